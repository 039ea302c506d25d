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
def weighted_kmeanspp(X, u, k, uniforms):
    """Indices of up to ``k`` seeds drawn by weighted k-means++ (D^2 * u sampling).

    ``uniforms`` holds ``k`` draws from U[0, 1) (made by the caller's seeded generator, so
    the result is reproducible). Stops early when every point coincides with a seed.
    """
    seeds, _ = kmeanspp_partitions(X, u, np.array([k]), uniforms)
    return seeds


@njit(cache=True, nogil=True)
def kmeanspp_partitions(X, u, ks, uniforms):
    """Weighted k-means++ seeding up to ``ks[-1]`` seeds, with the nearest-seed partition
    after the first ``ks[i]`` seeds for every i (free: the seeding keeps them anyway).

    ``ks`` is increasing; returns ``(seeds, labels)`` with ``labels[i]`` the partition for
    ``min(ks[i], seeds found)`` seeds.
    """
    n = X.shape[0]
    k = ks[-1]
    seeds = np.empty(k, dtype=np.int64)
    labels = np.zeros((ks.shape[0], n), dtype=np.int64)
    lab = np.zeros(n, dtype=np.int64)
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
        for g in range(ks.shape[0]):
            if ks[g] == n_seeds:
                labels[g] = lab
        acc = 0.0
        for i in range(n):
            acc += u[i] * d2[i]
            cum[i] = acc
        if acc <= 0.0:
            break
        s = _pick(cum, uniforms[j] * acc)
        seeds[n_seeds] = s
        _sq_dist_to(X, X[s], tmp)
        for i in range(n):
            if tmp[i] < d2[i]:
                d2[i] = tmp[i]
                lab[i] = n_seeds
        n_seeds += 1
    for g in range(ks.shape[0]):
        if ks[g] >= n_seeds:
            labels[g] = lab
    return seeds[:n_seeds], labels


@njit(cache=True, nogil=True)
def weighted_means(X, u, labels, centers, cluster_u):
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
def _bound(d2, u, cu, C, opt, U_total):
    """One point's sensitivity bound from its squared distance ``d2`` to its cluster's
    weighted mean and the cluster's weight ``cu`` (see :func:`sensitivity_bound`)."""
    a = (U_total - cu) / (2.0 * C * U_total * cu)
    term = np.sqrt(4.0 * a * a + 2.0 * d2 / (9.0 * opt)) - 2.0 * a
    lo = 4.0 / 9.0 * a
    if lo > term:
        term = lo
    paper = 4.5 * term
    direct = np.sqrt(2.0 * d2 / opt)
    g = u / cu + C * u * min(paper, direct)
    return 1.0 if g > 1.0 else g


@njit(cache=True, nogil=True)
def _sq_dist_to_centres(Z, labels, centers, out):
    """Squared distance of every row to its cluster's centre."""
    n, d = Z.shape
    for i in range(n):
        c = labels[i]
        s = 0.0
        for j in range(d):
            t = centers[c, j] - Z[i, j]
            s += t * t
        out[i] = s


@njit(cache=True, nogil=True)
def _bounds_from_geometry(d2, u, cu, C, opt, U_total, out):
    """:func:`_bound` of every row (``cu``: the row's cluster weight); returns the sum."""
    total = 0.0
    for i in range(d2.shape[0]):
        out[i] = _bound(d2[i], u[i], cu[i], C, opt, U_total)
        total += out[i]
    return total


@njit(cache=True, nogil=True)
def sensitivity_bound(Z, u, labels, centers, cluster_u, C, opt, U_total, out):
    """Sensitivity upper bounds of every row of one label; returns their sum.

    ``Z`` holds y * x (the bias column cancels in ``centre - y x``), ``labels`` the row's
    cluster among its label's clusters, ``centers`` the clusters' weighted means c_y^(i).
    With D = |c - y x| and U_c the cluster's weight, the bound is the smallest of

    - the paper's (Algorithm 1, line 8): u/U_c + C u (9/2) max{(4/9) a, sqrt(4 a^2 +
      2 D^2 / (9 opt)) - 2 a}, a = (U - U_c) / (2 C U U_c);
    - the direct one: u/U_c + C u D sqrt(2 / opt) (hinge(p) <= hinge(c) + |w| D, Jensen on
      the cluster, F >= max(opt, |w|^2 / 2));
    - 1 (a point's share of a sum of non-negative terms).
    """
    n = Z.shape[0]
    d2 = np.empty(n)
    _sq_dist_to_centres(Z, labels, centers, d2)
    total = 0.0
    for i in range(n):
        out[i] = _bound(d2[i], u[i], cluster_u[labels[i]], C, opt, U_total)
        total += out[i]
    return total
