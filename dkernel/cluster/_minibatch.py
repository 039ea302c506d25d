"""Truncated mini-batch kernel k-means (Jourdan & Schwartzman, 2024).

The estimator holds the parameters and the order of a fit's phases; the algorithm lives in
module-level functions of explicit state: :mod:`._window` (the state of the truncated fit
and its step, shared by :meth:`~MiniBatchKernelKMeans.fit` and
:meth:`~MiniBatchKernelKMeans.partial_fit`), :mod:`._recursive` (the untruncated fit) and
:mod:`._fit` (checkpoint, batch stream, seeding, the iteration loop).
"""

from __future__ import annotations

import logging
import os

import numpy as np
from sklearn.base import ClusterMixin, TransformerMixin
from sklearn.utils import check_random_state

from .._base import _BaseKernelEstimator
from .._params import NON_NEGATIVE, NON_NEGATIVE_INT, POSITIVE_INT, POSITIVE_INT_OR_NONE
from .._validation import DKernelError
from ..kernels import ONE_BLAS_THREAD
from ..runtime import (
    Progress,
    accounting,
    distributed_client,
    named_worker_errors,
    phase,
    progress,
    progress_enabled,
    timer,
)
from ._blocks import NumericOracle
from ._common import (
    SUPPORTED_KERNELS,
    _check_rate,
    _check_weights,
    _gather_checked,
    _KernelCentersMixin,
    labels_like_rows,
    use_graph_kernel,
)
from ._fit import (
    Loop,
    Seeding,
    fit_windows,
    hold_rows,
    initialise,
    iteration_state,
    kernel_evals,
    open_checkpoint,
    open_stream,
    sample_size,
    seed_centers,
    warn_never_won,
)
from ._recursive import fit_untruncated
from ._window import WindowState, export_windows, new_windows, step_rule, window_step

logger = logging.getLogger(__name__)


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
        Kernel width; ``None``: ``1 / (n_features * X.var())`` for rbf (scikit-learn's
        ``"scale"``, from the initial sample; ``1 / n_features`` on standardised data),
        the median heuristic (:func:`dkernel.kernels.estimate_gamma`) for laplacian,
        ``1 / n_features`` otherwise. The rule was the best label-free default measured
        on five datasets (``benchmarks/results/defaults.md``). To choose gamma, grid-search
        it with :func:`kernel_alignment_score` (``score`` is not comparable across widths),
        or use :func:`select_gamma`. One width serves every feature: features on very
        different scales (counts next to fractions, say) should be standardised first
        (``sklearn.preprocessing.StandardScaler``), or the largest ones decide alone.
    degree, coef0 : float
        Polynomial/sigmoid parameters.
    kernel_params : dict, default=None
    batch_size : int, default=256
        Rows per batch (the paper's b), drawn with replacement; capped at n. Small
        batches with a short window (the defaults) make many cheap steps: an iteration
        costs about ``b (b + k tau)`` kernel values, so halving both b and ``tau`` makes
        one about 4x cheaper, and the early stop comes after a similar share of an epoch
        (the settings section of ``benchmarks/kernel_kmeans.py`` compares them).
    tau : int or None, default=50
        Truncation (τ): each center keeps the fewest most recent batches whose assigned
        rows sum to at least ``tau``. A single batch that gave a center more than ``tau``
        rows is kept whole (batches are never split), so a center holds at most
        ``tau + batch_size`` points. ``None``: no truncation, computed in :meth:`fit` by
        the recursive inner-product update over all n rows (the paper's dynamic program,
        O(n (b + k)) time per iteration and O(n k) memory). This variant holds all of X
        in memory: dask/store input above ``max_data_bytes`` is refused.
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
        Most iterations of :meth:`fit` (see ``max_no_improvement`` for the early stop).
    tol : float, default=0.0
        Stop when the improvement of the batch objective ``f_B(C_i) - f_B(C_{i+1})``
        falls below ``tol`` (the paper's ε); ``0`` turns this test off.
    max_no_improvement : int or None, default=10
        Stop when the smoothed batch objective has not reached a new minimum in this
        many consecutive iterations (scikit-learn's ``MiniBatchKMeans`` rule): the
        exponentially weighted average ``F_i = (1 - a) F_{i-1} + a f_B(C_i)`` with
        ``a = min(1, 2 b / (n + 1))``, so that the average spans about half an epoch.
        ``None`` runs ``max_iter`` iterations (unless ``tol`` stops earlier).
    reassignment_ratio : float in [0, 1], default=0.0
        Re-seed starved centers (scikit-learn's ``MiniBatchKMeans`` rule): after each
        iteration, a center whose accumulated weight (the rows it has won, weighted)
        is below ``reassignment_ratio`` times the largest center's restarts as a single
        point of the batch, drawn without replacement in proportion to ``w D^2`` (its
        weight times its feature-space distance to the nearest center, as k-means++
        draws; scikit-learn draws uniformly), and its weight is set to the smallest
        weight among the other centers so it is not re-seeded at once. At most half a
        batch of centers are re-seeded per iteration. The draws come from
        ``random_state``: the model stays the same for any input chunking. ``0``
        turns it off.
    init : {"k-means++", "random"} or ndarray of shape (n_clusters, n_features)
        Initial centers as single points: k-means++ in feature space
        (:func:`kernel_kmeans_plusplus`) or random rows of an initial sample, or the
        given points (not with the graph kernels).
    init_size : int, default=None
        Rows sampled (without replacement) for the initialisation; ``None`` means
        ``min(n, max(3 * batch_size, 10 * n_clusters))``.
    n_init : int, default=3
        Seedings tried on the initial sample; the one with the lowest k-means++
        potential is kept (scikit-learn's ``MiniBatchKMeans`` also tries 3). The
        seedings cost ``n_init`` times ``O(init_size k)`` kernel values, a small share
        of a fit's ``O(max_iter b (k tau + b))``.
    random_state : int, RandomState or None
        Seeds the initialisation, the gamma sample and every batch; the same seed
        gives the same model for NumPy, dask (any chunking) or zarr input.
    verbose : int, default=0
        ``>= 1``: a progress bar for :meth:`fit` and :meth:`partial_fit` (iterations
        done and the current batch objective, a note while numba compiles on first
        use, the reason of an early stop), then one for the labels pass (chunks of dask
        or store input, rows of NumPy input), shown in a terminal (stderr) or a notebook
        without any logging set up; the batch objective is also logged every ``verbose``
        iterations (INFO).
    checkpoint : str or os.PathLike, default=None
        A file (``.npz``) where :meth:`fit` saves its full state every
        ``checkpoint_every`` iterations, atomically (:func:`dkernel.data.save_checkpoint`).
        A later ``fit`` with the same parameters, data and checkpoint resumes from it and
        returns exactly the model an uninterrupted fit gives (same labels and centers,
        bit for bit). A checkpoint saved with other parameters (or data of another shape,
        dtype or weights) raises a ``DKernelError``. The file is removed when the fit
        ends. Truncated numeric-kernel fits only (``tau`` not None, not ``"knn"``/``"heat"``).
        X is not fingerprinted: resume on the same data.
    checkpoint_every : int, default=10
        Iterations between two checkpoints.
    max_data_bytes : int, default=2**30
        The variants that need all of X in memory (``tau=None``, the graph kernels, and
        :meth:`partial_fit`, whose batch becomes center support) refuse dask/zarr/store
        input larger than this many bytes; raise it to allow them. The default truncated
        fit streams batches and never holds X.

    Attributes
    ----------
    labels_ : ndarray or dask array of shape (n_samples,)
        Nearest center of each training row (one pass over the data). For dask, zarr or
        store input a dask array held by the workers (each chunk read and assigned in one
        task; under a distributed client its parts stay in the workers' memory): nothing of
        n rows comes to the client.
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
    phase_stats_ : dict
        The same phases' accounting (:func:`dkernel.runtime.accounting`): wall, client
        CPU, summed worker task time, blocking round trips, bytes to and from the client.
    kernel_evals_ : dict
        ``n_kernel_evals_`` of ``fit`` split into ``init``, ``iterations`` and ``labels``
        (``iterations / n_iter_`` is the cost of one iteration).
    n_features_in_ : int

    Notes
    -----
    One kernel block per iteration: ``K(B, S)`` between the batch and the union S of all
    windows (s <= k (tau + b) points) gives every center's inner products
    ``<phi(x), C_j>``; the only other kernel values are ``K(B_j, B_j)`` within each
    center's new rows (``K(B, B)`` when ``tol > 0``, for the objective after the step).
    Each window keeps the kernel matrix G_j of its points: the new rows extend it with
    their columns of ``K(B, S)`` and ``K(B_j, B_j)``, truncation drops its leading rows
    and columns, and the norm is ``<C_j, C_j> = c_j^T G_j c_j`` (the paper's incremental
    update ``(1-a)^2 <C_j, C_j> + 2a(1-a) <cm(B_j), C_j> + a^2 <cm(B_j), cm(B_j)>``
    and the truncation correction, made exact: no cancellation in float32). An iteration
    thus costs ``b s + sum_j b_j^2`` kernel evaluations, O(k (b + tau) b) independent of
    n, plus O(s d) to restack the support and O(sum_j m_j^2) for the norms. The support
    is centred once (rbf) and its squared norms kept per point, so no kernel call copies
    it. Memory on the driver is O(k (tau + b) (d + tau + b)) plus two prefetch groups of
    at most 64 MiB of batch rows (fetched in a background thread while the previous group
    is used, one task per touched chunk). The initial sample is fetched once and gives
    both the k-means++ seeding and the default gamma. ``labels_``/``inertia_``
    take one blockwise pass (``map_blocks`` over row chunks, on the workers). Nothing
    n x n is ever formed.

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
        batch_size=256,
        tau=50,
        learning_rate="beta",
        renormalize=True,
        max_iter=200,
        tol=0.0,
        max_no_improvement=10,
        reassignment_ratio=0.0,
        init="k-means++",
        init_size=None,
        n_init=3,
        random_state=None,
        verbose=0,
        checkpoint=None,
        checkpoint_every=10,
        max_data_bytes=2**30,
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
        self.max_no_improvement = max_no_improvement
        self.reassignment_ratio = reassignment_ratio
        self.init = init
        self.init_size = init_size
        self.n_init = n_init
        self.random_state = random_state
        self.verbose = verbose
        self.checkpoint = checkpoint
        self.checkpoint_every = checkpoint_every
        self.max_data_bytes = max_data_bytes

    # ---------------------------------------------------------------- checks
    _parameter_table = {
        "n_clusters": POSITIVE_INT,
        "batch_size": POSITIVE_INT,
        "tau": POSITIVE_INT_OR_NONE,
        "max_iter": POSITIVE_INT,
        "tol": NON_NEGATIVE,
        "max_no_improvement": POSITIVE_INT_OR_NONE,
        "reassignment_ratio": {"low": 0.0, "high": 1.0},
        "n_init": POSITIVE_INT,
        "init_size": POSITIVE_INT_OR_NONE,
        "verbose": NON_NEGATIVE_INT,
        "checkpoint_every": POSITIVE_INT,
        "max_data_bytes": NON_NEGATIVE_INT,
    }

    def _check_other_params(self) -> None:
        _check_rate(self.learning_rate)
        if self.checkpoint is not None:
            if not isinstance(self.checkpoint, (str, os.PathLike)):
                raise DKernelError(f"checkpoint must be a path, got {self.checkpoint!r}")
            if self.tau is None or self._is_graph():
                raise DKernelError(
                    "checkpoint supports the truncated fit with a numeric kernel "
                    "(tau not None, kernel not 'knn'/'heat')"
                )
        if not isinstance(self.renormalize, (bool, np.bool_)):
            raise DKernelError(f"renormalize must be True or False, got {self.renormalize!r}")

    # ------------------------------------------------------------------- fit
    @named_worker_errors
    def fit(self, X, y=None, sample_weight=None, *, callback=None):
        """Fit on X (NumPy, dask array or zarr store path), ``max_iter`` batch iterations.

        Parameters
        ----------
        X : array-like, dask array, or path of a zarr store, shape (n_samples, n_features)
        y : ignored
        sample_weight : array-like of shape (n_samples,), default=None
            Weighted centers and objective (e.g. coreset weights).
        callback : callable, default=None
            Called after each iteration as ``callback(n_iter, objective)``: the iterations
            done so far and the batch objective ``f_B`` of the last one (after the
            iteration's checkpoint, if one was due). An exception it raises stops the fit
            and propagates; a checkpointed fit then resumes from its last checkpoint.

        Returns
        -------
        self
        """
        X, is_dask, n, w, rng, dtype = self._start_fit(X, sample_weight, lazy_unit=True)
        self._rng, rule = rng, step_rule(self)
        # batches of at most n rows: the one place batch_size is capped
        loop = Loop(self.max_iter, min(self.batch_size, n), self.max_no_improvement, callback)
        seeding = self._seeding()
        with accounting(distributed_client() if is_dask else None) as acc:
            params = self.get_params(deep=False)
            ckpt = open_checkpoint(
                self.checkpoint, self.checkpoint_every, params, X, dtype, sample_weight, w
            )
            saved = None if ckpt is None else ckpt.saved
            # dask input: the setup reads the batches' chunks (one pass over the touched ones)
            width = X.numblocks[0] if is_dask else None
            with timer("setup", logger), phase("setup", width=width):
                rows, stream, oracle, mu = self._fit_setup(
                    X, is_dask, dtype, rng, loop, seeding, saved
                )
            enabled = progress_enabled(self.verbose)
            bar = Progress(self.max_iter, type(self).__name__, enabled=enabled)
            try:
                with timer("init", logger), phase("init"), bar.compiling("kernel k-means init"):
                    start = initialise(oracle, stream, saved, w, rng, dtype, bar, seeding)
                with timer("iterations", logger), phase("iterations"), ONE_BLAS_THREAD:
                    if self.tau is None:
                        self._state = None  # partial_fit after this fit starts afresh
                        st, (labels, inertia), centers = fit_untruncated(
                            oracle, rows, start.Z, w, stream.batches, bar, rule, loop, rng
                        )
                        fitted = labels_like_rows(labels, X, is_dask), inertia
                    else:
                        st = self._state = iteration_state(
                            oracle, start, stream, rng, self.gamma_, mu
                        )
                        fit_windows(st, oracle, stream.batches, w, bar, rule, loop=loop, ckpt=ckpt)
                        centers = export_windows(st.windows)
                    self._set_centers(oracle, *centers, rows.graph)
            finally:
                stream.batches.close()
                bar.close()
            self.history_, self.n_iter_ = st.history, st.n_iter
            with timer("labels", logger), phase("labels"):
                if self.tau is not None:
                    fitted = self._fit_labels(X, is_dask, w)
            if ckpt is not None:  # the fit is whole: its checkpoint is spent
                ckpt.remove()
            self.labels_, self.inertia_ = fitted[0], float(fitted[1])
            labels_evals = n * self.center_coef_.shape[1] if self.tau is not None else 0
            self.n_kernel_evals_, self.kernel_evals_ = kernel_evals(
                oracle.evals, start, labels_evals
            )
            warn_never_won(st.wins, st.n_iter)
        self.phase_stats_ = acc.report()
        self.timings_ = {name: row["wall"] for name, row in self.phase_stats_.items()}
        return self

    def _fit_setup(self, X, is_dask, dtype, rng, loop, seeding, saved):
        """The setup phase of :meth:`fit`: ``(rows, stream, oracle, mu)``, the rows held in
        memory (:func:`~._fit.hold_rows`), the batch stream with the initial sample, the
        kernel oracle and the centre of its calls (:meth:`_fit_oracle`)."""
        graph, n = self._is_graph(), int(X.shape[0])
        rows = hold_rows(
            X, is_dask, dtype, graph=graph, tau=self.tau, max_bytes=self.max_data_bytes
        )
        # the initial sample seeds the centers and gives gamma where the rule needs rows
        need = isinstance(self.init, str) or (not graph and self._kernel_spec(None).gamma is None)
        n_head = sample_size(n, loop.batch_size, seeding) if need and saved is None else None
        stream = open_stream(X, is_dask, dtype, rng, loop, rows, n_head=n_head, saved=saved)
        return (rows, stream, *self._fit_oracle(X, rows.graph, rng, stream.sample, saved, dtype))

    def _fit_oracle(self, X, X_rows, rng, sample, saved, dtype):
        """The kernel oracle of a fit, its kernel set as ``_spec``/``gamma_`` (and
        ``_graph``), and the centre ``mu`` of its kernel calls: the graph kernel built on
        ``X_rows``, gamma resolved on ``sample`` (where the rule needs rows) and the width
        checked against the rows, or the kernel as a checkpoint (``saved``) holds it."""
        if X_rows is not None:
            return use_graph_kernel(self, X_rows), None
        if saved is None:
            centre = sample if sample is not None else np.asarray(self.init, dtype)
            self._fit_spec(X, rng, sample, centre)
            mu = centre.mean(axis=0, dtype=np.float64).astype(dtype)
            return NumericOracle(self._spec, mu), mu
        self._spec = self._kernel_spec(None)
        if saved["gamma"] is not None:
            self._spec = self._spec._replace(gamma=float(saved["gamma"]))
        self.gamma_ = self._spec.gamma
        mu = saved["mu"].astype(dtype)
        return NumericOracle(self._spec, mu), mu

    # ------------------------------------------------------------ partial_fit
    @named_worker_errors
    def partial_fit(self, X, y=None, sample_weight=None):
        """One iteration on the batch X (all its rows); the first call also initialises.

        With ``tau=None`` the windows are never truncated (the support grows by the batch
        each call). Graph kernels are transductive and not supported here. The batch
        becomes center support, so it is held in memory: dask/store input above
        ``max_data_bytes`` is refused (read once, values checked in that read).
        ``inertia_`` is then the objective of this call's rows,
        ``sum_i w_i ||phi(x_i) - C_{label_i}||^2`` on the centers they were assigned to
        (before this call's update: ``history_[-1]`` times the rows' total weight; the
        step's own kernel block, no second pass).

        Returns
        -------
        self
        """
        first = getattr(self, "_state", None) is None
        if self._is_graph():
            raise DKernelError(
                f"partial_fit does not support the transductive kernel {self.kernel!r}"
            )
        if first:
            self.check_params()
        X, is_dask = self._validate_X(X, reset=first)
        n = X.shape[0]
        if first:
            self._check_data_params(n)
        w = _check_weights(sample_weight, n)
        if first:
            dtype = np.float32 if X.dtype == np.float32 else np.float64
        else:
            dtype = self.center_support_.dtype
        X = _gather_checked(X, is_dask, dtype, self.max_data_bytes, "partial_fit")
        X = np.ascontiguousarray(X, dtype=dtype)
        rule = step_rule(self)
        if first:
            self.__dict__.pop("_loaded_sizes", None)  # a loaded model's; this is a new one
            self._rng = getattr(self, "_rng", None) or check_random_state(self.random_state)
            size = min(n, self.init_size or n)
            sub = np.sort(self._rng.choice(n, size, replace=False)) if size < n else np.arange(n)
            sample = X[sub]
            oracle, mu = self._fit_oracle(X, None, self._rng, sample, None, dtype)
            Z = seed_centers(oracle, sample, w[sub], self._rng, dtype, self._seeding())
            self._state = WindowState(new_windows(oracle, Z), self._rng, gamma=self.gamma_, mu=mu)
        else:
            oracle = NumericOracle(self._spec, self._state.mu)
        state = self._state
        with (
            progress(
                1,
                f"{type(self).__name__}.partial_fit",
                enabled=progress_enabled(self.verbose),
            ) as bar,
            bar.compiling("kernel k-means iteration"),
            ONE_BLAS_THREAD,
        ):
            window_step(state, oracle, X, w, rule)
            bar.update(1, iteration=state.n_iter, objective=state.history[-1])
        self.history_, self.n_iter_ = state.history, state.n_iter
        self._set_centers(oracle, *export_windows(state.windows))
        self.n_kernel_evals_ = int(oracle.evals)
        # the objective of this call's rows, from the step's own kernel block (no second pass)
        self.inertia_ = float(self.history_[-1]) * float(np.sum(w))
        return self

    def _seeding(self) -> Seeding:
        """The initialisation parameters, as :func:`~._fit.seed_centers` takes them."""
        return Seeding(self.init, self.n_clusters, self.n_init, self.init_size)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = False
        return tags
