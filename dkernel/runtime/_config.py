"""Packaged defaults and cluster-config files."""

from __future__ import annotations

import os
from typing import Any

import dask.config
import yaml

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
    from ._client import check_jobqueue_config, check_local_config  # imports this module

    if kind == "local":
        check_local_config(dict(cfg.get("options") or {}), where)
    elif kind in ("slurm", "pbs"):
        check_jobqueue_config(kind, dict(cfg.get("options") or {}), where)
    return cfg


def numba_threads() -> int:
    return int(dask.config.get("dkernel.numba-threads-per-worker", 1) or 1)
