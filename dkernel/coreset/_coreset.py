"""The ``Coreset`` type, the single-machine construction, merge / reduce and training."""

from __future__ import annotations

import inspect
import logging
import numbers
import warnings
from dataclasses import dataclass, field, replace
from typing import NamedTuple

import numpy as np

from .._validation import (
    DKernelError,
    check_finite_2d,
    check_sample_weight,
    check_scalar,
    label_classes,
)
from ..runtime import progress, progress_enabled, timer
from ._sensitivity import _base_seed, _binary_labels, _rng, _sensitivities, check_C
from ._svm_terms import (
    hinge,
    labels_of,
    point_costs,
    regulariser,
    signs,
    svm_cost,
    weight_vector,
    with_bias,
)

logger = logging.getLogger(__name__)

#: Regularisation names of estimators minimising a mean loss (``SGDClassifier``,
#: ``BudgetedSVC``).
_MEAN_LOSS_PARAMS = frozenset({"alpha"})
#: Default share of uniform (weight-proportional) sampling in the mixture: it caps every
#: weight at U / (beta m), so where the sensitivity bound is loose the coreset loses at most
#: a constant factor to a uniform sample (benchmarks/results/coreset.md compares the two).
BETA = 0.3
#: Default share of the point costs at the coarse solution in the non-uniform part.
LOSS_SHARE = 0.5


class VacuousCoresetWarning(UserWarning):
    """The total sensitivity t is at least the number of rows n: the bound saves nothing."""


def _warn_vacuous(c: Coreset, stacklevel: int = 3) -> None:
    """Warn when ``c``'s total sensitivity is no smaller than the rows it was built from."""
    n = int(c.source_size)
    t = float(c.total_sensitivity)
    if n > 0 and t >= n:
        cause = (
            "The classes are (nearly) separable: the optimum's cost is almost all "
            "regulariser, so one point that a nearby w puts inside the margin carries most "
            "of that w's cost and no sensitivity bound can be small. The rows were drawn "
            "uniformly (the coreset is a uniform sample of m draws)"
            if c.info.get("separable")
            else "Features on large or very different scales are the usual cause: "
            "standardise X first (e.g. sklearn.preprocessing.StandardScaler)"
        )
        warnings.warn(
            f"the coreset's total sensitivity t = {t:.4g} is >= n = {n} rows (t/n = {t / n:.3g}): "
            f"its bound gives no saving over the full data. {cause}",
            VacuousCoresetWarning,
            stacklevel=stacklevel,
        )


@dataclass(frozen=True, eq=False)
class Coreset:
    """A weighted subset (S, v) standing in for a data set P in the SVM cost.

    ``weight`` counts replicated rows: fitting an estimator on ``(X, y, sample_weight=weight)``
    approximates fitting it on the full data, and ``weight.sum()`` estimates the full set's
    total weight (its size for unit weights).

    Attributes
    ----------
    X : ndarray of shape (m', n_features)
        The sampled rows (m' <= m distinct points; duplicates are merged into one weight).
    y : ndarray of shape (m',) or None
        Their labels, as given (one-vs-rest coresets hold -1/+1); None for an unlabelled
        (kernel k-means) coreset.
    weight : ndarray of shape (m',)
        v(p) = u(p) * count(p) / (m q(p)).
    sensitivity : ndarray of shape (m',)
        gamma(p) of each row in the set it was sampled from.
    total_sensitivity : float
        t = sum gamma over that set (summed over the parts of a merged coreset).
    source_size : int
        Rows of the data the coreset stands for.
    C : float
        Hinge weight the sensitivities were computed for.
    classes : tuple
        (negative, positive) labels.
    info : dict
        Construction details (``opt``, ``method``, ``levels``, ...).
    """

    X: np.ndarray
    y: np.ndarray | None
    weight: np.ndarray
    sensitivity: np.ndarray
    total_sensitivity: float
    source_size: int
    C: float = 1.0
    classes: tuple = (-1, 1)
    info: dict = field(default_factory=dict)

    def __len__(self) -> int:
        return int(self.X.shape[0])

    def __or__(self, other: Coreset) -> Coreset:
        return merge(self, other)

    def __repr__(self) -> str:
        return (
            f"Coreset(size={len(self)}, n_features={self.X.shape[1]}, "
            f"source_size={self.source_size}, total_weight={self.weight.sum():.6g}, "
            f"total_sensitivity={self.total_sensitivity:.6g}, C={self.C:g})"
        )

    @property
    def signs(self) -> np.ndarray:
        """Labels as -1/+1 (``classes[1]`` is +1)."""
        if self.y is None:
            raise DKernelError("an unlabelled (kernel k-means) coreset has no SVM labels")
        return signs(self.y, self.classes[1])

    def cost(self, coef, intercept=0.0) -> float:
        """F(S, w) = ||coef||^2 / 2 + C * sum v hinge, the same convention as the full set."""
        w = weight_vector(coef, intercept)
        return svm_cost(with_bias(self.X), self.signs, self.weight, self.C, w)

    def reduce(
        self, m, *, random_state=None, k=None, beta=BETA, loss_share=LOSS_SHARE, total_weight=None
    ):
        """A coreset of this coreset with at most ``m`` rows (one more resampling level).

        Sensitivities, the coarse solution and the point costs are recomputed on these rows
        (not carried over from the parts), so a reduced union is a coreset of the union.

        Parameters
        ----------
        m : int
            Draws (rows after merging duplicates <= m). ``m >= len(self)`` returns ``self``.
        random_state : int, SeedSequence, Generator or None
        k : int, optional
            k-means++ clusters per label (default: chosen by :func:`k_grid`).
        beta, loss_share : float
            The sampling mixture (see :func:`svm_coreset`).
        total_weight : float, optional
            Weight U of the whole data when this coreset stands for a part of it: the
            sensitivities are then those of the part's share of the global cost (the node's
            hinge weight is C * U / U_node).

        Returns
        -------
        Coreset
        """
        m = _check_m(m, None)
        if m >= len(self):
            return self
        mix = _check_mixture(beta, loss_share)
        # a reduce node is small and heavily weighted: a 5% certified gap is cheap there
        # and loosens the bound by at most sqrt(1.05)
        out = _build(
            self.X,
            self.signs,
            self.weight,
            m,
            C=self.C,
            k=k,
            rng=_rng(random_state),
            mix=mix,
            tol=0.05,
            U_total=total_weight,
        )
        return replace(
            _with_labels(out, self.classes),
            source_size=self.source_size,
            info={**out.info, "levels": self.info.get("levels", 0) + 1},
        )

    def fit(self, estimator, **fit_params):
        """Fit ``estimator`` on the coreset so its objective matches the full-data one.

        Any estimator whose ``fit`` takes ``sample_weight`` works (duck typing):

        - estimators with ``C`` (scikit-learn ``SVC``, ``LinearSVC``, ``LogisticRegression``)
          minimise ``||w||^2/2 + C sum_i s_i loss_i``: the coreset weights count replicated
          rows, so ``C`` stays as it is ("weight = replicated rows": a fit with integer
          weights equals a fit on the rows repeated that many times);
        - estimators with ``alpha`` (``SGDClassifier``, dkernel's ``BudgetedSVC``)
          minimise a *mean* loss plus ``alpha R(w)``: they get the weights normalised to
          mean 1, ``v * m' / U``, which gives the full set's ``(1/n) sum loss`` (equivalent to
          raw weights with ``alpha`` rescaled by ``U / m'``, and safe for SGD step sizes);
        - others (kernel k-means, ...) get the raw weights.

        The estimator is fitted in place and returned (as ``estimator.fit`` does).
        """
        params = inspect.signature(estimator.fit).parameters
        if "sample_weight" not in params and not any(
            p.kind is p.VAR_KEYWORD for p in params.values()
        ):
            raise DKernelError(
                f"{type(estimator).__name__}.fit takes no sample_weight; a "
                "coreset needs a weighted fit"
            )
        names = set(estimator.get_params()) if hasattr(estimator, "get_params") else set()
        w = self.weight
        if "C" not in names and (_MEAN_LOSS_PARAMS & names):
            w = w * (len(self) / float(w.sum()))
        return estimator.fit(self.X, self.y, sample_weight=w, **fit_params)


def merge(a: Coreset, b: Coreset) -> Coreset:
    """Union of two coresets (a coreset of the union of their sources); also ``a | b``.

    Examples
    --------
    >>> import numpy as np
    >>> from dkernel.coreset import uniform_coreset, merge
    >>> X = np.arange(40.0).reshape(20, 2); y = np.tile([-1, 1], 10)
    >>> a = uniform_coreset(X[:10], y[:10], 5, random_state=0)
    >>> c = merge(a, uniform_coreset(X[10:], y[10:], 5, random_state=1))
    >>> c.source_size, float(c.weight.sum())
    (20, 20.0)
    """
    if not isinstance(a, Coreset) or not isinstance(b, Coreset):
        raise DKernelError("merge takes two Coreset objects")
    if (a.y is None) != (b.y is None):
        raise DKernelError("cannot merge a labelled coreset with an unlabelled one")
    if a.X.shape[1] != b.X.shape[1]:
        raise DKernelError(f"cannot merge coresets with {a.X.shape[1]} and {b.X.shape[1]} features")
    if a.C != b.C:
        raise DKernelError(f"cannot merge coresets built for C={a.C} and C={b.C}")
    classes = a.classes if a.y is None else _merge_classes(a, b)
    return Coreset(
        X=np.concatenate([a.X, b.X]),
        y=None if a.y is None or b.y is None else np.concatenate([a.y, b.y]),
        weight=np.concatenate([a.weight, b.weight]),
        sensitivity=np.concatenate([a.sensitivity, b.sensitivity]),
        total_sensitivity=a.total_sensitivity + b.total_sensitivity,
        source_size=a.source_size + b.source_size,
        C=a.C,
        classes=classes,
        info={"method": "merge", "levels": max(a.info.get("levels", 0), b.info.get("levels", 0))},
    )


def _merge_classes(a: Coreset, b: Coreset) -> tuple:
    la = set(np.unique(np.asarray(a.y)).tolist()) | set(a.classes)
    lb = set(np.unique(np.asarray(b.y)).tolist()) | set(b.classes)
    labels = sorted(la | lb)
    if len(labels) > 2:
        raise DKernelError(f"cannot merge coresets with labels {labels}: more than two classes")
    if a.classes == b.classes:
        return a.classes
    return tuple(labels) if len(labels) == 2 else a.classes


def _exact(X, y, *, C, classes) -> Coreset:
    """The rows themselves as a coreset: unit weights, each row its own sensitivity 1."""
    n = X.shape[0]
    return Coreset(
        X=X,
        y=y,
        weight=np.ones(n),
        sensitivity=np.ones(n),
        total_sensitivity=float(n),
        source_size=n,
        C=C,
        classes=classes,
        info={"method": "exact", "levels": 0},
    )


def _check_m(m, n: int | None) -> int:
    check_scalar(m, "m", kind=numbers.Integral, low=1)
    if n is not None and m > n:
        raise DKernelError(f"m={m} exceeds the {n} rows of X")
    return int(m)


class Mixture(NamedTuple):
    """The sampling distribution's shares: q = (1 - beta) [(1 - loss_share) gamma / t +
    loss_share l / L] + beta u / U."""

    beta: float = BETA
    loss_share: float = LOSS_SHARE


def _check_mixture(beta, loss_share) -> Mixture:
    return Mixture(
        float(check_scalar(beta, "beta", kind=numbers.Real, low=0.0, high=1.0)),
        float(check_scalar(loss_share, "loss_share", kind=numbers.Real, low=0.0, high=1.0)),
    )


def _mixture_q(gamma, t, loss, L, u, U, mix: Mixture) -> np.ndarray:
    """Sampling probabilities of rows given the set's totals t, L and U.

    Without ``loss`` (no coarse solution, e.g. ``opt`` given) its share goes to gamma.
    """
    if loss is None or not L > 0.0:
        part = gamma / t
    else:
        part = (1.0 - mix.loss_share) * gamma / t + mix.loss_share * loss / L
    return (1.0 - mix.beta) * part + mix.beta * u / U


def _draw(q, u, m, rng):
    """m i.i.d. draws from q (a share of a distribution: the weights use q as it is);
    returns (unique indices, weights u count / (m q))."""
    cum = np.cumsum(q)
    idx = np.searchsorted(cum, rng.random(m) * cum[-1], side="right")
    idx = np.minimum(idx, len(q) - 1)
    uniq, counts = np.unique(idx, return_counts=True)
    weight = u[uniq] * counts / (m * q[uniq])
    return uniq, weight


def _distribution(X1, ys, u, *, C, k, rng, mix, opt=None, tol=0.005):
    """The sampling distribution q of rows ``X1`` (bias column last), with gamma and the
    sensitivity info; trusts its input."""
    with timer("sensitivities", logger):
        gamma, info = _sensitivities(X1, ys, u, C=C, k=k, rng=rng, opt=opt, tol=tol)
    U = float(u.sum())
    loss = None
    if info.w is not None:  # l(p) = u(p) f(p, w~) at the coarse solution w~
        loss = point_costs(hinge(X1 @ info.w, ys), u, C=C, reg=regulariser(info.w), U_total=U)
    return _mixture_q(gamma, float(gamma.sum()), loss, info.upper, u, U, mix), gamma, info


def _build(X, ys, u, m, *, C, k, rng, mix=None, opt=None, tol=0.005, U_total=None):
    """Sensitivity sampling on trusted input (``ys`` in {-1, +1}); y of the result is ys.

    ``U_total``: weight of the whole set the rows stand for (a node of a tree); the node's
    hinge weight is then ``C * U_total / U(rows)`` so its cost is its share of the global one.
    """
    mix = mix or Mixture()
    C_node = C if U_total is None else C * float(U_total) / float(u.sum())
    q, gamma, info = _distribution(
        with_bias(X), ys, u, C=C_node, k=k, rng=rng, mix=mix, opt=opt, tol=tol
    )
    t = float(gamma.sum())
    idx, weight = _draw(q, u, m, rng)
    return Coreset(
        X=X[idx],
        y=ys[idx],
        weight=weight,
        sensitivity=gamma[idx],
        total_sensitivity=t,
        source_size=int(X.shape[0]),
        C=C,
        classes=(-1.0, 1.0),
        info={
            "method": "sensitivity",
            "opt": info.opt,
            "coarse_cost": info.upper,
            "n_clusters": info.n_clusters,
            "beta": mix.beta,
            "loss_share": mix.loss_share,
            "levels": 1,
            "fallback_uniform": info.exact,
        },
    )


def _with_labels(out, classes):
    """A coreset built on labels -1/+1 (:func:`_build`) with the caller's ``(neg, pos)``."""
    neg, pos = classes
    return replace(out, y=labels_of(out.y, classes), classes=(neg, pos))


def _validate(X, y, m, C, sample_weight):
    X = check_finite_2d(X)
    n = X.shape[0]
    m = _check_m(m, n)
    C = check_C(C)
    u = check_sample_weight(sample_weight, n)
    check_cost_range(X, u, C)
    y = np.asarray(y)
    if y.ndim != 1 or y.shape[0] != n:
        raise DKernelError(f"y has shape {y.shape}, expected ({n},) to match the rows of X")
    return X, y, m, C, u


def check_cost_range(X, u, C: float) -> None:
    """Refuse finite weights and features whose SVM cost overflows float64: the solver's
    gradient reaches ``C * sum(u) * max(1, |x|)``, whose square must stay finite."""
    with np.errstate(over="ignore"):
        top = C * float(np.sum(u, dtype=np.float64)) * max(1.0, float(np.abs(X).max()))
    if not top < np.sqrt(np.finfo(np.float64).max):
        raise DKernelError(
            f"sample_weight (up to {float(np.max(u)):.3g}, total {float(np.sum(u)):.3g}) with "
            f"C={C:g} and |X| up to {float(np.abs(X).max()):.3g} is finite but overflows "
            "float64 in the SVM cost; rescale sample_weight (only its ratios matter) or X"
        )


def svm_coreset(
    X,
    y,
    m,
    *,
    C=1.0,
    k=None,
    sample_weight=None,
    opt=None,
    beta=BETA,
    loss_share=LOSS_SHARE,
    multiclass=None,
    random_state=None,
    verbose=0,
):
    """Sensitivity-sampling coreset of a labelled set for the linear SVM cost.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
        NumPy input (see :func:`distributed_coreset` for dask arrays and zarr stores).
    y : array-like of shape (n_samples,)
        Two classes (the larger label plays +1), or more with ``multiclass="ovr"``.
    m : int
        Number of i.i.d. draws; duplicates are merged, so the coreset has at most m rows.
    C : float, default=1.0
        Hinge weight (the paper's lambda) of F(P, w) = sum_p u(p) [||w_{1:d}||^2 / (2 U(P)) + C
        hinge(p, w)] (scikit-learn's ``C`` for unit weights).
    k : int, optional
        k-means++ clusters per label; by default three counts from ceil(ln n) to
        min(sqrt(n), 64) are tried and the one with the smallest total sensitivity kept.
    sample_weight : array-like of shape (n_samples,), optional
        Input weights u(p) (a weighted set, e.g. a coreset); default 1.
    opt : float, optional
        A certified lower bound of min_w F(P, w); by default the coarse solve computes one
        (L-BFGS on a smoothed hinge, certified by a dual-feasible point). When given, no
        coarse solution exists and ``loss_share`` is ignored.
    beta : float in [0, 1], default=0.3
        Share of weight-proportional (uniform) sampling in the mixture
        q = (1 - beta) [(1 - loss_share) gamma / t + loss_share l / L] + beta u / U:
        caps each weight at U / (beta m), so the coreset can lose at most a constant factor
        to a uniform sample where the bound is loose.
    loss_share : float in [0, 1], default=0.5
        Share, in the non-uniform part, of sampling by the point costs at the coarse
        solution w~, l(p) = u(p) f(p, w~) (L = F(P, w~)): the importance sampling that
        minimises the variance of F(S, w) near the optimum, where the error is measured.
        Any mixture keeps the coreset unbiased, and keeps the paper's guarantee with the
        total sensitivity t / ((1 - beta) (1 - loss_share)).
    multiclass : {None, "ovr"}, default=None
        ``"ovr"`` builds one coreset per class (that class +1, the rest -1) and returns a
        dict ``{class: Coreset}``; more than two classes without it is an error.
    random_state : int, Generator, RandomState or None
        Seeds the k-means++ seeding and the draw (the coarse solve is deterministic).
    verbose : int, default=0
        ``>= 1``: a progress bar on stderr (a notebook widget in Jupyter), one step per
        coreset built (one per class with ``multiclass="ovr"``).

    Returns
    -------
    Coreset, or dict of Coreset with ``multiclass="ovr"``

    Warns
    -----
    VacuousCoresetWarning
        When the total sensitivity is at least n (the bound saves nothing; unscaled
        features are the usual cause: standardise X).

    Notes
    -----
    O(n d (k + I)) for the clustering, O(n d) per L-BFGS iteration of the coarse solve and
    O(n + m log n) for the draw. The coreset is unbiased for any w:
    E[F(S, w)] = F(P, w); its relative error shrinks like sqrt(t / m).

    References
    ----------
    M. Tukan, C. Baykal, D. Feldman, D. Rus, "On coresets for support vector machines",
    TAMC 2020 / Theoretical Computer Science 2021, Algorithm 1.

    Examples
    --------
    >>> import numpy as np
    >>> from dkernel.coreset import svm_coreset
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(500, 2)); y = np.where(X[:, 0] + 0.3 * X[:, 1] > 0, 1, -1)
    >>> S = svm_coreset(X, y, 50, random_state=0)
    >>> len(S) <= 50, S.source_size
    (True, 500)
    """
    X, y, m, C, u = _validate(X, y, m, C, sample_weight)
    if multiclass not in (None, "ovr"):
        raise DKernelError(f"multiclass must be None or 'ovr', got {multiclass!r}")
    mix = _check_mixture(beta, loss_share)
    if opt is not None:
        check_scalar(opt, "opt", low=0.0, low_inclusive=False)
    k = check_scalar(k, "k", kind=numbers.Integral, low=1, allow_none=True)
    check_scalar(verbose, "verbose", kind=numbers.Integral, low=0)
    classes = label_classes(y)
    ovr = multiclass == "ovr" and classes.size > 2
    with progress(
        classes.size if ovr else 1, "svm_coreset", enabled=progress_enabled(verbose)
    ) as bar:
        if ovr:
            seeds = np.random.SeedSequence(_base_seed(random_state)).spawn(classes.size)
            per_class = {}
            for c, s in zip(classes, seeds):
                per_class[c.item()] = _one(X, np.where(y == c, 1, -1), u, m, C, k, opt, mix, s)
                bar.update(1, **{"class": c.item()})
            for one in per_class.values():
                _warn_vacuous(one)
            return per_class
        out = _one(X, y, u, m, C, k, opt, mix, random_state)
        bar.update(1, t_over_n=out.total_sensitivity / out.source_size)
    _warn_vacuous(out)
    return out


def _one(X, y, u, m, C, k, opt, mix, random_state) -> Coreset:
    ys, classes = _binary_labels(y, X.shape[0])
    rng = _rng(random_state)
    with timer("svm_coreset", logger):
        out = _build(X, ys, u, m, C=C, k=k, rng=rng, mix=mix, opt=opt)
    return _with_labels(out, classes)


def uniform_coreset(X, y, m, *, C=1.0, sample_weight=None, random_state=None):
    """The baseline: m i.i.d. draws proportional to the input weights, v = U / m each.

    Same return type as :func:`svm_coreset` (``sensitivity`` holds u, ``total_sensitivity``
    U), so both go through the same training and evaluation code.

    Examples
    --------
    >>> import numpy as np
    >>> from dkernel.coreset import uniform_coreset
    >>> X = np.arange(20.0).reshape(10, 2); y = np.array([0, 1] * 5)
    >>> S = uniform_coreset(X, y, 4, random_state=0)
    >>> float(S.weight.sum())
    10.0
    """
    X, y, m, C, u = _validate(X, y, m, C, sample_weight)
    _, classes = _binary_labels(y, X.shape[0])
    rng = _rng(random_state)
    idx, weight = _draw(u / float(u.sum()), u, m, rng)
    return Coreset(
        X=X[idx],
        y=y[idx],
        weight=weight,
        sensitivity=u[idx],
        total_sensitivity=float(u.sum()),
        source_size=int(X.shape[0]),
        C=C,
        classes=classes,
        info={"method": "uniform", "levels": 1},
    )


def coreset_cost(X, y, coef, intercept=0.0, *, C=1.0, sample_weight=None) -> float:
    """F(P, w) = ||coef||^2 / 2 + C sum_p u(p) hinge(p, w) of a labelled set (two classes).

    Examples
    --------
    >>> import numpy as np
    >>> from dkernel.coreset import coreset_cost
    >>> coreset_cost(np.array([[1.0], [-1.0]]), np.array([1, -1]), [0.5], C=1.0)
    1.125
    """
    X = check_finite_2d(X)
    ys, _ = _binary_labels(y, X.shape[0])
    u = check_sample_weight(sample_weight, X.shape[0])
    w = weight_vector(coef, intercept)
    if w.shape[0] != X.shape[1] + 1:
        raise DKernelError(f"coef has {w.shape[0] - 1} entries, X has {X.shape[1]} features")
    return svm_cost(with_bias(X), ys, u, check_C(C), w)
