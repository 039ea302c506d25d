"""Runtime: the embedded default cluster, cluster-config files, clients, timing."""

# The internal surface: what the other subpackages use (not part of the public API).
from ._client import GroupsLayoutFilter as GroupsLayoutFilter
from ._client import default_address as default_address
from ._client import get_client, make_cluster
from ._client import in_main_block as in_main_block
from ._client import local_cluster as local_cluster
from ._config import CLUSTER_KINDS, check_cluster_config, load_cluster_config
from ._errors import NoWorkersError as NoWorkersError
from ._errors import named_worker_errors as named_worker_errors
from ._memory import PauseGuard, check_worker_memory
from ._phases import Accounting as Accounting
from ._phases import accounting as accounting
from ._phases import amdahl, phase, spread
from ._plugins import ThreadSettings as ThreadSettings
from ._plugins import apply_thread_settings as apply_thread_settings
from ._progress import COMPILE_NOTE as COMPILE_NOTE
from ._progress import Progress as Progress
from ._progress import bar_class as bar_class
from ._progress import compile_note, progress, progress_enabled, show_progress
from ._progress import compute_blocks as compute_blocks
from ._progress import distributed_client as distributed_client
from ._progress import forget_compiled as forget_compiled
from ._progress import in_notebook as in_notebook
from ._progress import watch as watch
from ._progress import worker_addresses as worker_addresses
from ._timing import timer
from ._tree import TreeNode as TreeNode
from ._tree import add_in_order as add_in_order
from ._tree import tree_levels as tree_levels
from ._tree import tree_reduce as tree_reduce

__all__ = [
    "CLUSTER_KINDS",
    "PauseGuard",
    "amdahl",
    "check_cluster_config",
    "check_worker_memory",
    "compile_note",
    "get_client",
    "load_cluster_config",
    "make_cluster",
    "phase",
    "progress",
    "progress_enabled",
    "show_progress",
    "spread",
    "timer",
]
