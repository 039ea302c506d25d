"""Kernel functions on NumPy input: validation here, numba in ``_numba.py``."""

from __future__ import annotations

import contextlib
import itertools
import multiprocessing
import os
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NamedTuple

import numpy as np
from threadpoolctl import ThreadpoolController

from .._defaults import setting
from .._validation import DKernelError, check_finite_2d, check_scalar
from . import _numba as _nb
from ._table import KERNELS, kernel_info

# Rows per tile: the BLAS product of one tile and its transform stay in cache together
# (setting "kernels.tile-bytes", runtime/dkernel.yaml).
# Rows per tile at least min(d, this) (the product dominates for wide X).
_WIDE_TILE_ROWS = 512
# Row width (d * itemsize) from which K(X, X) computes the upper triangle only.
_MIRROR_MIN_ROW_BYTES = 512
# float32 RBF input is centred when both sides have at least this many rows.
_CENTRE_MIN_ROWS = 32
# From this much product work (m n d) BLAS is held at one thread (a few microseconds).
_MIN_BLAS_LIMIT_WORK = 1 << 18
# The fewest rows a block is cut to for threads. A task (one thread) tiles a block as the
# client does, so that both round it the same; below about 1024 rows a small-d product
# loses BLAS efficiency: k-means predict over 524,288 rows in one-thread tasks took
# 0.137 s with 1024-row tiles, 0.144 s with 512, 0.177 s with 256 and 0.191 s with 128
# (the tiles 16 cores gave).
_MIN_THREAD_TILE_ROWS = 1024


class KernelSpec(NamedTuple):
    """A validated kernel: name (or callable) and resolved parameters."""

    kernel: str | Callable
    gamma: float | None
    degree: float
    coef0: float
    params: dict

    @property
    def is_radial(self) -> bool:
        return isinstance(self.kernel, str) and KERNELS[self.kernel].radial


def resolve_kernel(
    kernel="rbf", gamma=None, degree=3, coef0=1.0, kernel_params=None, n_features: int | None = None
) -> KernelSpec:
    """Validate kernel parameters; ``gamma=None`` means ``1 / n_features`` (scikit-learn)."""
    if kernel_params is not None and not isinstance(kernel_params, dict):
        raise DKernelError(f"kernel_params must be a dict or None, got {kernel_params!r}")
    params = dict(kernel_params or {})
    if callable(kernel):
        return KernelSpec(kernel, gamma, degree, coef0, params)
    info = kernel_info(kernel)
    name = info.name
    if params:
        raise DKernelError(
            f"kernel_params {sorted(params)} are not used by kernel {kernel!r}: a named kernel "
            "takes gamma, degree and coef0 (kernel_params go to a callable kernel, or to the "
            "graph kernels 'knn'/'heat' of kernel k-means)"
        )
    if gamma is None and n_features is not None and info.uses_gamma:
        gamma = 1.0 / n_features
    if gamma is not None:
        check_scalar(gamma, "gamma", low=0.0, low_inclusive=False)
        gamma = float(gamma)
    check_scalar(degree, "degree", low=0)
    check_scalar(coef0, "coef0")
    return KernelSpec(name, gamma, degree, float(coef0), params)


def _as_pair(X, Y, spec: KernelSpec):
    """Validate X and Y; return float arrays of one common dtype (float32 stays float32)."""
    X = check_finite_2d(X, name="X")
    if Y is None:
        if spec.kernel == "precomputed" and X.shape[0] != X.shape[1]:
            raise DKernelError(
                f"a precomputed kernel K(X, X) must be square, got X of shape {X.shape} "
                "(pass the kernel matrix, not the data)"
            )
        return X, None
    Y = check_finite_2d(Y, name="Y")
    if spec.kernel == "precomputed" and X.shape[1] != Y.shape[0]:
        raise DKernelError(  # scikit-learn's rule: X is K(A, Y), one column per row of Y
            f"a precomputed kernel X of shape {X.shape} must have one column per row of Y "
            f"(Y has {Y.shape[0]} rows)"
        )
    if spec.kernel != "precomputed" and X.shape[1] != Y.shape[1]:
        raise DKernelError(
            f"X has {X.shape[1]} features but Y has {Y.shape[1]}: the widths must match"
        )
    dt = np.result_type(X.dtype, Y.dtype)
    return X.astype(dt, copy=False), Y.astype(dt, copy=False)


def pairwise_kernels(
    X,
    Y=None,
    *,
    kernel="rbf",
    gamma=None,
    degree=3,
    coef0=1.0,
    kernel_params=None,
    out=None,
    n_jobs=None,
) -> np.ndarray:
    """Kernel matrix ``K[i, j] = k(X[i], Y[j])`` on NumPy input.

    The BLAS product ``X @ Y.T`` is computed tile by tile straight into the output and
    turned into kernel values by a numba pass while the tile is in cache: no temporary
    of the output's size is made. float32 input gives float32 output.

    Parameters
    ----------
    X : array of shape (m, d)
    Y : array of shape (n, d), default=None
        ``None`` means ``Y = X``.
    kernel : {"rbf", "gaussian", "laplacian", "matern", "polynomial", "linear", "sigmoid", \
"cosine", "precomputed"} or callable
        RBF is ``exp(-gamma ||x - y||^2)``: the papers' ``exp(-||x - y||^2 / kappa)`` is
        ``gamma = 1 / kappa``. Laplacian is ``exp(-gamma ||x - y||_1)``; Matérn (nu = 3/2)
        ``(1 + s) exp(-s)`` with ``s = sqrt(3) ||x - y|| / l`` and length scale
        ``l = 1 / sqrt(2 gamma)`` (rbf's gamma: the Matérn family tends to the rbf of the
        same gamma as nu grows); polynomial
        ``(gamma <x, y> + coef0) ** degree``; sigmoid ``tanh(gamma <x, y> + coef0)``;
        cosine ``<x, y> / (||x|| ||y||)``. ``"precomputed"`` returns X (already a kernel
        matrix: square without Y, one column per row of Y with it). A callable is called
        as ``kernel(X, Y, **kernel_params)`` and must return the (m, n) matrix, as
        scikit-learn's ``SVC`` expects.
    gamma : float, default=None
        ``None`` means ``1 / n_features``.
    degree, coef0 : float
        Polynomial and sigmoid parameters.
    kernel_params : dict, default=None
        Extra keyword arguments of a callable kernel.
    out : ndarray of shape (m, n), default=None
        Where to write the result (C-contiguous, the result's dtype).
    n_jobs : int, default=None
        Threads splitting the row tiles (BLAS is limited to one thread per tile meanwhile).
        ``None``: every usable core, capped by the BLAS thread limit in force
        (``OMP_NUM_THREADS`` or threadpoolctl's ``threadpool_limits``), except inside a
        Dask task or any non-main thread (and for small blocks), where one thread is used
        so that Dask's own parallelism is not oversubscribed; ``-1``: every core, ``-2``:
        all but one, and so on. The result does not depend on the number of threads.

    Returns
    -------
    K : ndarray of shape (m, n)

    Notes
    -----
    O(m n d) time, O(m n) memory (the output; no temporary of its size). The rows are cut
    into tiles (about 2 MB of output each, taller for wide X); a thread computes a tile's
    BLAS product with BLAS at one thread and transforms it in cache with a numba pass. The
    exponential (RBF, Laplacian) is a vectorised Cody–Waite polynomial (within 1 ulp of
    the correctly rounded value; results below the dtype's normal range are 0); float32
    RBF input is centred first (the distances are unchanged, the cancellation in
    ``||x||^2 + ||y||^2 - 2 <x, y>`` is smaller). With
    ``Y=None`` and rows of at least 512 bytes (d >= 64 in float64, 128 in float32) only the
    upper triangle is computed and mirrored, and the Laplacian always does so.

    References
    ----------
    W. J. Cody and W. Waite, *Software Manual for the Elementary Functions*, 1980
    (the range reduction of the exponential).

    Examples
    --------
    >>> import numpy as np
    >>> from dkernel.kernels import pairwise_kernels
    >>> X = np.array([[0.0, 0.0], [1.0, 0.0]])
    >>> pairwise_kernels(X, kernel="rbf", gamma=1.0).round(4)
    array([[1.    , 0.3679],
           [0.3679, 1.    ]])
    """
    spec = resolve_kernel(kernel, gamma, degree, coef0, kernel_params)
    X, Y = _as_pair(X, Y, spec)
    if spec.gamma is None and isinstance(spec.kernel, str):
        spec = spec._replace(gamma=1.0 / X.shape[1])
    if n_jobs is not None:
        check_scalar(n_jobs, "n_jobs", kind=(int, np.integer))
        if n_jobs == 0:
            raise DKernelError("n_jobs must be a positive or negative int, got 0")
    return pairwise_from_spec(X, Y, spec, out=out, n_jobs=n_jobs)


def pairwise_from_spec(
    X: np.ndarray,
    Y: np.ndarray | None,
    spec: KernelSpec,
    out: np.ndarray | None = None,
    *,
    n_jobs: int | None = None,
    x_sq: np.ndarray | None = None,
    y_sq: np.ndarray | None = None,
) -> np.ndarray:
    """Trusting core of :func:`pairwise_kernels` (validated, same-dtype inputs).

    ``n_jobs`` threads (see :func:`effective_n_jobs`) each take row tiles from a shared
    counter, compute the tile's BLAS product with BLAS limited to one thread, and
    transform it with the numba kernel while it is in cache.

    ``x_sq``/``y_sq``: squared row norms of X/Y computed by the caller (rbf, cosine), for
    loops that reuse one side across calls (a support held across iterations). When
    either is given nothing is centred or copied: the caller centres once, if it wants
    to (:func:`centre_rows`), and the call costs the product and the transform only.
    """
    k = spec.kernel
    if callable(k):
        return _callable_kernel(X, Y, spec)
    if k == "precomputed":
        return X
    info = KERNELS[k]
    symmetric = Y is None
    if Y is None:
        Y = X
    m, n = X.shape[0], Y.shape[0]
    dt = X.dtype
    if out is None:
        out = np.empty((m, n), dtype=dt)
    elif out.shape != (m, n) or out.dtype != dt or not out.flags.c_contiguous:
        raise DKernelError(f"out must be a C-contiguous {dt} array of shape {(m, n)}")
    # A small symmetric K(X, X) (one cache-sized tile) is one product X @ X.T, which BLAS
    # computes as a rank-k update (half the work, symmetric by construction): a fixed
    # rule of the shape, so the result is the same for any n_jobs.
    tile_bytes = int(setting("kernels.tile-bytes"))
    whole = symmetric and info.tile is not None and m * m * dt.itemsize <= tile_bytes
    tiles = [(0, m)] if whole else row_tiles(m, n, X.shape[1], dt.itemsize)
    threads = effective_n_jobs(n_jobs, len(tiles), _block_work(m, n, X.shape[1]))
    if info.tile is None:  # no BLAS form: the laplacian's own loop
        work = _laplacian_work(X, Y, spec, out, symmetric)
    else:
        # Symmetric K(X, X) with wide rows: each tile computes only columns r0.. (its
        # diagonal block and the upper triangle right of it) and mirrors them into the lower
        # triangle. For narrow rows the strided mirror costs more than the half product
        # it saves.
        half = symmetric and not whole and X.shape[1] * dt.itemsize >= _MIRROR_MIN_ROW_BYTES
        work = _gram_work(X, Y, spec, out, symmetric, whole or half, half, x_sq, y_sq)
    run_tiles(work, tiles, threads, limit_blas=m * n * X.shape[1] >= _MIN_BLAS_LIMIT_WORK)
    if symmetric and info.unit_diagonal:
        np.fill_diagonal(out, 1.0)
    return out


def row_tiles(m: int, n: int, d: int, itemsize: int) -> list[tuple[int, int]]:
    """The row tiles ``(r0, r1)`` of an m x n kernel block over d features.

    A tile of the output stays in cache while it is transformed
    (``dkernel.kernels.tile-bytes``); wide rows (large d, where the product dominates) get
    taller tiles because BLAS re-packs the other side for every tile. Where the work is
    large enough for threads (``kernels.min-parallel-work``), every core gets at least two
    tiles to balance the load, but no tile is cut below ``_MIN_THREAD_TILE_ROWS`` rows for
    it; smaller work is not cut for threads it will not get (on 16 cores a 256 x 256 block
    would be 32 tiles of 8 rows, 2.4x the time of one tile).
    A rule of the shape and the machine, not of ``n_jobs`` or the calling thread: a block
    is tiled, and so rounded, the same on the client and in a task, for any ``n_jobs``.

    Examples
    --------
    >>> from dkernel.kernels import row_tiles
    >>> row_tiles(256, 256, 21, 4)  # one batch against one support: a single tile
    [(0, 256)]
    """
    tile = max(8, int(setting("kernels.tile-bytes")) // max(1, n * itemsize))
    tile = max(tile, min(_WIDE_TILE_ROWS, d))
    if _parallel_work(_block_work(m, n, d)):
        tile = min(tile, max(_MIN_THREAD_TILE_ROWS, -(-m // (2 * _cpu_count()))))
    return [(r0, min(m, r0 + tile)) for r0 in range(0, m, tile)]


def _block_work(m: int, n: int, d: int) -> int:
    """The work of an m x n kernel block over d features, in the unit of
    ``kernels.min-parallel-work``: about m n (d + 16) flops (product and transform)."""
    return m * n * (d + 16)


def _parallel_work(work: int) -> bool:
    """Whether a block of this much work (:func:`_block_work`) is worth threads: below
    ``kernels.min-parallel-work`` one thread is faster than a pool hand-off. The one test
    both the tiles (:func:`row_tiles`) and the threads (:func:`effective_n_jobs`) use."""
    return work >= int(setting("kernels.min-parallel-work"))


def _callable_kernel(X: np.ndarray, Y: np.ndarray | None, spec: KernelSpec) -> np.ndarray:
    """K(X, Y) of a user's kernel function, its shape and values checked."""
    k = spec.kernel
    assert callable(k)
    K = np.asarray(k(X, X if Y is None else Y, **spec.params))
    shape = (X.shape[0], X.shape[0] if Y is None else Y.shape[0])
    if K.shape != shape:
        raise DKernelError(
            f"the callable kernel {getattr(k, '__name__', k)!r} returned shape {K.shape} "
            f"for {shape[0]} and {shape[1]} rows; it must return {shape}"
        )
    if not np.isfinite(K).all():
        raise DKernelError(
            f"the callable kernel {getattr(k, '__name__', k)!r} returned NaN or inf values"
        )
    return K


def _laplacian_work(X, Y, spec: KernelSpec, out: np.ndarray, symmetric: bool):
    """The per-tile work of the laplacian kernel (no BLAS product: O(d) per entry, so a
    symmetric K always computes the upper triangle only and mirrors it)."""
    Xc = np.ascontiguousarray(X)
    YT = np.ascontiguousarray(Y.T)

    def work(r0, r1):
        _nb.laplacian_tile(Xc, YT, spec.gamma, out, r0, r1, r0 if symmetric else 0)
        if symmetric:
            _nb.mirror_tile(out, r0, r1)

    return work


def _gram_work(X, Y, spec, out, symmetric, mirror, half, x_sq, y_sq):
    """The per-tile work of the dot-product kernels: the tile's BLAS product (columns r0..
    only with ``half``) transformed in place, mirrored with ``mirror``."""
    info = KERNELS[spec.kernel]
    dt = X.dtype
    prepared = x_sq is not None or y_sq is not None
    centre = info.radial and dt == np.float32 and min(len(X), len(Y)) >= _CENTRE_MIN_ROWS
    if centre and not prepared:
        # ||x - y||^2 = ||x||^2 + ||y||^2 - 2 <x, y> cancels when the norms are large
        # next to the distance; centring (distances unchanged) cuts float32's error
        # several-fold for an O((m + n) d) copy (skipped for a few rows against many,
        # e.g. one SGD step, where the copy would cost as much as the kernel).
        mu = X.mean(axis=0, dtype=np.float64).astype(dt)
        X = X - mu
        Y = X if symmetric else Y - mu
    YT = Y.T
    xx = yy = None
    if info.norms is not None:
        xx, yy = _norms(X, Y, symmetric, x_sq, y_sq, root=info.norms == "root")
    degree = float(spec.degree)
    tile = info.tile
    assert tile is not None

    def work(r0, r1):
        c0 = r0 if half else 0
        np.matmul(X[r0:r1], YT[:, c0:], out=out[r0:r1, c0:])
        tile(out, xx, yy, spec.gamma, spec.coef0, degree, r0, r1, c0)
        if mirror:  # exactly symmetric, whatever the transform's rounding
            _nb.mirror_tile(out, r0, r1)

    return work


def _norms(X, Y, symmetric, x_sq, y_sq, *, root: bool):
    """Squared row norms of X and Y in X's dtype (the caller's when given); their square
    roots with ``root`` (cosine)."""
    dt = X.dtype
    xx = _nb.row_sq_norms(np.ascontiguousarray(X)) if x_sq is None else x_sq
    if symmetric:
        yy = xx
    else:
        yy = _nb.row_sq_norms(np.ascontiguousarray(Y)) if y_sq is None else y_sq
    xx, yy = xx.astype(dt, copy=False), yy.astype(dt, copy=False)
    if root:
        xx, yy = np.sqrt(xx), np.sqrt(yy)
    return xx, yy


def _in_parallel_context() -> bool:
    """True inside a Dask task (distributed worker, threaded scheduler) or any worker thread.

    Dask already runs one task per core there; threads of our own would oversubscribe.
    A thread that is not the main thread (the threaded scheduler's pool, a distributed
    worker's executor, a user's pool) or a child process (multiprocessing scheduler)
    counts as parallel.
    """
    if threading.current_thread() is not threading.main_thread():
        return True
    if multiprocessing.parent_process() is not None:
        return True
    distributed = sys.modules.get("distributed")
    if distributed is not None:
        try:
            distributed.get_worker()
        except ValueError:
            pass
        else:
            return True
    return False


def effective_n_jobs(n_jobs: int | None, n_tiles: int, work: int) -> int:
    """Threads for one call, an explicit policy (no load-average guessing).

    ``n_jobs=None``: one thread inside a Dask task or any non-main thread (Dask or the
    caller already runs one task per core), and for small work; otherwise the usable
    cores capped by the BLAS thread limit in force (``OMP_NUM_THREADS``, threadpoolctl's
    ``threadpool_limits``), so a caller who limits BLAS threads limits these too.
    An explicit ``n_jobs`` is obeyed (``-1``: every core, ``-2``: all but one, ...).
    Never more threads than tiles.
    """
    if n_jobs is None:
        if not _parallel_work(work) or _in_parallel_context():
            return 1
        n_jobs = min(_cpu_count(), _blas_thread_limit())
    elif n_jobs < 0:
        n_jobs = max(1, _cpu_count() + 1 + n_jobs)
    return max(1, min(int(n_jobs), n_tiles))


def _blas_thread_limit() -> int:
    """The BLAS thread count in force (threadpoolctl), or the core count if unknown.

    While this module holds BLAS at one thread for its tiles (``ONE_BLAS_THREAD``, e.g.
    around a whole fit loop), the count saved on entry is the one in force.
    """
    counts = ONE_BLAS_THREAD.outer_counts()
    counts = [c for c in counts if c]
    return max(1, min(counts)) if counts else _cpu_count()


def _cpu_count() -> int:
    """The cores a kernel call may use: ``dkernel.kernels.cores`` if set, else the cores
    this process may run on."""
    cores = setting("kernels.cores")
    if cores is not None:
        return max(1, int(cores))
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


_POOL: tuple[int, ThreadPoolExecutor] | None = None  # (pid, pool)
_POOL_LOCK = threading.Lock()


class _SingleThreadBLAS:
    """Reference-counted "BLAS at one thread" for the process (threadpoolctl).

    The BLAS thread count is process-wide, so concurrent callers (Dask's threads) share
    one limit: the first to enter sets it, the last to leave restores the saved counts.
    Small tiles gain nothing from BLAS threads, and on a loaded machine a BLAS call that
    waits for a descheduled helper thread takes many times longer.

    OpenBLAS ignores a raise of its thread count made from a thread other than the main
    one while another thread is inside a BLAS call: a restore from a Dask pool thread
    could leave the whole process at one BLAS thread. Such a restore is kept pending and
    retried at the next entry or exit, by every kernel call's thread policy
    (:meth:`outer_counts`), and when a local Dask computation finishes (:meth:`settle`,
    registered as a local-scheduler callback the first time a restore is missed).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._depth = 0
        self._saved: list = []
        self._pending: list = []
        self._libs: list | None = None
        self._callback: Any = None

    def libs(self) -> list:
        """The process's BLAS controllers (looked up once)."""
        if self._libs is None:
            self._libs = ThreadpoolController().select(user_api="blas").lib_controllers
        return self._libs

    def _outer(self) -> list:
        """``(lib, count)`` as the caller set them: a pending restore's counts win."""
        pending = {id(lib): n for lib, n in self._pending}
        return [(lib, pending.get(id(lib), lib.get_num_threads())) for lib in self.libs()]

    def outer_counts(self) -> list[int]:
        """BLAS thread counts as the caller set them (saved ones while held at one)."""
        self.settle()
        with self._lock:
            if self._depth:
                return [n for _, n in self._saved]
            return [n for _, n in self._outer()]

    def _restore(self, saved: list) -> None:
        missed = []
        for lib, n in saved:
            if lib.get_num_threads() != n:
                lib.set_num_threads(n)
                if lib.get_num_threads() != n:
                    missed.append((lib, n))
        self._pending = missed
        if missed and self._callback is None:
            from dask.callbacks import Callback

            self._callback = Callback(finish=lambda *args: self.settle())
            self._callback.register()

    def settle(self) -> None:
        """Retry a restore that OpenBLAS ignored (nothing to do otherwise)."""
        if self._pending:
            with self._lock:
                if self._depth == 0 and self._pending:
                    self._restore(self._pending)

    def __enter__(self):
        with self._lock:
            if self._depth == 0:
                self._saved = self._outer()
                self._pending = []
                for lib, _ in self._saved:
                    if lib.get_num_threads() != 1:
                        lib.set_num_threads(1)
            self._depth += 1
        return self

    def __exit__(self, *exc):
        with self._lock:
            self._depth -= 1
            if self._depth == 0:
                self._restore(self._saved)
                self._saved = []


ONE_BLAS_THREAD = _SingleThreadBLAS()


def run_tiles(work, tiles, threads: int, *, limit_blas: bool = True) -> None:
    """Run ``work(r0, r1)`` on every tile, in this thread or in this thread and
    ``threads - 1`` pool threads pulling tiles from a shared counter; BLAS is held at one
    thread meanwhile."""
    global _POOL
    with ONE_BLAS_THREAD if limit_blas else contextlib.nullcontext():
        if threads <= 1:
            for r0, r1 in tiles:
                work(r0, r1)
            return
        with _POOL_LOCK:
            # a new pool after a fork (the parent's threads do not exist in the child)
            if _POOL is None or _POOL[0] != os.getpid() or _POOL[1]._max_workers < threads:
                if _POOL is not None and _POOL[0] == os.getpid():
                    _POOL[1].shutdown(wait=False)
                _POOL = (
                    os.getpid(),
                    ThreadPoolExecutor(
                        max_workers=max(threads, _cpu_count()), thread_name_prefix="dkernel-tiles"
                    ),
                )
            pool = _POOL[1]
        counter = itertools.count()

        def drain():
            for t in iter(counter.__next__, None):
                if t >= len(tiles):
                    return
                work(*tiles[t])

        # The calling thread drains too: on a loaded machine, where a pool thread may wait
        # for a core, the call is never slower than running single-threaded.
        futures = [pool.submit(drain) for _ in range(threads - 1)]
        try:
            drain()
        finally:
            for f in futures:
                f.result()


def kernel_diag(X, *, kernel="rbf", gamma=None, degree=3, coef0=1.0, kernel_params=None):
    """The diagonal ``k(x_i, x_i)`` without forming the matrix: O(n d).

    Examples
    --------
    >>> import numpy as np
    >>> from dkernel.kernels import kernel_diag
    >>> kernel_diag(np.array([[1.0, 2.0]]), kernel="linear")
    array([5.])
    """
    spec = resolve_kernel(kernel, gamma, degree, coef0, kernel_params)
    X = check_finite_2d(X, name="X")
    if spec.gamma is None and isinstance(spec.kernel, str):
        spec = spec._replace(gamma=1.0 / X.shape[1])
    return diag_from_spec(X, spec)


def diag_from_spec(X: np.ndarray, spec: KernelSpec) -> np.ndarray:
    k = spec.kernel
    if callable(k):
        return np.array(
            [
                np.asarray(k(X[i : i + 1], X[i : i + 1], **spec.params)).ravel()[0]
                for i in range(X.shape[0])
            ],
            dtype=X.dtype,
        )
    if k == "precomputed":
        if X.shape[0] != X.shape[1]:
            raise DKernelError(f"a precomputed kernel must be square, got shape {X.shape}")
        return np.ascontiguousarray(np.diag(X))
    info = KERNELS[k]
    if info.diag is None:
        assert info.unit_diagonal, k
        return np.ones(X.shape[0], dtype=X.dtype)
    xx = _nb.row_sq_norms(np.ascontiguousarray(X))
    d = info.diag(xx, spec.gamma, spec.coef0, spec.degree)
    return np.asarray(d).astype(X.dtype, copy=False)
