"""Worker memory: fail or finish, never hang.

A Dask worker pauses when its process memory passes ``distributed.worker.memory.pause``
(80% of its limit) and waits for spilling to bring it back down. Memory that is not Dask's
(the interpreter, numpy, numba, scikit-learn: about 200 MiB once dkernel's modules are
loaded) cannot be spilled, so a worker whose limit is close to that stays paused for ever
and a fit makes no progress without a word (``memory_limit="250MB"`` is such a limit).

Two guards, both installed by :func:`dkernel.runtime.get_client` on the clusters it starts:

* :func:`check_worker_memory` loads dkernel's modules on every worker and refuses a worker
  whose memory at rest is already above its pause threshold (a clear error before work);
* :class:`PauseGuard` stops pausing a worker that has stayed paused for
  ``dkernel.cluster.memory.paused-timeout`` seconds with nothing left to spill (pausing can
  no longer help it): the work goes on and either finishes or, if memory really runs out,
  the nanny restarts the worker and the task fails with ``KilledWorker``.
"""

from __future__ import annotations

import gc
import importlib
import logging
import time
from typing import TYPE_CHECKING, Any

import dask.config
import psutil
from distributed import WorkerPlugin
from distributed.core import Status
from tornado.ioloop import PeriodicCallback

from .._validation import DKernelError

if TYPE_CHECKING:
    from distributed import Client

logger = logging.getLogger(__name__)

#: Modules every dkernel task loads on a worker (their memory is part of a worker at rest):
#: the store reads and the kernel k-means blocks, without scikit-learn. BSGD and coreset
#: tasks load their packages (and scikit-learn, about 50 MiB more) when they first run.
WORKER_MODULES = ("dkernel.data", "dkernel.cluster._blocks")


def _worker_memory(modules: tuple[str, ...], dask_worker=None) -> dict[str, Any]:
    """On a worker (``client.run``): load ``modules``, report process memory and thresholds."""
    for name in modules:
        importlib.import_module(name)
    gc.collect()
    mm = dask_worker.memory_manager
    return {
        "rss": psutil.Process().memory_info().rss,
        "limit": mm.memory_limit,
        "pause": mm.memory_pause_fraction,
    }


def check_worker_memory(client: Client, *, modules: tuple[str, ...] = WORKER_MODULES) -> None:
    """Raise a ``DKernelError`` if a worker is already past its pause threshold at rest.

    Loads ``modules`` on every worker first (what a dkernel task would load anyway), so the
    check sees the memory a worker really starts its work with.

    Parameters
    ----------
    client : distributed.Client
    modules : tuple of str
        Modules to import on the workers before measuring.
    """
    for addr, m in client.run(_worker_memory, modules).items():
        if not m["limit"] or m["pause"] is False:
            continue
        threshold = m["limit"] * m["pause"]
        if m["rss"] >= threshold:
            need = m["rss"] / m["pause"] * 2
            raise DKernelError(
                f"worker {addr} uses {m['rss'] / 2**20:.0f} MiB at rest, above the "
                f"{threshold / 2**20:.0f} MiB at which it pauses ({m['pause']:.0%} of its "
                f"memory_limit of {m['limit'] / 2**20:.0f} MiB): it would pause for ever. "
                f"Give each worker more memory (memory_limit of at least {need / 1e6:.0f}MB) "
                "or use fewer workers"
            )


class PauseGuard(WorkerPlugin):
    """Turn pausing off on a worker that stays paused with nothing left to spill.

    Parameters
    ----------
    timeout : float, optional
        Seconds a worker may stay paused with no spillable data before pausing is turned
        off for it (default: ``dkernel.cluster.memory.paused-timeout``).
    interval : float, default=1.0
        Seconds between checks.
    """

    name = "dkernel-pause-guard"

    def __init__(self, timeout: float | None = None, interval: float = 1.0):
        if timeout is None:
            timeout = float(dask.config.get("dkernel.cluster.memory.paused-timeout", 30))
        self.timeout = float(timeout)
        self.interval = float(interval)
        self._since: float | None = None
        self._pc: PeriodicCallback | None = None

    def setup(self, worker) -> None:
        self._since = None
        self._pc = PeriodicCallback(lambda: self.check(worker), self.interval * 1000)
        self._pc.start()

    def teardown(self, worker) -> None:
        if self._pc is not None:
            self._pc.stop()

    def check(self, worker) -> None:
        """One check: count the time paused with nothing spillable; unpause after timeout."""
        if worker.status != Status.paused:
            self._since = None
            return
        fast = getattr(worker.data, "fast", worker.data)
        if len(fast):  # spilling can still free memory: let pausing work
            self._since = None
            return
        now = time.monotonic()
        if self._since is None:
            self._since = now
        if now - self._since < self.timeout:
            return
        logger.warning(
            "worker %s has been paused for %.0f s with nothing left to spill; "
            "turning pausing off so the work finishes or fails (memory limit %s bytes)",
            worker.address,
            now - self._since,
            worker.memory_manager.memory_limit,
        )
        worker.memory_manager.memory_pause_fraction = False
        worker.status = Status.running
        self._since = None
