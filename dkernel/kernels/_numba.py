"""numba kernels that turn a Gram block ``G = X @ Y.T`` into a kernel block in place.

Each function works on a tile of rows ``[r0, r1)`` so that the orchestration in
``_pairwise.py`` can compute the BLAS product tile by tile and transform each tile
while it is still in cache (from several threads at once: every function here releases
the GIL). No dask is imported here.

The exponential is :func:`fast_exp`, a branch-free Cody–Waite range reduction with a
polynomial that LLVM vectorises (``np.exp`` inside a numba loop is a scalar libm call,
which does not vectorise).
"""

from __future__ import annotations

import numpy as np
from numba import njit, types
from numba.extending import overload

# exp(x) = 2^k exp(r), k = round(x / ln 2), r = x - k ln 2 in [-ln2/2, ln2/2]; ln 2 is split
# into a high part with trailing zero bits (k * LN2_HI is exact) and a low correction
# (Cody & Waite, "Software Manual for the Elementary Functions", 1980).
_LOG2E = 1.4426950408889634
_LN2_HI64 = 6.93147180369123816490e-01  # fdlibm's split: 32 significant bits
_LN2_LO64 = 1.90821492927058770002e-10
_LN2_HI32 = 0.693359375  # 355/512: 9 significant bits
_LN2_LO32 = -2.12194440e-04
# Below these arguments exp(x) is subnormal (or zero) in the dtype; the kernels return 0
# there (absolute error < 2.3e-308 / 1.7e-38), so 2^k never leaves the normal range.
_EXP_LO64 = -708.0
_EXP_LO32 = -87.0
# The only fast-math flag used: fused multiply-add contraction (no NaN/inf assumptions).
_FMA = {"contract"}


def fast_exp(x):
    """``exp(x)`` for ``x <= 0`` in numba code, vectorisable; 0 below the normal range.

    From Python this is ``np.exp``; inside an ``@njit`` function it compiles to the
    polynomial for the argument's float width: float64 within 1 ulp of ``np.exp``
    (Taylor degree 13 on ``|r| <= ln2/2``), float32 within 1 ulp of the correctly rounded
    value (degree 7). Arguments below -708 (float64) / -87 (float32), ``-inf`` and NaN
    give 0. Positive arguments are accepted up to 709 / 88.
    """
    return np.exp(x)


@overload(fast_exp, jit_options={"cache": True, "nogil": True, "fastmath": _FMA})  # type: ignore[typeddict-unknown-key]
def _fast_exp_impl(x):
    if isinstance(x, types.Float) and x.bitwidth == 32:
        return _exp32()
    if isinstance(x, types.Float):
        return _exp64()
    return None


def _exp32():
    """float32 ``exp``: degree-7 Taylor polynomial on the reduced argument."""
    lo32 = np.float32(_EXP_LO32)
    log2e32 = np.float32(_LOG2E)
    hi32 = np.float32(_LN2_HI32)
    lo_part32 = np.float32(_LN2_LO32)
    half32 = np.float32(0.5)
    one32 = np.float32(1.0)
    zero32 = np.float32(0.0)
    c7 = np.float32(1.0 / 5040.0)
    c6 = np.float32(1.0 / 720.0)
    c5 = np.float32(1.0 / 120.0)
    c4 = np.float32(1.0 / 24.0)
    c3 = np.float32(1.0 / 6.0)

    def impl32(x):
        ok = x >= lo32
        if not ok:
            x = zero32
        k = np.floor(x * log2e32 + half32)
        r = x - k * hi32
        r = r - k * lo_part32
        p = c7
        p = p * r + c6
        p = p * r + c5
        p = p * r + c4
        p = p * r + c3
        p = p * r + half32
        p = p * r + one32
        p = p * r + one32
        bits = np.float32(p).view(np.int32) + (np.int32(k) << 23)
        y = np.int32(bits).view(np.float32)
        return y if ok else zero32

    return impl32


def _exp64():
    """float64 ``exp``: degree-13 Taylor polynomial on the reduced argument."""

    def impl64(x):
        ok = x >= _EXP_LO64
        if not ok:
            x = 0.0
        k = np.floor(x * _LOG2E + 0.5)
        r = x - k * _LN2_HI64
        r = r - k * _LN2_LO64
        p = 1.0 / 6227020800.0
        p = p * r + 1.0 / 479001600.0
        p = p * r + 1.0 / 39916800.0
        p = p * r + 1.0 / 3628800.0
        p = p * r + 1.0 / 362880.0
        p = p * r + 1.0 / 40320.0
        p = p * r + 1.0 / 5040.0
        p = p * r + 1.0 / 720.0
        p = p * r + 1.0 / 120.0
        p = p * r + 1.0 / 24.0
        p = p * r + 1.0 / 6.0
        p = p * r + 0.5
        p = p * r + 1.0
        p = p * r + 1.0
        bits = np.float64(p).view(np.int64) + (np.int64(k) << 52)
        y = np.int64(bits).view(np.float64)
        return y if ok else 0.0

    return impl64


@njit(cache=True, nogil=True, fastmath=_FMA)
def fast_exp_array(a, out):
    """``out[...] = fast_exp(a)`` elementwise (1-D; used by the tests and the benchmark)."""
    for j in range(a.shape[0]):
        out[j] = fast_exp(a[j])


# Inner loops run over 1-D row slices starting at 0: with a run-time column offset in the
# index LLVM cannot rule out negative (wrap-around) indices and does not vectorise.


@njit(cache=True, nogil=True, fastmath=_FMA)
def rbf_from_gram(G, xx, yy, gamma, r0, r1, c0=0):
    """``G[i, j] <- exp(-gamma * max(xx[i] + yy[j] - 2 G[i, j], 0))``, rows r0..r1, cols c0.."""
    g = G.dtype.type(-gamma)
    two = G.dtype.type(2.0)
    zero = G.dtype.type(0.0)
    ys = yy[c0:]
    for i in range(r0, r1):
        xi = xx[i]
        row = G[i, c0:]
        for j in range(row.shape[0]):
            d = xi + ys[j] - two * row[j]
            if d < zero:
                d = zero
            row[j] = fast_exp(g * d)


@njit(cache=True, nogil=True, fastmath=_FMA)
def matern_from_gram(G, xx, yy, gamma, r0, r1, c0=0):
    """Matérn nu = 3/2: ``G[i, j] <- (1 + s) exp(-s)``, ``s = sqrt(6 gamma d2)``,
    ``d2 = max(xx[i] + yy[j] - 2 G[i, j], 0)`` (rows r0..r1, columns c0..)."""
    g = G.dtype.type(6.0 * gamma)
    two = G.dtype.type(2.0)
    zero = G.dtype.type(0.0)
    one = G.dtype.type(1.0)
    ys = yy[c0:]
    for i in range(r0, r1):
        xi = xx[i]
        row = G[i, c0:]
        for j in range(row.shape[0]):
            d = xi + ys[j] - two * row[j]
            if d < zero:
                d = zero
            s = np.sqrt(g * d)
            row[j] = (one + s) * fast_exp(-s)


@njit(cache=True, nogil=True, fastmath=_FMA)
def poly_from_gram(G, gamma, coef0, degree, r0, r1, c0=0):
    """``G[i, j] <- (gamma G[i, j] + coef0) ** degree`` (rows r0..r1, columns c0..).

    A whole ``degree`` (the usual case) is computed by repeated squaring, which
    vectorises; a fractional one calls ``pow``.
    """
    g = G.dtype.type(gamma)
    c = G.dtype.type(coef0)
    one = G.dtype.type(1.0)
    p = int(degree)
    whole = p == degree and p < 64
    for i in range(r0, r1):
        row = G[i, c0:]
        if whole:
            for j in range(row.shape[0]):
                b = g * row[j] + c
                acc = one
                e = p
                while e > 0:
                    if e & 1:
                        acc *= b
                    b *= b
                    e >>= 1
                row[j] = acc
        else:
            for j in range(row.shape[0]):
                row[j] = (g * row[j] + c) ** degree


@njit(cache=True, nogil=True)
def sigmoid_from_gram(G, gamma, coef0, r0, r1, c0=0):
    """``G[i, j] <- tanh(gamma G[i, j] + coef0)`` (rows r0..r1, columns c0..)."""
    g = G.dtype.type(gamma)
    c = G.dtype.type(coef0)
    for i in range(r0, r1):
        row = G[i, c0:]
        for j in range(row.shape[0]):
            row[j] = np.tanh(g * row[j] + c)


@njit(cache=True, nogil=True, fastmath=_FMA)
def cosine_from_gram(G, xnorm, ynorm, r0, r1, c0=0):
    """``G[i, j] <- G[i, j] / (|x_i| |y_j|)``; rows of zero norm give 0 (as scikit-learn)."""
    zero = G.dtype.type(0.0)
    one = G.dtype.type(1.0)
    ys = ynorm[c0:]
    yinv = np.empty(ys.shape[0], dtype=G.dtype)
    for j in range(ys.shape[0]):
        yinv[j] = one / ys[j] if ys[j] > zero else zero
    for i in range(r0, r1):
        xi = one / xnorm[i] if xnorm[i] > zero else zero
        row = G[i, c0:]
        for j in range(row.shape[0]):
            row[j] = row[j] * xi * yinv[j]


@njit(cache=True, nogil=True)
def laplacian_block(X, Y, gamma, out, r0, r1):
    """``out[i, j] <- exp(-gamma * sum_k |X[i, k] - Y[j, k]|)`` (no BLAS form exists).

    Reference loop (scalar); the fast path is :func:`laplacian_tile`.
    """
    n = Y.shape[0]
    d = X.shape[1]
    g = out.dtype.type(gamma)
    for i in range(r0, r1):
        for j in range(n):
            s = 0.0
            for k in range(d):
                s += abs(X[i, k] - Y[j, k])
            out[i, j] = np.exp(-g * out.dtype.type(s))


# Columns of Y.T handled at once by laplacian_tile: the (d, block) slab stays in L2.
_LAPLACE_COLS = 256


@njit(cache=True, nogil=True, fastmath=_FMA)
def laplacian_tile(X, YT, gamma, out, r0, r1, c0=0):
    """Vectorised Laplacian: rows r0..r1, columns c0.. of ``exp(-gamma ||X[i] - Y[j]||_1)``.

    ``YT`` is ``Y.T`` C-contiguous (d, n); the inner loop runs over a block of columns
    so that it vectorises, and the block is reused for every row of the tile. Sums are
    accumulated in the output's dtype.
    """
    n = YT.shape[1]
    d = X.shape[1]
    g = out.dtype.type(-gamma)
    zero = out.dtype.type(0.0)
    for b0 in range(c0, n, _LAPLACE_COLS):
        b1 = min(n, b0 + _LAPLACE_COLS)
        for i in range(r0, r1):
            acc = out[i, b0:b1]
            acc[:] = zero
            for k in range(d):
                xik = X[i, k]
                yk = YT[k, b0:b1]
                for j in range(acc.shape[0]):
                    acc[j] += abs(xik - yk[j])
            for j in range(acc.shape[0]):
                acc[j] = fast_exp(g * acc[j])


@njit(cache=True, nogil=True, fastmath={"reassoc", "contract"})
def row_sq_norms(X):
    """Squared Euclidean norm of each row, accumulated in float64 (vectorised: the sum may
    be reassociated), returned in X's dtype."""
    m, d = X.shape
    out = np.empty(m, dtype=X.dtype)
    for i in range(m):
        s = 0.0
        for k in range(d):
            v = np.float64(X[i, k])
            s += v * v
        out[i] = s
    return out


@njit(cache=True, nogil=True)
def mirror_tile(K, r0, r1):
    """Lower triangle from the upper one for rows r0..r1: ``K[j, i] <- K[i, j]``, ``j > i``.

    Covers the strict lower triangle of the diagonal block and ``K[r1:, r0:r1]``, so a
    symmetric kernel matrix is exactly symmetric. Walks the destination row by row
    (contiguous writes) while the source tile is still in cache.
    """
    n = K.shape[0]
    for j in range(r0 + 1, n):
        dst = K[j, r0 : min(r1, j)]
        for i in range(dst.shape[0]):
            dst[i] = K[r0 + i, j]
