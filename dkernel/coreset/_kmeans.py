"""Coresets for kernel k-means: sensitivity sampling from a kernel k-means++ clustering."""

from __future__ import annotations

import logging
import numbers

import numpy as np
from sklearn.utils import check_random_state

from .._validation import DKernelError, check_finite_2d, check_sample_weight, check_scalar
from ..cluster import NumericOracle, kmeans_plusplus_oracle
from ..kernels import resolve_kernel
from ..runtime import timer
from ._coreset import BETA, Coreset, _check_m, _draw

logger = logging.getLogger(__name__)


def kernel_kmeans_sensitivity(X, centers_idx, u, oracle):
    """Sensitivity upper bounds for the kernel k-means cost from seeds ``X[centers_idx]``.

    gamma(p) = u(p) D(p)^2 / cost + u(p) / U(cluster of p), with D the feature-space
    distance to the nearest seed and cost = sum u D^2 (the bound of Feldman & Langberg for
    an approximate solution, up to its constant; t = 1 + number of clusters).
    Returns ``(gamma, labels)``.
    """
    gamma, labels, _ = _sensitivity_parts(X, centers_idx, u, oracle)
    return gamma, labels


def _sensitivity_parts(X, centers_idx, u, oracle):
    """``kernel_kmeans_sensitivity`` and its cost part ``u D^2 / cost`` apart."""
    diag = oracle.diag(X)
    K = oracle.kernel(X, X[centers_idx])
    d2 = np.maximum(diag[:, None] - 2.0 * K + diag[centers_idx][None, :], 0.0)
    labels = np.argmin(d2, axis=1)
    dmin = d2[np.arange(X.shape[0]), labels]
    cluster_u = np.bincount(labels, weights=u, minlength=len(centers_idx))
    cost = float(u @ dmin)
    gamma = u / cluster_u[labels]
    share = u * dmin / cost if cost > 0.0 else np.zeros_like(gamma)
    return gamma + share, labels, share


def kernel_kmeans_coreset(
    X,
    m,
    n_clusters,
    *,
    kernel="rbf",
    gamma=None,
    degree=3,
    coef0=1.0,
    kernel_params=None,
    sample_weight=None,
    beta=BETA,
    random_state=None,
):
    """Sensitivity-sampling coreset for the kernel k-means cost.

    The kernel k-means++ seeding of ``n_clusters`` centres (an O(log k) approximation in
    expectation) gives every point a sensitivity bound: its share of the seeding's cost
    plus one over its cluster's weight. The coreset is ``m`` draws from a mixture of
    three parts: weight-proportional (share ``beta``), the cost shares and the clusters
    (each cluster the same mass, spread by weight), ``(1 - beta) / 2`` each.
    Sampling in proportion to the bound itself would give the cost part only
    ``1 / (1 + k)`` of the draws: the clusters' part alone is then close to a uniform
    sample on balanced data and misses the far points that carry the cost of other
    centres. The weights count replicated rows, so
    ``KernelKMeans`` and ``MiniBatchKernelKMeans`` fitted with ``sample_weight=weight``
    (:meth:`Coreset.fit`) minimise an unbiased estimate of the full-data cost.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
        NumPy input.
    m : int
        Draws (at most m distinct rows).
    n_clusters : int
        Clusters of the seeding (the k the coreset is built for).
    kernel, gamma, degree, coef0, kernel_params
        As :func:`dkernel.kernels.pairwise_kernels` (``gamma=None``: ``1 / n_features``);
        pass the estimator's kernel.
    sample_weight : array-like of shape (n_samples,), optional
    beta : float in [0, 1], default=0.3
        Share of weight-proportional sampling in the mixture.
    random_state : int, RandomState or None

    Returns
    -------
    Coreset
        ``y`` is None; ``info["method"] == "kernel-kmeans"``.

    Notes
    -----
    O(n k t) kernel evaluations for the seeding (t local trials) plus O(n k) for the
    distances.

    References
    ----------
    D. Feldman and M. Langberg, "A unified framework for approximating and clustering
    data", STOC 2011; O. Bachem, M. Lucic and A. Krause, "Practical coreset constructions
    for machine learning", arXiv:1703.06476, 2017.

    Examples
    --------
    >>> import numpy as np
    >>> from dkernel.coreset import kernel_kmeans_coreset
    >>> X = np.random.default_rng(0).normal(size=(1000, 2))
    >>> S = kernel_kmeans_coreset(X, 100, 5, gamma=0.5, random_state=0)
    >>> len(S) <= 100, S.source_size
    (True, 1000)
    """
    X = check_finite_2d(X)
    n = X.shape[0]
    m = _check_m(m, n)
    check_scalar(n_clusters, "n_clusters", kind=numbers.Integral, low=1, high=n)
    beta = float(check_scalar(beta, "beta", kind=numbers.Real, low=0.0, high=1.0))
    spec = resolve_kernel(kernel, gamma, degree, coef0, kernel_params, n_features=X.shape[1])
    if spec.kernel == "precomputed":
        raise DKernelError("kernel_kmeans_coreset needs a kernel function, not 'precomputed'")
    u = check_sample_weight(sample_weight, n)
    rng = check_random_state(random_state)
    oracle = NumericOracle(spec)
    with timer("kernel k-means coreset", logger):
        seeds, _ = kmeans_plusplus_oracle(oracle, X, oracle.diag(X), u, int(n_clusters), rng)
        gam, _, share = _sensitivity_parts(X, seeds, u, oracle)
        U, t = float(u.sum()), float(gam.sum())
        q = _mixture(gam - share, share, u, U, beta)
        idx, weight = _draw(q, u, m, np.random.default_rng(rng.randint(0, 2**31 - 1)))
    return Coreset(
        X=X[idx],
        y=None,
        weight=weight,
        sensitivity=gam[idx],
        total_sensitivity=t,
        source_size=n,
        classes=(),
        info={"method": "kernel-kmeans", "n_clusters": int(n_clusters), "beta": beta},
    )


def _mixture(cluster, share, u, U, beta):
    """Sampling distribution: ``beta`` weight-proportional, the rest split equally between
    the clusters' part and the cost part (a part that is all zero gives its mass to the
    other)."""
    parts = [p / p.sum() for p in (cluster, share) if p.sum() > 0.0]
    return beta * u / U + (1.0 - beta) * sum(parts) / len(parts)
