"""Sensitivity upper bounds of the SVM cost (Tukan et al. 2020, Algorithm 1, lines 1-8)."""

from __future__ import annotations

import logging
import math
import numbers
from typing import NamedTuple

import numpy as np

from .._validation import (
    DKernelError,
    check_finite_2d,
    check_sample_weight,
    check_scalar,
    label_classes,
)
from ..runtime import timer
from ._numba import (
    _bounds_from_geometry,
    _sq_dist_to_centres,
    kmeanspp_partitions,
    sensitivity_bound,
    weighted_means,
)
from ._solver import coarse_svm
from ._svm_terms import SIGNS, signs, with_bias

logger = logging.getLogger(__name__)

#: Largest cluster count per label tried by default (the grid ends at min(sqrt(n), this)).
_K_MAX = 64


class SensitivityInfo(NamedTuple):
    opt: float  # the certified lower bound used in the bound
    upper: float  # the coarse solution's cost (nan when opt was given)
    w: np.ndarray | None  # the coarse solution (None when opt was given)
    n_clusters: int  # clusters over both labels
    exact: bool  # True when the bound fell back to weight-proportional (one class)


def default_k(n: int) -> int:
    """k = ceil(ln n) clusters per label (the paper's k ~ log n)."""
    return max(1, math.ceil(math.log(max(n, 2))))


def k_grid(n: int, k=None) -> np.ndarray:
    """Cluster counts per label to try: ``k`` itself, or by default three geometrically
    spaced values from ceil(ln n) to min(sqrt(n), :data:`_K_MAX`)."""
    if k is not None:
        return np.array([min(int(k), n)])
    lo = min(default_k(n), n)
    hi = max(lo, min(math.ceil(math.sqrt(n)), _K_MAX))
    return np.unique(np.geomspace(lo, hi, 3).round().astype(np.int64))


class Geometry(NamedTuple):
    """Per-row clustering pieces of the bound: squared distance to the row's cluster mean
    (of y x, per label) and the cluster's weight."""

    d2: np.ndarray
    cluster_u: np.ndarray
    n_clusters: int


def _cluster_geometry(X1, ys, u, *, C, opt, U_total, k, rng) -> Geometry:
    """Per label, k-means++ clusters of y x and each row's :class:`Geometry`.

    With ``k=None`` every count of :func:`k_grid` is tried on one k-means++ seeding: the
    nearest-seed partition after its first k seeds (kept by the seeding itself), with the
    clusters' weighted means as centres; the partition with the smallest total sensitivity
    at ``opt`` is kept (the bound holds for any partition, so ``opt`` may be an estimate
    here). O(n d k_max) in all.
    """
    n = X1.shape[0]
    d2, cu = np.empty(n), np.empty(n)
    n_clusters = 0
    for sign in SIGNS:
        rows = np.flatnonzero(ys == sign)
        if rows.size == 0:
            continue
        Z = np.ascontiguousarray(sign * X1[rows, :-1])
        uz = np.ascontiguousarray(u[rows])
        ks = k_grid(rows.size, k)
        seeds, partitions = kmeanspp_partitions(Z, uz, ks, rng.random(int(ks[-1])))
        best_total, out, dist = np.inf, np.empty(rows.size), np.empty(rows.size)
        for labels in partitions:
            centers = Z[seeds].copy()
            cluster_u = np.zeros(seeds.size)
            weighted_means(Z, uz, labels, centers, cluster_u)
            used = cluster_u > 0.0
            if not used.all():  # partitions of fewer seeds: drop the clusters not in use
                remap = np.cumsum(used) - 1
                labels, centers, cluster_u = remap[labels], centers[used], cluster_u[used]
            total = sensitivity_bound(Z, uz, labels, centers, cluster_u, C, opt, U_total, out)
            if total < best_total:
                best_total, best_k = total, centers.shape[0]
                _sq_dist_to_centres(Z, labels, centers, dist)
                d2[rows] = dist
                cu[rows] = cluster_u[labels]
        n_clusters += best_k
    return Geometry(d2, cu, n_clusters)


def _bounds(geom: Geometry, u, *, C, opt, U_total) -> np.ndarray:
    gamma = np.empty(u.shape[0])
    _bounds_from_geometry(geom.d2, u, geom.cluster_u, C, opt, U_total, gamma)
    return gamma


def cluster_bound(X1, ys, u, *, C, opt, U_total, k, rng):
    """gamma(p) of every row given opt (see :func:`_cluster_geometry`); returns
    ``(gamma, clusters over both labels)``."""
    geom = _cluster_geometry(X1, ys, u, C=C, opt=opt, U_total=U_total, k=k, rng=rng)
    return _bounds(geom, u, C=C, opt=opt, U_total=U_total), geom.n_clusters


def _sensitivities(X1, ys, u, *, C, k, rng, opt=None, U_total=None, w0=None, tol=0.005):
    """Sensitivity bounds of rows ``X1`` (bias column last) with labels ``ys`` in {-1, +1}.

    ``U_total`` is the weight of the whole set whose cost is approximated (the rows may be a
    part of it, as in the two-pass build); by default the rows' own total. Trusts its input.
    A set with one label only gets gamma = u (weight-proportional sampling, still unbiased).
    ``tol`` is the certified gap of the coarse solve: a gap g inflates the bound's second
    term by at most sqrt(1 + g).
    """
    U_total = float(u.sum()) if U_total is None else float(U_total)
    if np.unique(ys).size < 2:
        return u.astype(np.float64, copy=True), SensitivityInfo(np.nan, np.nan, None, 1, True)
    upper, w = np.nan, None
    if opt is None:
        with timer("coarse svm", logger):
            sol = coarse_svm(X1, ys, u, C, w0=w0, tol=tol)
        opt, upper, w = sol.lower, sol.upper, sol.w
    if not opt > 0.0:
        raise DKernelError(f"opt must be a positive lower bound of the SVM cost, got {opt}")
    with timer("k-means++ and bound", logger):
        gamma, n_clusters = cluster_bound(
            X1, ys, u, C=C, opt=float(opt), U_total=U_total, k=k, rng=rng
        )
    return gamma, SensitivityInfo(float(opt), float(upper), w, n_clusters, False)


def _binary_labels(y, n: int, *, name: str = "y"):
    """Labels as (ys in {-1, +1}, classes (negative, positive)); raise for anything else."""
    y = np.asarray(y)
    if y.ndim != 1 or y.shape[0] != n:
        raise DKernelError(f"{name} has shape {y.shape}, expected ({n},) to match the rows of X")
    if np.issubdtype(y.dtype, np.floating) and np.isinf(y).any():
        bad = int(np.argmax(np.isinf(y)))
        raise DKernelError(f"{name} contains an infinite label at row {bad}")
    classes = label_classes(y, name=name)
    if classes.size < 2:
        raise DKernelError(
            f"{name} has one class only ({classes.tolist()}); an SVM coreset needs two"
        )
    if classes.size > 2:
        raise DKernelError(
            f"{name} has {classes.size} classes; pass multiclass='ovr' for one-vs-rest coresets"
        )
    return signs(y, classes[1]), (classes[0], classes[1])


def check_C(C) -> float:
    return float(check_scalar(C, "C", kind=numbers.Real, low=0.0, low_inclusive=False))


def svm_sensitivity(X, y, *, C=1.0, k=None, sample_weight=None, opt=None, random_state=None):
    """Upper bounds gamma(p) on the sensitivity of every point for the SVM cost.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
    y : array-like of shape (n_samples,)
        Two classes (mapped to -1/+1: the larger label is +1).
    C : float, default=1.0
        Weight of the hinge term (the paper's lambda).
    k : int, optional
        k-means++ clusters per label; by default the count of :func:`k_grid` with the
        smallest total sensitivity.
    sample_weight : array-like of shape (n_samples,), optional
        Point weights u(p); default 1.
    opt : float, optional
        A certified lower bound of the optimal cost; computed by the coarse solve when None.
    random_state : int, Generator, RandomState or None
        Seed of the k-means++ seeding.

    Returns
    -------
    ndarray of shape (n_samples,)
        gamma(p) >= sup_w u(p) f(p, w) / F(P, w), for the cost
        F(P, w) = sum_p u(p) [||w_{1:d}||^2 / (2 U(P)) + C hinge(p, w)].

    Notes
    -----
    O(n d (k + I)) for k-means++ with ``I`` Lloyd steps, plus the coarse solve (O(n d) per
    L-BFGS iteration).

    References
    ----------
    M. Tukan, C. Baykal, D. Feldman, D. Rus, "On coresets for support vector machines",
    TAMC 2020 / Theoretical Computer Science 2021, Algorithm 1.

    Examples
    --------
    >>> import numpy as np
    >>> from dkernel.coreset import svm_sensitivity
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(200, 2)); y = np.where(X[:, 0] > 0, 1, -1)
    >>> g = svm_sensitivity(X, y, random_state=0)
    >>> g.shape, bool((g > 0).all())
    ((200,), True)
    """
    X = check_finite_2d(X)
    n = X.shape[0]
    ys, _ = _binary_labels(y, n)
    u = check_sample_weight(sample_weight, n)
    C = check_C(C)
    k = check_scalar(k, "k", kind=numbers.Integral, low=1, allow_none=True)
    if opt is not None:
        check_scalar(opt, "opt", low=0.0, low_inclusive=False)
    rng = _rng(random_state)
    gamma, _ = _sensitivities(with_bias(X), ys, u, C=C, k=k, rng=rng, opt=opt)
    return gamma


def _rng(random_state) -> np.random.Generator:
    """A Generator from an int, SeedSequence, Generator, RandomState or None."""
    if isinstance(random_state, np.random.Generator):
        return random_state
    if isinstance(random_state, np.random.RandomState):
        return np.random.default_rng(random_state.randint(0, 2**31 - 1))
    if random_state is None or isinstance(random_state, np.random.SeedSequence):
        return np.random.default_rng(random_state)
    if isinstance(random_state, numbers.Integral):
        return np.random.default_rng(int(random_state))
    raise DKernelError(f"random_state must be None, an int or a generator, got {random_state!r}")


def _base_seed(random_state) -> int:
    """An int seed for node-wise SeedSequences ([seed, level, index])."""
    if isinstance(random_state, numbers.Integral) and not isinstance(random_state, bool):
        return int(random_state)
    return int(_rng(random_state).integers(0, 2**63 - 1))
