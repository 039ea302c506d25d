"""Runtime: the embedded default cluster, cluster-config files, clients, timing."""

from ._checkpoint import fingerprint, load_checkpoint, save_checkpoint
from ._client import get_client, make_cluster
from ._config import CLUSTER_KINDS, check_cluster_config, load_cluster_config
from ._memory import PauseGuard, check_worker_memory
from ._progress import compile_note, progress, progress_enabled, show_progress
from ._timing import _timer

__all__ = [
    "CLUSTER_KINDS",
    "PauseGuard",
    "_timer",
    "check_cluster_config",
    "check_worker_memory",
    "compile_note",
    "fingerprint",
    "get_client",
    "load_checkpoint",
    "load_cluster_config",
    "make_cluster",
    "progress",
    "progress_enabled",
    "save_checkpoint",
    "show_progress",
]
