"""SVM coresets (Tukan, Baykal, Feldman & Rus, 2020): sensitivity sampling, merge-and-reduce
across Dask workers, two-pass distributed sampling and a streaming tree.

A coreset (S, v) of a labelled set P is a small weighted subset whose SVM cost
F(S, w) approximates F(P, w) for every w; train any estimator taking ``sample_weight`` on it
with :meth:`Coreset.fit`.
"""

from ._coreset import Coreset, coreset_cost, merge, svm_coreset, uniform_coreset
from ._distributed import distributed_coreset
from ._sensitivity import svm_sensitivity
from ._store import uniform_store_coreset, write_coreset
from ._streaming import StreamingCoreset

__all__ = [
    "Coreset",
    "StreamingCoreset",
    "coreset_cost",
    "distributed_coreset",
    "merge",
    "svm_coreset",
    "svm_sensitivity",
    "uniform_coreset",
    "uniform_store_coreset",
    "write_coreset",
]
