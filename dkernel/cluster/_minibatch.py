"""Truncated mini-batch kernel k-means (Jourdan & Schwartzman, 2024)."""

from __future__ import annotations

import logging
import numbers
import warnings

import numpy as np
from sklearn.base import ClusterMixin, TransformerMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import check_random_state

from .._base import _BaseKernelEstimator
from .._validation import DKernelError, check_scalar
from ..runtime import _timer
from . import _kernels as _nb
from ._common import (
    _TILE_ROWS,
    GRAPH_KERNELS,
    SUPPORTED_KERNELS,
    _check_rate,
    _check_weights,
    _graph_params,
    _GraphOracle,
    _KernelCentersMixin,
    _NumericOracle,
)
from ._init import _kernel_kmeans_plusplus

logger = logging.getLogger(__name__)

#: Bytes of batch rows fetched together (one pass over the touched chunks per group).
_PREFETCH_BYTES = 64 << 20
#: Below this kept coefficient mass, a truncated window's norm is recomputed directly.
_INCREMENTAL_MASS = 0.5


class _Window:
    """One center's sliding window: per batch, its points and coefficients (oldest first)."""

    __slots__ = ("coef", "count", "norm", "offset", "pts", "seen")

    def __init__(self, pts, norm):
        self.pts = [pts]
        self.coef = [np.ones(len(pts))]
        self.count = [len(pts)]
        self.offset = [0]
        self.norm = float(norm)
        self.seen = 0.0  # running weight N_j of the "sklearn" rate

    @property
    def total(self) -> int:
        return int(sum(self.count))


class MiniBatchKernelKMeans(
    ClusterMixin, TransformerMixin, _KernelCentersMixin, _BaseKernelEstimator
):
    """Truncated mini-batch kernel k-means.

    Kernel k-means clusters in the feature space ``phi`` of a kernel, where a center is a
    weighted combination of data points, ``C_j = sum_p a_p phi(s_p)``. Each iteration
    draws a batch ``B`` of ``batch_size`` rows uniformly with replacement (the data
    layer's seeded, chunk-grouped sampler), assigns each row to the nearest center by
    ``||phi(x) - C_j||^2 = k(x, x) - 2 <phi(x), C_j> + <C_j, C_j>`` and moves each center
    that won rows towards their (weighted) mean: ``C_j <- (1 - alpha_j) C_j + alpha_j
    cm(B_j)``. With truncation (``tau``, the paper's τ) a center keeps only its most
    recent batches: the fewest newest ones whose assigned rows number at least ``tau``.

    Parameters
    ----------
    n_clusters : int, default=8
    kernel : {"rbf", "laplacian", "polynomial", "linear", "sigmoid", "cosine", "knn", \
"heat"} or callable, default="rbf"
        ``"knn"`` and ``"heat"`` are the graph kernels of :func:`dkernel.kernels.knn_kernel`
        and :func:`dkernel.kernels.heat_kernel`, built on the training rows
        (``kernel_params={"n_neighbors": 10, "t": 1.0}``). They are transductive:
        ``labels_`` and ``fit_predict`` work, ``predict``/``transform``/``score`` on new
        rows and ``partial_fit`` raise.
    gamma : float, default=None
        Kernel width; ``None`` uses the median heuristic
        (:func:`dkernel.kernels.estimate_gamma`) for rbf/laplacian, ``1 / n_features``
        otherwise. :func:`select_gamma` picks one without labels.
    degree, coef0 : float
        Polynomial/sigmoid parameters.
    kernel_params : dict, default=None
    batch_size : int, default=1024
        Rows per batch (the paper's b), drawn with replacement.
    tau : int or None, default=200
        Truncation (τ): each center keeps the fewest most recent batches whose assigned
        rows sum to at least ``tau``. A single batch that gave a center more than ``tau``
        rows is kept whole (batches are never split), so a center holds at most
        ``tau + batch_size`` points. ``None``: no truncation, computed in :meth:`fit` by
        the recursive inner-product update over all n rows (the paper's dynamic program,
        O(n (b + k)) time per iteration and O(n k) memory, X held in memory).
    learning_rate : {"beta", "sklearn"} or float, default="beta"
        ``"beta"``: ``alpha_j = sqrt(b_j / b)`` (Schwartzman 2023); ``"sklearn"``:
        ``alpha_j = b_j / (N_j + b_j)`` with N_j the weight a center has won so far; a
        float in (0, 1] is a constant rate. With sample weights b_j, b and N_j are sums of
        weights.
    renormalize : bool, default=True
        After truncation rescale the kept coefficients to sum to one, so a center stays
        a convex combination (the weighted mean of its window). ``False`` keeps the
        paper's plain truncation (the center loses the dropped mass).
    max_iter : int, default=200
        Iterations of :meth:`fit`.
    tol : float, default=0.0
        Stop when the improvement of the batch objective ``f_B(C_i) - f_B(C_{i+1})``
        falls below ``tol`` (the paper's ε); ``0`` runs ``max_iter`` iterations.
    init : {"k-means++", "random"} or ndarray of shape (n_clusters, n_features)
        Initial centers as single points: k-means++ in feature space
        (:func:`kernel_kmeans_plusplus`) or random rows of an initial sample, or the
        given points (not with the graph kernels).
    init_size : int, default=None
        Rows sampled (without replacement) for the initialisation; ``None`` means
        ``min(n, max(3 * batch_size, 10 * n_clusters))``.
    n_init : int, default=1
        Seedings tried on the initial sample; the one with the lowest k-means++
        potential is kept.
    random_state : int, RandomState or None
        Seeds the initialisation, the median heuristic and every batch; the same seed
        gives the same model for NumPy, dask (any chunking) or zarr input.
    verbose : int, default=0
        Log the batch objective every ``verbose`` iterations (INFO).

    Attributes
    ----------
    labels_ : ndarray of shape (n_samples,)
        Nearest center of each training row (one blockwise pass over the data).
    inertia_ : float
        Kernel k-means objective ``sum_i w_i ||phi(x_i) - C_{labels_i}||^2`` over all
        training rows.
    n_iter_ : int
    history_ : list of float
        Weighted mean batch objective ``f_B(C_i)`` at each iteration, before the update.
    center_support_ : ndarray of shape (n_support, n_features)
        The support points of all centers stacked (the rows of the graph kernels' support
        for ``"knn"``/``"heat"``, with ``center_support_indices_``).
    center_coef_ : ndarray of shape (n_clusters, n_support)
        ``C_j = sum_p center_coef_[j, p] phi(center_support_[p])``. Each support point
        belongs to one center's window, so the matrix is block-sparse; a fitted model
        predicts from these alone.
    center_norms_ : ndarray of shape (n_clusters,)
        ``<C_j, C_j>``, maintained incrementally.
    gamma_ : float or None
        The kernel width used.
    n_kernel_evals_ : int
        Kernel values computed by ``fit`` (the labels pass included) or by the last
        ``partial_fit`` call; diagonals excluded.
    timings_ : dict
        Seconds spent by ``fit`` in ``setup``, ``init``, ``iterations`` and ``labels``.
    n_features_in_ : int

    Notes
    -----
    A truncated iteration costs ``b (s + b)`` kernel evaluations, s <= k (tau + b)
    the support size, i.e. O(k (b + tau) b), independent of n; memory on the driver is
    O(k (tau + b) d + b^2) plus a prefetch buffer of at most 64 MiB of batch rows (batches
    are fetched in groups, one task per touched chunk). The maintained inner products:
    ``<C'_j, C'_j> = (1-a)^2 <C_j, C_j> + 2a(1-a) <cm(B_j), C_j> + a^2 <cm(B_j), cm(B_j)>``,
    and dropping batches D from a window subtracts ``2 <D, C> - <D, D>`` (when the kept
    coefficients still hold at least half of the mass; otherwise the kept window's norm is
    recomputed directly, O((tau + b_j)^2), to avoid cancellation with float32 kernels).
    ``labels_``/``inertia_`` take one blockwise pass (``map_blocks`` over row chunks).
    Nothing n x n is ever formed.

    References
    ----------
    B. Jourdan and G. Schwartzman, "Mini-batch kernel k-means", arXiv:2410.05902, 2024.
    G. Schwartzman, "Mini-batch k-means terminates within O(d/ε) iterations", ICLR 2023.

    Examples
    --------
    >>> from dkernel.cluster import MiniBatchKernelKMeans
    >>> from dkernel.data import make_rings
    >>> X, y = make_rings(600, n_rings=2, noise=0.05, random_state=0)
    >>> km = MiniBatchKernelKMeans(2, gamma=2.0, batch_size=128, tau=50, max_iter=30,
    ...                            random_state=0).fit(X)
    >>> km.labels_.shape, km.center_coef_.shape[0]
    ((600,), 2)
    """

    _supported_kernels = SUPPORTED_KERNELS
    _gamma_rule = "median"

    def __init__(
        self,
        n_clusters=8,
        *,
        kernel="rbf",
        gamma=None,
        degree=3,
        coef0=1.0,
        kernel_params=None,
        batch_size=1024,
        tau=200,
        learning_rate="beta",
        renormalize=True,
        max_iter=200,
        tol=0.0,
        init="k-means++",
        init_size=None,
        n_init=1,
        random_state=None,
        verbose=0,
    ):
        self.n_clusters = n_clusters
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.kernel_params = kernel_params
        self.batch_size = batch_size
        self.tau = tau
        self.learning_rate = learning_rate
        self.renormalize = renormalize
        self.max_iter = max_iter
        self.tol = tol
        self.init = init
        self.init_size = init_size
        self.n_init = n_init
        self.random_state = random_state
        self.verbose = verbose

    # ---------------------------------------------------------------- checks
    def _check_params(self, n: int) -> None:
        check_scalar(self.n_clusters, "n_clusters", kind=numbers.Integral, low=1)
        if self.n_clusters > n:
            raise DKernelError(f"n_clusters={self.n_clusters} must be <= n_samples={n}")
        check_scalar(self.batch_size, "batch_size", kind=numbers.Integral, low=1)
        check_scalar(self.tau, "tau", kind=numbers.Integral, low=1, allow_none=True)
        _check_rate(self.learning_rate)
        check_scalar(self.max_iter, "max_iter", kind=numbers.Integral, low=1)
        check_scalar(self.tol, "tol", low=0.0)
        check_scalar(self.n_init, "n_init", kind=numbers.Integral, low=1)
        check_scalar(self.init_size, "init_size", kind=numbers.Integral, low=1, allow_none=True)
        check_scalar(self.verbose, "verbose", kind=numbers.Integral, low=0)
        if not isinstance(self.renormalize, (bool, np.bool_)):
            raise DKernelError(f"renormalize must be True or False, got {self.renormalize!r}")
        self._check_init()
        if isinstance(self.kernel, str) and self.kernel.lower() not in GRAPH_KERNELS:
            self._kernel_spec(None)  # unknown kernel names raise here
        elif not isinstance(self.kernel, str) and not callable(self.kernel):
            raise DKernelError(f"unknown kernel {self.kernel!r}")

    # ------------------------------------------------------------------- fit
    def fit(self, X, y=None, sample_weight=None):
        """Fit on X (NumPy, dask array or zarr store path), ``max_iter`` batch iterations.

        Parameters
        ----------
        X : array-like, dask array, or path of a zarr store, shape (n_samples, n_features)
        y : ignored
        sample_weight : array-like of shape (n_samples,), default=None
            Weighted centers and objective (e.g. coreset weights).

        Returns
        -------
        self
        """
        X, is_dask, n, w, rng, dtype = self._start_fit(X, sample_weight)
        self._rng = rng
        X_rows = None
        with _timer("setup", logger) as t_setup:
            if self._is_graph():
                from ..kernels import heat_kernel, knn_kernel

                X_rows = np.asarray(X.compute() if is_dask else X, dtype=dtype)
                params = _graph_params(self.kernel.lower(), self.kernel_params, n)
                self._graph = (
                    knn_kernel(X_rows, params["n_neighbors"])
                    if self.kernel.lower() == "knn"
                    else heat_kernel(X_rows, params["n_neighbors"], params["t"])
                )
                self._spec = None
                self.gamma_ = None
                oracle = _GraphOracle(self._graph)

                def fetch(idx):
                    return idx
            else:
                self._spec = self._resolve_gamma(X, rng)
                self.gamma_ = self._spec.gamma
                oracle = _NumericOracle(self._spec)
                fetch = _row_fetcher(X, dtype)
        with _timer("init", logger) as t_init:
            Z = self._init_points(oracle, fetch, n, w, rng, dtype)
        self.history_ = []
        self.n_iter_ = 0
        self._wins = np.zeros(self.n_clusters, dtype=np.int64)
        batches = _batch_stream(
            n,
            self.batch_size,
            rng,
            fetch,
            X.shape[1],
            dtype,
            graph=oracle.graph,
            max_batches=self.max_iter,
        )
        with _timer("iterations", logger) as t_iter:
            if self.tau is None:
                X_all = (
                    np.arange(n)
                    if oracle.graph
                    else np.asarray(X.compute() if is_dask else X, dtype=dtype)
                )
                self._windows = None  # partial_fit after this fit starts afresh
                labels, dist = self._fit_untruncated(oracle, X_all, w, Z, batches, X_rows)
            else:
                self._windows = self._new_windows(oracle, Z)
                for it in range(self.max_iter):
                    idx, Xb = next(batches)
                    stop = self._window_step(oracle, Xb, w[idx], it)
                    if stop:
                        break
                self._export_windows(oracle, X_rows)
        with _timer("labels", logger) as t_lab:
            if self.tau is not None:
                labels, dist = self._labels_and_distances(X, is_dask)
        self.labels_ = labels
        self.inertia_ = float(np.dot(w, dist))
        labels_evals = n * self.center_coef_.shape[1] if self.tau is not None else 0
        self.n_kernel_evals_ = int(oracle.evals + labels_evals)
        self.timings_ = {
            "setup": t_setup["seconds"],
            "init": t_init["seconds"],
            "iterations": t_iter["seconds"],
            "labels": t_lab["seconds"],
        }
        self._warn_never_won()
        return self

    def _init_points(self, oracle, fetch, n, w, rng, dtype):
        """Initial centers as points (rows, or indices for graph kernels)."""
        if not isinstance(self.init, str):
            return np.asarray(self.init, dtype=dtype)
        size = self.init_size or max(3 * self.batch_size, 10 * self.n_clusters)
        size = max(min(n, size), self.n_clusters)
        from ..data import draw_indices

        idx = np.sort(draw_indices(n, size, rng, replace=False))
        P = fetch(idx)
        wi = w[idx]
        if wi.sum() <= 0:
            wi = np.ones_like(wi)
        if self.init == "random":
            nz = np.flatnonzero(wi > 0)
            pick = rng.choice(nz, self.n_clusters, replace=nz.size < self.n_clusters)
            return P[pick]
        diag = oracle.diag(P)
        best, best_pot = None, np.inf
        for _ in range(self.n_init):
            chosen, pot = _kernel_kmeans_plusplus(oracle, P, diag, wi, self.n_clusters, rng)
            if pot < best_pot or best is None:
                best, best_pot = chosen, pot
        return P[best]

    def _rate(self, W_j, W_tot, win):
        lr = _check_rate(self.learning_rate)
        if lr == "beta":
            return float(np.sqrt(W_j / W_tot))
        if lr == "sklearn":
            return float(W_j / (win.seen + W_j))
        return lr

    # --------------------------------------------------------- truncated path
    def _new_windows(self, oracle, Z):
        norms = oracle.diag(Z)
        return [_Window(Z[j : j + 1], norms[j]) for j in range(len(Z))]

    def _stack(self):
        """Stacked support, per-center segment pointers and coefficients (records offsets)."""
        pts, coefs, ptr = [], [], [0]
        pos = 0
        for win in self._windows:
            for e in range(len(win.pts)):
                win.offset[e] = pos
                pos += len(win.pts[e])
                pts.append(win.pts[e])
                coefs.append(win.coef[e])
            ptr.append(pos)
        return (
            np.concatenate(pts),
            np.asarray(ptr, dtype=np.int64),
            np.concatenate(coefs).astype(np.float64),
        )

    def _assign_batch(self, diag_b, inner, norms, wb, Kbb, labels, mind):
        """Assign a batch to its nearest centers (``labels``, ``mind`` filled in place) and
        gather the per-center batch terms.

        Returns ``(batch objective, total weight, W, cross, selfk, count)``.
        """
        _nb.assign_nearest(diag_b, inner, norms, labels, mind)
        W_tot = float(wb.sum())
        W, cross, selfk, count = _nb.batch_center_terms(Kbb, inner, labels, wb, self.n_clusters)
        self._wins += count
        return _batch_objective(wb, mind, W_tot), W_tot, W, cross, selfk, count

    def _window_step(self, oracle, Xb, wb, it) -> bool:
        """One truncated iteration on the batch ``Xb``; returns True to stop (tol)."""
        k = self.n_clusters
        tau = np.inf if self.tau is None else self.tau
        S, ptr, coef = self._stack()
        Kxs = oracle.kernel(Xb, S)
        inner = np.empty((len(Xb), k))
        _nb.center_inner(Kxs, ptr, coef, inner)
        diag_b = oracle.diag(Xb)
        norms = np.array([win.norm for win in self._windows])
        labels = np.empty(len(Xb), dtype=np.int64)
        mind = np.empty(len(Xb))
        Kbb = oracle.kernel(Xb, Xb)
        f_before, W_tot, W, cross, selfk, count = self._assign_batch(
            diag_b, inner, norms, wb, Kbb, labels, mind
        )
        track = self.tol > 0
        inner_new = inner.copy() if track else None
        for j in range(k):
            if count[j] == 0 or W[j] <= 0.0:
                continue  # empty cluster: the center stays as it is
            win = self._windows[j]
            a = self._rate(W[j], W_tot, win)
            win.seen += W[j]
            mask = labels == j
            new_coef = a * wb[mask] / W[j]
            win.norm = (
                (1 - a) ** 2 * win.norm
                + 2 * a * (1 - a) * cross[j] / W[j]
                + a * a * selfk[j] / W[j] ** 2
            )
            win.coef = [c * (1 - a) for c in win.coef]
            win.pts.append(Xb[mask])
            win.coef.append(new_coef)
            win.count.append(int(count[j]))
            win.offset.append(-1)
            if track:
                inner_new[:, j] = (1 - a) * inner[:, j] + Kbb[:, mask] @ new_coef
            # drop whole oldest batches while the rest still holds >= tau points
            n_drop, total = 0, win.total
            while n_drop < len(win.count) - 1 and total - win.count[n_drop] >= tau:
                total -= win.count[n_drop]
                n_drop += 1
            if n_drop:
                kept = float(sum(c.sum() for c in win.coef[n_drop:]))
                if kept >= _INCREMENTAL_MASS:
                    # <K, K> = <C, C> - 2 <D, C> + <D, D> for the dropped batches D
                    D = np.concatenate(win.pts[:n_drop])
                    cD = np.concatenate(win.coef[:n_drop])
                    KD = oracle.kernel(D, np.concatenate(win.pts))
                    dc = _nb.bilinear(KD, cD, np.concatenate(win.coef))
                    dd = _nb.bilinear(np.ascontiguousarray(KD[:, : len(D)]), cD, cD)
                    win.norm = win.norm - 2.0 * dc + dd
                if track:
                    for e in range(n_drop):
                        o = win.offset[e]
                        inner_new[:, j] -= Kxs[:, o : o + len(win.pts[e])] @ win.coef[e]
                del win.pts[:n_drop], win.coef[:n_drop], win.count[:n_drop], win.offset[:n_drop]
                scale = 1.0 / kept if self.renormalize else 1.0
                if self.renormalize:
                    win.coef = [c * scale for c in win.coef]
                    win.norm *= scale * scale
                    if track:
                        inner_new[:, j] *= scale
                if kept < _INCREMENTAL_MASS:
                    # most of the mass was dropped: the difference above would cancel
                    # catastrophically (float32 kernel values), so take the kept window's
                    # norm directly, O((tau + b_j)^2) kernel values
                    K_pts = np.concatenate(win.pts)
                    c_all = np.concatenate(win.coef)
                    win.norm = _nb.bilinear(oracle.kernel(K_pts, K_pts), c_all, c_all)
            win.norm = max(win.norm, 0.0)
        self.n_iter_ += 1
        self.history_.append(f_before)
        if self.verbose and (it + 1) % self.verbose == 0:
            logger.info("iteration %d: batch objective %.6g", it + 1, f_before)
        if track:
            norms = np.array([win.norm for win in self._windows])
            _nb.assign_nearest(diag_b, inner_new, norms, labels, mind)
            f_after = _batch_objective(wb, mind, W_tot)
            self._f_after = f_after
            return f_before - f_after < self.tol
        return False

    def _export_windows(self, oracle, X_rows=None):
        S, ptr, coef = self._stack()
        C = np.zeros((self.n_clusters, len(S)))
        for j in range(self.n_clusters):
            C[j, ptr[j] : ptr[j + 1]] = coef[ptr[j] : ptr[j + 1]]
        norms = np.array([win.norm for win in self._windows])
        self._set_centers(oracle, S, C, norms, X_rows)

    # ------------------------------------------------------- untruncated path
    def _fit_untruncated(self, oracle, X_all, w, Z, batches, X_rows):
        """Recursive inner-product update over all n rows (tau=None)."""
        n, k = len(X_all), self.n_clusters
        diag_all = oracle.diag(X_all)
        P = np.empty((n, k))  # <phi(x_i), C_j>
        for r0 in range(0, n, _TILE_ROWS):
            P[r0 : r0 + _TILE_ROWS] = oracle.kernel(X_all[r0 : r0 + _TILE_ROWS], Z)
        norms = oracle.diag(Z)
        A = np.zeros((k, n))  # coefficients over the training rows
        AZ = np.eye(k)  # coefficients over the initial points
        seen = np.zeros(k)
        labels = np.empty(self.batch_size, dtype=np.int64)
        mind = np.empty(self.batch_size)
        for it in range(self.max_iter):
            idx, Xb = next(batches)
            wb = w[idx]
            inner = np.ascontiguousarray(P[idx])
            diag_b = diag_all[idx]
            Kbb = oracle.kernel(Xb, Xb)
            f_before, W_tot, W, cross, selfk, count = self._assign_batch(
                diag_b, inner, norms, wb, Kbb, labels, mind
            )
            a = np.zeros(k)
            for j in range(k):
                if count[j] and W[j] > 0:
                    lr = _check_rate(self.learning_rate)
                    a[j] = (
                        np.sqrt(W[j] / W_tot)
                        if lr == "beta"
                        else W[j] / (seen[j] + W[j])
                        if lr == "sklearn"
                        else lr
                    )
                    seen[j] += W[j]
            Wd = np.where(W > 0, W, 1.0)
            norms = (1 - a) ** 2 * norms + 2 * a * (1 - a) * cross / Wd + a * a * selfk / Wd**2
            norms = np.maximum(norms, 0.0)
            vals = a[labels] * wb / Wd[labels]
            Wb = np.zeros((len(idx), k))
            Wb[np.arange(len(idx)), labels] = vals
            A *= (1 - a)[:, None]
            AZ *= (1 - a)[:, None]
            np.add.at(A, (labels, idx), vals)
            P *= (1 - a)[None, :]
            for r0 in range(0, n, _TILE_ROWS):
                P[r0 : r0 + _TILE_ROWS] += oracle.kernel(X_all[r0 : r0 + _TILE_ROWS], Xb) @ Wb
            self.n_iter_ += 1
            self.history_.append(f_before)
            if self.verbose and (it + 1) % self.verbose == 0:
                logger.info("iteration %d: batch objective %.6g", it + 1, f_before)
            if self.tol > 0:
                _nb.assign_nearest(diag_b, np.ascontiguousarray(P[idx]), norms, labels, mind)
                f_after = _batch_objective(wb, mind, W_tot)
                if f_before - f_after < self.tol:
                    break
        points = np.concatenate([X_all, Z.astype(X_all.dtype) if not oracle.graph else Z])
        self._set_centers(oracle, points, np.hstack([A, AZ]), norms, X_rows)
        labels_all = np.empty(n, dtype=np.int64)
        dist_all = np.empty(n)
        _nb.assign_nearest(diag_all, P, norms, labels_all, dist_all)
        return labels_all, dist_all

    # ------------------------------------------------------------ partial_fit
    def partial_fit(self, X, y=None, sample_weight=None):
        """One iteration on the batch X (all its rows); the first call also initialises.

        With ``tau=None`` the windows are never truncated (the support grows by the batch
        each call). Graph kernels are transductive and not supported here.

        Returns
        -------
        self
        """
        first = not hasattr(self, "_windows") or getattr(self, "_windows", None) is None
        if self._is_graph():
            raise DKernelError(
                f"partial_fit does not support the transductive kernel {self.kernel!r}"
            )
        X, is_dask = self._validate_X(X, reset=first)
        if is_dask:
            X = np.asarray(X.compute())
        n = X.shape[0]
        if first:
            self._check_params(n)
        w = _check_weights(sample_weight, n)
        dtype = np.float32 if X.dtype == np.float32 else np.float64
        if first:
            self._rng = getattr(self, "_rng", None) or check_random_state(self.random_state)
            self._spec = self._resolve_gamma(X, self._rng)
            self.gamma_ = self._spec.gamma
            oracle = _NumericOracle(self._spec)
            if isinstance(self.init, str):
                size = self.init_size or n
                sub = (
                    np.sort(self._rng.choice(n, min(n, size), replace=False))
                    if size < n
                    else np.arange(n)
                )

                Z = self._init_points_from(oracle, X[sub].astype(dtype, copy=False), w[sub])
            else:
                Z = np.asarray(self.init, dtype=dtype)
            self._windows = self._new_windows(oracle, Z)
            self.history_, self.n_iter_ = [], 0
            self._wins = np.zeros(self.n_clusters, dtype=np.int64)
        else:
            oracle = _NumericOracle(self._spec)
            dtype = self.center_support_.dtype
        self._window_step(oracle, X.astype(dtype, copy=False), w, self.n_iter_)
        self._export_windows(oracle)
        self.n_kernel_evals_ = int(oracle.evals)
        return self

    def _init_points_from(self, oracle, P, w):
        if w.sum() <= 0:
            w = np.ones_like(w)
        if self.init == "random":
            return P[self._rng.choice(len(P), self.n_clusters, replace=False)]
        diag = oracle.diag(P)
        best, best_pot = None, np.inf
        for _ in range(self.n_init):
            chosen, pot = _kernel_kmeans_plusplus(oracle, P, diag, w, self.n_clusters, self._rng)
            if best is None or pot < best_pot:
                best, best_pot = chosen, pot
        return P[best]

    def _warn_never_won(self):
        never = np.flatnonzero(self._wins == 0)
        if never.size:
            warnings.warn(
                f"center(s) {never.tolist()} never won a batch row in {self.n_iter_} iterations "
                "and stayed at their initial point; consider fewer clusters or more iterations",
                ConvergenceWarning,
                stacklevel=3,
            )

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = False
        return tags


def _row_fetcher(X, dtype):
    """``idx -> rows`` as NumPy of ``dtype`` (NumPy fancy index or grouped dask take)."""
    from ..data import take_rows

    def fetch(idx):
        return np.ascontiguousarray(take_rows(X, idx), dtype=dtype)

    return fetch


def _batch_stream(n, batch_size, rng, fetch, d, dtype, *, graph=False, max_batches=None):
    """Yield ``(indices, points)`` per iteration; rows of several batches fetched at once.

    Indices are drawn one batch at a time from ``rng`` (so they do not depend on the
    grouping); a group of batches is gathered in one pass over the touched chunks.
    """
    from ..data import draw_indices

    per_batch = max(1, batch_size * d * np.dtype(dtype).itemsize)
    group = 1 if graph else max(1, _PREFETCH_BYTES // per_batch)
    if max_batches is not None:
        group = min(group, max_batches)
    while True:
        idxs = [draw_indices(n, batch_size, rng) for _ in range(group)]
        rows = fetch(np.concatenate(idxs))
        for g, idx in enumerate(idxs):
            yield idx, rows[g * batch_size : (g + 1) * batch_size]


def _batch_objective(wb, mind, W_tot: float) -> float:
    """Weighted mean feature-space distance of a batch to its nearest centers (f_B)."""
    return float(np.dot(wb, mind) / W_tot) if W_tot > 0 else 0.0
