"""Truncated mini-batch kernel k-means (Jourdan & Schwartzman, 2024)."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import logging
import numbers
import os
import warnings
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

import dask.array as da
import numpy as np
from sklearn.base import ClusterMixin, TransformerMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import check_random_state

from .._base import _BaseKernelEstimator
from .._defaults import setting
from .._params import NON_NEGATIVE, NON_NEGATIVE_INT, POSITIVE_INT, POSITIVE_INT_OR_NONE
from .._validation import DKernelError
from ..data import draw_indices, load_checkpoint, save_checkpoint
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
from . import _numba as _nb
from ._blocks import _TILE_ROWS, NumericOracle
from ._common import (
    SUPPORTED_KERNELS,
    _check_rate,
    _check_weights,
    _fetch_checked,
    _gather_checked,
    _KernelCentersMixin,
)
from ._init import _init_centers

logger = logging.getLogger(__name__)


@dataclasses.dataclass
class _Run:
    """What one ``fit`` carries from its setup to its end."""

    n: int
    b: int  # rows per batch
    w: np.ndarray  # sample weights
    rng: np.random.RandomState
    ckpt_params: dict | None = None
    state: dict | None = None  # the checkpoint resumed from
    start: int = 0  # iterations already done (resumed)
    batch_seed: int = 0
    batches: Iterator | None = None  # (indices, rows) per batch, ``_batch_stream``
    head: np.ndarray | None = None  # indices of the initial sample
    sample: np.ndarray | None = None  # its rows
    X_rows: np.ndarray | None = None  # the rows a graph kernel was built on
    X_mem: np.ndarray | None = None  # all rows, for the untruncated update
    evals0: int = 0  # kernel values counted before / after the initialisation
    evals1: int = 0


def _indices(idx):
    """A graph kernel's batches are row indices."""
    return idx


def _row_fetcher(X, X_mem, is_dask, dtype):
    """The rows of a batch: one checked read of the touched chunks (dask/store input
    not held in memory), a copy out of memory otherwise."""
    if is_dask and X_mem is None:
        return functools.partial(_fetch_checked, X, dtype=dtype)
    X_local = X if X_mem is None else X_mem
    return lambda idx: np.ascontiguousarray(X_local[idx], dtype=dtype)


class _Window:
    """One center's sliding window over recent batches (oldest first).

    ``pts``/``pc``/``sq``/``count``: per batch, its points (rows as given, or indices),
    the same rows as the kernel calls take them (centred by the oracle's ``mu``; the same
    arrays when nothing is centred), their squared norms (None for kernels without
    norms) and how many; ``c``:
    the coefficients of all points, flat; ``gram``: the kernel matrix of the window's
    points (float64), kept across iterations so that the center norm ``c^T G c`` needs
    no kernel evaluation.
    """

    __slots__ = ("c", "count", "gram", "norm", "pc", "pts", "seen", "sq")

    def __init__(self, pts, pc, sq, gram):
        self.pts = [pts]
        self.pc = [pc]
        self.sq = [sq]
        self.count = [len(pts)]
        self.c = np.ones(len(pts))
        self.gram = np.asarray(gram, dtype=np.float64)
        self.norm = float(_nb.bilinear(self.gram, self.c, self.c))
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
        X, is_dask, n, w, rng, dtype = self._start_fit(X, sample_weight, lazy_unit=True)
        with accounting(distributed_client() if is_dask else None) as acc:
            self._fit_accounted(X, is_dask, n, w, rng, dtype, sample_weight)
        self.phase_stats_ = acc.report()
        self.timings_ = {name: row["wall"] for name, row in self.phase_stats_.items()}
        return self

    def _fit_accounted(self, X, is_dask, n, w, rng, dtype, sample_weight):
        """:meth:`fit` after its checks, each phase counted by the accounting around it."""
        self._rng = rng
        run = _Run(n=n, b=min(self.batch_size, n), w=w, rng=rng)
        if self.checkpoint is not None:
            run.ckpt_params = self._checkpoint_params(n, X.shape[1], dtype, sample_weight, w)
            run.state = load_checkpoint(self.checkpoint, params=run.ckpt_params)
            run.start = 0 if run.state is None else int(run.state["n_iter"])
        with timer("setup", logger), phase("setup"):
            oracle = self._setup(run, X, is_dask, dtype)
        bar = Progress(self.max_iter, type(self).__name__, enabled=progress_enabled(self.verbose))
        try:
            with (
                timer("init", logger),
                phase("init"),
                bar.compiling("kernel k-means init"),
            ):
                Z = self._initialise(run, oracle, dtype, bar)
            with timer("iterations", logger), phase("iterations"), ONE_BLAS_THREAD:
                if self.tau is None:
                    self._windows = None  # partial_fit after this fit starts afresh
                    X_all = np.arange(n) if oracle.graph else run.X_mem
                    labels, dist = self._fit_untruncated(
                        oracle, X_all, w, Z, run.batches, run.X_rows, bar
                    )
                    if is_dask:  # the same type of result as the truncated fit's
                        labels = da.from_array(labels, chunks=(X.chunks[0],))
                    fitted = labels, float(np.dot(np.asarray(w), dist))
                else:
                    self._fit_truncated(run, oracle, Z, bar)
        finally:
            run.batches.close()
            bar.close()
        with timer("labels", logger), phase("labels"):
            if self.tau is not None:
                fitted = self._fit_labels(X, is_dask, w)
        if self.checkpoint is not None:  # the fit is whole: its checkpoint is spent
            with contextlib.suppress(FileNotFoundError):
                os.remove(self.checkpoint)
        self._record_fit(run, oracle, *fitted)
        self._warn_never_won()

    def _setup(self, run, X, is_dask, dtype):
        """The oracle, the batch stream and the initial sample of a fit."""
        n, b, rng = run.n, run.b, run.rng
        if self._is_graph():
            run.X_rows = _gather_checked(X, is_dask, dtype, self.max_data_bytes, "a graph kernel")
            oracle = self._graph_oracle(run.X_rows, n)
            self._mu = None
            fetch = _indices
            need_head = isinstance(self.init, str)
        else:
            if self.tau is None:  # the untruncated update holds X: one read, up front
                run.X_mem = _gather_checked(
                    X, is_dask, dtype, self.max_data_bytes, "tau=None (no truncation)"
                )
            fetch = _row_fetcher(X, run.X_mem, is_dask, dtype)
            need = isinstance(self.init, str) or self._kernel_spec(None).gamma is None
            need_head = need and run.state is None
        head = self._init_sample(n, b, rng) if need_head else None
        # one read of the touched chunks gives the seeding sample, which is also the
        # median heuristic's sample, and the first group of batches; batch indices
        # come from their own generator, so the grouping cannot change the model
        state = run.state
        run.batch_seed = rng.randint(0, 2**31 - 1) if state is None else state["batch_seed"]
        run.batches = _batch_stream(
            n,
            b,
            np.random.RandomState(int(run.batch_seed)),
            fetch,
            X.shape[1],
            dtype,
            prefetch=is_dask and run.X_mem is None and not self._is_graph(),
            max_batches=self.max_iter - run.start,
            head=head,
            skip=run.start,  # a resumed fit: the batches already used are drawn, not read
        )
        if head is not None:
            run.head, run.sample = next(run.batches)
        if self._is_graph():
            return oracle
        if state is None:
            return self._numeric_oracle(X, rng, run.sample, dtype)
        self._spec = self._kernel_spec(None)
        if state["gamma"] is not None:
            self._spec = self._spec._replace(gamma=float(state["gamma"]))
        self._mu = state["mu"].astype(dtype)
        self.gamma_ = self._spec.gamma
        return NumericOracle(self._spec, self._mu)

    def _numeric_oracle(self, X, rng, sample, dtype):
        """Resolve gamma (from ``sample`` where the rule needs rows), check the width
        against the rows and centre the kernel calls on their mean."""
        centre = sample if sample is not None else np.asarray(self.init, dtype)
        self._fit_spec(X, rng, sample, centre)
        self._mu = centre.mean(axis=0, dtype=np.float64).astype(dtype)
        return NumericOracle(self._spec, self._mu)

    def _seed_centers(self, oracle, sample, w_sample, rng, dtype):
        """The initial centers as single points: seeded on ``sample`` or given."""
        if not isinstance(self.init, str):
            return np.asarray(self.init, dtype=dtype)
        pick = _init_centers(
            oracle, sample, w_sample, self.n_clusters, rng, init=self.init, n_init=self.n_init
        )
        return sample[pick]

    def _initialise(self, run, oracle, dtype, bar):
        """Seed the centers (returned), or restore a checkpoint's state (returns None)."""
        run.evals0 = oracle.evals
        if run.state is not None:
            self._restore_state(run.state, run.rng, oracle)
            run.evals0, run.evals1 = 0, int(run.state["evals_init"])
            bar.update(run.start, objective=self.history_[-1])
            return None
        w_head = None if run.head is None else run.w[run.head]
        Z = self._seed_centers(oracle, run.sample, w_head, run.rng, dtype)
        self.history_ = []
        self.n_iter_ = 0
        self._wins = np.zeros(self.n_clusters, dtype=np.int64)
        run.evals1 = oracle.evals
        return Z

    def _fit_truncated(self, run, oracle, Z, bar):
        """The truncated iterations (from ``run.start`` on a resumed fit)."""
        if run.state is None:
            self._windows = self._new_windows(oracle, Z)
        plateau = self._plateau(run.n, run.b)
        for it in range(run.start, self.max_iter):
            idx_b, Xb = next(run.batches)
            note = bar.compiling("kernel k-means iteration")
            with note if it == run.start else contextlib.nullcontext():
                below_tol = self._window_step(oracle, Xb, run.w[idx_b], it)
            stop = plateau(self.history_[-1]) or below_tol
            bar.update(1, objective=self.history_[-1])
            more = it + 1 < self.max_iter
            if run.ckpt_params is not None and not stop and more:
                if (it + 1) % self.checkpoint_every == 0:
                    self._save_state(run, oracle)
            if stop:
                if more:
                    bar.stop_early(_stop_reason(below_tol, self.max_no_improvement))
                break
        self._export_windows(oracle, run.X_rows)

    def _record_fit(self, run, oracle, labels, inertia):
        """The fitted labels, inertia and kernel-evaluation counts."""
        self.labels_ = labels
        self.inertia_ = float(inertia)
        labels_evals = run.n * self.center_coef_.shape[1] if self.tau is not None else 0
        self.n_kernel_evals_ = int(oracle.evals + labels_evals)
        self.kernel_evals_ = {
            "init": int(run.evals1 - run.evals0),
            "iterations": int(oracle.evals - run.evals1),
            "labels": int(labels_evals),
        }

    # ------------------------------------------------------------ checkpoints
    def _checkpoint_params(self, n, d, dtype, sample_weight, w):
        """What a checkpoint is tied to: the parameters that shape the fit, and the data's
        shape, dtype and weights (not ``verbose``, not the checkpoint options)."""
        params = self.get_params(deep=False)
        for key in ("checkpoint", "checkpoint_every", "verbose"):
            params.pop(key)
        rs = params["random_state"]
        if rs is not None and not isinstance(rs, numbers.Integral):
            params["random_state"] = type(rs).__name__  # an instance: its state is saved
        if not isinstance(params["init"], str):
            params["init"] = hashlib.sha256(np.ascontiguousarray(params["init"])).hexdigest()
        params["data"] = {"n": n, "d": int(d), "dtype": np.dtype(dtype).name}
        if sample_weight is not None:
            params["data"]["weights"] = hashlib.sha256(np.ascontiguousarray(w)).hexdigest()
        return params

    def _save_state(self, run, oracle):
        """Save everything the rest of the fit depends on, after ``n_iter_`` iterations."""
        rs = run.rng.get_state()
        state = {
            "n_iter": int(self.n_iter_),
            "batch_seed": int(run.batch_seed),
            "history": np.asarray(self.history_, dtype=np.float64),
            "wins": self._wins,
            "gamma": self.gamma_,
            "mu": self._mu,
            "evals": int(oracle.evals),
            "evals_init": int(run.evals1 - run.evals0),
            "rng_keys": rs[1],
            "rng_rest": [rs[0], int(rs[2]), int(rs[3]), float(rs[4])],
        }
        for j, win in enumerate(self._windows):
            state[f"w{j}_count"] = np.asarray(win.count, dtype=np.int64)
            state[f"w{j}_pts"] = np.concatenate(win.pts)
            if any(pc is not pts for pc, pts in zip(win.pc, win.pts)):
                state[f"w{j}_pc"] = np.concatenate(win.pc)
            if win.sq[0] is not None:
                state[f"w{j}_sq"] = np.concatenate(win.sq)
            state[f"w{j}_c"] = win.c
            state[f"w{j}_gram"] = win.gram
            state[f"w{j}_scalars"] = [float(win.norm), float(win.seen)]
        with timer("checkpoint", logger):
            save_checkpoint(self.checkpoint, state, params=run.ckpt_params)

    def _restore_state(self, state, rng, oracle):
        """The inverse of :meth:`_save_state`: windows, counters, history, generators."""
        name, pos, has_gauss, cached = state["rng_rest"]
        rng.set_state((name, state["rng_keys"], pos, has_gauss, cached))
        self.n_iter_ = int(state["n_iter"])
        self.history_ = [float(v) for v in state["history"]]
        self._wins = state["wins"].astype(np.int64)
        oracle.evals = int(state["evals"])

        def split(a, count):
            return np.split(a, np.cumsum(count)[:-1])

        self._windows = []
        for j in range(self.n_clusters):
            count = state[f"w{j}_count"]
            win = _Window.__new__(_Window)
            win.count = [int(c) for c in count]
            win.pts = split(state[f"w{j}_pts"], count)
            pc = state.get(f"w{j}_pc")
            win.pc = list(win.pts) if pc is None else split(pc, count)
            sq = state.get(f"w{j}_sq")
            win.sq = [None] * len(count) if sq is None else split(sq, count)
            win.c = state[f"w{j}_c"]
            win.gram = state[f"w{j}_gram"]
            win.norm, win.seen = (float(v) for v in state[f"w{j}_scalars"])
            self._windows.append(win)

    def _init_sample(self, n, b, rng):
        """Sorted indices of the initial sample (without replacement)."""
        size = self.init_size or max(3 * b, 10 * self.n_clusters)
        size = max(min(n, size), self.n_clusters)
        return np.sort(draw_indices(n, size, rng, replace=False))

    def _plateau(self, n, b):
        """The ``max_no_improvement`` rule: a callable fed each batch objective in turn,
        True once the smoothed objective has gone that many iterations without a new
        minimum. A resumed fit replays its saved history, so it stops where an
        uninterrupted fit does."""
        rule = _Plateau(self.max_no_improvement, min(1.0, 2.0 * b / (n + 1)))
        for f in getattr(self, "history_", None) or []:
            rule(f)
        return rule

    def _rate(self, W_j, W_tot, seen):
        """The step ``alpha_j`` of a center that won weight ``W_j`` of the batch's ``W_tot``
        (``seen``: the weight it had won before)."""
        lr = _check_rate(self.learning_rate)
        if lr == "beta":
            return float(np.sqrt(W_j / W_tot))
        if lr == "sklearn":
            return float(W_j / (seen + W_j))
        return lr

    def _starved(self, seen, wb, mind):
        """The centers to re-seed (``reassignment_ratio``) after an iteration: their
        indices, the batch positions that seed them (drawn from ``self._rng`` in
        proportion to ``wb * mind``, without replacement) and the accumulated weight
        they restart from; None when there is nothing to re-seed."""
        if not self.reassignment_ratio:
            return None
        seen = np.asarray(seen, dtype=np.float64)
        starved = np.flatnonzero(seen < self.reassignment_ratio * seen.max())
        p = wb * np.maximum(mind, 0.0)
        # at most half a batch, and never more than the rows that can be drawn
        limit = min(len(wb) // 2, int(np.count_nonzero(p > 0)))
        if starved.size > limit:
            starved = np.sort(starved[np.argsort(seen[starved], kind="stable")[:limit]])
        if starved.size == 0:
            return None
        pos = self._rng.choice(len(wb), size=starved.size, replace=False, p=p / p.sum())
        rest = np.delete(seen, starved)
        logger.debug("re-seeding %d starved center(s): %s", starved.size, starved.tolist())
        return starved, pos, float(rest.min())

    def _record_iteration(self, it, f_before):
        self.n_iter_ += 1
        self.history_.append(f_before)
        if self.verbose and (it + 1) % self.verbose == 0:
            logger.info("iteration %d: batch objective %.6g", it + 1, f_before)

    # --------------------------------------------------------- truncated path
    def _new_windows(self, oracle, Z):
        Zc, z_sq = oracle.prep(Z)
        wins = []
        for j in range(len(Z)):
            sq = None if z_sq is None else z_sq[j : j + 1]
            gram = oracle.kernel_p(Zc[j : j + 1], sq)
            wins.append(_Window(Z[j : j + 1], Zc[j : j + 1], sq, gram))
        return wins

    def _stack(self, oracle=None):
        """Stacked support (as the kernel calls take it when ``oracle`` is given, the rows
        as given otherwise), its squared norms, the per-center segment pointers and the
        coefficients: one copy per iteration."""
        which = "pts" if oracle is None else "pc"
        S = np.concatenate([p for win in self._windows for p in getattr(win, which)])
        S_sq = None
        if oracle is not None:
            if self._windows[0].sq[0] is not None:
                S_sq = np.concatenate([q for win in self._windows for q in win.sq])
        ptr = np.zeros(len(self._windows) + 1, dtype=np.int64)
        ptr[1:] = np.cumsum([len(win.c) for win in self._windows])
        coef = np.concatenate([win.c for win in self._windows]).astype(np.float64)
        return S, S_sq, ptr, coef

    def _window_step(self, oracle, Xb, wb, it) -> bool:
        """One truncated iteration on the batch ``Xb``; returns True to stop (tol)."""
        k = self.n_clusters
        S, S_sq, ptr, coef = self._stack(oracle)
        Xc, x_sq = oracle.prep(Xb)
        Kxs = oracle.kernel_p(Xc, x_sq, S, S_sq)  # the one block: batch x every window
        inner = np.empty((len(Xb), k))
        _nb.center_inner(Kxs, ptr, coef, inner)
        diag_b = oracle.diag(Xb)
        norms = np.array([win.norm for win in self._windows])
        labels = np.empty(len(Xb), dtype=np.int64)
        mind = np.empty(len(Xb))
        f_before, W_tot = _assign(diag_b, inner, norms, wb, labels, mind)
        W = np.bincount(labels, weights=wb, minlength=k)
        count = np.bincount(labels, minlength=k)
        self._wins += count
        new = _sort_by_center(Xb, Xc, x_sq, wb, labels, count)
        Kbb = oracle.kernel_p(Xc, x_sq) if self.tol > 0 else None
        # each center's new rows among themselves (the k blocks in parallel, or from Kbb)
        if Kbb is None:
            Kjjs = oracle.kernel_blocks(new.pc, new.sq, new.bounds)
        else:
            Kjjs = [Kbb[np.ix_(new.rows(j), new.rows(j))] for j in range(k)]
        inner_new = inner.copy() if Kbb is not None else None
        for j in range(k):
            if count[j] == 0 or W[j] <= 0.0:
                continue  # empty cluster: the center stays as it is
            win = self._windows[j]
            a = self._rate(W[j], W_tot, win.seen)
            win.seen += W[j]
            m_drop = self._move_window(win, a, W[j], new, j, Kxs, ptr[j], Kjjs[j])
            if inner_new is not None and Kbb is not None:  # both set when tol > 0
                c, m_keep = win.c, len(win.c) - count[j]
                cols = slice(ptr[j] + m_drop, ptr[j + 1])
                inner_new[:, j] = Kxs[:, cols] @ c[:m_keep] + Kbb[:, new.rows(j)] @ c[m_keep:]
        plan = self._starved([win.seen for win in self._windows], wb, mind)
        if plan is not None:
            starved, pos, seen = plan
            for j, p, win in zip(starved, pos, self._new_windows(oracle, Xb[pos])):
                win.seen = seen
                self._windows[j] = win
                if inner_new is not None and Kbb is not None:
                    inner_new[:, j] = Kbb[:, p]
        self._record_iteration(it, f_before)
        if inner_new is None:
            return False
        norms = np.array([win.norm for win in self._windows])
        self._f_after, _ = _assign(diag_b, inner_new, norms, wb, labels, mind)
        return f_before - self._f_after < self.tol

    def _move_window(self, win, a, W_j, new, j, Kxs, col0, Kjj) -> int:
        """Move one center a step ``a`` towards the mean of its new rows (``new``'s
        segment ``j``, total weight ``W_j``) and truncate its window; returns how many
        of its old points it dropped."""
        tau = np.inf if self.tau is None else self.tau
        r0, r1 = new.bounds[j], new.bounds[j + 1]
        # drop whole oldest batches while the rest (the new one included) holds >= tau
        counts = [*win.count, r1 - r0]
        n_drop, total = 0, sum(counts)
        while n_drop < len(counts) - 1 and total - counts[n_drop] >= tau:
            total -= counts[n_drop]
            n_drop += 1
        m_drop = sum(counts[:n_drop])
        c = np.concatenate([win.c[m_drop:] * (1 - a), a * new.w[r0:r1] / W_j])
        # the kept window's Gram, the new rows x kept window (from the block), Kjj
        G = _nb.window_gram(win.gram, m_drop, Kxs, new.rows(j), col0 + m_drop, Kjj)
        if n_drop and self.renormalize:
            c /= c.sum()
        win.gram, win.c = G, c
        win.norm = max(float(_nb.bilinear(G, c, c)), 0.0)
        del win.pts[:n_drop], win.pc[:n_drop], win.sq[:n_drop], win.count[:n_drop]
        win.pts.append(new.pts[r0:r1])
        win.pc.append(new.pc[r0:r1])
        win.sq.append(None if new.sq is None else new.sq[r0:r1])
        win.count.append(r1 - r0)
        return m_drop

    def _export_windows(self, oracle, X_rows=None):
        S, _, ptr, coef = self._stack()
        C = np.zeros((self.n_clusters, len(S)))
        for j in range(self.n_clusters):
            C[j, ptr[j] : ptr[j + 1]] = coef[ptr[j] : ptr[j + 1]]
        norms = np.array([win.norm for win in self._windows])
        self._set_centers(oracle, S, C, norms, X_rows)

    # ------------------------------------------------------- untruncated path
    def _fit_untruncated(self, oracle, X_all, w, Z, batches, X_rows, bar):
        """Recursive inner-product update over all n rows (tau=None)."""
        n, k = len(X_all), self.n_clusters
        diag_all = oracle.diag(X_all)
        P = np.empty((n, k))  # <phi(x_i), C_j>
        for r0 in range(0, n, _TILE_ROWS):
            P[r0 : r0 + _TILE_ROWS] = oracle.kernel(X_all[r0 : r0 + _TILE_ROWS], Z)
        st = _Recursive(P, oracle.diag(Z), A=np.zeros((k, n)), AZ=np.eye(k), seen=np.zeros(k))
        b = min(self.batch_size, n)
        labels = np.empty(b, dtype=np.int64)
        mind = np.empty(b)
        plateau = self._plateau(n, b)
        for it in range(self.max_iter):
            idx, Xb = next(batches)
            wb, diag_b = w[idx], diag_all[idx]
            inner = np.ascontiguousarray(st.P[idx])
            f_before, W_tot = _assign(diag_b, inner, st.norms, wb, labels, mind)
            self._recursive_step(oracle, X_all, st, idx, Xb, inner, wb, W_tot, labels)
            plan = self._starved(st.seen, wb, mind)
            if plan is not None:
                self._reseed_recursive(oracle, X_all, st, idx, diag_all, plan)
            self._record_iteration(it, f_before)
            bar.update(1, objective=f_before)
            below_tol = False
            if self.tol > 0:
                f_after, _ = _assign(
                    diag_b, np.ascontiguousarray(st.P[idx]), st.norms, wb, labels, mind
                )
                below_tol = f_before - f_after < self.tol
            if below_tol or plateau(f_before):
                if it + 1 < self.max_iter:
                    bar.stop_early(_stop_reason(below_tol, self.max_no_improvement))
                break
        points = np.concatenate([X_all, Z.astype(X_all.dtype) if not oracle.graph else Z])
        self._set_centers(oracle, points, np.hstack([st.A, st.AZ]), st.norms, X_rows)
        labels_all = np.empty(n, dtype=np.int64)
        dist_all = np.empty(n)
        _nb.assign_nearest(diag_all, st.P, st.norms, labels_all, dist_all)
        return labels_all, dist_all

    def _recursive_step(self, oracle, X_all, st, idx, Xb, inner, wb, W_tot, labels):
        """Move the centers towards the batch (its rows assigned to ``labels``, ``inner``
        their inner products with the centers): update every row's inner products, the
        norms and the coefficients over the rows."""
        k = self.n_clusters
        Kbb = oracle.kernel(Xb, Xb)
        W, cross, selfk, count = _nb.batch_center_terms(Kbb, inner, labels, wb, k)
        self._wins += count
        a = np.zeros(k)
        for j in range(k):
            if count[j] and W[j] > 0:
                a[j] = self._rate(W[j], W_tot, st.seen[j])
                st.seen[j] += W[j]
        Wd = np.where(W > 0, W, 1.0)
        norms = (1 - a) ** 2 * st.norms + 2 * a * (1 - a) * cross / Wd + a * a * selfk / Wd**2
        st.norms = np.maximum(norms, 0.0)
        vals = a[labels] * wb / Wd[labels]
        Wb = np.zeros((len(idx), k))
        Wb[np.arange(len(idx)), labels] = vals
        st.A *= (1 - a)[:, None]
        st.AZ *= (1 - a)[:, None]
        np.add.at(st.A, (labels, idx), vals)
        st.P *= (1 - a)[None, :]
        for r0 in range(0, len(X_all), _TILE_ROWS):
            st.P[r0 : r0 + _TILE_ROWS] += oracle.kernel(X_all[r0 : r0 + _TILE_ROWS], Xb) @ Wb

    def _reseed_recursive(self, oracle, X_all, st, idx, diag_all, plan):
        """The untruncated fit's re-seeding: each starved center becomes its single batch
        row (coefficient 1 on that row, its inner products with every row recomputed)."""
        starved, pos, seen = plan
        rows = idx[pos]
        Xr = X_all[rows]
        for r0 in range(0, len(X_all), _TILE_ROWS):
            st.P[r0 : r0 + _TILE_ROWS, starved] = oracle.kernel(X_all[r0 : r0 + _TILE_ROWS], Xr)
        st.A[starved] = 0.0
        st.A[starved, rows] = 1.0
        st.AZ[starved] = 0.0
        st.norms[starved] = diag_all[rows]
        st.seen[starved] = seen

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
        first = getattr(self, "_windows", None) is None
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
        if first:
            self.__dict__.pop("_loaded_sizes", None)  # a loaded model's; this is a new one
            self._rng = getattr(self, "_rng", None) or check_random_state(self.random_state)
            size = min(n, self.init_size or n)
            sub = np.sort(self._rng.choice(n, size, replace=False)) if size < n else np.arange(n)
            sample = X[sub]
            oracle = self._numeric_oracle(X, self._rng, sample, dtype)
            Z = self._seed_centers(oracle, sample, w[sub], self._rng, dtype)
            self._windows = self._new_windows(oracle, Z)
            self.history_, self.n_iter_ = [], 0
            self._wins = np.zeros(self.n_clusters, dtype=np.int64)
        else:
            oracle = NumericOracle(self._spec, self._mu)
        with (
            progress(
                1,
                f"{type(self).__name__}.partial_fit",
                enabled=progress_enabled(self.verbose),
            ) as bar,
            bar.compiling("kernel k-means iteration"),
            ONE_BLAS_THREAD,
        ):
            self._window_step(oracle, X, w, self.n_iter_)
            bar.update(1, iteration=self.n_iter_, objective=self.history_[-1])
        self._export_windows(oracle)
        self.n_kernel_evals_ = int(oracle.evals)
        # the objective of this call's rows, from the step's own kernel block (no second pass)
        self.inertia_ = float(self.history_[-1]) * float(np.sum(w))
        return self

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


def _stop_reason(below_tol: bool, patience) -> str:
    if below_tol:
        return "the batch objective improved by less than tol"
    return f"no new best smoothed batch objective in {patience} iterations"


class _Plateau:
    """Early stop on the exponentially weighted average of the batch objective."""

    __slots__ = ("alpha", "best", "ewa", "patience", "since")

    def __init__(self, patience, alpha):
        self.patience, self.alpha = patience, alpha
        self.ewa, self.best, self.since = None, np.inf, 0

    def __call__(self, f) -> bool:
        if self.patience is None:
            return False
        self.ewa = f if self.ewa is None else (1.0 - self.alpha) * self.ewa + self.alpha * f
        if self.ewa < self.best:
            self.best, self.since = self.ewa, 0
        else:
            self.since += 1
        return self.since >= self.patience


def _batch_stream(
    n, batch_size, rng, fetch, d, dtype, *, prefetch=False, max_batches=None, head=None, skip=0
):
    """Yield ``(indices, points)`` per iteration; rows of several batches fetched at once.

    Indices are drawn one batch at a time from ``rng`` in the calling thread (so they do
    not depend on the grouping or the prefetch); a group of batches (at most the setting
    ``kmeans.prefetch-bytes`` of rows, balanced over ``max_batches``) is gathered in one pass
    over the touched chunks (rows in memory, ``prefetch=False``: one batch per fetch).
    ``head``: indices fetched with the first group and yielded first (the initial sample:
    one read serves both). ``prefetch``: the next group is fetched in a background thread
    while this one is used (dask/store input), never more than ``max_batches`` need.
    ``skip``: batches drawn and discarded first (never read): a resumed fit continues the
    same sequence. Call ``close()`` when done.
    """
    for _ in range(skip):
        draw_indices(n, batch_size, rng)
    per_batch = max(1, batch_size * d * np.dtype(dtype).itemsize)
    # rows in memory (no prefetch) are gathered a batch at a time: a group only pays off as
    # one pass over a store's chunks, and a large gather costs fresh pages
    group = max(1, int(setting("kmeans.prefetch-bytes")) // per_batch) if prefetch else 1
    n_groups = None
    if max_batches is not None:
        n_groups = -(-max_batches // group)
        group = -(-max_batches // n_groups)

    def draw():
        return [draw_indices(n, batch_size, rng) for _ in range(group)]

    def load(idxs, head=None):
        parts = idxs if head is None else [head, *idxs]
        rows = fetch(np.concatenate(parts))
        h = 0 if head is None else len(head)
        return idxs, rows[h:], rows[:h]

    pool = ThreadPoolExecutor(1, thread_name_prefix="dkernel-prefetch") if prefetch else None
    try:
        cur = load(draw(), head)
        done = 1
        if head is not None:
            yield head, cur[2]
        while True:
            nxt = None
            if pool is not None and (n_groups is None or done < n_groups):
                nxt = pool.submit(load, draw())
            idxs, rows, _ = cur
            for g, idx in enumerate(idxs):
                yield idx, rows[g * batch_size : (g + 1) * batch_size]
            cur = nxt.result() if nxt is not None else load(draw())
            done += 1
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)


@dataclasses.dataclass
class _Recursive:
    """The untruncated fit's state: every row's inner products with the centers, the
    centers' norms, their coefficients over the rows and over the initial points, and
    the weight each center has won (the "sklearn" rate)."""

    P: np.ndarray
    norms: np.ndarray
    A: np.ndarray
    AZ: np.ndarray
    seen: np.ndarray


class _SortedBatch(NamedTuple):
    """A batch sorted by center (stable: rows keep their batch order), so each center's
    new rows are one slice, kept in its window as a view: ``pts`` the rows as given,
    ``pc`` as the kernel calls take them, ``sq`` their squared norms, ``w`` weights,
    ``order`` the batch positions, ``bounds`` the k + 1 segment ends."""

    pts: np.ndarray
    pc: np.ndarray
    sq: np.ndarray | None
    w: np.ndarray
    order: np.ndarray
    bounds: np.ndarray

    def rows(self, j):
        """Batch positions of center ``j``'s new rows."""
        return self.order[self.bounds[j] : self.bounds[j + 1]]


def _sort_by_center(Xb, Xc, x_sq, wb, labels, count) -> _SortedBatch:
    order = np.argsort(labels, kind="stable")
    bounds = np.concatenate([[0], np.cumsum(count)])
    Xs = Xb[order]
    Xcs = Xc[order] if Xc is not Xb else Xs
    sqs = None if x_sq is None else x_sq[order]
    return _SortedBatch(Xs, Xcs, sqs, wb[order], order, bounds)


def _assign(diag_b, inner, norms, wb, labels, mind) -> tuple[float, float]:
    """Assign a batch to its nearest centers (``labels``, ``mind`` filled in place);
    returns its objective f_B and total weight."""
    _nb.assign_nearest(diag_b, inner, norms, labels, mind)
    W_tot = float(wb.sum())
    return _batch_objective(wb, mind, W_tot), W_tot


def _batch_objective(wb, mind, W_tot: float) -> float:
    """Weighted mean feature-space distance of a batch to its nearest centers (f_B)."""
    return float(np.dot(wb, mind) / W_tot) if W_tot > 0 else 0.0
