"""Runtime: the embedded default cluster, cluster-config files, clients, timing."""

from ._client import get_client, make_cluster
from ._config import CLUSTER_KINDS, load_cluster_config
from ._timing import _timer

__all__ = ["CLUSTER_KINDS", "_timer", "get_client", "load_cluster_config", "make_cluster"]
