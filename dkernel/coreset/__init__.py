"""SVM coresets (Tukan, Baykal, Feldman & Rus, 2020): sensitivity sampling, merge-and-reduce
across Dask workers, two-pass distributed sampling and a streaming tree; coresets for kernel
k-means (:func:`kernel_kmeans_coreset`).

A coreset (S, v) of a labelled set P is a small weighted subset whose SVM cost
F(S, w) approximates F(P, w) for every w; train any estimator taking ``sample_weight`` on it
with :meth:`Coreset.fit`.

The paper's symbols, as the code names them (the cost's terms are in ``_svm_terms``):

=============  ==========================================================================
P, n           the data set and its rows (``source_size``)
u(p), U        input weight of a row (``sample_weight``, default 1) and their sum
y, ys          labels; ``ys`` the signs -1/+1 (``classes[1]`` plays +1)
w, X1          weights with the bias last, rows with the bias column (a constant 1) last
C (lambda)     the hinge weight: F(P, w) = ||w_{1:d}||^2 / 2 + C sum_p u(p) hinge(p, w)
f(p, w)        a row's share of the cost, ||w_{1:d}||^2 / (2 U) + C hinge(p, w)
opt            a certified lower bound of min_w F(P, w) (the coarse solve's dual bound)
k              k-means++ clusters per label behind the sensitivity bound
s(p), gamma    the sensitivity bound of a row, >= sup_w u(p) f(p, w) / F(P, w)
               (``sensitivity``)
t              the total sensitivity, sum_p gamma(p) (``total_sensitivity``); the coreset's
               relative error shrinks like sqrt(t / m), and t >= n makes the bound vacuous
l(p), L        a row's cost u(p) f(p, w~) at the coarse solution w~, and their sum F(P, w~)
q(p)           the sampling distribution, a mixture of gamma / t, l / L and u / U
               (shares ``beta`` and ``loss_share``)
m              draws of the coreset (it has at most m distinct rows)
v(p)           a drawn row's weight, u(p) count(p) / (m q(p)) (``weight``)
epsilon        the target relative error |F(S, w) - F(P, w)| <= epsilon F(P, w); the paper's
               m grows like t / epsilon^2, here ``m`` is given and epsilon follows
=============  ==========================================================================

The row groups (chunk, block, leaf, batch, ...) are defined in :mod:`dkernel`'s docstring.
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

# The internal surface (the ``as`` names): what the other subpackages use, not part of the
# public API.
from ._kmeans import draw_systematic as draw_systematic
from ._kmeans import inclusion as inclusion
from ._kmeans import kernel_kmeans_coreset
from ._kmeans import kernel_kmeans_sensitivity as kernel_kmeans_sensitivity
from ._numba import kmeanspp_partitions as kmeanspp_partitions
from ._numba import sensitivity_bound as sensitivity_bound
from ._numba import weighted_kmeanspp as weighted_kmeanspp
from ._numba import weighted_means as weighted_means
from ._sensitivity import cluster_bound as cluster_bound
from ._sensitivity import svm_sensitivity
from ._solver import coarse_svm as coarse_svm
from ._store import read_coreset, uniform_store_coreset, write_coreset
from ._streaming import StreamingCoreset
from ._svm_terms import class_counts as class_counts
from ._svm_terms import decision as decision
from ._svm_terms import hinge as hinge
from ._svm_terms import labels_of as labels_of
from ._svm_terms import part_costs as part_costs
from ._svm_terms import point_costs as point_costs
from ._svm_terms import regulariser as regulariser
from ._svm_terms import signs as signs
from ._svm_terms import svm_cost as svm_cost
from ._svm_terms import weight_vector as weight_vector
from ._svm_terms import with_bias as with_bias

__all__ = [
    "Coreset",
    "StreamingCoreset",
    "VacuousCoresetWarning",
    "coreset_cost",
    "distributed_coreset",
    "kernel_kmeans_coreset",
    "merge",
    "read_coreset",
    "svm_coreset",
    "svm_sensitivity",
    "uniform_coreset",
    "uniform_store_coreset",
    "write_coreset",
]
