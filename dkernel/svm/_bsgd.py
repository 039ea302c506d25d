"""Budgeted SGD kernel SVM (BSGD): the estimator. numba kernels are in ``_budget.py``, the
rounds on the workers in ``_distributed.py``, model files in ``_io.py``."""

from __future__ import annotations

import contextlib
import functools
import itertools
import logging
import numbers
import os
from typing import Any, NamedTuple

import dask
import dask.array as da
import numpy as np
from sklearn.base import ClassifierMixin
from sklearn.metrics import accuracy_score
from sklearn.utils import check_random_state
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_is_fitted

from .._base import _BaseKernelEstimator, open_labelled, read_classes, read_inputs
from .._defaults import setting
from .._model_io import MAX_MODEL_BYTES, fitted_spec, read_npz, set_feature_names
from .._params import NON_NEGATIVE, POSITIVE_INT, POSITIVE_INT_OR_NONE, check_table, options
from .._validation import (
    DKernelError,
    check_scalar,
    column_moments,
    feature_stats_error,
    is_dask_array,
)
from ..data import chunk_bounds, load_checkpoint, save_checkpoint, take_rows
from ..kernels import KERNEL_CODES, KERNELS, KernelSpec, check_kernel_scale, pair_gram
from ..runtime import (
    accounting,
    distributed_client,
    named_worker_errors,
    phase,
    progress,
    progress_enabled,
    timer,
)
from . import _budget as nb
from . import _distributed as dist
from . import _refit
from ._io import RAW_ARRAYS, check_model, model_header, write_model
from ._stream import (
    BLOCK_ROWS,
    BlockTask,
    Standardizer,
    block_plan,
    class_indices,
    prefetch,
    read_block,
)

logger = logging.getLogger(__name__)

#: Rows per block when scoring (bounds the kernel block's memory).
_PREDICT_ROWS = 8192
#: How merge screens partners: "golden" (a golden-section search per partner) or "lookup"
#: (a precomputed table of the binary argmax h(m, k), bilinear interpolation; multi-class
#: models always use golden section). Either way the chosen partner's h is refined by golden
#: section to ~1e-9. The table saves most of the screening's exp calls at the same accuracy
#: (benchmarks/results/bsgd_notes.md), so it is the default.
_MERGE_SEARCH = "lookup"
#: Default number of shards of a distributed fit: one per ``_SHARD_ROWS`` rows, at least
#: ``_MIN_SHARDS`` and at most ``_MAX_SHARDS`` (a function of n only, so the model never
#: depends on the number of workers; never more than one per row).
_SHARD_ROWS = 1 << 17
_MIN_SHARDS = 8
_MAX_SHARDS = 256
#: An averaging start no clock reaches.
_NEVER = 1 << 62
#: Stopping rule of the refit (``||grad|| <= tol ||grad(0)||`` per class) and its Newton
#: steps at most.
_REFIT_TOL = 1e-3
_REFIT_MAX_ITER = 50
#: The multi-class loss of ``refit=True`` (benchmarks/results/bsgd_refit_cs.md).
_REFIT_DEFAULT = "ovr"
#: ``alpha=None`` in a first ``partial_fit``: SGDClassifier's default.
_STREAM_ALPHA = 1e-4
#: At most this many bytes of rows in the sample that ``partial_fit(refit=True)`` solves over.
_RESERVOIR_BYTES = 64 * 2**20
#: ``probability=True``: the share of the rows held out for Platt scaling, and at most this
#: many rows (two parameters per score column need few; the rest train the model).
_CALIBRATION_SHARE = 0.1
_CALIBRATION_ROWS = 50_000


class _FitPlan(NamedTuple):
    """What :meth:`BudgetedSVC.fit` resolves once before training (see ``_fit_plan``)."""

    X: Any
    y: Any
    w: Any
    weighted: bool
    is_dask: bool
    classes: np.ndarray
    held: tuple | None
    n: int
    d: int
    n_cols: int
    alpha: float
    seed: int
    use_dist: bool
    client: Any
    ckpt: _Checkpoint | None
    saved: dict | None
    y_map: Any
    scaler: Standardizer | None
    head: tuple | None
    spec: KernelSpec

    @property
    def resumes_refit(self) -> bool:
        """The checkpoint was saved in the refit (the SGD passes' model is in it)."""
        return _saved_in_refit(self.saved)


def _saved_in_refit(saved: dict | None) -> bool:
    return saved is not None and saved.get("stage") == "refit"


def _is_bool(v) -> bool:
    return isinstance(v, (bool, np.bool_))


def _is_auto(v) -> bool:
    return isinstance(v, str) and v == "auto"


class BudgetedSVC(ClassifierMixin, _BaseKernelEstimator):
    """Kernel SVM trained by budgeted stochastic gradient descent (BSGD).

    Kernel SGD on ``P(w) = alpha/2 ||w||^2 + 1/N sum_t hinge(w; x_t, y_t)`` with at most
    ``budget`` support vectors: whenever an update makes B + 1, a budget maintenance step
    (removal, projection or merging) brings the model back to B while keeping the weight
    degradation ``||Delta_t||`` small. Data of any size, streamed from NumPy, dask arrays or a
    zarr store; on a Dask cluster every worker trains (``distributed``).

    Parameters
    ----------
    budget : int, default=500
        Maximum number of support vectors B (>= 2).
    maintenance : {"merge", "project", "remove"}, default="merge"
        Budget maintenance. ``"merge"`` needs a kernel ``exp(-gamma ||x - z||^p)`` (``rbf``
        or ``laplacian``: the kernel table's ``merge_power``); other kernels are refused.
    algorithm : {"pegasos", "norma", "perceptron"}, default="pegasos"
        Learning rate eta_t: ``1/(alpha t)``, ``eta0/sqrt(t)`` or ``eta0`` (margin
        perceptron, where ``alpha`` is ignored, i.e. 0).
    alpha : float or None, default=None
        Regularisation (the paper's lambda; as ``alpha`` of scikit-learn's
        ``SGDClassifier``): > 0 for pegasos, >= 0 for norma; the refit's too. None: in
        :meth:`fit`, ``1 / (4 n_samples)`` for the SGD passes (``C = 4`` in SVC's terms)
        and ``1 / (10 n_samples)`` for the refit (``C = 10``: the exact solve over fixed
        support vectors gains from a weaker regulariser than the SGD passes,
        benchmarks/results/bsgd_notes.md); ``1e-4`` in a first :meth:`partial_fit`.
        Recorded in ``alpha_`` and ``refit_alpha_``.
    eta0 : float, default=1.0
        Step size of norma and perceptron (> 0).
    radius : float or None, default=None
        Project w onto the ball ``||w|| <= radius`` after each update (the perceptron's U);
        None: no projection.
    kernel, gamma, degree, coef0, kernel_params
        As :func:`dkernel.kernels.pairwise_kernels`. ``gamma=None``: scikit-learn's
        ``"scale"``, ``1 / (n_features * X.var())`` on a row sample for rbf (the L1
        median heuristic for laplacian, ``1 / n_features`` for the other kernels), the rule
        all dkernel estimators share; a sequential fit takes the sample from its first block
        (read once, also trained on), a distributed one samples 1000 rows. ``1 /
        n_features`` with ``standardize=True`` (the same rule on standardised data).
        Callables and ``precomputed`` are not supported (the loop is compiled).
    fit_intercept : bool, default=False
        Learn an intercept as the weight of a constant feature of value 1 appended to phi(x)
        (it shrinks with w like the other weights, as in liblinear; budget maintenance never
        touches it). Off by default, as in the paper and its C++ toolbox: in one pass of
        Pegasos the constant feature (worth ``k = 1`` against every example, where RBF values
        between standardised points are far smaller) takes a step of ``eta_t`` on every
        margin violation and costs accuracy (benchmarks/results/bsgd_notes.md).
    standardize : bool, default=False
        Standardise every feature, ``(x - mean) / std`` (std 0 -> 1), with statistics from
        one pass over the training data in :meth:`fit` (blockwise for dask and store input;
        the first batch in a first :meth:`partial_fit`), stored in ``feature_mean_`` and
        ``feature_scale_`` and applied to every block read in training and prediction (the
        support vectors are in standardised units). Turn it on when features have unequal or
        small scales. Off by default: it helps most on badly scaled data but costs accuracy
        where features are already comparable (a9a's 0/1 indicators, letter's integer grid),
        and no cheap statistic of the data told the two apart
        (benchmarks/results/bsgd_notes.md).
    max_iter : int, default=5
        Epochs (passes over the data) in :meth:`fit`, as ``SGDClassifier``'s ``max_iter``;
        1 for the one-pass streaming algorithm of the paper.
    average : bool or int, default=True
        Return the averaged iterate (Polyak/ASGD averaging of the kernel expansion) instead
        of the last one: True averages over the last epoch (the second half of the pass when
        ``max_iter=1``), an int ``k`` from step ``k`` on (as ``SGDClassifier``'s ``average``; in a
        distributed fit steps count on the merged model's clock, ``n_samples / n_shards``
        per epoch), False not at all. Steps are weighted by their
        index counted from the start of averaging (``w_bar = sum_t t w_t / sum_t t``;
        Lacoste-Julien, Schmidt & Bach 2012), so late iterates count most. Training goes on
        from the last iterate (``partial_fit`` too).
    shuffle : bool, default=True
        Visit the rows in a seeded random order (sequential fits: virtual blocks of 65536
        rows in random order, rows within each block permuted; distributed fits: each
        shard's rows permuted per epoch; independent of the storage chunking).
    distributed : {"auto", True, False}, default="auto"
        ``False``: one sequential stream (the paper's algorithm, read on the client with a
        bounded prefetch; a given seed always gives the same model). ``True``: rounds on
        fixed shards, one task per shard per round on the workers of the current Dask
        client (or here without one), the partial models merged by a tree (see Notes).
        ``"auto"``: True for dask/zarr/store input of at least 16777216 (2^24) rows when
        a distributed client is active, else False; either way the refit (``refit=True``)
        of dask/zarr/store input then runs on the workers. Below that size the sequential
        stream chooses the better support and, on the embedded 2-worker cluster, is as
        fast or faster: 1.6 s against 7.8 s at 10^6 rows (B = 200), 19.2 s against 18.4 s
        at 10^7 (B = 500) (benchmarks/results/bsgd_notes.md).
    refit : bool or {"ovr", "weston_watkins", "crammer_singer"}, default=True
        After the SGD passes, keep the support vectors Z they chose and solve for the
        coefficients (and intercept) exactly over all training rows: ``min alpha/2
        beta^T K_ZZ beta + 1/n sum_i w_i max(0, 1 - y_i f(x_i))^2`` (the squared hinge;
        the RKHS norm of the SGD passes, ``alpha`` as given or, with ``alpha=None``,
        ``1 / (10 n)``), by a truncated Newton method
        warm-started from the SGD coefficients, to a gradient norm ``1e-3`` of its value
        at zero, 50 steps at most (see :mod:`dkernel.svm._refit`). Each solver step is
        one pass over the rows; in a distributed fit the rows stay on the workers
        (features ``k(x, Z)`` cached there) and only vectors of size B x classes travel.
        Multi-class problems: ``"ovr"`` solves one binary problem per class (its column
        against the others); ``"weston_watkins"`` one joint problem whose loss per row
        sums the squared hinges of the margins between the true class and each other
        class; ``"crammer_singer"`` one joint problem with only the largest of them (the
        loss the SGD passes take), which is not smooth: its solve rarely meets the stop
        and takes the 50 steps, several times the passes of the others. True is
        ``"ovr"``: the joint losses were not more accurate on enough of the benchmark sets
        to be worth their passes (benchmarks/results/bsgd_refit_cs.md). Binary problems
        have one solve either way. False: the SGD coefficients (averaged or last), as in
        the paper. ``partial_fit`` never refits.
    refit_rows : int or "auto", default="auto"
        The refit solves over at most this many rows: beyond, over a uniform random sample
        of them (seeded by the fit's seed, drawn per row range, so it depends neither on
        the workers nor on the chunking), each standing for ``n / refit_rows`` rows (the
        regulariser stays ``alpha``'s). ``"auto"``: 256 per support vector (128,000 at
        B = 500: every row of the shared benchmark sets). The sampled objective is an
        unbiased estimate of the full one for every coefficient vector; a pass of the
        solver costs O(rows x B).
    n_shards : int or None, default=None
        Shards of a distributed fit: ranges of consecutive rows of equal size, cut
        wherever the rows fall (a store of one chunk still gives every worker a shard).
        None: one per 2^17 rows, at least 8 and at most 256 (at most one per row). Fixed
        by the number of rows, so the model depends neither on the number of workers nor
        on the chunking; a cluster uses at most as many workers as there are shards.
    n_rounds : int, default=8
        Rounds per epoch of a distributed fit (each shard passes over 1/n_rounds of its
        rows per round, then the partial models are merged).
    split_every : int, default=2
        Fan-in of the merge tree of a distributed fit.
    probability : bool, default=False
        Enable :meth:`predict_proba` (as scikit-learn's ``SVC``): :meth:`fit` holds out a
        random 10 % of the rows (at most 50000; seeded by ``random_state`` when it is an
        int, else by 0), trains on the others, and fits Platt's sigmoid
        ``1 / (1 + exp(A f + B))`` of each score column on the held-out rows' scores
        (``probA_``, ``probB_``). The model then differs from the ``probability=False``
        one, which trains on every row. To calibrate a model on data of your own choice,
        wrap it in ``sklearn.calibration.CalibratedClassifierCV`` instead (NumPy input).
    random_state : int, RandomState or None
    checkpoint : str, os.PathLike or None, default=None
        A file (``.npz``) where :meth:`fit` saves its state every ``checkpoint_every``
        blocks (sequential) or rounds (distributed), and in the refit as it starts and
        after every Newton step (with the SGD passes' model, so a fit resumed there skips
        them), written atomically. A fit that finds a checkpoint of the same parameters and
        data shape resumes from it and gives exactly the model of an uninterrupted fit
        (with ``random_state=None`` the saved seed is reused); one of other parameters is
        refused with a ``DKernelError``. Removed when the fit completes. ``partial_fit``
        ignores it.
    checkpoint_every : int, default=1
        Blocks (of 65536 rows, sequential fits) or rounds (distributed fits) between saves.
    verbose : int, default=0
        > 0: progress bars on stderr or as notebook widgets: the SGD passes (rows done,
        support vectors and the running share of margin violations; distributed: rounds
        done, epoch and support vectors), then the refit (Newton steps, the gradient
        against its stop), and a note while numba compiles; also logs each block or round
        at INFO.

    Attributes
    ----------
    support_vectors_ : ndarray of shape (n_sv, n_features)
    dual_coef_ : ndarray of shape (n_sv, n_cols)
        Coefficients; ``n_cols = n_classes`` for multi-class (Crammer-Singer) and 1 for
        binary problems (the decision function of ``classes_[1]``, labels coded -1/+1). The
        averaged model's when ``average`` is on.
    intercept_ : ndarray of shape (n_cols,)
    classes_ : ndarray
    n_iter_ : int
        Epochs run.
    t_ : int
        SGD steps taken (examples seen). The learning-rate clock of a distributed fit is
        that of the merged model (the mean clock of the shards).
    weight_degradation_ : float
        Average ``||Delta_t||`` over the maintenance steps (the paper's E-bar); 0 if none.
    n_maintenance_ : int
        Number of budget maintenance steps (a distributed fit's merge tree included).
    gamma_ : float
        The kernel bandwidth used.
    alpha_ : float
        The regularisation of the SGD passes.
    refit_alpha_ : float or None
        The regularisation of the refit (None: no refit).
    feature_mean_, feature_scale_ : ndarray of shape (n_features,) or None
        The standardisation (``standardize=True``), else None.
    distributed_ : bool
        Whether the last fit ran distributed.
    probA_, probB_ : ndarray of shape (n_cols,) or None
        Platt scaling of each score column (``probability=True``), else None.
    timings_ : dict
        Seconds of the last ``fit`` per phase: ``setup``, then ``stream`` (sequential) or
        ``compile``, ``shards``, ``prefix``, ``rounds`` (distributed), ``refit parts``,
        ``refit solve``, ``calibration``.
    phase_stats_ : dict
        The same phases' accounting (:func:`dkernel.runtime.accounting`): wall, client
        CPU, summed worker task time, blocking round trips, bytes to and from the client,
        the most tasks the phase can run at once.

    Notes
    -----
    Per example O(B d) for the scores plus, once the budget is full, O(B) for removal and
    merging (every partner is screened, for binary models through a precomputed table of
    the best h over (m, k), for multi-class ones by a short golden-section search on
    ``k^(h^2) = exp(h^2 log k)``; the chosen partner's h is refined by golden section; kernel
    values between SVs are kept in a B x B matrix) and
    O(B^2) for projection (the inverse of ``K + 1e-6 I`` over the SVs is updated by rank-one
    steps and rebuilt every B maintenance steps or when a pivot is not safely positive).
    Averaging costs O(1) per step (the averaged sums are kept lazily). Memory O(B^2 + B d)
    for the model plus the prefetched blocks.

    Refit: O(B^3) for the eigendecomposition of K_ZZ, then per Newton step a few
    (typically 3-10) Hessian-vector passes and one gradient pass at the full step (a
    line-search pass too when some class needs a shorter step), each
    O(n B c) over the cached features ``k(x, Z)`` (n B floats, kept when they take at most
    2 GiB, else recomputed from the rows in every pass); all classes share each pass. The
    rows are split into at least 8 parts of equal size (one per 65536 rows beyond), summed
    by a fixed tree in a fixed order, so the result is the same bits with any number of
    workers.

    Distributed fit: shards fixed at fit start from the row count, each loaded once into a
    worker's memory; per round one task per shard runs the same numba pass from the global
    model over its next rows (seeds from (seed, epoch, shard)); the partial models are
    combined by a tree (fan-in ``split_every``): weighted union of SVs (weights
    ``n_k / sum n``, scale folded into the coefficients, identical SVs summed), then budget
    maintenance down to B; the root seeds the next round and the client waits only for the
    last one. Per round O(n_shards B d) floats travel (the models, never rows). Shards and
    rounds trade accuracy for parallelism: averaging many shards' models costs accuracy on
    some data (benchmarks/results/bsgd_notes.md). Each round re-merges (n_shards - 1) B
    support vectors in the tree, so small data sets train faster sequentially.

    References
    ----------
    Z. Wang, K. Crammer and S. Vucetic, "Breaking the curse of kernelization: budgeted
    stochastic gradient descent for large-scale SVM training", JMLR 13 (2012) 3103-3131.
    M. Zinkevich, M. Weimer, A. Smola and L. Li, "Parallelized stochastic gradient descent",
    NIPS 2010. S. Lacoste-Julien, M. Schmidt and F. Bach, "A simpler approach to obtaining an
    O(1/t) convergence rate for the projected stochastic subgradient method", 2012.

    Examples
    --------
    >>> from dkernel.data import make_checkerboard
    >>> from dkernel.svm import BudgetedSVC
    >>> X, y = make_checkerboard(2000, random_state=0)
    >>> clf = BudgetedSVC(budget=50, gamma=2.0, alpha=1e-3, random_state=0).fit(X, y)
    >>> clf.support_vectors_.shape[0] <= 50
    True
    """

    _supported_kernels = frozenset(KERNEL_CODES)
    _gamma_rule = "scale"
    #: The learner's state after a fit (None after ``load``: rebuilt from ``_raw``).
    _state: nb.BSGDState | None = None
    #: Rows per virtual block (the unit of shuffling); tests shrink it.
    _block_rows = BLOCK_ROWS

    def __init__(
        self,
        *,
        budget=500,
        maintenance="merge",
        algorithm="pegasos",
        alpha=None,
        eta0=1.0,
        radius=None,
        kernel="rbf",
        gamma=None,
        degree=3,
        coef0=1.0,
        kernel_params=None,
        fit_intercept=False,
        standardize=False,
        max_iter=5,
        average=True,
        shuffle=True,
        distributed="auto",
        refit=True,
        refit_rows="auto",
        n_shards=None,
        n_rounds=8,
        split_every=2,
        probability=False,
        random_state=None,
        checkpoint=None,
        checkpoint_every=1,
        verbose=0,
    ):
        self.budget = budget
        self.maintenance = maintenance
        self.algorithm = algorithm
        self.alpha = alpha
        self.eta0 = eta0
        self.radius = radius
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.kernel_params = kernel_params
        self.fit_intercept = fit_intercept
        self.standardize = standardize
        self.max_iter = max_iter
        self.average = average
        self.shuffle = shuffle
        self.distributed = distributed
        self.refit = refit
        self.refit_rows = refit_rows
        self.n_shards = n_shards
        self.n_rounds = n_rounds
        self.split_every = split_every
        self.probability = probability
        self.random_state = random_state
        self.checkpoint = checkpoint
        self.checkpoint_every = checkpoint_every
        self.verbose = verbose

    # ------------------------------------------------------------------ validation
    _parameter_table = {
        "budget": {"kind": numbers.Integral, "low": 2},
        "alpha": {**NON_NEGATIVE, "allow_none": True},
        "eta0": {"low": 0.0, "low_inclusive": False},
        "radius": {"low": 0.0, "low_inclusive": False, "allow_none": True},
        "max_iter": POSITIVE_INT,
        "n_shards": POSITIVE_INT_OR_NONE,
        "n_rounds": POSITIVE_INT,
        "split_every": {"kind": numbers.Integral, "low": 2},
        "checkpoint_every": POSITIVE_INT,
        "refit": options(True, False, *_refit.OBJECTIVES),
    }
    _choices = {
        "maintenance": tuple(nb.MAINTENANCE_CODES),
        "algorithm": tuple(nb.ALGORITHM_CODES),
    }
    _flags = ("fit_intercept", "standardize", "shuffle", "probability")
    #: Parameters that take an int of at least ``low``, or the other form named.
    _int_or = {
        "average": (_is_bool, 1),
        "verbose": (_is_bool, 0),
        "refit_rows": (_is_auto, 1),
    }

    def check_params(self) -> None:
        """Check the parameters, before any data is read.

        ``fit`` and ``partial_fit`` call this first; the CLI calls it before it starts a
        cluster. Raises a :class:`~dkernel.DKernelError` naming the first bad parameter.
        """
        for name, choices in self._choices.items():
            v = getattr(self, name)
            if not isinstance(v, str) or v not in choices:
                raise DKernelError(f"{name} must be one of {', '.join(choices)}; got {v!r}")
        check_table(self, self._parameter_table)
        if self.algorithm == "pegasos" and self.alpha is not None and self.alpha <= 0:
            raise DKernelError(
                "alpha must be > 0 for algorithm='pegasos' (its rate is 1/(alpha t))"
            )
        for name in self._flags:
            if not isinstance(getattr(self, name), (bool, np.bool_)):
                raise DKernelError(f"{name} must be True or False; got {getattr(self, name)!r}")
        for name, (other_form, low) in self._int_or.items():
            if not other_form(getattr(self, name)):
                check_scalar(getattr(self, name), name, kind=numbers.Integral, low=low)
        if self.distributed not in ("auto", True, False):
            raise DKernelError(
                f"distributed must be 'auto', True or False; got {self.distributed!r}"
            )
        if self.checkpoint is not None and not isinstance(self.checkpoint, (str, os.PathLike)):
            raise DKernelError(
                f"checkpoint must be a path or None; got {type(self.checkpoint).__name__}"
            )
        if callable(self.kernel) or self.kernel == "precomputed":
            raise DKernelError(
                f"BudgetedSVC needs a named kernel ({', '.join(KERNEL_CODES)}); callables "
                "and 'precomputed' are not supported"
            )
        spec = self._kernel_spec(None)  # unknown names raise here
        if self.maintenance == "merge" and KERNELS[str(spec.kernel)].merge_power is None:
            mergeable = " or ".join(k.name for k in KERNELS.values() if k.merge_power)
            raise DKernelError(
                f"maintenance='merge' cannot merge support vectors of kernel {spec.kernel!r}: "
                f"the merge needs k(x, z) = exp(-gamma ||x - z||^p) ({mergeable}); with "
                f"kernel {spec.kernel!r} use maintenance='remove' or 'project'"
            )

    def _check_state_memory(self, d: int, n_cols: int) -> None:
        """Refuse a budget whose model state (the (B+1)^2 kernel matrix of the support
        vectors, and its inverse for projection) does not fit this machine's free memory,
        before anything is read."""
        import psutil

        B1 = int(self.budget) + 1
        square = 2 if self.maintenance == "project" else 1
        need = 8 * B1 * (square * B1 + d + 3 * n_cols + 3)
        free = psutil.virtual_memory().available
        if need > free:
            what = " and its inverse" if square == 2 else ""
            raise DKernelError(
                f"budget={self.budget} needs {need / 2**30:,.1f} GiB for the model state "
                f"(the {B1:,} x {B1:,} kernel matrix of the support vectors{what}), more "
                f"than the {free / 2**30:,.1f} GiB free here: choose a smaller budget "
                "(hundreds to a few thousand support vectors)"
            )

    def _samples_gamma(self) -> bool:
        """Whether resolving gamma needs rows of the data (the base's rule on raw data)."""
        spec = self._kernel_spec(None)
        width = KERNELS[str(spec.kernel)].distance is not None
        return spec.gamma is None and not self.standardize and width

    def _resolve_spec(self, X, *, sample=None) -> KernelSpec:
        """The kernel with gamma resolved (the base's rule, on ``sample`` when given;
        ``1 / n_features`` on data that will be standardised)."""
        spec = self._kernel_spec(X)
        if self._samples_gamma():
            spec = self._resolve_gamma(X, sample=sample)
        return spec

    def _config(self, spec: KernelSpec, alpha: float, n: int) -> nb.BSGDConfig:
        algo = nb.ALGORITHM_CODES[self.algorithm]
        pw = KERNELS[str(spec.kernel)].merge_power or 2  # unused unless merging
        lookup = _MERGE_SEARCH == "lookup"
        if self.average is False:
            avg_mode, avg_start = nb.AVG_OFF, 0
        elif self.average is True:  # the last epoch, or the second half of a single pass
            T = int(self.max_iter) * int(n)
            avg_mode, avg_start = nb.AVG_LINEAR, T - min(int(n), T // 2) + 1
        else:
            avg_mode, avg_start = nb.AVG_LINEAR, int(self.average)
        return nb.BSGDConfig(
            kind=KERNEL_CODES[str(spec.kernel)],
            gamma=float(spec.gamma or 0.0),
            degree=float(spec.degree),
            coef0=float(spec.coef0),
            algo=algo,
            alpha=0.0 if algo == nb.PERCEPTRON else float(alpha),
            eta0=float(self.eta0),
            radius=float(self.radius or 0.0),
            maint=nb.MAINTENANCE_CODES[self.maintenance],
            icpt=1.0 if self.fit_intercept else 0.0,
            ridge=nb.PROJECT_RIDGE,
            pw=pw,
            search=nb.LOOKUP if lookup else nb.GOLDEN,
            T=nb.lookup_table(pw) if lookup else np.zeros((2, 2)),
            budget=int(self.budget),
            avg_mode=avg_mode,
            avg_start=avg_start,
        )

    # ------------------------------------------------------------------ input
    def _prepare(self, X, y, sample_weight, *, reset: bool):
        """(X, is_dask, y, w, classes) from the floor's one reader (:func:`read_inputs`):
        NumPy checked now, dask lazily as it is read (its weights in one pass); ``classes``:
        the store's recorded classes when y is the store's own labels, else None."""
        got = read_inputs(
            X, y, sample_weight, needs_y=True, weights="lazy", estimator=self, reset=reset
        )
        return got.X, got.is_dask, got.y, got.sample_weight, got.classes

    @staticmethod
    def _classes_of(y) -> np.ndarray:
        """The sorted labels (:func:`read_classes`)."""
        return read_classes(y, token="svm-classes")

    def _use_distributed(self, is_dask: bool, n: int):
        """(distributed?, client)."""
        client = distributed_client() if is_dask else None
        if self.distributed == "auto":
            # setting "svm.auto-min-rows": below it the sequential stream measured as fast
            # or faster (benchmarks/results/bsgd_notes.md)
            use = client is not None and n >= int(setting("svm.auto-min-rows"))
            return use, client if use else None
        if self.distributed:
            return True, client if client is not None else distributed_client()
        return False, None

    # ------------------------------------------------------------------ fitting
    @named_worker_errors
    def fit(self, X, y=None, sample_weight=None):
        """Train on X (NumPy, dask array, zarr store path or Dataset) for ``max_iter`` epochs.

        Parameters
        ----------
        X : array-like of shape (n, d), dask array, zarr array, str or Dataset
            A store path or :class:`~dkernel.data.Dataset` supplies ``y`` when it is None.
        y : array-like of shape (n,), labels of any type
        sample_weight : array-like of shape (n,), optional
            A weighted example scales its SGD step.

        Returns
        -------
        self
        """
        self.check_params()
        with accounting(distributed_client()) as acc:
            self._fit_accounted(X, y, sample_weight)
        self.phase_stats_ = acc.report()
        self.timings_ = {name: row["wall"] for name, row in self.phase_stats_.items()}
        return self

    def _fit_accounted(self, X, y, sample_weight):
        """:meth:`fit`'s work, its phases counted by the accounting around it."""
        with phase("setup"):
            plan = self._fit_plan(X, y, sample_weight)
        shards = None  # a distributed fit's rows on the workers, which the refit reuses
        if plan.resumes_refit:
            # killed during the refit: the SGD passes' model is in the checkpoint
            state = nb.state_from_arrays(plan.saved)
            cfg = self._sgd_config(plan)
            if plan.use_dist:  # the refit's parts are cut from the shards, as in the fit
                shards = self._load_shards(plan)
        elif plan.use_dist:
            state, cfg, shards = self._fit_distributed(plan)
        else:
            with phase("stream"):
                state, cfg = self._fit_sequential(plan)
        _check_trained(state, plan.w if plan.weighted else None)
        check_kernel_scale(
            state.SV[: state.n_sv], plan.spec, where="on the support vectors the SGD passes chose: "
        )
        coef = None
        client = plan.client
        if self.refit:
            if not plan.use_dist and plan.is_dask and self.distributed == "auto":
                client = distributed_client()  # the rows stay on the workers
            coef = self._refit(plan, state, cfg, client, shards)
        # everything succeeded: only now replace the fitted attributes
        self._finish(state, plan.classes, plan.spec, cfg, n_iter=int(self.max_iter), d=plan.d)
        self._set_scaler(plan.scaler)
        if coef is not None:
            self.dual_coef_, self.intercept_ = coef.coef, coef.intercept
            self.refit_alpha_ = self._refit_alpha(plan.n)
        self.distributed_ = bool(plan.use_dist)
        if plan.use_dist:
            self.t_ = plan.n * int(self.max_iter)
        self.probA_ = self.probB_ = None
        if plan.held is not None:
            with phase("calibration"):
                self._calibrate(*plan.held, weighted=plan.weighted)
        if plan.ckpt is not None:
            plan.ckpt.remove()

    def _fit_plan(self, X, y, sample_weight) -> _FitPlan:
        """Everything a fit decides before training, once: the checked data, the classes,
        the held-out calibration rows, alpha, the seed (a checkpoint's when resuming),
        distributed or not, the scaler, the kernel with gamma resolved and, sequentially,
        the first block read up front."""
        X, is_dask, y, w, classes = self._prepare(X, y, sample_weight, reset=True)
        if classes is None:
            classes = self._classes_of(y)
        if len(classes) < 2:
            raise DKernelError(f"y has one class only ({classes.tolist()}); need at least 2")
        n_cols = 1 if len(classes) == 2 else len(classes)
        self._check_state_memory(int(X.shape[1]), n_cols)  # before the held-out rows are read
        held = None
        if self.probability:  # Platt scaling is fitted on rows the model never saw
            X, y, w, held = self._hold_out(X, y, w, is_dask)
        n, d = int(X.shape[0]), int(X.shape[1])
        alpha = float(self.alpha) if self.alpha is not None else _default_alpha(n)
        rs = check_random_state(self.random_state)
        seed = int(rs.randint(np.iinfo(np.int32).max))
        use_dist, client = self._use_distributed(is_dask, n)
        ckpt = _Checkpoint.of(self, n=n, d=d, classes=classes, distributed=use_dist)
        saved = ckpt.load() if ckpt is not None else None
        if saved is not None:
            seed = int(saved["seed"])
            at = saved["position"]
            if _saved_in_refit(saved):
                at = f"refit step {saved['refit_steps']}"
            logger.info("resuming from checkpoint %s at %s", ckpt.path, at)
        y_map = _label_map(classes)
        scaler = _feature_stats(X) if self.standardize else None
        # a sequential fit reads its first block up front, once, and trains on it (X is
        # then read once per epoch): gamma's sample, and the rows the kernel is checked on
        # before training; a distributed fit samples rows for gamma
        head = None
        if not use_dist and (self._samples_gamma() or saved is None):
            task0 = block_plan(
                n, seed=seed, epoch=0, shuffle=bool(self.shuffle), block_rows=int(self._block_rows)
            )[0]
            head = read_block(X, y, w, task0, y_map=y_map, standardize=scaler)
        spec = self._resolve_spec(X, sample=None if head is None else head[0])
        if head is not None:
            check_kernel_scale(head[0], spec)  # a width off X's scale: say so before training
        return _FitPlan(
            X=X, y=y, w=w, weighted=sample_weight is not None, is_dask=is_dask,
            classes=classes, held=held, n=n, d=d, n_cols=n_cols, alpha=alpha, seed=seed,
            use_dist=use_dist, client=client, ckpt=ckpt, saved=saved, y_map=y_map,
            scaler=scaler, head=head, spec=spec,
        )  # fmt: skip

    def _sgd_config(self, plan: _FitPlan, prefix: int = 0) -> nb.BSGDConfig:
        """The SGD passes' configuration: a distributed fit's merged model advances its
        clock by the mean shard's rows per epoch, a sequential one by every row.

        ``prefix``: a distributed fit's first epochs ran as the stream (clock n each), so
        the last epoch, the one averaged, starts after them and the rounds before it."""
        n = plan.n
        if not plan.use_dist:
            return self._config(plan.spec, plan.alpha, n)
        k = len(dist.plan_shards(n, _shard_count(self.n_shards, n)).starts)
        n_c = max(1, round(n / k))
        cfg = self._config(plan.spec, plan.alpha, n_c)
        if prefix and self.average is True and prefix < int(self.max_iter):
            last = prefix * n + (int(self.max_iter) - prefix - 1) * n_c
            cfg = cfg._replace(avg_start=last + 1)
        return cfg

    def _stream_prefix(self, plan: _FitPlan, shards, epochs: int) -> dist.Partial:
        """The first ``epochs`` epochs of a distributed fit as the sequential stream, in one
        task on one worker (:func:`~._distributed.stream_prefix`)."""
        cfg = self._config(plan.spec, plan.alpha, plan.n)
        if epochs < int(self.max_iter) and cfg.avg_mode != nb.AVG_OFF:
            cfg = cfg._replace(avg_start=_NEVER)  # the averaged epoch is a rounds epoch
        if shards.client is not None and cfg.search == nb.LOOKUP:
            cfg = cfg._replace(T=np.zeros((1, 1)))  # each process builds its own table
        run = functools.partial(
            dist.stream_prefix, cfg=cfg, n_cols=plan.n_cols, seed=plan.seed, epochs=epochs,
            shuffle=bool(self.shuffle), block_rows=int(self._block_rows),
        )  # fmt: skip
        with timer("bsgd prefix", logger), phase("prefix", width=1):
            out = shards.join(run, name=f"bsgd-prefix-{shards.name}")
            return out if shards.client is None else out.result()

    def _fit_distributed(self, plan: _FitPlan):
        """Rounds over fixed shards on the workers (:func:`~._distributed.fit_rounds`):
        ``(state, config, shards)``, the shards' rows still on the workers for the refit."""
        level = logging.INFO if self.verbose else logging.DEBUG
        prefix = 0
        if plan.saved is None:
            prefix = dist.prefix_epochs(plan.n, plan.d, int(self.max_iter))
        cfg = self._sgd_config(plan, prefix)
        start, resume_at = dist.empty_partial(plan.d, plan.n_cols), (0, 0)
        if plan.saved is not None:
            start, resume_at = _partial_of(plan.saved), tuple(plan.saved["position"])
        n_rounds = int(self.n_rounds)
        ckpt, show = plan.ckpt, progress_enabled(self.verbose)
        with (
            timer("bsgd distributed fit", logger, level),
            progress(
                int(self.max_iter) * n_rounds, "BudgetedSVC rounds", enabled=show, unit="round"
            ) as bar,
        ):
            bar.update(resume_at[0] * n_rounds + resume_at[1])

            def on_round(epoch: int, rnd: int, part) -> None:
                """After each round; ``part`` is the merged model when it was fetched."""
                pos = (epoch, rnd + 1) if rnd + 1 < n_rounds else (epoch + 1, 0)
                if ckpt is not None and part is not None:
                    ckpt.save(pos, plan.seed, _partial_arrays(part))
                shown = {} if part is None else {"SVs": len(part.SV)}
                bar.update(1, epoch=f"{epoch + 1}/{self.max_iter}", **shown)

            # numba compiles on the workers before the first round, under its own note
            with bar.compiling("bsgd"), phase("compile"):
                dist.compile_kernels(plan.client, cfg, plan.d, plan.n_cols)
            shards = self._load_shards(plan)
            if prefix:
                start, resume_at = self._stream_prefix(plan, shards, prefix), (prefix, 0)
                bar.update(prefix * n_rounds)
                if prefix == int(self.max_iter):  # the whole fit was the stream
                    cfg = self._config(plan.spec, plan.alpha, plan.n)
            part = dist.fit_rounds(
                shards, cfg=cfg, start=start, n_rounds=n_rounds,
                n_epochs=int(self.max_iter), split_every=int(self.split_every),
                seed=plan.seed, shuffle=bool(self.shuffle), first=resume_at, on_round=on_round,
                fetch_every=ckpt.every if ckpt is not None else (1 if show else 0),
            )  # fmt: skip
            if self.verbose:
                logger.info(f"{len(shards)} shards x {n_rounds} rounds x {self.max_iter} epochs")
        return dist.state_from_partial(part, cfg), cfg, shards

    def _load_shards(self, plan: _FitPlan):
        """The distributed fit's shards, read into the workers' memory once."""
        return dist.load_shards(
            plan.X, plan.y, plan.w if plan.weighted else None,
            n_shards=_shard_count(self.n_shards, plan.n), classes=plan.classes,
            scaler=plan.scaler, client=plan.client,
        )  # fmt: skip

    def _fit_sequential(self, plan: _FitPlan) -> tuple[nb.BSGDState, nb.BSGDConfig]:
        """``max_iter`` epochs of blocks in a seeded order through the numba loop, here."""
        level = logging.INFO if self.verbose else logging.DEBUG
        n = plan.n
        cfg = self._sgd_config(plan)
        state = nb.new_state(int(self.budget), plan.d, plan.n_cols, cfg.maint)
        epoch0, block0 = 0, 0
        if plan.saved is not None:
            state = nb.state_from_arrays(plan.saved)
            epoch0, block0 = (int(v) for v in plan.saved["position"])
        show = progress_enabled(self.verbose)
        with progress(
            int(self.max_iter) * n, "BudgetedSVC", enabled=show, unit="rows", unit_scale=True
        ) as bar:
            for epoch in range(epoch0, int(self.max_iter)):
                blocks = block_plan(n, seed=plan.seed, epoch=epoch, shuffle=bool(self.shuffle),
                                    block_rows=int(self._block_rows))  # fmt: skip
                skip = block0 if epoch == epoch0 else 0
                bar.update(epoch * n + sum(t.stop - t.start for t in blocks[:skip]) - bar.n)
                after = None
                if plan.ckpt is not None:
                    after = functools.partial(
                        _save_block, plan.ckpt, state, plan.seed, epoch, len(blocks), skip
                    )
                with timer(f"bsgd epoch {epoch}", logger, level):
                    self._run(
                        blocks, plan.X, plan.y, plan.w, plan.y_map, state, cfg, bar=bar,
                        start_block=skip, after=after, scaler=plan.scaler,
                        head=plan.head if epoch == 0 and skip == 0 else None,
                    )  # fmt: skip
        return state, cfg

    def _hold_out(self, X, y, w, is_dask: bool):
        """``(X, y, w)`` of the training rows and ``(X, y, w)`` of the calibration rows.

        The calibration rows are a sample without replacement of ``_CALIBRATION_SHARE`` of
        the rows, at most ``_CALIBRATION_ROWS``, drawn with ``random_state`` when it is an int
        (else seed 0: a resumed fit must find the same rows), gathered into memory (one
        task per touched chunk); the training rows are the others, in their order (dask:
        selected within each chunk, nothing moves).
        """
        n = int(X.shape[0])
        m = min(_CALIBRATION_ROWS, max(1, int(np.ceil(_CALIBRATION_SHARE * n))))
        if n - m < 2:
            raise DKernelError(
                f"probability=True holds out {m} of {n} rows for Platt scaling; "
                "too few rows are left to train on"
            )
        rs = self.random_state
        seed = int(rs) if isinstance(rs, numbers.Integral) and not isinstance(rs, bool) else 0
        idx = np.sort(np.random.RandomState(seed).choice(n, m, replace=False))
        keep = np.ones(n, dtype=bool)
        keep[idx] = False
        name = "svm-calibration-rows"
        held, train = [], []
        for A in (X, y, w):
            if is_dask_array(A):
                held.append(take_rows(A, idx, name=name))
                train.append(_without_rows(A, idx))
            else:
                held.append(A[idx])
                train.append(A[keep])
        Xc, yc, wc = held
        Xc, yc, wc = np.asarray(Xc, np.float64), np.asarray(yc), np.asarray(wc, np.float64)
        return (*train, (Xc, yc, wc))

    def _calibrate(self, Xc, yc, wc, *, weighted: bool) -> None:
        """Platt scaling of every score column on the held-out rows: ``probA_``, ``probB_``."""
        scores = np.asarray(self.decision_function(Xc)).reshape(len(yc), -1)
        cols = self.classes_[1:] if scores.shape[1] == 1 else self.classes_
        fits = [_platt(scores[:, j], yc == c, wc if weighted else None) for j, c in enumerate(cols)]
        self.probA_ = np.array([a for a, _ in fits])
        self.probB_ = np.array([b for _, b in fits])

    def _refit(self, plan: _FitPlan, state: nb.BSGDState, cfg: nb.BSGDConfig, client, shards):
        """Exact coefficients over the support vectors BSGD chose (``refit=True``); with a
        checkpoint, the solver's state is saved after each Newton step (beside the SGD
        passes' model, which a resumed fit then skips) and resumed from."""
        n_sv = state.n_sv
        if n_sv == 0:
            return None
        nb.flush_average(state.A, state.Abar, state.sref, state.fs, n_sv)
        W = float(state.fs[nb.FS_WSUM])
        if cfg.avg_mode != nb.AVG_OFF and W > 0:
            coef, b = state.Abar[:n_sv] / W, state.bbar / W
        else:
            s = float(state.fs[nb.FS_SCALE])
            coef, b = s * state.A[:n_sv], s * state.b
        level = logging.INFO if self.verbose else logging.DEBUG
        with (
            timer("bsgd refit", logger, level),
            progress(
                None,
                "BudgetedSVC refit",
                enabled=progress_enabled(self.verbose),
                unit=" Newton steps",
            ) as bar,
        ):

            def on_step(steps: int, g: float) -> None:
                bar.update(steps - bar.n, gradient=f"{g:.2g} of start (stop at {_REFIT_TOL:g})")

            start, on_save = _refit_resume(plan, state, int(self.max_iter))
            result = _refit.refit(
                plan.X, plan.y, plan.w if plan.weighted else None, classes=plan.classes,
                Z=state.SV[:n_sv], coef=coef, intercept=b, spec=plan.spec, icpt=cfg.icpt,
                scaler=plan.scaler, alpha=self._refit_alpha(plan.n),
                tol=_REFIT_TOL, max_iter=_REFIT_MAX_ITER, client=client, on_step=on_step,
                seed=plan.seed,
                max_rows=None if self.refit_rows == "auto" else int(self.refit_rows),
                multi_class=self._refit_loss(), start=start, on_save=on_save, resident=shards,
            )  # fmt: skip
            bar.update(result.n_iter - bar.n)
            return result

    def _refit_alpha(self, n: int) -> float:
        """The refit's alpha: the one given (also where the perceptron's SGD passes ignore
        it), else :func:`_default_refit_alpha` (also for norma's zero: the refit needs > 0)."""
        given = self.alpha is not None and self.alpha > 0
        return float(self.alpha) if given else _default_refit_alpha(n)

    def _refit_loss(self) -> str:
        """The multi-class loss of the refit (``refit`` is True or its name)."""
        return _REFIT_DEFAULT if self.refit is True else str(self.refit)

    def _run(
        self,
        plan: list[BlockTask],
        X,
        y,
        w,
        y_map,
        state: nb.BSGDState,
        cfg,
        *,
        bar=None,
        start_block: int = 0,
        after=None,
        scaler: Standardizer | None = None,
        head=None,
    ) -> None:
        """Blocks ``plan[start_block:]`` through the numba loop; ``after(i)`` once block i is
        done. ``head``: block ``plan[start_block]`` already read (not read again)."""

        def reader(task):
            return read_block(X, y, w, task, y_map=y_map, standardize=scaler)

        rest = prefetch(reader, plan[start_block + (head is not None) :], depth=2)
        blocks = rest if head is None else itertools.chain([head], rest)
        for i, (Xb, yi, wb) in enumerate(blocks, start=start_block):
            t0, v0 = int(state.ist[nb.IS_T]), int(state.ist[nb.IS_VIOL])
            if bar is not None:
                with bar.compiling("bsgd"):
                    nb.sgd_chunk(Xb, yi, wb, state, cfg)
            else:
                nb.sgd_chunk(Xb, yi, wb, state, cfg)
            if after is not None:
                after(i)
            if bar is not None:
                steps = int(state.ist[nb.IS_T]) - t0
                viol = (int(state.ist[nb.IS_VIOL]) - v0) / max(1, steps)
                bar.update(len(yi), SVs=state.n_sv, margin_viol=viol)
            if self.verbose:
                logger.info(
                    "block %d/%d: t=%d, %d SVs",
                    i + 1,
                    len(plan),
                    int(state.ist[nb.IS_T]),
                    state.n_sv,
                )

    def _finish(self, state: nb.BSGDState, classes, spec, cfg, *, n_iter: int, d: int) -> None:
        n_sv = state.n_sv
        fs, ist = state.fs, state.ist
        s = float(fs[nb.FS_SCALE])
        nb.flush_average(state.A, state.Abar, state.sref, fs, n_sv)
        W = float(fs[nb.FS_WSUM])
        self.n_features_in_ = d
        self.classes_ = classes
        self.support_vectors_ = state.SV[:n_sv].copy()
        if cfg.avg_mode != nb.AVG_OFF and W > 0:
            self.dual_coef_ = state.Abar[:n_sv] / W
            self.intercept_ = state.bbar / W * cfg.icpt
        else:
            self.dual_coef_ = s * state.A[:n_sv]
            self.intercept_ = s * state.b * cfg.icpt
        self.gamma_ = float(spec.gamma) if spec.gamma is not None else None
        self.alpha_ = float(cfg.alpha)
        self.refit_alpha_ = None  # a fit's refit sets it
        self.n_iter_ = n_iter
        self.t_ = int(ist[nb.IS_T])
        self._clock = int(ist[nb.IS_T])
        self._avg_start = int(cfg.avg_start)
        self.n_maintenance_ = int(ist[nb.IS_NMAINT])
        nm = max(1, self.n_maintenance_)
        self.weight_degradation_ = float(fs[nb.FS_DEGR]) / nm if self.n_maintenance_ else 0.0
        self._spec = spec
        self._state = state

    @named_worker_errors
    def partial_fit(self, X, y=None, classes=None, sample_weight=None, *, refit=False):
        """One pass over the rows of X in the given order, continuing the current model.

        Always sequential (the order is the caller's). With ``alpha=None`` the first call
        fixes ``alpha_ = 1e-4`` (``SGDClassifier``'s default: a stream's length is not
        known); after :meth:`fit`, ``alpha_`` of the fit is kept. With ``average`` on, a
        first call averages from its first step; later calls go on with the running
        average (its weights keep growing with the step count).

        With the estimator's ``refit`` on (the default), the calls keep a uniform random
        sample of every row streamed so far (reservoir sampling: at most ``refit_rows``
        rows, ``"auto"``: 256 per support vector, and at most 64 MiB of rows), and a call
        with ``refit=True`` ends with the refit of :meth:`fit` over that sample: exact
        coefficients over the support vectors the stream chose (``refit_alpha_``:
        ``alpha``, or with ``alpha=None`` ``1 / (10 t)`` for t rows streamed). Pass it on
        the last call of a stream (or every few calls: each refit costs a few passes over
        the sample). The sample is not saved with the model.

        To stream as well as :meth:`fit`: one call per chunk of a store in file order,
        ``refit=True`` on the last call (benchmarks/results/streaming.md has the settings
        compared on ijcnn1, B = 300).

        Parameters
        ----------
        X : array-like of shape (n, d), dask array, zarr array, str or Dataset
            A store path or :class:`~dkernel.data.Dataset` supplies ``y`` when it is None
            (and ``classes`` from the store's record when they are None).
        y : array-like of shape (n,)
        classes : array-like, required on the first call (unless the store records them)
            All labels that will ever appear; later calls may omit it.
        sample_weight : array-like of shape (n,), optional
        refit : bool, default=False
            End this call with the refit over the sample of the rows streamed so far.

        Returns
        -------
        self
        """
        first_call = not hasattr(self, "classes_")
        if first_call:
            self.check_params()
        X, _is_dask, y, w, recorded = self._prepare(X, y, sample_weight, reset=first_call)
        classes = self._stream_classes(first_call, recorded if classes is None else classes)
        n, d = int(X.shape[0]), int(X.shape[1])
        if first_call:
            cls = np.unique(np.asarray(classes))
            if len(cls) < 2:
                raise DKernelError(f"classes has one class only ({cls.tolist()}); need at least 2")
            self._check_state_memory(d, 1 if len(cls) == 2 else len(cls))
            spec = self._resolve_spec(X)
            alpha = float(self.alpha) if self.alpha is not None else _STREAM_ALPHA
            cfg = self._config(spec, alpha, n)._replace(avg_start=1)
            state = nb.new_state(int(self.budget), d, 1 if len(cls) == 2 else len(cls), cfg.maint)
            n_iter = 0
            scaler = _feature_stats(X) if self.standardize else None
        else:
            cls = self.classes_
            spec = self._spec
            cfg = self._config(spec, self.alpha_, n)._replace(avg_start=self._avg_start)
            state = self._current_state(cfg)
            n_iter = self.n_iter_
            scaler = self._scaler()
        plan = block_plan(n, seed=0, epoch=0, shuffle=False, block_rows=int(self._block_rows))
        with progress(
            n,
            "BudgetedSVC partial_fit",
            enabled=progress_enabled(self.verbose),
            unit="rows",
            unit_scale=True,
        ) as bar:
            self._run(plan, X, y, w, _label_map(cls), state, cfg, bar=bar, scaler=scaler)
        # the sample goes on from the previous call only (not across a fit or a load)
        res = getattr(self, "_reservoir", None)
        res = res if res is not None and not first_call and res.clock == self._clock else None
        self._finish(state, cls, spec, cfg, n_iter=max(n_iter, 1), d=d)
        self._set_scaler(scaler)
        self.distributed_ = False
        self.probA_ = self.probB_ = None  # a calibration of the former model no longer holds
        self._stream_sample(res, X, y, None if sample_weight is None else w, refit, cfg)
        return self

    def _stream_classes(self, first: bool, classes):
        """``partial_fit``'s classes: needed on the first call, the same on later ones."""
        if first and classes is None:
            raise DKernelError("classes must be passed to the first call to partial_fit")
        if not first and classes is not None:
            if not np.array_equal(np.unique(classes), self.classes_):
                raise DKernelError(
                    f"classes {np.unique(classes).tolist()} differ from those of the "
                    f"first partial_fit call {self.classes_.tolist()}"
                )
        return classes

    def _stream_sample(self, res, X, y, w, refit: bool, cfg: nb.BSGDConfig) -> None:
        """``partial_fit``'s rows into the reservoir (``refit`` on), then its refit."""
        if not self.refit:
            if refit:
                raise DKernelError("partial_fit(refit=True) needs the estimator's refit on")
            return
        cap = _reservoir_cap(int(self.budget), int(X.shape[1]), self.refit_rows)
        res = _reservoir_add(res, X, y, w, rng=self._rng_kept(), cap=cap)
        self._reservoir = res._replace(clock=self._clock)
        if refit:
            self._stream_refit(cfg)

    def _rng_kept(self):
        """The generator :meth:`partial_fit` keeps across calls."""
        self._rng = getattr(self, "_rng", None) or check_random_state(self.random_state)
        return self._rng

    def _stream_refit(self, cfg: nb.BSGDConfig) -> None:
        """``partial_fit(refit=True)``: the refit of :meth:`fit` over the reservoir."""
        res = self._reservoir
        level = logging.INFO if self.verbose else logging.DEBUG
        with timer("bsgd partial_fit refit", logger, level):
            result = _refit.refit(
                res.X, res.y, res.w, classes=self.classes_, Z=self.support_vectors_,
                coef=self.dual_coef_, intercept=self.intercept_, spec=self._spec,
                icpt=cfg.icpt, scaler=self._scaler(), alpha=self._refit_alpha(res.seen),
                tol=_REFIT_TOL, max_iter=_REFIT_MAX_ITER, max_rows=len(res.y),
                multi_class=self._refit_loss(),
            )  # fmt: skip
        self.dual_coef_, self.intercept_ = result.coef, result.intercept
        self.refit_alpha_ = self._refit_alpha(res.seen)

    def _set_scaler(self, scaler: Standardizer | None) -> None:
        self.feature_mean_ = None if scaler is None else scaler.mean
        self.feature_scale_ = None if scaler is None else scaler.scale

    def _scaler(self) -> Standardizer | None:
        mean = getattr(self, "feature_mean_", None)
        if mean is None:
            return None
        return Standardizer(np.asarray(mean), np.asarray(self.feature_scale_))

    def _current_state(self, cfg: nb.BSGDConfig) -> nb.BSGDState:
        """A private copy of the model state (rebuilt from the saved arrays after ``load``)."""
        st = getattr(self, "_state", None)
        if st is not None:
            return st.copy()
        raw = self._raw
        B = int(self.budget)
        SV0 = np.asarray(self.support_vectors_, dtype=np.float64)
        n_sv, d = SV0.shape
        state = nb.new_state(B, d, self.dual_coef_.shape[1], cfg.maint)
        nb.set_support(state, SV0)
        state.A[:n_sv] = raw["coef_unscaled"]
        state.b[:] = raw["bias_unscaled"]
        state.Abar[:n_sv] = raw["coef_average_sum"]
        state.bbar[:] = raw["bias_average_sum"]
        state.fs[nb.FS_SCALE] = float(raw["scale"])
        state.fs[nb.FS_WSUM] = float(raw["average_weight"])
        state.fs[nb.FS_SACC] = float(raw["average_offset"])
        state.sref[:n_sv] = float(raw["average_offset"])  # the saved sums are flushed
        state.K[:n_sv, :n_sv] = pair_gram(
            SV0, state.sqn[:n_sv], cfg.kind, cfg.gamma, cfg.degree, cfg.coef0
        )
        if cfg.maint == nb.PROJECT:
            nb.refresh_inverse(state.K, state.M, n_sv, cfg.ridge)
        state.ist[nb.IS_T] = self._clock
        state.ist[nb.IS_NSV] = n_sv
        state.ist[nb.IS_NMAINT] = self.n_maintenance_
        state.fs[nb.FS_DEGR] = self.weight_degradation_ * self.n_maintenance_
        if cfg.radius > 0:
            state.fs[nb.FS_WNORM2] = nb.exact_wnorm2(
                state.A, state.K, state.b, state.fs, n_sv, cfg.icpt
            )
        return state

    def _raw_arrays(self) -> dict[str, np.ndarray]:
        """The learner's own representation (iterate unscaled, global scale, averaged sums),
        saved so that a loaded model continues like the original (Pegasos gives every SV the
        same unscaled |alpha|, so the removal candidate is often decided by a tie that
        rounding must not change). The kernel matrix is rebuilt with the loop's own pair
        arithmetic (:func:`dkernel.kernels.pair_gram`), so it equals the one in memory;
        projection's inverse is recomputed from scratch and may differ in the last bits."""
        st = getattr(self, "_state", None)
        if st is None:
            return dict(self._raw)
        n_sv = st.n_sv
        nb.flush_average(st.A, st.Abar, st.sref, st.fs, n_sv)
        return {
            "coef_unscaled": st.A[:n_sv].copy(),
            "bias_unscaled": st.b.copy(),
            "scale": np.array(float(st.fs[nb.FS_SCALE])),
            "coef_average_sum": st.Abar[:n_sv].copy(),
            "bias_average_sum": st.bbar.copy(),
            "average_weight": np.array(float(st.fs[nb.FS_WSUM])),
            "average_offset": np.array(float(st.fs[nb.FS_SACC])),
        }

    # ------------------------------------------------------------------ prediction
    def _model_args(self) -> tuple:
        """What a row pass needs of the model: SVs, coefficients, intercept, kernel, scaler."""
        return (
            np.ascontiguousarray(self.support_vectors_, dtype=np.float64),
            np.asarray(self.dual_coef_, dtype=np.float64),
            np.asarray(self.intercept_, dtype=np.float64),
            self._spec,
            self._scaler(),
        )

    def _check_proba(self) -> bool:
        if not self.probability:
            raise AttributeError("predict_proba is not available when probability=False")
        return True

    @available_if(_check_proba)
    def predict_proba(self, X):
        """Class probabilities, shape (n, n_classes), columns in the order of ``classes_``.

        The decision function's scores through the Platt scaling (``probA_``, ``probB_``)
        that :meth:`fit` learned on its held-out rows (``probability=True``): for binary
        problems ``P(classes_[1]) = 1 / (1 + exp(probA_ f + probB_))``; for multi-class ones
        one such sigmoid per class, normalised to sum to one (as scikit-learn's
        ``CalibratedClassifierCV`` with ``method="sigmoid"``). NumPy input gives NumPy; dask,
        zarr or store input a lazy dask array computed blockwise on the workers. The argmax
        of the probabilities can differ from :meth:`predict` on rows near a boundary.
        """
        check_is_fitted(self, "dual_coef_")
        if getattr(self, "probA_", None) is None:
            raise DKernelError(
                "predict_proba needs the Platt scaling that fit(...) learns with "
                "probability=True; this model has none (partial_fit since, or "
                "probability set after the fit)"
            )
        X, is_dask = self._validate_X(X, reset=False)
        args = (
            *self._model_args(),
            np.asarray(self.probA_, dtype=np.float64),
            np.asarray(self.probB_, dtype=np.float64),
        )
        k = len(self.classes_)
        return self._row_pass(X, is_dask, _proba_rows, *args, n_out=k, token="svm-proba")

    @available_if(_check_proba)
    def predict_log_proba(self, X):
        """Logarithm of :meth:`predict_proba` (lazy for dask input, as it)."""
        P = self.predict_proba(X)
        if is_dask_array(P):
            return P.map_blocks(_log, token="svm-log-proba")
        return _log(P)

    def decision_function(self, X):
        """Scores: shape (n,) for binary problems (``classes_[1]`` positive), (n, c) otherwise.

        NumPy input gives NumPy; dask, zarr or store input a lazy dask array computed
        blockwise on the workers (values checked in the same pass).
        """
        check_is_fitted(self, "dual_coef_")
        X, is_dask = self._validate_X(X, reset=False)
        c = self.dual_coef_.shape[1]
        args = self._model_args()
        n_out = None if c == 1 else c
        return self._row_pass(X, is_dask, _decision_rows, *args, n_out=n_out, token="svm-scores")

    def predict(self, X):
        """Class labels (``classes_`` values); dask/zarr/store input gives a lazy dask array."""
        check_is_fitted(self, "dual_coef_")
        return self._predict_checked(*self._validate_X(X, reset=False))

    def _predict_checked(self, X, is_dask):
        """:meth:`predict` on input ``_validate_X`` has checked."""
        args = (*self._model_args(), self.classes_)
        return self._row_pass(
            X,
            is_dask,
            _predict_rows,
            *args,
            n_out=None,
            dtype=self.classes_.dtype,
            token="svm-predict",
        )

    @named_worker_errors
    def score(self, X, y=None, sample_weight=None):
        """Mean accuracy of :meth:`predict` on ``(X, y)``, weighted by ``sample_weight``.

        NumPy input: scikit-learn's ``accuracy_score`` of the predictions. Dask, zarr or store input
        (a store path or :class:`~dkernel.data.Dataset` supplies ``y`` when it is None): one
        pass on the workers that predicts each row chunk, compares it with its labels and
        sums, so each chunk of X and of y is read once and only two numbers come back.
        """
        check_is_fitted(self, "dual_coef_")
        X, y, _ = open_labelled(X, y)
        if y is None:
            raise DKernelError("score requires y, but the target y is None")
        Xv, is_dask = self._validate_X(X, reset=False)
        if not is_dask:
            if is_dask_array(y) or is_dask_array(sample_weight):
                y, sample_weight = da.compute(y, sample_weight)
            pred = self._predict_checked(Xv, False)
            return float(accuracy_score(y, pred, sample_weight=sample_weight))
        n = int(Xv.shape[0])
        y = _as_row_chunks(y, Xv.chunks[0], n, "y")
        kinds = (y.dtype.kind, self.classes_.dtype.kind)
        if "O" not in kinds and (kinds[0] in "US") != (kinds[1] in "US"):
            raise DKernelError(
                f"y has labels of dtype {y.dtype}, the model's classes are of dtype "
                f"{self.classes_.dtype}: they cannot match"
            )
        parts = [self._predict_checked(Xv, True), y]
        if sample_weight is not None:
            parts.append(_as_row_chunks(sample_weight, Xv.chunks[0], n, "sample_weight"))
        num, den = _per_block(_score_block, *parts, width=2, token="svm-score").sum(axis=0)
        if not den > 0:
            raise DKernelError(f"sample_weight sums to {den}; it must be positive")
        return float(num) / float(den)

    def summary(self) -> dict:
        """The fitted model in a few JSON-ready numbers.

        ``estimator``, ``kernel``, ``gamma``, ``alpha`` and ``refit_alpha`` (the values
        used), ``budget``,
        ``maintenance``, ``algorithm``, ``n_features``, ``classes``, ``n_support_vectors``,
        ``n_iter`` (epochs), ``t`` (SGD steps), ``n_maintenance``, ``weight_degradation``,
        ``distributed``, ``standardize``, ``refit`` (the refit's multi-class loss, or
        False), ``probability`` (whether :meth:`predict_proba` is calibrated) and, after
        :meth:`fit`, ``timings`` (wall seconds per phase) and ``phases`` (each phase's
        accounting: see ``phase_stats_``).
        """
        check_is_fitted(self, "dual_coef_")
        return {
            "estimator": type(self).__name__,
            "kernel": str(self._spec.kernel),
            "gamma": self.gamma_,
            "alpha": self.alpha_,
            "refit_alpha": getattr(self, "refit_alpha_", None),
            "budget": int(self.budget),
            "maintenance": self.maintenance,
            "algorithm": self.algorithm,
            "n_features": int(self.n_features_in_),
            "classes": self.classes_.tolist(),
            "n_support_vectors": int(self.support_vectors_.shape[0]),
            "n_iter": int(self.n_iter_),
            "t": int(self.t_),
            "n_maintenance": int(self.n_maintenance_),
            "weight_degradation": float(self.weight_degradation_),
            "distributed": bool(getattr(self, "distributed_", False)),
            "standardize": getattr(self, "feature_mean_", None) is not None,
            "refit": self._refit_loss() if self.refit else False,
            "probability": getattr(self, "probA_", None) is not None,
            **_phase_summary(self),
        }

    # ------------------------------------------------------------------ persistence
    def save(self, path) -> None:
        """Write the fitted model to ``path`` (``.npz`` + JSON header; see ``dkernel.svm._io``)."""
        check_is_fitted(self, "dual_coef_")
        header = model_header(self)
        arrays = {
            "support_vectors": np.asarray(self.support_vectors_, dtype=np.float64),
            "dual_coef": np.asarray(self.dual_coef_, dtype=np.float64),
            "intercept": np.asarray(self.intercept_, dtype=np.float64),
            **self._raw_arrays(),
        }
        scaler = self._scaler()
        if scaler is not None:
            arrays["feature_mean"] = scaler.mean
            arrays["feature_scale"] = scaler.scale
        if getattr(self, "probA_", None) is not None:
            arrays["platt_a"] = np.asarray(self.probA_, dtype=np.float64)
            arrays["platt_b"] = np.asarray(self.probB_, dtype=np.float64)
        write_model(path, header, arrays, self.classes_)

    @classmethod
    def load(cls, path, *, max_bytes: int = MAX_MODEL_BYTES) -> BudgetedSVC:
        """Read a model written by :meth:`save`.

        The header's parameters go through the estimator's own checks; files above
        ``max_bytes`` (1 GiB by default, on disk or unpacked) are refused unread.
        """
        return cls._from_file(*read_npz(path, max_bytes=max_bytes))

    @classmethod
    def _from_file(cls, where: str, header: dict, arrays: dict) -> BudgetedSVC:
        """The estimator of a model file's parts (checked here)."""
        header, arrays, classes = check_model(where, header, arrays)
        params, fitted = header["params"], header["fitted"]
        try:
            est = cls(**params)
            est.check_params()
            if fitted["kernel"] not in KERNEL_CODES:
                raise DKernelError(f"kernel {fitted['kernel']!r} of the fitted model is unknown")
        except (TypeError, DKernelError) as exc:
            raise DKernelError(f"{where!r} has a corrupt header ({exc})") from None
        if arrays["support_vectors"].shape[0] > est.budget:
            raise DKernelError(
                f"{where!r} is corrupt: {arrays['support_vectors'].shape[0]} support vectors "
                f"for a budget of {est.budget}"
            )
        est.support_vectors_ = arrays["support_vectors"]
        est.dual_coef_ = arrays["dual_coef"]
        est.intercept_ = arrays["intercept"]
        est.classes_ = classes
        est.n_features_in_ = int(fitted["n_features_in_"])
        set_feature_names(est, fitted)
        for k in ("gamma_", "alpha_", "t_", "n_iter_", "weight_degradation_", "n_maintenance_"):
            setattr(est, k, fitted[k])
        est.distributed_ = bool(fitted.get("distributed_", False))
        est.refit_alpha_ = fitted.get("refit_alpha_")
        est._clock = int(fitted.get("clock", est.t_))
        est._avg_start = int(fitted.get("avg_start", 1))
        est._spec = fitted_spec(params, fitted)
        check_kernel_scale(est.support_vectors_, est._spec, where=f"{where!r} is corrupt: ")
        est._state = None
        est._raw = {k: arrays[k] for k in RAW_ARRAYS}
        est.feature_mean_ = arrays.get("feature_mean")
        est.feature_scale_ = arrays.get("feature_scale")
        est.probA_ = arrays.get("platt_a")
        est.probB_ = arrays.get("platt_b")
        return est

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = False
        return tags


def save_model(est: BudgetedSVC, path) -> None:
    """Write a fitted BudgetedSVC to ``path`` (atomically)."""
    est.save(path)


#: Parameters that do not change the model (left out of a checkpoint's fingerprint).
_NOT_FINGERPRINTED = ("checkpoint", "checkpoint_every", "verbose")


class _Checkpoint:
    """Where and how often a fit saves its state, and the parameters it is tied to."""

    def __init__(self, path, every: int, params: dict) -> None:
        self.path = os.fspath(path)
        self.every = int(every)
        self.params = params

    @classmethod
    def of(cls, est: BudgetedSVC, *, n: int, d: int, classes, distributed: bool):
        if est.checkpoint is None:
            return None
        params = {k: v for k, v in est.get_params().items() if k not in _NOT_FINGERPRINTED}
        params.update(
            n_samples=n,
            n_features=d,
            classes=[str(c) for c in classes],
            distributed=bool(distributed),
            block_rows=int(est._block_rows),
        )
        return cls(est.checkpoint, est.checkpoint_every, params)

    def load(self):
        return load_checkpoint(self.path, params=self.params)

    def save(self, position: tuple[int, int], seed: int, arrays: dict) -> None:
        with timer("bsgd checkpoint", logger):
            save_checkpoint(
                self.path,
                {"position": [int(p) for p in position], "seed": int(seed), **arrays},
                params=self.params,
            )

    def remove(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.remove(self.path)


def _refit_resume(plan: _FitPlan, state: nb.BSGDState, epochs: int):
    """``(start, on_save)`` of a refit under ``plan``'s checkpoint (both None without
    one): the Newton state to go on from (None unless the checkpoint was saved in the
    refit), and the hook saving it (as the solve starts and after each Newton step) beside
    the SGD passes' model ``state``, at the position after their last epoch."""
    ckpt = plan.ckpt
    if ckpt is None:
        return None, None
    start = None
    saved = plan.saved if plan.resumes_refit else None
    if saved is not None:
        g0 = saved["refit_g0"]
        start = _refit.NewtonState(
            saved["refit_V"], int(saved["refit_steps"]), g0 if len(g0) else None
        )
    fixed = nb.state_arrays(state)

    def on_save(at: _refit.NewtonState) -> None:
        arrays = {
            "stage": "refit",
            "refit_V": at.V,
            "refit_steps": int(at.steps),
            "refit_g0": np.zeros(0) if at.g0 is None else at.g0,
        }
        ckpt.save((epochs, 0), plan.seed, {**fixed, **arrays})

    return start, on_save


def _save_block(
    ckpt: _Checkpoint, state, seed: int, epoch: int, n_blocks: int, skip: int, i: int
) -> None:
    """After block ``i`` of ``epoch`` (this run started at block ``skip``): save every
    ``ckpt.every`` blocks and after the epoch's last."""
    if (i + 1 - skip) % ckpt.every and i + 1 < n_blocks:
        return
    pos = (epoch, i + 1) if i + 1 < n_blocks else (epoch + 1, 0)
    ckpt.save(pos, seed, nb.state_arrays(state))


_PARTIAL_ARRAYS = ("SV", "A", "b", "Abar", "bbar")


def _partial_arrays(p: dist.Partial) -> dict:
    """A merged model as checkpoint entries (floats as JSON keep every bit)."""
    out: dict = {f"part_{k}": np.asarray(getattr(p, k)) for k in _PARTIAL_ARRAYS}
    out["part_scalars"] = [float(p.W), float(p.t), int(p.n), int(p.n_maint)]
    out["part_degr"] = [float(p.degr), float(p.degr2)]
    return out


def _partial_of(saved: dict) -> dist.Partial:
    W, t, n, n_maint = saved["part_scalars"]
    degr, degr2 = saved["part_degr"]
    arrays = {k: saved[f"part_{k}"] for k in _PARTIAL_ARRAYS}
    return dist.Partial(
        W=float(W), t=float(t), n=int(n), n_maint=int(n_maint), degr=float(degr),
        degr2=float(degr2), **arrays,
    )  # fmt: skip


def _phase_summary(est) -> dict:
    """``timings`` and ``phases`` of a fitted estimator's summary (absent before a fit)."""
    stats = getattr(est, "phase_stats_", None)
    if stats is None:
        return {}
    return {"timings": dict(est.timings_), "phases": {k: dict(v) for k, v in stats.items()}}


class _Reservoir(NamedTuple):
    """A uniform sample of the rows :meth:`BudgetedSVC.partial_fit` streamed (Vitter's
    algorithm R): ``seen`` rows so far, at most ``cap`` kept (X, raw labels, weights)."""

    X: np.ndarray
    y: np.ndarray
    w: np.ndarray | None
    seen: int
    #: the model's step count after the call that last added rows
    clock: int = 0


def _reservoir_cap(budget: int, d: int, refit_rows) -> int:
    rows = _refit._ROWS_PER_SV * budget if refit_rows == "auto" else int(refit_rows)
    return max(1, min(rows, _RESERVOIR_BYTES // (8 * max(1, d))))


def _reservoir_add(res: _Reservoir | None, X, y, w, *, rng, cap: int) -> _Reservoir:
    """``res`` with the n rows of (X, y, w) offered in order: row t (counted over the whole
    stream) enters with probability ``cap / (t + 1)`` in a uniform slot, the later of two
    rows for one slot kept. The entering rows are gathered once (one task per touched
    chunk for dask input)."""
    n = int(X.shape[0])
    seen = 0 if res is None else res.seen
    kept = 0 if res is None else len(res.y)
    t = seen + np.arange(n)
    slot = np.where(t < cap, t, rng.randint(0, np.maximum(t, cap) + 1))
    enter = np.flatnonzero(slot < cap)
    last = len(enter) - 1 - np.unique(slot[enter][::-1], return_index=True)[1]
    rows, slots = enter[last], slot[enter[last]]
    Xn, yn = take_rows(X, rows), take_rows(y, rows)
    wn = None if w is None else take_rows(w, rows)
    size = max(kept, int(slots.max()) + 1) if len(slots) else kept
    if res is None:
        res = _Reservoir(
            np.empty((0, Xn.shape[1]), Xn.dtype), np.empty(0, yn.dtype),
            None if wn is None else np.empty(0), 0,
        )  # fmt: skip
    Xr, yr = _grown(res.X, size), _grown(res.y, size)
    Xr[slots], yr[slots] = Xn, yn
    wr = None
    if wn is not None or res.w is not None:
        wr = _grown(np.ones(kept) if res.w is None else res.w, size, fill=1.0)
        wr[slots] = 1.0 if wn is None else wn
    return _Reservoir(Xr, yr, wr, seen + n)


def _grown(a: np.ndarray, size: int, fill=None) -> np.ndarray:
    """A copy of ``a`` with ``size`` rows (new rows ``fill``, or uninitialised)."""
    out = np.empty((size, *a.shape[1:]), a.dtype) if fill is None else np.full(size, fill)
    out[: len(a)] = a
    return out


def _check_trained(state: nb.BSGDState, w) -> None:
    """Refuse a state that overflowed in training (the fitted attributes stay untouched)."""
    n_sv = state.n_sv
    if (
        np.isfinite(state.A[:n_sv]).all()
        and np.isfinite(state.Abar[:n_sv]).all()
        and np.isfinite(state.b).all()
        and np.isfinite(state.fs).all()
    ):
        return
    hint = ""
    if w is not None:
        top = float(w.max().compute() if is_dask_array(w) else np.max(w))
        hint = (
            f"; sample_weight reaches {top:.3g}, and a weight scales its row's SGD step: "
            "use weights of order 1 (divide them by their mean)"
        )
    raise DKernelError(f"training diverged: the SGD coefficients overflowed{hint}")


def _per_block(func, *arrays, width: int, token: str) -> np.ndarray:
    """``func`` over the row chunks of the 1-D dask ``arrays`` (aligned), one named task per
    chunk returning a (1, width) row; the rows, stacked, as NumPy (small results reduced
    on the client)."""
    out = da.map_blocks(
        func,
        *arrays,
        new_axis=1,
        chunks=((1,) * arrays[0].numblocks[0], (width,)),
        dtype=np.float64,
        meta=np.empty((0, 0)),
        token=token,
    )
    return np.asarray(out.compute())


def _without_rows(A, rows: np.ndarray):
    """Dask ``A`` without the sorted row positions ``rows``, dropped within each chunk (one
    named task per chunk; Dask's boolean indexing would shuffle the rows between tasks);
    ``rows`` travels once, as one key."""
    from dask.base import tokenize

    starts = chunk_bounds(A)
    dropped = np.diff(np.searchsorted(rows, starts))
    chunks = (tuple(int(c) for c in np.asarray(A.chunks[0]) - dropped), *A.chunks[1:])
    ref = dask.delayed(rows, name=f"svm-held-out-{tokenize(rows)}", pure=True)
    return da.map_blocks(
        _drop_rows, A, ref, chunks=chunks, dtype=A.dtype, meta=A._meta, token="svm-train-rows"
    )


def _drop_rows(block: np.ndarray, rows: np.ndarray, block_info=None) -> np.ndarray:
    lo, hi = block_info[0]["array-location"][0]
    a, b = np.searchsorted(rows, [lo, hi])
    return np.delete(block, rows[a:b] - lo, axis=0)


def _score_block(pred: np.ndarray, yb: np.ndarray, wb: np.ndarray | None = None) -> np.ndarray:
    """One row chunk of ``score``: [[weighted hits, total weight]]."""
    hits = np.asarray(pred) == np.asarray(yb)
    if wb is None:
        return np.array([[float(hits.sum()), float(len(hits))]])
    wf = np.asarray(wb, dtype=np.float64)
    return np.array([[float(wf[hits].sum()), float(wf.sum())]])


def _log(P):
    with np.errstate(divide="ignore"):
        return np.log(P)


def _as_row_chunks(v, chunks, n: int, name: str):
    """``v`` (y or weights, NumPy or dask) as a 1-D dask array of ``n`` rows in X's row
    chunks (blockwise with the predictions; dask chunked otherwise is rechunked)."""
    if not is_dask_array(v):
        v = np.asarray(v)
    if v.ndim == 2 and v.shape[1] == 1:
        v = v.reshape(-1)
    if v.ndim != 1 or int(v.shape[0]) != n:
        raise DKernelError(f"{name} has shape {v.shape}, expected ({n},)")
    if not is_dask_array(v):
        return da.from_array(v, chunks=(chunks,))
    return v if v.chunks[0] == tuple(chunks) else v.rechunk({0: chunks})


def _label_map(classes: np.ndarray):
    def y_map(yb: np.ndarray, start: int) -> np.ndarray:
        return class_indices(yb, start, classes=classes)

    return y_map


def _decision_rows(Xb, SV, coef, intercept, spec, scaler=None) -> np.ndarray:
    """Scores of the rows of Xb, (r,) for one column, (r, c) otherwise (in row tiles)."""
    Xb = np.ascontiguousarray(Xb, dtype=np.float64) if scaler is None else scaler.apply(Xb)
    out = np.empty((Xb.shape[0], coef.shape[1]))
    for r in range(0, Xb.shape[0], _PREDICT_ROWS):
        blk = Xb[r : r + _PREDICT_ROWS]
        if SV.shape[0]:
            out[r : r + len(blk)] = _BaseKernelEstimator._kernel(blk, SV, spec) @ coef + intercept
        else:
            out[r : r + len(blk)] = intercept
    return out[:, 0] if coef.shape[1] == 1 else out


def _proba_rows(Xb, SV, coef, intercept, spec, scaler, A, B) -> np.ndarray:
    """Probabilities of the rows of Xb, (r, n_classes): the Platt sigmoid of each score
    column; one column gives both classes, several are normalised (uniform where all are
    0)."""
    z = _decision_rows(Xb, SV, coef, intercept, spec, scaler).reshape(len(Xb), -1) * A + B
    if z.shape[1] == 1:  # each side as its own sigmoid: no 1 - P rounding to 0
        return np.hstack([_sigmoid(z), _sigmoid(-z)])
    P = _sigmoid(-z)
    total = P.sum(axis=1, keepdims=True)
    out = np.full_like(P, 1.0 / P.shape[1])
    np.divide(P, total, out=out, where=total > 0)
    return out


def _sigmoid(z: np.ndarray) -> np.ndarray:
    """``1 / (1 + exp(-z))`` without overflow."""
    return np.exp(-np.logaddexp(0.0, -z))


def _platt(f: np.ndarray, positive: np.ndarray, w: np.ndarray | None) -> tuple[float, float]:
    """Platt's sigmoid ``P(+|f) = 1 / (1 + exp(a f + b))`` by weighted maximum likelihood
    with the smoothed targets of Platt (1999) and Lin, Lin & Weng (2007):
    ``(N+ + 1) / (N+ + 2)`` and ``1 / (N- + 2)`` (weights summed for the counts)."""
    from scipy.optimize import minimize

    f = np.asarray(f, dtype=np.float64)
    w = np.ones(len(f)) if w is None else np.asarray(w, dtype=np.float64)
    pos = np.asarray(positive, dtype=bool)
    n_pos, n_neg = float(w[pos].sum()), float(w[~pos].sum())
    t = np.where(pos, (n_pos + 1.0) / (n_pos + 2.0), 1.0 / (n_neg + 2.0))

    def loss(ab):
        z = ab[0] * f + ab[1]  # -log P(+) = log(1 + exp(z)); -log P(-) = that - z
        value = float(w @ (np.logaddexp(0.0, z) - (1.0 - t) * z))
        g = w * (t - _sigmoid(-z))  # d/dz = (1 - P(+)) - (1 - t)
        return value, np.array([g @ f, g.sum()])

    b0 = float(np.log((n_neg + 1.0) / (n_pos + 1.0)))
    res = minimize(loss, np.array([0.0, b0]), jac=True, method="L-BFGS-B")
    return float(res.x[0]), float(res.x[1])


def _predict_rows(Xb, SV, coef, intercept, spec, scaler, classes) -> np.ndarray:
    scores = _decision_rows(Xb, SV, coef, intercept, spec, scaler)
    if scores.ndim == 1:
        return classes[(scores > 0).astype(np.intp)]
    return classes[np.argmax(scores, axis=1)]


def _column_sums(Xb) -> np.ndarray:
    """``[sum x, sum x^2]`` of a block's columns, shape (2, d)."""
    Xb = np.asarray(Xb, dtype=np.float64)
    return np.stack([Xb.sum(axis=0), np.einsum("ij,ij->j", Xb, Xb)])


def _feature_stats(X) -> Standardizer:
    """Mean and std of every feature in one pass (dask: blockwise sums, one compute);
    a constant feature gets scale 1."""
    if is_dask_array(X):
        # one task per row chunk (``svm-standardize`` on the dashboard), summed here in order
        d = int(X.shape[1])
        sums = X.map_blocks(
            _column_sums,
            chunks=((2,) * X.numblocks[0], (d,)),
            dtype=np.float64,
            token="svm-standardize",
        )
        s1, s2 = np.sum(dask.compute(*sums.to_delayed().ravel()), axis=0)
        n = int(X.shape[0])
        mean = s1 / n
        var = np.maximum(s2 / n - mean * mean, 0.0)
    else:
        Xf = np.asarray(X, dtype=np.float64)
        mean, var = column_moments(Xf)
    if not (np.isfinite(mean).all() and np.isfinite(var).all()):
        raise feature_stats_error(mean, var)
    std = np.sqrt(var)
    std[~(std > 1e-12 * np.maximum(1.0, np.abs(mean)))] = 1.0
    return Standardizer(mean, std)


def _shard_count(n_shards, n: int) -> int:
    """The shards of a distributed fit of n rows: ``n_shards`` when given, else one per
    ``_SHARD_ROWS`` rows within ``[_MIN_SHARDS, _MAX_SHARDS]``."""
    if n_shards is not None:
        return int(n_shards)
    return int(np.clip(n // _SHARD_ROWS, _MIN_SHARDS, _MAX_SHARDS))


def _default_alpha(n: int) -> float:
    """``alpha=None``: ``1 / (4 n)`` (C = 4 in SVC's terms), chosen with the default five
    epochs and last-epoch averaging (benchmarks/results/bsgd_notes.md)."""
    return 0.25 / n


def _default_refit_alpha(n: int) -> float:
    """``alpha=None``: the refit's ``1 / (10 n)`` (C = 10), the best mean accuracy over the
    five shared sets of C = 4, 10, 20 for the refit alone (benchmarks/results/bsgd_notes.md)."""
    return 0.1 / n
