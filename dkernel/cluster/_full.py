"""Full-batch kernel k-means (Lloyd in feature space) with Dask kernel blocks."""

from __future__ import annotations

import contextlib
import logging
import warnings

import dask.array as da
import numpy as np
from sklearn.base import ClusterMixin, TransformerMixin
from sklearn.exceptions import ConvergenceWarning

from .._base import _BaseKernelEstimator
from .._params import NON_NEGATIVE, NON_NEGATIVE_INT, POSITIVE_INT, POSITIVE_INT_OR_NONE
from .._validation import checked_block
from ..data import draw_indices, take_rows
from ..kernels import (
    diag_from_spec,
    kernel_matrix,
    pairwise_from_spec,
)
from ..runtime import named_worker_errors, progress, progress_enabled, timer
from . import _numba as _nb
from ._blocks import NumericOracle
from ._common import (
    SUPPORTED_KERNELS,
    _as_dtype,
    _check_fits,
    _gather_checked,
    _KernelCentersMixin,
    use_graph_kernel,
)
from ._init import _init_centers

logger = logging.getLogger(__name__)


class KernelKMeans(ClusterMixin, TransformerMixin, _KernelCentersMixin, _BaseKernelEstimator):
    """Full-batch kernel k-means: Lloyd's algorithm in the feature space of a kernel.

    Each iteration sets every center to the (weighted) mean of its cluster,
    ``C_j = sum_{i in P_j} w_i phi(x_i) / W_j``, and reassigns every row to the nearest
    center by the exact ``||phi(x) - C_j||^2 = k(x, x) - 2 (K A^T)_{ij} + A_j K A_j^T``
    (the center-norm term is kept). ``K A^T`` is computed from lazy kernel blocks
    (:func:`dkernel.kernels.kernel_matrix`) as Dask tasks; the kernel matrix is cached
    (persisted) only when it fits ``max_kernel_bytes``, otherwise its blocks are
    recomputed every iteration, so nothing n x n has to fit in memory.

    Parameters
    ----------
    n_clusters : int, default=8
    kernel, gamma, degree, coef0, kernel_params
        As :class:`MiniBatchKernelKMeans` (including the graph kernels ``"knn"`` and
        ``"heat"``, computed in memory).
    max_iter : int, default=100
        Lloyd iterations; the run stops earlier when no label changes.
    tol : float, default=0.0
        Also stop when the relative decrease of the objective is below ``tol``.
    init : {"k-means++", "random"} or ndarray of shape (n_clusters, n_features)
    init_size : int, default=None
        Rows sampled for the k-means++ seeding (``None``: ``min(n, 10000)``).
    n_init : int, default=1
        Full runs from different seedings; the lowest objective wins.
    max_kernel_bytes : int, default=2**30
        Cache the n x n kernel (persisted blocks) only if it needs at most this many bytes.
    max_data_bytes : int, default=2**30
        The fitted model's support is every training row, so ``fit`` holds all of X in
        memory: dask/zarr/store input larger than this many bytes is refused (raise it
        to fit anyway). X is read once (each chunk once, values checked in that read),
        kept on the workers for the kernel passes, and gathered once for the support.
    chunk_rows : int, default=None
        Rows per block for NumPy input (default: about 4096); dask input keeps its chunks.
    random_state : int, RandomState or None
    verbose : int, default=0
        ``>= 1``: a progress bar (Lloyd iterations and the objective, a note while numba
        compiles on first use) in a terminal (stderr) or a notebook, no logging needed;
        each iteration's objective is also logged (INFO).

    Attributes
    ----------
    labels_, inertia_, n_iter_, center_support_, center_coef_, center_norms_, gamma_,
    n_kernel_evals_, n_features_in_
        As :class:`MiniBatchKernelKMeans`; here the support is every training row (plus
        the initial points of a cluster that stayed empty).
    history_ : list of float
        Objective after each iteration.

    Notes
    -----
    O(n^2) kernel evaluations per iteration (once in total when the kernel is cached),
    O(n k) memory on the driver plus X itself (the support), one kernel block per task.
    The seeding sample is fetched once and also gives the default gamma; the
    ``n_init`` runs share it.

    References
    ----------
    I. S. Dhillon, Y. Guan and B. Kulis, "Kernel k-means, spectral clustering and
    normalized cuts", KDD 2004.

    Examples
    --------
    >>> from dkernel.cluster import KernelKMeans
    >>> from dkernel.data import make_rings
    >>> X, y = make_rings(300, n_rings=2, noise=0.05, random_state=0)
    >>> km = KernelKMeans(2, gamma=2.0, random_state=0).fit(X)
    >>> km.labels_.shape
    (300,)
    """

    _supported_kernels = SUPPORTED_KERNELS
    _gamma_rule = "scale"

    def __init__(
        self,
        n_clusters=8,
        *,
        kernel="rbf",
        gamma=None,
        degree=3,
        coef0=1.0,
        kernel_params=None,
        max_iter=100,
        tol=0.0,
        init="k-means++",
        init_size=None,
        n_init=1,
        max_kernel_bytes=2**30,
        max_data_bytes=2**30,
        chunk_rows=None,
        random_state=None,
        verbose=0,
    ):
        self.n_clusters = n_clusters
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.kernel_params = kernel_params
        self.max_iter = max_iter
        self.tol = tol
        self.init = init
        self.init_size = init_size
        self.n_init = n_init
        self.max_kernel_bytes = max_kernel_bytes
        self.max_data_bytes = max_data_bytes
        self.chunk_rows = chunk_rows
        self.random_state = random_state
        self.verbose = verbose

    _parameter_table = {
        "n_clusters": POSITIVE_INT,
        "max_iter": POSITIVE_INT,
        "tol": NON_NEGATIVE,
        "n_init": POSITIVE_INT,
        "init_size": POSITIVE_INT_OR_NONE,
        "max_kernel_bytes": NON_NEGATIVE_INT,
        "max_data_bytes": NON_NEGATIVE_INT,
        "chunk_rows": POSITIVE_INT_OR_NONE,
        "verbose": NON_NEGATIVE_INT,
    }

    @named_worker_errors
    def fit(self, X, y=None, sample_weight=None):
        """Fit on X (NumPy, dask array or zarr store path).

        Parameters
        ----------
        X : array-like, dask array or path, shape (n_samples, n_features)
        y : ignored
        sample_weight : array-like of shape (n_samples,), default=None

        Returns
        -------
        self
        """
        X, is_dask, n, w, rng, dtype = self._start_fit(X, sample_weight)
        size = min(n, self.init_size or 10000)
        Xd = X_rows = None
        if self._is_graph():
            X_rows = _gather_checked(X, is_dask, dtype, self.max_data_bytes, "a graph kernel")
            oracle = use_graph_kernel(self, X_rows)
            diag = oracle.diag(np.arange(n))
            Kop = _GraphProduct(self._graph, oracle)
            sample = np.sort(draw_indices(n, size, rng, replace=False))
            sample_w = w[sample]
        else:
            Xd = self._rows_once(X, is_dask, dtype)
            idx = np.sort(draw_indices(n, size, rng, replace=False))
            sample = np.ascontiguousarray(take_rows(Xd, idx, name="kkmeans-sample"), dtype=dtype)
            sample_w = w[idx]
            oracle, diag = self._numeric_oracle(Xd, rng, sample)
            Kop = _DaskProduct(Xd, self._spec, self.max_kernel_bytes)
        best = self._best_of_n_init(oracle, Kop, sample, sample_w, diag, w, rng, dtype)
        self.labels_ = best["labels"]
        found = int(np.unique(self.labels_).size)
        if found < self.n_clusters:
            warnings.warn(
                f"KernelKMeans found {found} distinct clusters, fewer than "
                f"n_clusters={self.n_clusters}: X may have fewer distinct points than "
                "clusters (duplicates); the empty clusters keep their initial point",
                ConvergenceWarning,
                stacklevel=2,
            )
        self.inertia_ = best["inertia"]
        self.n_iter_ = best["n_iter"]
        self.history_ = best["history"]
        if oracle.graph:
            pts = np.concatenate([np.arange(n), best["Z"]])
        else:
            pts = np.concatenate([np.asarray(Xd.compute(), dtype=dtype), best["Z"]])
        self._set_centers(oracle, pts, np.hstack([best["A"], best["AZ"]]), best["norms"], X_rows)
        self.n_kernel_evals_ = int(oracle.evals + Kop.evals)
        return self

    def _rows_once(self, X, is_dask, dtype):
        """X as a dask array whose chunks every pass reuses: a store's or dask array's
        chunks read once (values checked in that read) and persisted, NumPy rows wrapped."""
        if not is_dask:
            return da.from_array(np.asarray(X, dtype=dtype), chunks=(self.chunk_rows or 4096, -1))
        _check_fits(X, dtype, self.max_data_bytes, "KernelKMeans (its support is every row)")
        return X.map_blocks(checked_block, _as_dtype, dtype, dtype=dtype).persist()

    def _numeric_oracle(self, Xd, rng, sample):
        """Resolve gamma from the sample, check the width; returns the oracle and k(x, x)."""
        self._fit_spec(Xd, rng, sample, sample)
        diag = Xd.map_blocks(
            _diag_block, self._spec, dtype=np.float64, drop_axis=1, meta=np.empty((0,))
        ).compute()
        return NumericOracle(self._spec), diag

    def _best_of_n_init(self, oracle, Kop, sample, sample_w, diag, w, rng, dtype):
        """Lloyd from ``n_init`` seedings, under a progress bar; the lowest inertia wins."""
        bar_cm = progress(
            self.max_iter * self.n_init,
            type(self).__name__,
            enabled=progress_enabled(self.verbose),
        )
        with timer("lloyd", logger), bar_cm as bar:
            return _best_lloyd(
                oracle,
                Kop,
                sample,
                sample_w,
                diag,
                w,
                n_clusters=self.n_clusters,
                init=self.init if isinstance(self.init, str) else np.asarray(self.init, dtype),
                n_init=self.n_init,
                rng=rng,
                max_iter=self.max_iter,
                tol=self.tol,
                verbose=self.verbose,
                bar=bar,
            )


def _best_lloyd(
    oracle,
    Kop,
    sample,
    sample_w,
    diag,
    w,
    *,
    n_clusters,
    init,
    n_init,
    rng,
    max_iter,
    tol,
    verbose=0,
    bar=None,
):
    """``n_init`` runs of (seeding on ``sample``, :func:`_lloyd`); the lowest objective wins.

    ``sample`` holds the points seedings draw from (rows, or row indices for index
    oracles) and ``sample_w`` their weights; ``init`` an array gives the initial points
    of every run. Used by :class:`KernelKMeans` and :func:`select_gamma`. ``bar``: a
    :class:`~dkernel.runtime.Progress` advanced by each Lloyd iteration.
    """
    best = None
    for r in range(n_init):
        note = bar.compiling("kernel k-means init") if bar is not None and r == 0 else None
        with note or contextlib.nullcontext():
            if isinstance(init, str):
                Z = sample[_init_centers(oracle, sample, sample_w, n_clusters, rng, init=init)]
            else:
                Z = init
            KZ = Kop.cross(Z)
        run = _lloyd(KZ, oracle.kernel(Z, Z), Kop, diag, w, max_iter, tol, verbose, bar)
        if bar is not None:  # a run that stopped early: its unused iterations count as done
            bar.update(max_iter - run["n_iter"])
        run["Z"] = Z
        if best is None or run["inertia"] < best["inertia"]:
            best = run
    return best


def _lloyd(KZ, KZZ, Kop, diag, w, max_iter, tol=0.0, verbose=0, bar=None):
    """Lloyd's algorithm in feature space: the package's one Lloyd loop.

    Starts from the assignment to the initial points Z (``KZ`` = K(X, Z), ``KZZ`` =
    K(Z, Z)); each iteration sets ``C_j = sum_{i in P_j} w_i phi(x_i) / W_j`` (rows
    ``A``; an empty cluster keeps its previous center, its initial point at first:
    coefficients ``AZ`` over Z) and reassigns every row by the exact distance, with
    ``K A^T`` from ``Kop.matmul``. Stops when no label changes, or when the relative
    decrease of the objective is below ``tol``.
    """
    n, k = KZ.shape
    KZ = np.asarray(KZ, dtype=np.float64)
    KZZ = np.asarray(KZZ, dtype=np.float64)
    A = np.zeros((k, n))
    AZ = np.eye(k)
    norms = np.einsum("ij,ij->i", AZ @ KZZ, AZ)
    labels = np.empty(n, dtype=np.int64)
    dist = np.empty(n)
    _nb.assign_nearest(diag, np.ascontiguousarray(KZ), norms, labels, dist)
    inertia = float(np.dot(w, dist))
    history = []
    n_iter = 0
    for it in range(max_iter):
        for j in range(k):
            mask = labels == j
            Wj = float(w[mask].sum())
            if Wj > 0:
                A[j] = np.where(mask, w / Wj, 0.0)
                AZ[j] = 0.0
            # an empty cluster keeps its previous center (A[j], AZ[j] unchanged)
        KA = Kop.matmul(A.T)  # (n, k) = K A^T
        KZA = KZ @ AZ.T
        inner = KA + KZA
        norms = (
            np.einsum("jn,nj->j", A, KA)
            + 2.0 * np.einsum("jn,nj->j", A, KZA)
            + np.einsum("ij,ij->i", AZ @ KZZ, AZ)
        )
        norms = np.maximum(norms, 0.0)
        new = np.empty(n, dtype=np.int64)
        _nb.assign_nearest(diag, np.ascontiguousarray(inner), norms, new, dist)
        new_inertia = float(np.dot(w, dist))
        history.append(new_inertia)
        n_iter = it + 1
        if bar is not None:
            bar.update(1, objective=new_inertia)
        if verbose:
            logger.info("Lloyd iteration %d: objective %.6g", n_iter, new_inertia)
        changed = not np.array_equal(new, labels)
        rel = (inertia - new_inertia) / max(abs(inertia), 1e-300)
        labels, inertia = new, new_inertia
        if not changed or (tol > 0 and rel < tol):
            break
    return {
        "labels": labels,
        "inertia": inertia,
        "n_iter": n_iter,
        "history": history,
        "A": A,
        "AZ": AZ,
        "norms": norms,
    }


def _diag_block(Xb, spec):
    return np.asarray(diag_from_spec(np.asarray(Xb), spec), dtype=np.float64)


def _cross_block(Xb, Z, spec):
    return np.asarray(pairwise_from_spec(np.asarray(Xb), Z, spec), dtype=np.float64)


class _DaskProduct:
    """``K A^T`` over lazy kernel blocks; the blocks are persisted when they fit the budget."""

    def __init__(self, Xd, spec, max_bytes):
        self.Xd = Xd
        self.spec = spec
        n = Xd.shape[0]
        self.K = kernel_matrix(
            Xd,
            Xd,
            kernel=spec.kernel,
            gamma=spec.gamma,
            degree=spec.degree,
            coef0=spec.coef0,
            kernel_params=spec.params,
        )
        self.cached = n * n * self.K.dtype.itemsize <= max_bytes
        self.evals = 0
        if self.cached:
            self.K = self.K.persist()
            self.evals = n * n

    def matmul(self, AT):
        n = self.Xd.shape[0]
        ATd = da.from_array(AT.astype(self.K.dtype), chunks=(self.K.chunks[1], AT.shape[1]))
        if not self.cached:
            self.evals += n * n
        return np.asarray((self.K @ ATd).compute(), dtype=np.float64)

    def cross(self, Z):
        k = Z.shape[0]
        self.evals += self.Xd.shape[0] * k
        return self.Xd.map_blocks(
            _cross_block,
            Z,
            self.spec,
            dtype=np.float64,
            chunks=(self.Xd.chunks[0], (k,)),
            meta=np.empty((0, 0)),
        ).compute()


class _DenseProduct:
    """``K A^T`` for a kernel matrix held in memory (:func:`select_gamma`'s sample)."""

    def __init__(self, K):
        self.K = K
        self.evals = 0

    def matmul(self, AT):
        return self.K @ AT

    def cross(self, Z):
        return self.K[:, Z]


class _GraphProduct:
    """``K A^T`` for a graph kernel in memory (sparse product, or column blocks)."""

    def __init__(self, G, oracle):
        self.G = G
        self.oracle = oracle
        self.evals = 0

    def cross(self, Z):
        return self.oracle.kernel(np.arange(self.G.n_samples), Z)

    def matmul(self, AT):
        n = self.G.n_samples
        if getattr(self.G, "matrix", None) is not None:
            self.evals += int(self.G.matrix.nnz)
            return np.asarray(self.G.matrix @ AT)
        out = np.zeros((n, AT.shape[1]))
        rows = np.arange(n)
        for c0 in range(0, n, 1024):
            cols = rows[c0 : c0 + 1024]
            out += self.G.block(rows, cols) @ AT[cols]
        self.evals += n * n
        return out
