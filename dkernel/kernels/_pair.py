"""numba pair kernels: one kernel value ``k(x, z)`` at a time, for loops that visit one
example at a time (the budgeted SGD step, budget maintenance, its scoring).

Each kernel has an integer code (its ``code`` in the kernel table, ``_table.py``), so that a
jitted loop takes the kernel as a plain argument and :func:`kval` dispatches on it.
:func:`pair_gram` builds the kernel matrix of a point set with exactly the arithmetic of
:func:`kval` (the same dot product summed in the same order, the same closing formula), so a
matrix rebuilt from the points (after ``load``, after a distributed round) equals the one
the loop grew entry by entry. The BLAS tile kernels of :mod:`._numba` serve whole blocks
instead (:func:`~dkernel.kernels.pairwise_kernels`); they round differently.

Nothing here imports dask; every function trusts its input.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ._numba import fast_exp

RBF, LAPLACIAN, LINEAR, POLYNOMIAL, SIGMOID, COSINE, MATERN = 0, 1, 2, 3, 4, 5, 6


@njit(cache=True, nogil=True)
def from_dot(kind, gamma, degree, coef0, dot, xsq, zsq):
    """``k(x, z)`` of a dot-product kernel (every kind but laplacian) from ``<x, z>`` and
    the squared norms."""
    if kind == RBF:
        d2 = xsq + zsq - 2.0 * dot
        if d2 < 0.0:
            d2 = 0.0
        return fast_exp(-gamma * d2)
    if kind == MATERN:  # nu = 3/2, length scale 1 / sqrt(2 gamma) (see _table.py)
        d2 = xsq + zsq - 2.0 * dot
        if d2 < 0.0:
            d2 = 0.0
        s = np.sqrt(6.0 * gamma * d2)
        return (1.0 + s) * fast_exp(-s)
    if kind == LINEAR:
        return dot
    if kind == POLYNOMIAL:
        return (gamma * dot + coef0) ** degree
    if kind == SIGMOID:
        return np.tanh(gamma * dot + coef0)
    den = np.sqrt(xsq) * np.sqrt(zsq)  # cosine
    return dot / den if den > 0.0 else 0.0


@njit(cache=True, nogil=True)
def kval(kind, gamma, degree, coef0, x, xsq, z, zsq):
    """One kernel value k(x, z) (squared norms given; the sums run over k = 0, 1, ...)."""
    d = x.shape[0]
    if kind == LAPLACIAN:
        s = 0.0
        for k in range(d):
            s += abs(x[k] - z[k])
        return fast_exp(-gamma * s)
    dot = 0.0
    for k in range(d):
        dot += x[k] * z[k]
    return from_dot(kind, gamma, degree, coef0, dot, xsq, zsq)


@njit(cache=True, nogil=True)
def sq_norm(x):
    """``<x, x>`` summed over k = 0, 1, ... like :func:`kval`'s dot products. Not
    ``np.dot``: numba hands that to the BLAS, whose kernel (picked per processor, or by
    ``OPENBLAS_CORETYPE``) sums in its own order, so the last bits, and with them which SV
    a tie in the budget maintenance keeps, would depend on the machine."""
    s = 0.0
    for k in range(x.shape[0]):
        s += x[k] * x[k]
    return s


@njit(cache=True, nogil=True)
def sq_norms(X):
    """Squared row norms as the pair loops compute them (:func:`sq_norm`)."""
    out = np.empty(X.shape[0])
    for i in range(X.shape[0]):
        out[i] = sq_norm(X[i])
    return out


@njit(cache=True, nogil=True)
def pair_matrix(X, Y, kind, gamma, degree, coef0):
    """``k(X, Y)`` entry by entry through :func:`kval` (the reference of the loops)."""
    n, m = X.shape[0], Y.shape[0]
    xsq = sq_norms(X)
    ysq = sq_norms(Y)
    out = np.empty((n, m))
    for i in range(n):
        for j in range(m):
            out[i, j] = kval(kind, gamma, degree, coef0, X[i], xsq[i], Y[j], ysq[j])
    return out


@njit(cache=True, nogil=True)
def pair_gram(X, sqn, kind, gamma, degree, coef0):
    """``k(X, X)`` equal bit for bit to :func:`kval` of every pair (``sqn``: the squared
    row norms). Row i's sums run over the features in order like :func:`kval`'s, but
    for all partners j >= i at once (independent sums, so the inner loop vectorises
    without reordering any of them); the upper triangle is mirrored."""
    n, d = X.shape
    XT = np.ascontiguousarray(X.T)
    out = np.empty((n, n))
    acc = np.empty(n)
    lap = kind == LAPLACIAN
    for i in range(n):
        acc[i:] = 0.0
        for k in range(d):
            xk = X[i, k]
            row = XT[k]
            if lap:
                for j in range(i, n):
                    acc[j] += abs(xk - row[j])
            else:
                for j in range(i, n):
                    acc[j] += xk * row[j]
        for j in range(i, n):
            if lap:
                v = fast_exp(-gamma * acc[j])
            else:
                v = from_dot(kind, gamma, degree, coef0, acc[j], sqn[i], sqn[j])
            out[i, j] = v
            out[j, i] = v
    return out


@njit(cache=True, nogil=True)
def krow_into(kind, gamma, degree, coef0, x, xsq, ZT, zsq, n, out):
    """``out[j] = k(x, z_j)`` for the first ``n`` points, equal bit for bit to :func:`kval`
    of each pair. ``ZT`` holds the points as columns (shape (d, >= n)): each sum runs over
    the features in order like :func:`kval`'s, but for all points at once, so the inner
    loops vectorise (the rows of a row-major point set would be read one point at a time)."""
    d = x.shape[0]
    out[:n] = 0.0
    if kind == LAPLACIAN:
        for k in range(d):
            xk = x[k]
            row = ZT[k]
            for j in range(n):
                out[j] += abs(xk - row[j])
        for j in range(n):
            out[j] = fast_exp(-gamma * out[j])
        return
    for k in range(d):
        xk = x[k]
        row = ZT[k]
        for j in range(n):
            out[j] += xk * row[j]
    if kind == RBF:
        for j in range(n):
            d2 = xsq + zsq[j] - 2.0 * out[j]
            if d2 < 0.0:
                d2 = 0.0
            out[j] = fast_exp(-gamma * d2)
    else:
        for j in range(n):
            out[j] = from_dot(kind, gamma, degree, coef0, out[j], xsq, zsq[j])
