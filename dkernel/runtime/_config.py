"""Packaged defaults and cluster-config files."""

from __future__ import annotations

import difflib
import inspect
import os
from typing import Any

import dask.config
import yaml
from dask.utils import parse_bytes

from .. import _defaults  # noqa: F401  (loaded by the package; named for readers)
from .._validation import DKernelError

#: The cluster kinds a config file may name.
CLUSTER_KINDS = ("local", "slurm", "pbs", "scheduler-file", "address")


def load_cluster_config(path: str | os.PathLike) -> dict[str, Any]:
    """Read a ``cluster-configs/*.yaml`` file and check its ``cluster.kind``."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        hint = " (a scheduler address needs a scheme: tcp://host:8786)" if ":" in path else ""
        raise DKernelError(f"cluster config {path!r} does not exist{hint}")
    try:
        with open(path, encoding="utf-8") as fh:
            doc = yaml.safe_load(fh) or {}
    except yaml.YAMLError as exc:
        raise DKernelError(f"cluster config {path!r} is not valid YAML ({exc})") from None
    cfg = doc.get("cluster") if isinstance(doc, dict) else None
    if not isinstance(cfg, dict):
        raise DKernelError(f"cluster config {path!r} needs a top-level 'cluster:' mapping")
    return check_cluster_config(cfg, where=f"cluster config {path!r}")


def check_cluster_config(cfg: dict[str, Any], *, where: str = "cluster config") -> dict[str, Any]:
    """Check the ``cluster:`` mapping of a config: its kind and the fields that kind needs."""
    kind = cfg.get("kind")
    if kind not in CLUSTER_KINDS:
        raise DKernelError(f"{where}: kind must be one of {', '.join(CLUSTER_KINDS)}, got {kind!r}")
    for key in ("options", "scale"):
        if cfg.get(key) is not None and not isinstance(cfg[key], dict):
            raise DKernelError(f"{where}: '{key}' must be a mapping, got {cfg[key]!r}")
    if kind == "scheduler-file" and not cfg.get("scheduler_file"):
        raise DKernelError(f"{where}: kind scheduler-file needs 'scheduler_file: <path>'")
    if kind == "address" and not cfg.get("address"):
        raise DKernelError(f"{where}: kind address needs 'address: tcp://host:port'")
    if kind == "local":
        check_local_config(dict(cfg.get("options") or {}), where)
    elif kind in ("slurm", "pbs"):
        check_jobqueue_config(kind, dict(cfg.get("options") or {}), where)
    return cfg


def numba_threads() -> int:
    return int(dask.config.get("dkernel.numba-threads-per-worker", 1) or 1)


#: Below this a worker process cannot start: the interpreter with dask, numpy and numba take
#: about 200 MiB at rest (see :mod:`dkernel.runtime._memory`), and its nanny kills it on its
#: first memory check ("Stream is closed", "Nanny failed to start"). In-process workers
#: are left to :func:`~dkernel.runtime._memory.check_worker_memory`.
MIN_WORKER_MEMORY = 256 * 2**20


def _local_classes(processes: bool) -> tuple:
    from distributed import LocalCluster, Nanny, Worker

    return (LocalCluster, Nanny, Worker) if processes else (LocalCluster, Worker)


def _init_names(cls) -> set[str]:
    """The keyword arguments ``cls(...)`` takes, along its classes' ``__init__``."""
    names: set[str] = set()
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is None:
            continue
        try:
            params = inspect.signature(init).parameters.values()
        except (TypeError, ValueError):
            continue
        names |= {p.name for p in params if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)}
    return names - {"self"}


def check_known_options(options: dict[str, Any], classes: tuple, *, where: str) -> None:
    """Refuse an option none of ``classes`` (the cluster class and what it passes its
    other options to: the nanny and worker, a job class) takes, naming it in one line."""
    known = set().union(*(_init_names(c) for c in classes))
    for key in options:
        if key not in known:
            close = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.7)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            owners = ", ".join(c.__name__ for c in classes)
            raise DKernelError(f"{where}: unknown option {key!r} (not taken by {owners}){hint}")


def check_local_config(options: dict[str, Any], where: str) -> None:
    """A config's ``local`` options, checked before anything starts: each known to
    ``LocalCluster`` or its workers, with values it can start with."""
    opts = {str(k).replace("_", "-"): v for k, v in options.items()}
    _check_local_options(opts, where)
    names = {k.replace("-", "_"): v for k, v in opts.items()}
    check_known_options(names, _local_classes(bool(opts.get("processes", True))), where=where)


def check_jobqueue_config(kind: str, options: dict[str, Any], where: str) -> None:
    """A config's ``slurm``/``pbs`` options, each known to the dask-jobqueue cluster or its
    job class (unchecked when dask-jobqueue is not installed: building it says so)."""
    try:
        import dask_jobqueue
    except ImportError:  # pragma: no cover - depends on the environment
        return
    cls = dask_jobqueue.SLURMCluster if kind == "slurm" else dask_jobqueue.PBSCluster
    check_known_options(options, (cls, cls.job_cls), where=where)


def _positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _check_local_options(opts: dict[str, Any], where: str) -> None:
    """The options a ``LocalCluster`` would otherwise reject deep inside its start-up (or
    take silently: ``n_workers: 0`` would start a cluster without workers), each as one
    clear line."""
    n_workers = opts.get("n-workers")
    if n_workers is not None and not _positive_int(n_workers):
        raise DKernelError(
            f"{where}: n_workers must be an integer >= 1 (or null for one per core), "
            f"got {n_workers!r}"
        )
    threads = opts.get("threads-per-worker", 1)
    if not _positive_int(threads):
        raise DKernelError(f"{where}: threads_per_worker must be an integer >= 1, got {threads!r}")
    limit = opts.get("memory-limit", "auto")
    if limit is not None and limit != "auto":
        try:
            ok = not isinstance(limit, bool) and float(parse_bytes(limit)) >= 0
        except (ValueError, TypeError):
            ok = False
        if not ok:
            raise DKernelError(
                f"{where}: memory_limit must be 'auto', a size like '4GiB' or a number of "
                f"bytes, got {limit!r}"
            )
        small = 0 < float(parse_bytes(limit)) < MIN_WORKER_MEMORY
        if small and opts.get("processes", True):  # in-process workers: _memory's guard
            raise DKernelError(
                f"{where}: memory_limit {limit!r} is too small for a worker process to start "
                f"(at least {MIN_WORKER_MEMORY // 2**20} MiB: the interpreter, dask, numpy and "
                "numba take about 200 MiB at rest); give each worker more, or 0 for no limit"
            )
    for key in ("scheduler-port", "worker-dashboard-address", "dashboard-address"):
        value = opts.get(key)
        if value is None:
            continue
        port = str(value).rsplit(":", 1)[-1] if key != "scheduler-port" else value
        if not str(port).isdigit() or int(port) > 65535:
            raise DKernelError(
                f"{where}: {key.replace('-', '_')} needs a port number (0 to 65535), got {value!r}"
            )
