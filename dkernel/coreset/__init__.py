"""SVM coresets (Tukan, Baykal, Feldman & Rus, 2020): sensitivity sampling, merge-and-reduce
across Dask workers, two-pass distributed sampling and a streaming tree; coresets for kernel
k-means (:func:`kernel_kmeans_coreset`).

A coreset (S, v) of a labelled set P is a small weighted subset whose SVM cost
F(S, w) approximates F(P, w) for every w; train any estimator taking ``sample_weight`` on it
with :meth:`Coreset.fit`.
"""

from ._coreset import (
    Coreset,
    VacuousCoresetWarning,
    coreset_cost,
    merge,
    svm_coreset,
    uniform_coreset,
)
from ._distributed import distributed_coreset
from ._kmeans import kernel_kmeans_coreset
from ._sensitivity import svm_sensitivity

# The internal surface (the ``as`` names): what the other subpackages use, not part of the
# public API.
from ._solver import coarse_svm as coarse_svm
from ._store import uniform_store_coreset, write_coreset
from ._streaming import StreamingCoreset
from ._svm_terms import decision as decision
from ._svm_terms import hinge as hinge
from ._svm_terms import regulariser as regulariser
from ._svm_terms import signs as signs
from ._svm_terms import svm_cost as svm_cost
from ._svm_terms import with_bias as with_bias

__all__ = [
    "Coreset",
    "StreamingCoreset",
    "VacuousCoresetWarning",
    "coreset_cost",
    "distributed_coreset",
    "kernel_kmeans_coreset",
    "merge",
    "svm_coreset",
    "svm_sensitivity",
    "uniform_coreset",
    "uniform_store_coreset",
    "write_coreset",
]
