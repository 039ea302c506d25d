"""Shared plumbing of the kernel k-means estimators: kernel access, input checks, centers.

A *kernel oracle* evaluates ``K(A, B)`` and ``diag K(A, A)`` on "points": rows of X for
the numeric kernels, row indices into the training set for the transductive graph kernels
(``kernel="knn"``/``"heat"``). Everything above it is written once for both.
"""

from __future__ import annotations

import abc
import itertools
import numbers
from collections.abc import Callable
from typing import Any

import numpy as np
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted

from .._base import checked_block
from .._validation import (
    DKernelError,
    check_sample_weight,
    check_scalar,
    is_dask_array,
    report_nonfinite,
)
from ..data import take_rows
from ..kernels._kernels import row_sq_norms as _row_sq_norms
from ..kernels._pairwise import (
    KernelSpec,
    _effective_n_jobs,
    _kernel_diag,
    _pairwise_kernels,
    _run_tiles,
)
from . import _kernels as _nb

#: Transductive graph kernels, built on the training rows and addressed by index.
GRAPH_KERNELS = ("knn", "heat")
#: Numeric kernels the estimators accept (plus a callable).
SUPPORTED_KERNELS = frozenset({"rbf", "laplacian", "polynomial", "linear", "sigmoid", "cosine"})
#: Rows per local tile in the untruncated dynamic program.
_TILE_ROWS = 4096
#: Bytes of one kernel tile (rows x support) in the labels/predict pass.
_LABEL_TILE_BYTES = 16 << 20


class _NumericOracle:
    """Kernel values on rows of X through the kernel module's numba+BLAS core.

    ``mu`` (float32 rbf only, as :func:`~dkernel.kernels.pairwise_kernels` centres): a
    fixed centre subtracted from every row once, by :meth:`prep`, so that float32
    distances cancel less (they are translation invariant). :meth:`prep`
    returns the centred rows with their squared norms; :meth:`kernel_p` takes prepared
    pairs and computes the product and the transform only (no copy, no norms, no
    centring per call): a support reused across iterations is prepared once.
    """

    graph = False

    def __init__(self, spec: KernelSpec, mu: np.ndarray | None = None):
        self.spec = spec
        self.mu = mu if spec.kernel == "rbf" and mu is not None and mu.dtype == np.float32 else None
        self.evals = 0

    def kernel(self, A: np.ndarray, B: np.ndarray) -> np.ndarray:
        self.evals += A.shape[0] * B.shape[0]
        if A.shape[0] == 0 or B.shape[0] == 0:
            return np.zeros((A.shape[0], B.shape[0]), dtype=A.dtype)
        return _pairwise_kernels(A, B, self.spec)

    def diag(self, A: np.ndarray) -> np.ndarray:
        return np.asarray(_kernel_diag(A, self.spec), dtype=np.float64)

    def prep(self, A: np.ndarray, out: np.ndarray | None = None):
        """``(rows - mu, squared row norms)``; norms only for rbf/cosine (else None)."""
        if self.mu is not None:
            A = np.subtract(A, self.mu, out=out)
        if self.spec.kernel in ("rbf", "cosine"):
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
            return _pairwise_kernels(A, B, self.spec, out)
        y_sq = b_sq if B is not None else None
        return _pairwise_kernels(A, B, self.spec, out, x_sq=a_sq, y_sq=y_sq)

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
                    blocks[j] = _pairwise_kernels(A[r0:r1], None, self.spec)
                else:
                    blocks[j] = _pairwise_kernels(A[r0:r1], None, self.spec, x_sq=a_sq[r0:r1])

        entries = int(np.dot(sizes, sizes))
        threads = _effective_n_jobs(None, len(sizes), entries * (A.shape[1] + 16))
        _run_tiles(work, [(j, j + 1) for j in range(len(sizes))], threads)
        self.evals += entries
        return blocks


class _IndexOracle(abc.ABC):
    """Points are row indices (graph and precomputed kernels): nothing to prepare."""

    graph = True
    mu = None
    evals = 0

    @abc.abstractmethod
    def kernel(self, A, B):
        """Kernel values between the index sets ``A`` and ``B``."""

    def prep(self, A, out=None):
        return A, None

    def kernel_p(self, A, a_sq, B=None, b_sq=None, out=None):
        return self.kernel(A, A if B is None else B)

    def kernel_blocks(self, A, a_sq, bounds) -> list:
        return [self.kernel(A[r0:r1], A[r0:r1]) for r0, r1 in itertools.pairwise(bounds)]


class _GraphOracle(_IndexOracle):
    """Kernel values of a :class:`~dkernel.kernels.GraphKernel`; points are row indices."""

    def __init__(self, graph):
        self.G = graph
        self.evals = 0

    def kernel(self, A: np.ndarray, B: np.ndarray) -> np.ndarray:
        self.evals += A.shape[0] * B.shape[0]
        if A.shape[0] == 0 or B.shape[0] == 0:
            return np.zeros((A.shape[0], B.shape[0]))
        return np.ascontiguousarray(self.G.block(A, B))

    def diag(self, A: np.ndarray) -> np.ndarray:
        return np.asarray(self.G.diag(A), dtype=np.float64)


class _PrecomputedOracle(_IndexOracle):
    """Kernel values from a dense matrix held in memory; points are row indices."""

    def __init__(self, K: np.ndarray):
        self.K = K
        self.evals = 0

    def kernel(self, A, B):
        self.evals += len(A) * len(B)
        return np.ascontiguousarray(self.K[np.ix_(A, B)])

    def diag(self, A):
        return np.asarray(self.K[A, A], dtype=np.float64)


def _fetch_checked(X, idx: np.ndarray, dtype) -> np.ndarray:
    """Rows ``X[idx]`` as C-contiguous ``dtype``: one grouped read of the touched chunks
    (:func:`dkernel.data.take_rows`), values checked in that read (NaN/inf named by the
    global row)."""
    rows = np.ascontiguousarray(take_rows(X, idx), dtype=dtype)
    if rows.size and not np.isfinite(rows).all():
        bad = np.flatnonzero(~np.isfinite(rows).all(axis=1))[0]
        report_nonfinite(rows[bad : bad + 1], name="X", row_offset=int(idx[bad]))
    return rows


def _gather_checked(X, is_dask: bool, dtype, max_bytes: int, what: str) -> np.ndarray:
    """All of X in this process as ``dtype`` (one read per chunk, values checked in it).

    For the variants that truly need every row in memory; dask/store input larger than
    ``max_bytes`` is refused with an error naming ``max_data_bytes``.
    """
    if not is_dask:
        return np.asarray(X, dtype=dtype)
    _check_fits(X, dtype, max_bytes, what)
    return np.asarray(X.map_blocks(checked_block, _as_dtype, dtype, dtype=dtype).compute())


def _check_fits(X, dtype, max_bytes: int, what: str) -> None:
    """Refuse to hold dask/store X in memory when it is larger than ``max_bytes``."""
    nbytes = int(X.shape[0]) * int(X.shape[1]) * np.dtype(dtype).itemsize
    if nbytes > max_bytes:
        raise DKernelError(
            f"{what} holds all of X in memory ({nbytes / 2**20:.1f} MiB), above "
            f"max_data_bytes={max_bytes}; raise max_data_bytes, or use "
            "MiniBatchKernelKMeans with tau set (it streams batches from the store)"
        )


def _as_dtype(Xb, dtype):
    return np.asarray(Xb, dtype=dtype)


def _check_max_data_bytes(value) -> None:
    check_scalar(value, "max_data_bytes", kind=numbers.Integral, low=0)


def _check_rate(learning_rate):
    if isinstance(learning_rate, str):
        if learning_rate not in ("beta", "sklearn"):
            raise DKernelError(
                f"unknown learning_rate {learning_rate!r}; "
                "use 'beta', 'sklearn' or a float in (0, 1]"
            )
        return learning_rate
    if (
        isinstance(learning_rate, bool)
        or not isinstance(learning_rate, numbers.Real)
        or not 0.0 < float(learning_rate) <= 1.0
    ):
        raise DKernelError(
            f"learning_rate must be 'beta', 'sklearn' or a float in (0, 1], got {learning_rate!r}"
        )
    return float(learning_rate)


def _graph_params(kernel, kernel_params, n):
    params = dict(kernel_params or {})
    allowed = {"knn": {"n_neighbors"}, "heat": {"n_neighbors", "t"}}[kernel]
    extra = set(params) - allowed
    if extra:
        raise DKernelError(
            f"kernel={kernel!r} takes kernel_params {sorted(allowed)}, got {sorted(extra)}"
        )
    nn = params.get("n_neighbors", 10)
    if isinstance(nn, bool) or not isinstance(nn, numbers.Integral) or not 1 <= nn <= n - 1:
        raise DKernelError(
            f"kernel_params['n_neighbors'] must be an int in [1, {n - 1}], got {nn!r}"
        )
    params["n_neighbors"] = int(nn)
    if kernel == "heat":
        t = params.get("t", 1.0)
        if isinstance(t, bool) or not isinstance(t, numbers.Real) or not t > 0:
            raise DKernelError(f"kernel_params['t'] must be a positive number, got {t!r}")
        params["t"] = float(t)
    return params


class _KernelCentersMixin:
    """Centers as weighted support points; input checks; predict/transform/score.

    Fitted attributes used here: ``center_support_`` (s, d), ``center_coef_`` (k, s),
    ``center_norms_`` (k,) = ``<C_j, C_j>``, ``_spec`` (the resolved kernel) and, for the
    graph kernels, ``_graph``.
    """

    # provided by the estimator and _BaseKernelEstimator (declared for the type checker)
    kernel: Any
    _graph: Any
    _row_pass: Callable[..., Any]

    def _is_graph(self) -> bool:
        return isinstance(self.kernel, str) and self.kernel.lower() in GRAPH_KERNELS

    # ------------------------------------------------------------------ input
    def _start_fit(self, X, sample_weight):
        """The checks every ``fit`` starts with, in order, before any work.

        Returns ``(X, is_dask, n, weights, rng, dtype)``.
        """
        X, is_dask = self._validate_X(X, reset=True)
        n = int(X.shape[0])
        self._check_params(n)
        w = _check_weights(sample_weight, n)
        rng = check_random_state(self.random_state)
        dtype = np.float32 if X.dtype == np.float32 else np.float64
        return X, is_dask, n, w, rng, dtype

    def _check_init(self):
        """Check ``init``: 'k-means++', 'random' or k finite points (not for graph kernels)."""
        if isinstance(self.init, str):
            if self.init not in ("k-means++", "random"):
                raise DKernelError(
                    f"init must be 'k-means++', 'random' or an array, got {self.init!r}"
                )
            return
        if self._is_graph():
            raise DKernelError("graph kernels take init='k-means++' or 'random', not points")
        Z = np.asarray(self.init)
        if Z.shape != (self.n_clusters, self.n_features_in_):
            raise DKernelError(
                f"init has shape {Z.shape}, expected ({self.n_clusters}, {self.n_features_in_})"
            )
        if not np.isfinite(Z).all():
            raise DKernelError("init contains NaN or inf")

    def _oracle(self):
        if self._is_graph():
            return _GraphOracle(self._graph)
        return _NumericOracle(self._spec)

    # ---------------------------------------------------------------- centers
    def _set_centers(self, oracle, points, coef, norms, X_rows=None):
        """Store the fitted centers: ``points`` stacked support, ``coef`` (k, s)."""
        coef = np.asarray(coef, dtype=np.float64)
        keep = np.flatnonzero(np.any(coef != 0.0, axis=0))
        coef = np.ascontiguousarray(coef[:, keep])
        pts = points[keep]
        if oracle.graph:
            self.center_support_indices_ = np.asarray(pts, dtype=np.int64)
            self.center_support_ = X_rows[pts] if X_rows is not None else None
        else:
            self.center_support_ = np.ascontiguousarray(pts)
        self.center_coef_ = coef
        self.center_norms_ = np.asarray(norms, dtype=np.float64).copy()

    def _assign_all(self, X, is_dask: bool):
        """Labels and squared distances of every row, shape (n, 2) as ``[label, dist]``.

        NumPy: local tiles, a NumPy array. Dask: one task per row chunk on the workers, a
        lazy dask array (values checked in the same read).
        """
        if self._is_graph():
            labels, dist = self._assign_points(self._oracle(), np.arange(self._graph.n_samples))
            return np.column_stack([labels, dist])
        if not is_dask:
            X = X.astype(self.center_support_.dtype, copy=False)
        return self._row_pass(X, is_dask, _assign_block, *self._center_args(), n_out=2)

    def _labels_and_distances(self, X, is_dask: bool):
        """``(labels, squared distances)`` of every row as NumPy (one pass; computes dask)."""
        res = self._assign_all(X, is_dask)
        res = np.asarray(res.compute() if is_dask_array(res) else res)
        return res[:, 0].astype(np.int64), res[:, 1]

    def _center_args(self):
        return (self.center_support_, self.center_coef_, self.center_norms_, self._spec)

    def _assign_points(self, oracle, P):
        labels = np.empty(len(P), dtype=np.int64)
        dist = np.empty(len(P))
        S = self.center_support_indices_ if oracle.graph else self.center_support_
        inner = np.empty((0, 0))
        for r0 in range(0, len(P), _TILE_ROWS):
            Pb = P[r0 : r0 + _TILE_ROWS]
            inner = oracle.kernel(Pb, S) @ self.center_coef_.T
            _nb.assign_nearest(
                oracle.diag(Pb),
                np.ascontiguousarray(inner),
                self.center_norms_,
                labels[r0 : r0 + _TILE_ROWS],
                dist[r0 : r0 + _TILE_ROWS],
            )
        return labels, dist

    def _check_predictable(self):
        check_is_fitted(self, "center_coef_")
        if self._is_graph():
            raise DKernelError(
                f"kernel={self.kernel!r} is a transductive graph kernel defined only on the "
                "training rows: use labels_ or fit_predict, not predict/transform/score on new data"
            )

    # ------------------------------------------------------------- public API
    def predict(self, X):
        """Index of the nearest center in feature space for each row of X.

        Parameters
        ----------
        X : ndarray, dask array, zarr array or store path of shape (n, n_features)

        Returns
        -------
        labels : ndarray of shape (n,), or a lazy dask array for dask/zarr/store input
            (computed blockwise on the workers).
        """
        self._check_predictable()
        X, is_dask = self._validate_X(X, reset=False)
        if not is_dask:
            X = X.astype(self.center_support_.dtype, copy=False)
        return self._row_pass(
            X, is_dask, _label_block, *self._center_args(), n_out=None, dtype=np.int64
        )

    def transform(self, X):
        """Feature-space distances ``||phi(x) - C_j||`` to every center, shape (n, k).

        A lazy dask array for dask/zarr/store input, computed blockwise on the workers.
        """
        self._check_predictable()
        X, is_dask = self._validate_X(X, reset=False)
        if not is_dask:
            X = X.astype(self.center_support_.dtype, copy=False)
        k = self.center_coef_.shape[0]
        return self._row_pass(X, is_dask, _distance_block, *self._center_args(), n_out=k)

    def score(self, X, y=None, sample_weight=None):
        """Negative kernel k-means objective ``-sum_i w_i min_j ||phi(x_i) - C_j||^2``.

        Comparable between models of one kernel width only: it tends to 0 as gamma does.
        To choose gamma (``GridSearchCV``) score with
        :func:`~dkernel.cluster.kernel_alignment_score` instead.
        """
        self._check_predictable()
        X, is_dask = self._validate_X(X, reset=False)
        w = _check_weights(sample_weight, X.shape[0])
        return -float(np.dot(w, self._labels_and_distances(X, is_dask)[1]))


def _check_weights(sample_weight, n):
    if sample_weight is not None and is_dask_array(sample_weight):
        sample_weight = np.asarray(sample_weight.compute())
    return check_sample_weight(sample_weight, n)


def _support_inner(support, coef, spec):
    """Prepare a fitted support once per block: ``(oracle, S, S_sq, inner)``.

    ``inner(K, out)`` writes ``K @ coef.T`` (float64). When every support point belongs to
    one center (the mini-batch model), the support is ordered by center and the product
    is a vectorised segment sum (:func:`~dkernel.cluster._kernels.center_inner`: one read
    of K, no widened copy of it); otherwise a dense float64 product.
    """
    mu = support.mean(axis=0, dtype=np.float64).astype(support.dtype) if len(support) else None
    oracle = _NumericOracle(spec, mu)
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
