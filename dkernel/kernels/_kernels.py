"""numba kernels that turn a Gram block ``G = X @ Y.T`` into a kernel block in place.

Each function works on a tile of rows ``[r0, r1)`` so that the orchestration in
``_pairwise.py`` can compute the BLAS product tile by tile and transform each tile
while it is still in cache. No dask is imported here.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def rbf_from_gram(G, xx, yy, gamma, r0, r1):
    """``G[i, j] <- exp(-gamma * max(xx[i] + yy[j] - 2 G[i, j], 0))`` for rows r0..r1."""
    n = G.shape[1]
    g = G.dtype.type(gamma)
    two = G.dtype.type(2.0)
    zero = G.dtype.type(0.0)
    for i in range(r0, r1):
        xi = xx[i]
        for j in range(n):
            d = xi + yy[j] - two * G[i, j]
            if d < zero:
                d = zero
            G[i, j] = np.exp(-g * d)


@njit(cache=True, nogil=True)
def poly_from_gram(G, gamma, coef0, degree, r0, r1):
    """``G[i, j] <- (gamma G[i, j] + coef0) ** degree``."""
    n = G.shape[1]
    g = G.dtype.type(gamma)
    c = G.dtype.type(coef0)
    for i in range(r0, r1):
        for j in range(n):
            G[i, j] = (g * G[i, j] + c) ** degree


@njit(cache=True, nogil=True)
def sigmoid_from_gram(G, gamma, coef0, r0, r1):
    """``G[i, j] <- tanh(gamma G[i, j] + coef0)``."""
    n = G.shape[1]
    g = G.dtype.type(gamma)
    c = G.dtype.type(coef0)
    for i in range(r0, r1):
        for j in range(n):
            G[i, j] = np.tanh(g * G[i, j] + c)


@njit(cache=True, nogil=True)
def cosine_from_gram(G, xnorm, ynorm, r0, r1):
    """``G[i, j] <- G[i, j] / (|x_i| |y_j|)``; rows of zero norm give 0 (as scikit-learn)."""
    n = G.shape[1]
    zero = G.dtype.type(0.0)
    for i in range(r0, r1):
        xi = xnorm[i]
        for j in range(n):
            den = xi * ynorm[j]
            if den > zero:
                G[i, j] = G[i, j] / den
            else:
                G[i, j] = zero


@njit(cache=True, nogil=True)
def laplacian_block(X, Y, gamma, out, r0, r1):
    """``out[i, j] <- exp(-gamma * sum_k |X[i, k] - Y[j, k]|)`` (no BLAS form exists)."""
    n = Y.shape[0]
    d = X.shape[1]
    g = out.dtype.type(gamma)
    for i in range(r0, r1):
        for j in range(n):
            s = 0.0
            for k in range(d):
                s += abs(X[i, k] - Y[j, k])
            out[i, j] = np.exp(-g * out.dtype.type(s))


@njit(cache=True, nogil=True)
def row_sq_norms(X):
    """Squared Euclidean norm of each row, accumulated in float64, returned in X's dtype."""
    m, d = X.shape
    out = np.empty(m, dtype=X.dtype)
    for i in range(m):
        s = 0.0
        for k in range(d):
            v = X[i, k]
            s += v * v
        out[i] = s
    return out
