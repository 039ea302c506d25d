"""Budgeted SGD kernel SVM (BSGD): the estimator, which holds the parameters and delegates.

The fit's steps are functions of an explicit plan and state in ``_fit.py`` (and
``_partial.py`` for ``partial_fit``); the state and its conversions are in ``state.py``,
the numba kernels in ``_budget.py``, the rounds on the workers in ``rounds.py``,
scoring in ``_predict.py``, model files and checkpoints in ``_io.py``, the parameter checks
in ``_checks.py``."""

from __future__ import annotations

import dask.array as da
import numpy as np
from sklearn.base import ClassifierMixin
from sklearn.metrics import accuracy_score
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_is_fitted

from .._base import _BaseKernelEstimator, open_labelled
from .._model_io import MAX_MODEL_BYTES, read_npz
from .._validation import DKernelError, is_dask_array
from ..kernels import KERNEL_CODES
from ..runtime import accounting, distributed_client, named_worker_errors
from . import _budget as nb
from . import _fit, _partial
from ._checks import check_params
from ._io import estimator_from_file, model_arrays, model_header, write_model
from ._predict import Model, dask_accuracy, decision_rows, log, predict_rows, proba_rows


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
    n_rounds : int, default=1
        Rounds per epoch of a distributed fit: each shard passes over 1/n_rounds of its rows,
        then the models are merged (more merges measured no more accurate, and cost more).
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
        n_rounds=1,
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

    def check_params(self) -> None:
        """Check the parameters, before any data is read.

        ``fit`` and ``partial_fit`` call this first; the CLI calls it before it starts a
        cluster. Raises a :class:`~dkernel.DKernelError` naming the first bad parameter.
        """
        check_params(self)

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
            fitted = _fit.fit(self, X, y, sample_weight)
        # everything succeeded: only now replace the fitted attributes
        vars(self).update(fitted)
        self.phase_stats_ = acc.report()
        self.timings_ = {name: row["wall"] for name, row in self.phase_stats_.items()}
        return self

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
        if not hasattr(self, "classes_"):
            self.check_params()
        vars(self).update(_partial.partial_fit(self, X, y, classes, sample_weight, refit=refit))
        return self

    # ------------------------------------------------------------------ prediction
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
            *Model.of(self),
            np.asarray(self.probA_, dtype=np.float64),
            np.asarray(self.probB_, dtype=np.float64),
        )
        k = len(self.classes_)
        return self._row_pass(X, is_dask, proba_rows, *args, n_out=k, token="svm-proba")

    @available_if(_check_proba)
    def predict_log_proba(self, X):
        """Logarithm of :meth:`predict_proba` (lazy for dask input, as it)."""
        P = self.predict_proba(X)
        if is_dask_array(P):
            return P.map_blocks(log, token="svm-log-proba")
        return log(P)

    def decision_function(self, X):
        """Scores: shape (n,) for binary problems (``classes_[1]`` positive), (n, c) otherwise.

        NumPy input gives NumPy; dask, zarr or store input a lazy dask array computed
        blockwise on the workers (values checked in the same pass).
        """
        check_is_fitted(self, "dual_coef_")
        X, is_dask = self._validate_X(X, reset=False)
        c = self.dual_coef_.shape[1]
        n_out = None if c == 1 else c
        return self._row_pass(
            X, is_dask, decision_rows, *Model.of(self), n_out=n_out, token="svm-scores"
        )

    def predict(self, X):
        """Class labels (``classes_`` values); dask/zarr/store input gives a lazy dask array."""
        check_is_fitted(self, "dual_coef_")
        return _labels(self, *self._validate_X(X, reset=False))

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
        return _accuracy(self, X, y, sample_weight)

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
        return _summary(self)

    # ------------------------------------------------------------------ persistence
    def save(self, path) -> None:
        """Write the fitted model to ``path`` (``.npz`` + JSON header; see ``dkernel.svm._io``)."""
        check_is_fitted(self, "dual_coef_")
        write_model(path, model_header(self), model_arrays(self), self.classes_)

    @classmethod
    def load(cls, path, *, max_bytes: int = MAX_MODEL_BYTES) -> BudgetedSVC:
        """Read a model written by :meth:`save`.

        The header's parameters go through the estimator's own checks; files above
        ``max_bytes`` (1 GiB by default, on disk or unpacked) are refused unread.
        """
        return cls._from_file(*read_npz(path, max_bytes=max_bytes))

    @classmethod
    def _from_file(cls, where: str, header: dict, arrays: dict) -> BudgetedSVC:
        """The estimator of a model file's parts (checked here; :func:`dkernel.load_model`
        calls it)."""
        return estimator_from_file(cls, where, header, arrays)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = False
        return tags


def save_model(est: BudgetedSVC, path) -> None:
    """Write a fitted BudgetedSVC to ``path`` (atomically)."""
    est.save(path)


def _labels(est: BudgetedSVC, X, is_dask: bool):
    """:meth:`BudgetedSVC.predict` on input ``_validate_X`` has checked."""
    return est._row_pass(
        X, is_dask, predict_rows, *Model.of(est), est.classes_, n_out=None,
        dtype=est.classes_.dtype, token="svm-predict",
    )  # fmt: skip


def _accuracy(est: BudgetedSVC, X, y, sample_weight) -> float:
    """:meth:`BudgetedSVC.score` on X opened with its labels y."""
    Xv, is_dask = est._validate_X(X, reset=False)
    if not is_dask:
        if is_dask_array(y) or is_dask_array(sample_weight):
            y, sample_weight = da.compute(y, sample_weight)
        pred = _labels(est, Xv, False)
        return float(accuracy_score(y, pred, sample_weight=sample_weight))
    pred = _labels(est, Xv, True)
    return dask_accuracy(pred, y, sample_weight, classes=est.classes_)


def _summary(est: BudgetedSVC) -> dict:
    """:meth:`BudgetedSVC.summary` of a fitted estimator."""
    return {
        "estimator": type(est).__name__,
        "kernel": str(est._spec.kernel),
        "gamma": est.gamma_,
        "alpha": est.alpha_,
        "refit_alpha": getattr(est, "refit_alpha_", None),
        "budget": int(est.budget),
        "maintenance": est.maintenance,
        "algorithm": est.algorithm,
        "n_features": int(est.n_features_in_),
        "classes": est.classes_.tolist(),
        "n_support_vectors": int(est.support_vectors_.shape[0]),
        "n_iter": int(est.n_iter_),
        "t": int(est.t_),
        "n_maintenance": int(est.n_maintenance_),
        "weight_degradation": float(est.weight_degradation_),
        "distributed": bool(getattr(est, "distributed_", False)),
        "standardize": getattr(est, "feature_mean_", None) is not None,
        "refit": _fit.refit_loss(est.refit) if est.refit else False,
        "probability": getattr(est, "probA_", None) is not None,
        **_phase_summary(est),
    }


def _phase_summary(est) -> dict:
    """``timings`` and ``phases`` of a fitted estimator's summary (absent before a fit)."""
    stats = getattr(est, "phase_stats_", None)
    if stats is None:
        return {}
    return {"timings": dict(est.timings_), "phases": {k: dict(v) for k, v in stats.items()}}
