"""numba kernels of the coreset construction: weighted k-means++ and the sensitivity bound.

No dask here: these run inside one task on one block of rows.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def _pick(cum_weights, r):
    """First index whose cumulative weight exceeds ``r`` (binary search)."""
    lo, hi = 0, cum_weights.shape[0] - 1
    while lo < hi:
        mid = (lo + hi) // 2
        if cum_weights[mid] > r:
            hi = mid
        else:
            lo = mid + 1
    return lo


@njit(cache=True, nogil=True)
def _sq_dist_to(X, c, out):
    n, d = X.shape
    for i in range(n):
        s = 0.0
        for j in range(d):
            t = X[i, j] - c[j]
            s += t * t
        out[i] = s


@njit(cache=True, nogil=True)
def _weighted_kmeanspp(X, u, k, uniforms):
    """Indices of up to ``k`` seeds drawn by weighted k-means++ (D^2 * u sampling).

    ``uniforms`` holds ``k`` draws from U[0, 1) (made by the caller's seeded generator, so
    the result is reproducible). Stops early when every point coincides with a seed.
    """
    n = X.shape[0]
    seeds = np.empty(k, dtype=np.int64)
    cum = np.empty(n)
    acc = 0.0
    for i in range(n):
        acc += u[i]
        cum[i] = acc
    seeds[0] = _pick(cum, uniforms[0] * acc)
    d2 = np.empty(n)
    _sq_dist_to(X, X[seeds[0]], d2)
    tmp = np.empty(n)
    n_seeds = 1
    for j in range(1, k):
        acc = 0.0
        for i in range(n):
            acc += u[i] * d2[i]
            cum[i] = acc
        if acc <= 0.0:
            break
        s = _pick(cum, uniforms[j] * acc)
        seeds[n_seeds] = s
        n_seeds += 1
        _sq_dist_to(X, X[s], tmp)
        for i in range(n):
            if tmp[i] < d2[i]:
                d2[i] = tmp[i]
    return seeds[:n_seeds]


@njit(cache=True, nogil=True)
def _assign(X, centers, labels):
    """Nearest centre of every row (squared Euclidean)."""
    n, d = X.shape
    k = centers.shape[0]
    for i in range(n):
        best, arg = np.inf, 0
        for c in range(k):
            s = 0.0
            for j in range(d):
                t = X[i, j] - centers[c, j]
                s += t * t
            if s < best:
                best, arg = s, c
        labels[i] = arg


@njit(cache=True, nogil=True)
def _weighted_means(X, u, labels, centers, cluster_u):
    """Weighted means and weight totals of the clusters; empty clusters keep their centre."""
    n, d = X.shape
    k = centers.shape[0]
    sums = np.zeros((k, d))
    tot = np.zeros(k)
    for i in range(n):
        c = labels[i]
        tot[c] += u[i]
        for j in range(d):
            sums[c, j] += u[i] * X[i, j]
    for c in range(k):
        cluster_u[c] = tot[c]
        if tot[c] > 0.0:
            for j in range(d):
                centers[c, j] = sums[c, j] / tot[c]


@njit(cache=True, nogil=True)
def _weighted_kmeans(X, u, k, uniforms, n_iter):
    """Weighted k-means++ seeding plus ``n_iter`` Lloyd steps.

    Returns ``(labels, centers, cluster_u)``; the centres are the clusters' weighted means
    (the paper's c_y^(i)), so they are consistent with the labels.
    """
    n, d = X.shape
    seeds = _weighted_kmeanspp(X, u, k, uniforms)
    kk = seeds.shape[0]
    centers = np.empty((kk, d))
    for c in range(kk):
        centers[c] = X[seeds[c]]
    labels = np.empty(n, dtype=np.int64)
    cluster_u = np.zeros(kk)
    for _ in range(n_iter):
        _assign(X, centers, labels)
        _weighted_means(X, u, labels, centers, cluster_u)
    _assign(X, centers, labels)
    _weighted_means(X, u, labels, centers, cluster_u)
    return labels, centers, cluster_u


@njit(cache=True, nogil=True)
def _sensitivity_bound(Z, u, labels, centers, cluster_u, cluster_alpha, C, opt, out):
    """The paper's sensitivity upper bound (Algorithm 1, line 8) of every row.

    ``Z`` holds y * x (the bias column cancels in ``centre - y x``), ``labels`` the row's
    cluster among its label's clusters, ``cluster_alpha`` the clusters' alpha_i.
    gamma(p) = u/U(P_y^(i)) + C u (9/2) max{(4/9) a_i, sqrt(4 a_i^2 + 2 |p_Delta|^2 /
    (9 opt)) - 2 a_i}.
    """
    n, d = Z.shape
    for i in range(n):
        c = labels[i]
        s = 0.0
        for j in range(d):
            t = centers[c, j] - Z[i, j]
            s += t * t
        a = cluster_alpha[c]
        term = np.sqrt(4.0 * a * a + 2.0 * s / (9.0 * opt)) - 2.0 * a
        lo = 4.0 / 9.0 * a
        if lo > term:
            term = lo
        out[i] = u[i] / cluster_u[c] + C * u[i] * 4.5 * term
