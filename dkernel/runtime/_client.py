"""Clusters and clients: the embedded default, config files, or an existing scheduler."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import socket
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import dask.config
from dask.utils import parse_timedelta

from .._validation import DKernelError
from ._config import (
    _check_local_options,
    _local_classes,
    check_cluster_config,
    check_known_options,
    load_cluster_config,
    numba_threads,
)
from ._memory import PauseGuard, check_worker_memory
from ._plugins import register_thread_settings
from ._progress import worker_addresses

if TYPE_CHECKING:
    from types import FrameType

    from distributed import Client

logger = logging.getLogger(__name__)


def local_cluster(*, where: str = "the local cluster", **overrides: Any):
    from distributed import LocalCluster

    opts = dict(dask.config.get("dkernel.cluster.local"))
    opts.update({k.replace("_", "-"): v for k, v in overrides.items()})
    _check_local_options(opts, where)
    n_workers = opts.pop("n-workers", None)
    if n_workers is None:
        n_workers = min(os.cpu_count() or 1, 4)
    threads = opts.pop("threads-per-worker", 1)
    processes = bool(opts.pop("processes", True))
    kwargs: dict[str, Any] = dict(
        n_workers=int(n_workers),
        threads_per_worker=int(threads),
        processes=processes,
        memory_limit=opts.pop("memory-limit", "auto"),
        # the dashboard on the loopback interface only: no unauthenticated listener on the
        # network unless the config asks for one
        dashboard_address=opts.pop("dashboard-address", "127.0.0.1:0"),
    )
    host = opts.pop("host", "127.0.0.1")
    if processes or host is None or "://" in str(host):  # in-process: inproc://, no socket
        kwargs["host"] = host
    else:  # in-process on loopback TCP: an inproc:// address names the machine's IP, so the
        # dashboard link would point there while the dashboard listens on 127.0.0.1 only
        kwargs.update(host=host, protocol="tcp://")
    kwargs.update({k.replace("-", "_"): v for k, v in opts.items()})
    check_known_options(kwargs, _local_classes(processes), where=where)
    if processes:
        _check_main_guard()
        env = dict(kwargs.pop("env", None) or {})
        env.setdefault("NUMBA_NUM_THREADS", str(numba_threads()))
        kwargs["env"] = env
    _quiet_groups_layout()
    with _quiet_wildcard_origin():
        return LocalCluster(**kwargs)


_GUARD_HINT = (
    'put the script\'s work under `if __name__ == "__main__":` (workers start by '
    '"spawn" and import the script again)'
)


def _check_main_guard() -> None:
    """Worker processes start by "spawn" and import the main script again: a script that
    starts a cluster at module level would start one in every worker as it boots (distributed
    then prints pages of tracebacks). Refused here with one line: in the script (a call from
    its top-level code outside an ``if __name__ == "__main__":`` block), and in a worker that
    is importing it."""
    import multiprocessing
    import sys

    if getattr(multiprocessing.current_process(), "_inheriting", False):
        raise SystemExit(
            f"dkernel: error: a Dask worker started a cluster as it booted: {_GUARD_HINT}"
        )
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    frame: FrameType | None = sys._getframe(1)
    while frame is not None and not (
        frame.f_code.co_name == "<module>" and frame.f_globals is getattr(main, "__dict__", None)
    ):
        frame = frame.f_back
    if frame is None or not path or not os.path.isfile(path):
        return  # not called from a script's top level (a notebook, a function, -c)
    if not in_main_block(path, frame.f_lineno):
        raise DKernelError(
            f"get_client() at the top level of {os.path.basename(path)} (line "
            f"{frame.f_lineno}) would start a cluster in every worker: {_GUARD_HINT}"
        )


def in_main_block(path: str, line: int) -> bool:
    """Whether ``line`` of the script is inside an ``if __name__ == "__main__":`` block."""
    import ast

    try:
        with open(path, encoding="utf-8") as fh:
            tree = ast.parse(fh.read())
    except (OSError, SyntaxError, ValueError):
        return True  # cannot tell: let it run
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "__main__" in ast.unparse(node.test):
            if "__name__" in ast.unparse(node.test):
                end = node.end_lineno or node.lineno
                if node.lineno <= line <= end:
                    return True
    return False


class _WildcardOriginFilter(logging.Filter):
    """Bokeh warns that the dashboard's websocket accepts any origin (distributed's
    ``allow_websocket_origin: ["*"]``). On the embedded default the dashboard listens on
    loopback only, so the warning on every start says nothing a user can act on."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Host wildcard")


@contextlib.contextmanager
def _quiet_wildcard_origin() -> Iterator[None]:
    log = logging.getLogger("bokeh.server.util")
    quiet = _WildcardOriginFilter()
    log.addFilter(quiet)
    try:
        yield
    finally:
        log.removeFilter(quiet)


class GroupsLayoutFilter(logging.Filter):
    """The dashboard's Groups page lays task groups out in an order that distributed
    (2026.8) takes from ``dask.order`` over the groups, assuming it puts every group after
    the groups it depends on, and that every such group still exists. Neither holds while
    work runs (a ``from_array`` group is ordered after its consumers; a forgotten group is
    still named by a dependent), so ``TaskGroupGraph.update_layout`` raises ``KeyError``
    on most refreshes, and each is logged with its traceback: with the embedded cluster the
    scheduler runs in the user's process, so they fill the notebook or the terminal. Plain
    dask work shows it too (a ``mean`` of a ``from_array``); the page keeps its last layout.
    Only those records are dropped; docs/upstream/groups-page-keyerror.md is the report for
    distributed.

    Where they are logged depends on bokeh: up to 3.9 distributed's scheduler-page logger
    gets the exception (``exc_info``); from 3.10 bokeh's own callback runner
    (``bokeh.util.asyncio``) logs two records without it, "Error thrown from callback:" and
    the formatted traceback, from ``_log_task_exception``, whose ``exception`` is read off
    the stack."""

    #: records dropped (a test counts that the reproduction reproduces)
    dropped = 0

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else _exception_being_logged()
        if exc is None or not _from_groups_layout(exc):
            return True
        type(self).dropped += 1
        return False


#: The loggers the Groups page's errors reach: distributed's (bokeh <= 3.9) and bokeh's own
#: callback runner (bokeh >= 3.10).
_GROUPS_LOGGERS = ("distributed.dashboard.components.scheduler", "bokeh.util.asyncio")


def _exception_being_logged() -> BaseException | None:
    """The exception bokeh's ``_log_task_exception`` is logging, if it is on the stack."""
    import sys

    frame: FrameType | None = sys._getframe(2)
    for _ in range(12):  # the filter runs a few frames below the logging call
        if frame is None:
            return None
        if frame.f_code.co_name == "_log_task_exception":
            exc = frame.f_locals.get("exception")
            return exc if isinstance(exc, BaseException) else None
        frame = frame.f_back
    return None


def _from_groups_layout(exc: BaseException) -> bool:
    """A ``KeyError`` raised in the Groups page's ``update_layout``."""
    if not isinstance(exc, KeyError):
        return False
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_name == "update_layout":
            return True
        tb = tb.tb_next
    return False


def _quiet_groups_layout() -> None:
    """Install :class:`GroupsLayoutFilter` on the loggers the Groups page's errors reach
    (once)."""
    for name in _GROUPS_LOGGERS:
        log = logging.getLogger(name)
        if not any(isinstance(f, GroupsLayoutFilter) for f in log.filters):
            log.addFilter(GroupsLayoutFilter())


def _jobqueue_cluster(kind: str, cfg: dict[str, Any]):
    try:
        import dask_jobqueue
    except ImportError:  # pragma: no cover - depends on the environment
        raise DKernelError(
            f"a {kind} cluster needs dask-jobqueue: pip install 'dkernel[hpc]'"
        ) from None
    opts = dict(cfg.get("options") or {})
    prologue = list(opts.pop("job_script_prologue", None) or [])
    line = f"export NUMBA_NUM_THREADS={numba_threads()}"
    if not any("NUMBA_NUM_THREADS" in p for p in prologue):
        prologue.append(line)
    cls = dask_jobqueue.SLURMCluster if kind == "slurm" else dask_jobqueue.PBSCluster
    try:
        return cls(job_script_prologue=prologue, **opts)
    except (TypeError, ValueError) as exc:  # unknown or ill-typed option in the YAML
        raise DKernelError(f"cannot build the {kind} cluster from its options ({exc})") from None


def make_cluster(config: str | os.PathLike | dict[str, Any] | None = None):
    """Build the cluster object a config describes, without connecting a client.

    ``None`` gives the embedded default (``LocalCluster``); a YAML path from
    ``cluster-configs/`` or an already-loaded ``cluster:`` mapping gives a local, SLURM or
    PBS cluster (dask-jobqueue, scaled as the config's ``scale:`` says once a client
    connects). ``scheduler-file`` and ``address`` configs have no cluster object: they
    return ``None``.
    """
    if config is None:
        return local_cluster()
    cfg = check_cluster_config(config) if isinstance(config, dict) else load_cluster_config(config)
    kind = cfg["kind"]
    where = "the local cluster" if isinstance(config, dict) else f"cluster config {str(config)!r}"
    if kind == "local":
        try:
            return local_cluster(where=where, **(cfg.get("options") or {}))
        except DKernelError:
            raise
        except (TypeError, ValueError) as exc:  # an option LocalCluster does not know
            raise DKernelError(f"cannot build the local cluster from its options ({exc})") from None
    if kind in ("slurm", "pbs"):
        return _jobqueue_cluster(kind, cfg)
    return None


#: The clients :func:`get_client` made, by the arguments it was given: asked again, it
#: returns the same one while it runs (re-running a notebook cell starts no second cluster).
_MADE: dict[str, Client] = {}


def get_client(
    config: str | os.PathLike | dict[str, Any] | None = None,
    *,
    new: bool = False,
    **local_options: Any,
) -> Client:
    """Connect a ``distributed.Client`` to the cluster ``config`` names.

    Parameters
    ----------
    config : None, path of a cluster YAML, a loaded ``cluster:`` mapping, or an address
        ``None``: the scheduler at ``DASK_SCHEDULER_ADDRESS`` (Dask's ``scheduler-address``
        config) when set, else the embedded default, an in-process ``LocalCluster`` sized
        to the machine (``dkernel.cluster.local`` in the Dask config). A path: a file from
        ``cluster-configs/`` (local, slurm, pbs, scheduler-file, address); a mapping: the
        ``cluster:`` part of such a file, as :func:`load_cluster_config` returns it. A
        string like ``"tcp://host:8786"``: connect to that scheduler.
    new : bool, default False
        Start (or connect) a new cluster even when one is already at hand. By default
        ``get_client()`` is idempotent: with no arguments it returns the current Dask
        client when there is one, and otherwise, asked with the same arguments as before,
        the client it made then while that still runs. It logs (INFO) which it did.
    **local_options
        Overrides of the embedded default (``n_workers``, ``threads_per_worker``,
        ``processes``, ``memory_limit``, ``host``, ``dashboard_address``).

    Returns
    -------
    distributed.Client
        On a cluster this function starts (embedded, local, SLURM, PBS) the memory guards
        of :mod:`dkernel.runtime._memory` are installed: workers already past their pause
        threshold at rest are refused with a ``DKernelError``, and a worker paused with
        nothing to spill is unpaused after ``dkernel.cluster.memory.paused-timeout`` s.
        On every scheduler it connects to, work that finds no worker for
        ``dkernel.cluster.no-workers-timeout`` s (a config file's ``no_workers_timeout:``)
        fails with distributed's ``NoWorkerError`` instead of waiting for ever (the CLI
        reports it as one line). The embedded cluster listens on 127.0.0.1 only
        (``dkernel.cluster.local.host``, ``dashboard-address``). Its dashboard link is
        logged at INFO level. Close it (``client.close()`` and ``client.cluster.close()``,
        or use it as a context manager) when done.
    """
    key = _made_key(config, local_options)
    if not new:
        found = _existing_client(key, plain=config is None and not local_options)
        if found is not None:
            return found
    if config is None:
        config = default_address()
    timeout = dask.config.get("dkernel.cluster.no-workers-timeout", None)
    if config is None:
        client = _guarded(_new_client(local_cluster(**local_options)))
    elif isinstance(config, str) and "://" in config:
        client = _connect(config)
    else:
        cfg = (
            check_cluster_config(config)
            if isinstance(config, dict)
            else load_cluster_config(config)
        )
        timeout = cfg.get("no_workers_timeout", timeout)
        kind = cfg["kind"]
        if kind == "scheduler-file":
            sf = os.path.expanduser(os.path.expandvars(str(cfg.get("scheduler_file") or "")))
            if not os.path.isfile(sf):
                raise DKernelError(
                    f"scheduler file {sf!r} does not exist (start the scheduler first)"
                )
            client = _connect(None, scheduler_file=sf)
        elif kind == "address":
            client = _connect(str(cfg["address"]))
        else:
            if kind != "local":
                _check_submit_command(kind)
            cluster = make_cluster(cfg)
            scale = cfg.get("scale") or {}
            if scale:
                cluster.scale(**scale)
            client = _new_client(cluster)
            if kind != "local" and cfg.get("wait_for_workers"):
                _wait_for_workers(client, int(cfg["wait_for_workers"]), timeout, kind)
            client = _guarded(client)
    _set_no_workers_timeout(client, timeout)
    register_thread_settings(client)  # hand-started workers: the embedded thread settings
    _MADE[key] = client
    logger.info("started a Dask client; dashboard: %s", client.dashboard_link)
    return client


def _check_submit_command(kind: str) -> None:
    """A jobqueue cluster without its batch system would wait for workers that never come."""
    submit = "sbatch" if kind == "slurm" else "qsub"
    if shutil.which(submit) is None:
        raise DKernelError(
            f"a {kind} cluster submits its workers with {submit}, which is not on this "
            f"machine's PATH: run from a {kind.upper()} login node, or use kind: local"
        )


def _made_key(config: Any, local_options: dict[str, Any]) -> str:
    if isinstance(config, os.PathLike):
        config = os.path.abspath(os.fspath(config))
    elif isinstance(config, str) and "://" not in config:
        config = os.path.abspath(config)
    return json.dumps([config, local_options], sort_keys=True, default=str)


def _existing_client(key: str, *, plain: bool) -> Client | None:
    """The current client (for a plain ``get_client()``) or the one made before for ``key``."""
    from distributed import Client

    if plain:
        try:
            current = Client.current(allow_global=True)
        except ValueError:
            current = None
        if current is not None and current.status == "running":
            logger.info(
                "using the current Dask client (dashboard: %s); get_client(new=True) starts "
                "another",
                current.dashboard_link,
            )
            return current
    made = _MADE.get(key)
    if made is not None and made.status == "running":
        logger.info(
            "using the client get_client made before (dashboard: %s); get_client(new=True) "
            "starts another",
            made.dashboard_link,
        )
        return made
    _MADE.pop(key, None)
    return None


def _new_client(cluster) -> Client:
    from distributed import Client

    try:
        return Client(cluster)
    except BaseException:
        cluster.close()
        raise


def _wait_for_workers(client: Client, n: int, timeout: Any, kind: str) -> None:
    """``wait_for_workers`` of a jobqueue config, bounded by the no-workers timeout."""
    try:
        client.wait_for_workers(n, timeout=timeout)
    except TimeoutError:
        cluster = client.cluster
        client.close()
        if cluster is not None:
            cluster.close()
        raise DKernelError(
            f"the {kind} cluster had fewer than {n} workers after {timeout} s (its jobs may "
            "still wait in the queue: raise no_workers_timeout in the config file, or check "
            "them with squeue/qstat)"
        ) from None


def _set_no_workers_timeout(client: Client, timeout: Any) -> None:
    """Make the scheduler fail work that finds no worker for ``timeout`` s.

    distributed has the mechanism (``distributed.scheduler.no-workers-timeout``) but reads
    it when a scheduler starts, and a scheduler started elsewhere (``dask scheduler``, a
    batch job) has its own config: the attribute is set on the running scheduler instead.
    The function is nested so it travels by value: the scheduler needs no dkernel.
    """
    if timeout is None:
        return
    try:
        seconds = float(parse_timedelta(timeout, default="s"))
    except (ValueError, TypeError, KeyError):
        seconds = float("nan")
    if not seconds > 0:
        raise DKernelError(f"dkernel.cluster.no-workers-timeout must be > 0 s, got {timeout!r}")

    def set_timeout(dask_scheduler, seconds=seconds):
        current = dask_scheduler.no_workers_timeout
        if current is None or current > seconds:
            dask_scheduler.no_workers_timeout = seconds
        return dask_scheduler.no_workers_timeout

    try:
        client.run_on_scheduler(set_timeout)
    except Exception as exc:  # a scheduler that refuses run_on_scheduler
        logger.warning("could not set the scheduler's no-workers timeout (%s)", exc)


def default_address() -> str | None:
    """``DASK_SCHEDULER_ADDRESS`` (or Dask's ``scheduler-address`` config), with a scheme."""
    address = os.environ.get("DASK_SCHEDULER_ADDRESS") or dask.config.get("scheduler-address", None)
    if not address:
        return None
    address = str(address)
    return address if "://" in address else f"tcp://{address}"


def _guarded(client: Client) -> Client:
    """Install the memory guards on a cluster dkernel started (closing it if they refuse).

    :func:`check_worker_memory` refuses workers already past their pause threshold at rest;
    :class:`PauseGuard` keeps a worker from staying paused for ever. Both follow
    ``dkernel.cluster.memory`` (``check``, ``paused-timeout``).
    """
    cfg = dask.config.get("dkernel.cluster.memory", {}) or {}
    try:
        if cfg.get("check", True) and worker_addresses(client):
            check_worker_memory(client)
        if cfg.get("paused-timeout") is not None:
            client.register_plugin(PauseGuard(float(cfg["paused-timeout"])))
    except BaseException:
        cluster = client.cluster
        client.close()
        if cluster is not None:
            cluster.close()
        raise
    return client


def _connect(address: str | None, **kwargs: Any) -> Client:
    """A client of a running scheduler; a failed connection becomes a ``DKernelError``.

    A TCP address is probed first: a refused connection (nothing listens there) is
    reported at once, where ``Client`` would retry it for
    ``distributed.comm.timeouts.connect`` (30 s).
    """
    from distributed import Client

    if address is not None:
        _probe(address)
    try:
        return Client(address, **kwargs)
    except (OSError, TimeoutError) as exc:
        where = address or kwargs.get("scheduler_file")
        raise DKernelError(f"cannot connect to the scheduler at {where} ({exc})") from None


def _probe(address: str) -> None:
    parts = urlsplit(address)
    if parts.scheme not in ("tcp", "tls") or parts.hostname is None:
        return
    try:
        port = parts.port
    except ValueError:
        port = None
    if port is None:
        raise DKernelError(f"scheduler address {address!r} needs a port: tcp://host:8786")
    try:
        with socket.create_connection((parts.hostname, port), timeout=5):
            pass
    except ConnectionRefusedError:
        raise DKernelError(
            f"cannot connect to the scheduler at {address}: connection refused (no scheduler "
            "listens there; start it first, or check the host and port)"
        ) from None
    except OSError:  # unresolved name, timeout ...: Client's own retries report it
        return
