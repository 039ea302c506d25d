"""The worker side of kernel k-means: kernel values on rows, and the blockwise passes.

What a Dask task of a labels, ``predict``, ``transform`` or ``score`` pass runs on a worker
(:func:`_assign_block`, :func:`_label_block`, :func:`_distance_block`), and the kernel
oracle on rows of X that the estimators use on the client. Kept apart from the estimators
so that a worker loads numpy, numba and the kernel module only (not scikit-learn): about
50 MiB less per worker process.
"""

from __future__ import annotations

import numpy as np

from ..kernels import (
    KERNELS,
    KernelSpec,
    diag_from_spec,
    effective_n_jobs,
    pairwise_from_spec,
    run_tiles,
)
from ..kernels import row_sq_norms as _row_sq_norms
from . import _numba as _nb

#: Rows per local tile in the untruncated dynamic program.
_TILE_ROWS = 4096
#: Bytes of one kernel tile (rows x support) in the labels/predict pass.
_LABEL_TILE_BYTES = 16 << 20


class NumericOracle:
    """Kernel values on rows of X through the kernel module's numba+BLAS core.

    ``mu`` (float32 radial kernels with a BLAS form only, as
    :func:`~dkernel.kernels.pairwise_kernels` centres): a
    fixed centre subtracted from every row once, by :meth:`prep`, so that float32
    distances cancel less (they are translation invariant). :meth:`prep`
    returns the centred rows with their squared norms; :meth:`kernel_p` takes prepared
    pairs and computes the product and the transform only (no copy, no norms, no
    centring per call): a support reused across iterations is prepared once.
    """

    graph = False

    def __init__(self, spec: KernelSpec, mu: np.ndarray | None = None):
        self.spec = spec
        info = KERNELS.get(spec.kernel) if isinstance(spec.kernel, str) else None
        centre = info is not None and info.radial and info.tile is not None
        self.mu = mu if centre and mu is not None and mu.dtype == np.float32 else None
        self.norms = info is not None and info.norms is not None
        self.evals = 0

    def kernel(self, A: np.ndarray, B: np.ndarray) -> np.ndarray:
        self.evals += A.shape[0] * B.shape[0]
        if A.shape[0] == 0 or B.shape[0] == 0:
            return np.zeros((A.shape[0], B.shape[0]), dtype=A.dtype)
        return pairwise_from_spec(A, B, self.spec)

    def diag(self, A: np.ndarray) -> np.ndarray:
        return np.asarray(diag_from_spec(A, self.spec), dtype=np.float64)

    def prep(self, A: np.ndarray, out: np.ndarray | None = None):
        """``(rows - mu, squared row norms)``; norms only for kernels whose tile transform
        reads them (else None)."""
        if self.mu is not None:
            A = np.subtract(A, self.mu, out=out)
        if self.norms:
            return A, _row_sq_norms(np.ascontiguousarray(A))
        return A, None

    def kernel_p(self, A, a_sq, B=None, b_sq=None, out=None) -> np.ndarray:
        """K(A, B) on prepared rows (``B=None``: the symmetric K(A, A)), into ``out`` if
        given (a buffer reused across calls: no fresh pages per call)."""
        nb = A.shape[0] if B is None else B.shape[0]
        self.evals += A.shape[0] * nb
        if A.shape[0] == 0 or nb == 0:
            return np.zeros((A.shape[0], nb), dtype=A.dtype)
        if a_sq is None:  # a kernel without norms: nothing was prepared
            return pairwise_from_spec(A, B, self.spec, out)
        y_sq = b_sq if B is not None else None
        return pairwise_from_spec(A, B, self.spec, out, x_sq=a_sq, y_sq=y_sq)

    def kernel_blocks(self, A, a_sq, bounds) -> list:
        """The symmetric blocks ``K(A[bounds[j]:bounds[j + 1]])`` of consecutive row ranges
        (prepared rows), the ranges spread over the kernel module's threads."""
        sizes = np.diff(bounds)
        blocks: list = [None] * len(sizes)

        def work(j0, j1):
            for j in range(j0, j1):
                r0, r1 = bounds[j], bounds[j + 1]
                if r1 == r0:
                    blocks[j] = np.zeros((0, 0), dtype=A.dtype)
                elif a_sq is None:
                    blocks[j] = pairwise_from_spec(A[r0:r1], None, self.spec)
                else:
                    blocks[j] = pairwise_from_spec(A[r0:r1], None, self.spec, x_sq=a_sq[r0:r1])

        entries = int(np.dot(sizes, sizes))
        threads = effective_n_jobs(None, len(sizes), entries * (A.shape[1] + 16))
        run_tiles(work, [(j, j + 1) for j in range(len(sizes))], threads)
        self.evals += entries
        return blocks


def _support_inner(support, coef, spec):
    """Prepare a fitted support once per block: ``(oracle, S, S_sq, inner)``.

    ``inner(K, out)`` writes ``K @ coef.T`` (float64). When every support point belongs to
    one center (the mini-batch model), the support is ordered by center and the product
    is a vectorised segment sum (:func:`~dkernel.cluster._numba.center_inner`: one read
    of K, no widened copy of it); otherwise a dense float64 product.
    """
    mu = support.mean(axis=0, dtype=np.float64).astype(support.dtype) if len(support) else None
    oracle = NumericOracle(spec, mu)
    nnz = (coef != 0.0).sum(axis=0)
    if (nnz <= 1).all():
        owner = np.argmax(coef != 0.0, axis=0)
        cval = coef[owner, np.arange(coef.shape[1])].astype(np.float64)
        if (np.diff(owner) < 0).any():  # group the support by center (once per block)
            order = np.argsort(owner, kind="stable")
            support, owner, cval = support[order], owner[order], cval[order]
        ptr = np.zeros(coef.shape[0] + 1, dtype=np.int64)
        ptr[1:] = np.cumsum(np.bincount(owner, minlength=coef.shape[0]))
        cval = np.ascontiguousarray(cval)

        def inner(K, out):
            _nb.center_inner(K, ptr, cval, out)
    else:
        coefT = np.ascontiguousarray(coef.T)

        def inner(K, out):
            np.matmul(K.astype(np.float64, copy=False), coefT, out=out)

    S, S_sq = oracle.prep(support)
    return oracle, S, S_sq, inner


def _tiles(n_rows: int, n_support: int, itemsize: int):
    step = max(64, min(_TILE_ROWS, _LABEL_TILE_BYTES // max(1, n_support * itemsize)))
    return [(r0, min(n_rows, r0 + step)) for r0 in range(0, n_rows, step)]


def _inner_block(Xb, support, coef, spec):
    """``(diag, <phi(x), C_j>)`` of one row block against the fitted centers, in tiles."""
    Xb = np.ascontiguousarray(Xb, dtype=support.dtype)
    oracle, S, S_sq, inner = _support_inner(support, coef, spec)
    out = np.empty((Xb.shape[0], coef.shape[0]))
    tiles = _tiles(Xb.shape[0], S.shape[0], S.dtype.itemsize)
    step = tiles[0][1] - tiles[0][0] if tiles else 0
    buf = np.empty_like(Xb[:step])
    # one kernel tile buffer for the block: a fresh allocation per tile costs page faults
    # (Dask workers trim the heap at 64 KiB: MALLOC_TRIM_THRESHOLD_)
    K = np.empty((step, S.shape[0]), dtype=S.dtype)
    for r0, r1 in tiles:
        P, p_sq = oracle.prep(Xb[r0:r1], out=buf[: r1 - r0] if oracle.mu is not None else None)
        inner(oracle.kernel_p(P, p_sq, S, S_sq, out=K[: r1 - r0]), out[r0:r1])
    return oracle.diag(Xb), out


def _assign_block(Xb, support, coef, norms, spec):
    """One row block: ``[label, squared distance]`` per row (local tiles or a map_blocks task)."""
    diag, inner = _inner_block(Xb, support, coef, spec)
    labels = np.empty(inner.shape[0], dtype=np.int64)
    dist = np.empty(inner.shape[0])
    _nb.assign_nearest(diag, inner, norms, labels, dist)
    return np.column_stack([labels, dist])


def _label_block(Xb, support, coef, norms, spec):
    """One row block: the nearest center of each row."""
    return _assign_block(Xb, support, coef, norms, spec)[:, 0].astype(np.int64)


def _distance_block(Xb, support, coef, norms, spec):
    """One row block: ``||phi(x) - C_j||`` to every center, shape (r, k)."""
    diag, inner = _inner_block(Xb, support, coef, spec)
    return np.sqrt(np.maximum(diag[:, None] - 2.0 * inner + norms, 0.0))
