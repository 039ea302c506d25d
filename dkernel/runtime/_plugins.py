"""Worker settings that every Dask worker gets, however it was started.

The embedded ``LocalCluster`` and dask-jobqueue workers are started with
``NUMBA_NUM_THREADS`` set (``dkernel.numba-threads-per-worker``); workers started by hand
(``dask worker``, ``srun dask worker``, dask-mpi) are not. :func:`get_client` registers
:class:`ThreadSettings` on every cluster it connects to, so those workers get the same
settings, and ``dask worker --preload dkernel.runtime._plugins`` applies them at start-up.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import TYPE_CHECKING, Any

from distributed.diagnostics.plugin import WorkerPlugin

from ._config import numba_threads

if TYPE_CHECKING:
    from distributed import Client, Worker

logger = logging.getLogger(__name__)

#: Thread variables a worker gets besides ``NUMBA_NUM_THREADS`` (distributed's nanny sets the
#: same ones for the workers it spawns: ``distributed.nanny.pre-spawn-environ``).
BLAS_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def apply_thread_settings(numba: int, *, blas: int | None = 1) -> dict[str, Any]:
    """Set numba's (and BLAS's) thread count in this process; return what was found/done.

    ``NUMBA_NUM_THREADS`` is read when numba is imported; a numba already imported but
    whose thread pool has not started yet is set through ``numba.config``. A pool that
    already runs cannot shrink: that case is logged and reported (``"numba_pool"``).
    """
    out: dict[str, Any] = {"NUMBA_NUM_THREADS": int(numba)}
    os.environ["NUMBA_NUM_THREADS"] = str(int(numba))
    if blas is not None:
        for var in BLAS_VARS:
            os.environ.setdefault(var, str(int(blas)))
            out[var] = int(os.environ[var])
    nb = sys.modules.get("numba")
    if nb is not None:
        from numba.np.ufunc import parallel

        if getattr(parallel, "_is_initialized", False):
            current = int(nb.config.NUMBA_NUM_THREADS)
            out["numba_pool"] = current
            if current != int(numba):
                logger.warning(
                    "numba's thread pool already runs %d threads (wanted %d): set "
                    "NUMBA_NUM_THREADS before starting the worker",
                    current,
                    numba,
                )
        else:  # both are read when the pool starts
            nb.config.NUMBA_NUM_THREADS = int(numba)
            parallel.NUM_THREADS = int(numba)
    return out


class ThreadSettings(WorkerPlugin):
    """Give a worker dkernel's thread settings (``NUMBA_NUM_THREADS`` and BLAS at 1).

    Workers living in the client's own process (``LocalCluster(processes=False)``) are
    left alone: their settings are the user's process's.

    Parameters
    ----------
    numba_threads : int, optional
        Default: ``dkernel.numba-threads-per-worker`` of the Dask config (1).
    """

    name = "dkernel-thread-settings"
    idempotent = True

    def __init__(self, numba_threads: int | None = None) -> None:
        self.numba_threads = int(numba_threads or _default_threads())
        self.client_pid = os.getpid()

    def setup(self, worker: Worker) -> None:
        quiet_named_task_errors()
        if os.getpid() == self.client_pid:
            return
        done = apply_thread_settings(self.numba_threads)
        logger.debug("dkernel thread settings on %s: %s", worker.address, done)

    def teardown(self, worker: Worker) -> None:
        """Close the worker's object-storage sessions while its event loops still run."""
        data = sys.modules.get("dkernel.data")
        if data is not None and os.getpid() != self.client_pid:
            data.close_clients()


class _NamedErrorFilter(logging.Filter):
    """Drops distributed's "Compute Failed" report (eight lines with a traceback) of a task
    that raised a ``DKernelError``: the error names its cause and reaches the client, which
    shows it once (the CLI as its one ``dkernel: error:`` line)."""

    def filter(self, record: logging.LogRecord) -> bool:
        msg = record.msg if isinstance(record.msg, str) else ""
        if not msg.startswith("Compute Failed"):
            return True
        return not any("DKernelError" in repr(a) for a in (record.args or ()))


def quiet_named_task_errors() -> None:
    """Install :class:`_NamedErrorFilter` on this process's ``distributed.worker`` logger."""
    log = logging.getLogger("distributed.worker")
    if not any(isinstance(f, _NamedErrorFilter) for f in log.filters):
        log.addFilter(_NamedErrorFilter())


def _default_threads() -> int:
    return numba_threads()


def register_thread_settings(client: Client) -> None:
    """Register :class:`ThreadSettings` on the client's cluster (present and future workers)."""
    client.register_plugin(ThreadSettings())


async def dask_setup(worker: Worker) -> None:
    """``dask worker --preload dkernel.runtime._plugins``: the settings from the start."""
    apply_thread_settings(_default_threads())
    quiet_named_task_errors()
