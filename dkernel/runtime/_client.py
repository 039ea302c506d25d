"""Clusters and clients: the embedded default, config files, or an existing scheduler."""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING, Any

import dask.config

from .._validation import DKernelError
from ._config import check_cluster_config, load_cluster_config, numba_threads
from ._memory import PauseGuard, check_worker_memory
from ._plugins import register_thread_settings

if TYPE_CHECKING:
    from distributed import Client

logger = logging.getLogger(__name__)


def _local_cluster(**overrides: Any):
    from distributed import LocalCluster

    opts = dict(dask.config.get("dkernel.cluster.local"))
    opts.update({k.replace("_", "-"): v for k, v in overrides.items()})
    n_workers = opts.pop("n-workers", None) or min(os.cpu_count() or 1, 4)
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
    if processes:
        env = dict(kwargs.pop("env", None) or {})
        env.setdefault("NUMBA_NUM_THREADS", str(numba_threads()))
        kwargs["env"] = env
    return LocalCluster(**kwargs)


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
        return _local_cluster()
    cfg = check_cluster_config(config) if isinstance(config, dict) else load_cluster_config(config)
    kind = cfg["kind"]
    if kind == "local":
        try:
            return _local_cluster(**(cfg.get("options") or {}))
        except TypeError as exc:  # an option LocalCluster does not know
            raise DKernelError(f"cannot build the local cluster from its options ({exc})") from None
    if kind in ("slurm", "pbs"):
        return _jobqueue_cluster(kind, cfg)
    return None


def get_client(
    config: str | os.PathLike | dict[str, Any] | None = None, **local_options: Any
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
        The embedded cluster listens on 127.0.0.1 only (``dkernel.cluster.local.host``,
        ``dashboard-address``). Its dashboard link is logged at INFO level. Close it
        (``client.close()`` and ``client.cluster.close()``, or use it as a context manager)
        when done.
    """
    from distributed import Client

    if config is None:
        config = _default_address()
    if config is None:
        client = _guarded(Client(_local_cluster(**local_options)))
    elif isinstance(config, str) and "://" in config:
        client = _connect(config)
    else:
        cfg = (
            check_cluster_config(config)
            if isinstance(config, dict)
            else load_cluster_config(config)
        )
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
            cluster = make_cluster(cfg)
            scale = cfg.get("scale") or {}
            if scale:
                cluster.scale(**scale)
            client = Client(cluster)
            if kind != "local" and cfg.get("wait_for_workers"):
                client.wait_for_workers(int(cfg["wait_for_workers"]))
            client = _guarded(client)
    register_thread_settings(client)  # hand-started workers: the embedded thread settings
    logger.info("dask dashboard: %s", client.dashboard_link)
    return client


def _default_address() -> str | None:
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
        if cfg.get("check", True) and client.scheduler_info().get("workers"):
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
    """A client of a running scheduler; a failed connection becomes a ``DKernelError``."""
    from distributed import Client

    try:
        return Client(address, **kwargs)
    except (OSError, TimeoutError) as exc:
        where = address or kwargs.get("scheduler_file")
        raise DKernelError(f"cannot connect to the scheduler at {where} ({exc})") from None
