"""numba inner loops of kernel k-means (no dask here).

Notation (Jourdan & Schwartzman, 2024): a center ``C_j = sum_p coef[p] phi(s_p)`` over its
support points ``s_p`` (rows ``ptr[j]:ptr[j + 1]`` of the stacked support), the batch ``B``
and its part ``B_j`` assigned to center ``j``.

- :func:`center_inner`: ``<phi(x_i), C_j>`` from a kernel block ``K(X, S)`` (segment sums).
- :func:`assign_nearest`: ``argmin_j K(x, x) - 2 <phi(x), C_j> + <C_j, C_j>``.
- :func:`batch_center_terms`: per center, ``W_j = sum w_i``, ``sum w_i <phi(x_i), C_j>`` and
  ``sum_{i, l in B_j} w_i w_l K(x_i, x_l)``, the terms of the recursive norm update
  ``<C'_j, C'_j> = (1-a)^2 <C_j, C_j> + 2 a (1-a) <cm(B_j), C_j> + a^2 <cm(B_j), cm(B_j)>``.
- :func:`bilinear`: ``u^T K v`` (the norm correction when a window batch is dropped).
- :func:`window_gram`: a window's next Gram matrix from its kept part, the new rows'
  kernel values against the kept points (rows of the iteration's block) and among
  themselves.
"""

from __future__ import annotations

import numpy as np
from numba import njit

# Segment sums may be reassociated (vectorised); no NaN/inf assumptions are made.
_SUM = {"reassoc", "contract"}


@njit(cache=True, nogil=True, fastmath=_SUM)
def center_inner(K, ptr, coef, out):
    """``out[i, j] = sum_{p in [ptr[j], ptr[j+1])} K[i, p] * coef[p]`` (overwrites ``out``).

    Accumulated in float64 (a float32 K is widened per element), vectorised.
    """
    m = K.shape[0]
    k = ptr.shape[0] - 1
    for i in range(m):
        row = K[i]
        for j in range(k):
            seg = row[ptr[j] : ptr[j + 1]]
            c = coef[ptr[j] : ptr[j + 1]]
            acc = 0.0
            for p in range(seg.shape[0]):
                acc += np.float64(seg[p]) * c[p]
            out[i, j] = acc


@njit(cache=True, nogil=True)
def assign_nearest(diag, inner, norms, labels, mindist):
    """Nearest center in feature space; ties go to the lowest index; distances clamped >= 0."""
    m, k = inner.shape
    for i in range(m):
        best = np.inf
        arg = 0
        for j in range(k):
            d = diag[i] - 2.0 * inner[i, j] + norms[j]
            if d < best:
                best = d
                arg = j
        labels[i] = arg
        mindist[i] = best if best > 0.0 else 0.0


@njit(cache=True, nogil=True)
def batch_center_terms(Kbb, inner, labels, w, k):
    """Per-center ``(W_j, sum w_i <x_i, C_j>, sum_{i,l in B_j} w_i w_l K_il, count_j)``."""
    b = labels.shape[0]
    W = np.zeros(k)
    cross = np.zeros(k)
    selfk = np.zeros(k)
    count = np.zeros(k, dtype=np.int64)
    for i in range(b):
        j = labels[i]
        W[j] += w[i]
        cross[j] += w[i] * inner[i, j]
        count[j] += 1
        acc = 0.0
        for l in range(b):
            if labels[l] == j:
                acc += w[l] * Kbb[i, l]
        selfk[j] += w[i] * acc
    return W, cross, selfk, count


@njit(cache=True, nogil=True)
def bilinear(K, u, v):
    """``u^T K v`` accumulated in float64."""
    acc = 0.0
    for i in range(K.shape[0]):
        row = 0.0
        for j in range(K.shape[1]):
            row += K[i, j] * v[j]
        acc += u[i] * row
    return acc


@njit(cache=True, nogil=True)
def window_gram(gram, m_drop, K, rows, col0, Kjj):
    """``[[gram[m_drop:, m_drop:], Kjw.T], [Kjw, Kjj]]`` with ``Kjw = K[rows, col0:col0 + m_keep]``
    (the new rows against the kept window points), in float64."""
    m_keep = gram.shape[0] - m_drop
    r = rows.shape[0]
    n = m_keep + r
    G = np.empty((n, n))
    for i in range(m_keep):
        for j in range(m_keep):
            G[i, j] = gram[m_drop + i, m_drop + j]
    for a in range(r):
        Krow = K[rows[a]]
        for j in range(m_keep):
            v = np.float64(Krow[col0 + j])
            G[m_keep + a, j] = v
            G[j, m_keep + a] = v
        for b in range(r):
            G[m_keep + a, m_keep + b] = Kjj[a, b]
    return G
