"""Coreset construction, unbiasedness, merge/reduce algebra, training and bad input."""

from __future__ import annotations

import numpy as np
import pytest

from dkernel import DKernelError
from dkernel.coreset import (
    Coreset,
    coarse_svm,
    coreset_cost,
    merge,
    svm_coreset,
    uniform_coreset,
    with_bias,
)


def _data(rng, n=400, d=3):
    X = rng.normal(size=(n, d))
    y = np.where(X[:, 0] + 0.5 * X[:, 1] + 0.5 * rng.normal(size=n) > 0, 1, 0)
    return X, y


def _ref_cost(X, y, w, b, C, u=None):
    u = np.ones(len(y)) if u is None else u
    ys = np.where(y == y.max(), 1.0, -1.0)
    return 0.5 * w @ w + C * (u * np.maximum(0, 1 - ys * (X @ w + b))).sum()


def test_cost_matches_numpy(rng):
    X, y = _data(rng)
    w, b = rng.normal(size=3), 0.2
    assert coreset_cost(X, y, w, b, C=0.5) == pytest.approx(_ref_cost(X, y, w, b, 0.5))


def test_coreset_shape_labels_and_reproducible(rng):
    X, y = _data(rng)
    X32 = X.astype(np.float32)
    a = svm_coreset(X32, y, 60, random_state=3)
    b = svm_coreset(X32, y, 60, random_state=3)
    assert a.X.dtype == np.float32 and len(a) <= 60 and a.source_size == 400
    assert set(np.unique(a.y)) <= {0, 1} and a.classes == (0, 1)
    assert np.array_equal(a.X, b.X) and np.array_equal(a.weight, b.weight)
    assert a.total_sensitivity > 0 and (a.weight > 0).all()
    # each row of the coreset is a row of X, with its sensitivity
    assert all((X32 == row).all(1).any() for row in a.X)


@pytest.mark.parametrize("beta", [0.0, 0.5])
def test_unbiased(rng, beta):
    X, y = _data(rng, n=300)
    u = rng.uniform(0.5, 2.0, 300)
    X1, ys = with_bias(X), np.where(y == 1, 1.0, -1.0)
    opt = coarse_svm(X1, ys, u, 1.0).lower
    w, b = rng.normal(size=3), -0.3
    full = _ref_cost(X, y, w, b, 1.0, u)
    vals = np.array(
        [
            svm_coreset(X, y, 30, sample_weight=u, opt=opt, beta=beta, random_state=s).cost(w, b)
            for s in range(400)
        ]
    )
    sem = vals.std() / np.sqrt(len(vals))
    assert abs(vals.mean() - full) < 4 * sem
    wsum = np.array(
        [
            svm_coreset(X, y, 30, sample_weight=u, opt=opt, random_state=s).weight.sum()
            for s in range(100)
        ]
    )
    assert abs(wsum.mean() - u.sum()) < 4 * wsum.std() / 10


def test_pathological_close_points_get_high_sensitivity():
    from dkernel.coreset import svm_sensitivity
    from dkernel.data import make_pathological

    X, y = make_pathological(5000, random_state=0)
    X = (X - X.mean(0)) / X.std(0)
    gamma = svm_sensitivity(X, y, random_state=0)
    # the two close points of different labels (rows 0 and 1) are sampled several times
    # more often than under uniform sampling
    assert (gamma[:2] > np.quantile(gamma, 0.99)).all()
    assert (gamma[:2] > 5 * gamma.mean()).all()


def test_merge_algebra(rng):
    X, y = _data(rng)
    a = svm_coreset(X[:200], y[:200], 40, random_state=0)
    b = svm_coreset(X[200:], y[200:], 40, random_state=1)
    c = a | b
    d = merge(a, b)
    assert np.array_equal(c.X, d.X) and len(c) == len(a) + len(b)
    assert c.weight.sum() == pytest.approx(a.weight.sum() + b.weight.sum())
    assert c.source_size == 400
    assert c.total_sensitivity == pytest.approx(a.total_sensitivity + b.total_sensitivity)
    w, b0 = rng.normal(size=3), 0.1
    # the cost of a union is the sum of the hinge parts plus one regulariser
    assert c.cost(w, b0) == pytest.approx(a.cost(w, b0) + b.cost(w, b0) - 0.5 * w @ w)
    # merge is associative on rows and weights
    e = svm_coreset(X[:100], y[:100], 20, random_state=2)
    left, right = (a | b) | e, a | (b | e)
    assert np.array_equal(left.X, right.X) and np.array_equal(left.weight, right.weight)


def test_reduce_composition(rng):
    X, y = _data(rng, n=4000)
    a = svm_coreset(X[:2000], y[:2000], 800, random_state=0)
    b = svm_coreset(X[2000:], y[2000:], 800, random_state=1)
    c = (a | b).reduce(400, random_state=2)
    assert len(c) <= 400 and c.source_size == 4000 and c.info["levels"] == 2
    assert c.classes == (0, 1) and set(np.unique(c.y)) <= {0, 1}
    # m at least the rows held: nothing to reduce, the same object back
    parent = a | b
    assert parent.reduce(10**6) is parent and parent.reduce(len(parent)) is parent
    # the reduced coreset still approximates the full cost
    for _s in range(3):
        w, b0 = rng.normal(size=3), rng.normal()
        assert c.cost(w, b0) == pytest.approx(coreset_cost(X, y, w, b0), rel=0.25)
    # reduce is unbiased in the total weight
    sums = [parent.reduce(100, random_state=s).weight.sum() for s in range(12)]
    assert abs(np.mean(sums) - parent.weight.sum()) < 4 * np.std(sums) / np.sqrt(12)


def test_merge_errors(rng):
    X, y = _data(rng)
    a = svm_coreset(X, y, 20, random_state=0)
    b = svm_coreset(X[:, :2], y, 20, random_state=0)
    with pytest.raises(DKernelError, match="3 and 2 features"):
        merge(a, b)
    with pytest.raises(DKernelError, match="C=1.0 and C=2.0"):
        merge(a, svm_coreset(X, y, 20, C=2.0, random_state=0))
    with pytest.raises(DKernelError, match="more than two classes"):
        merge(a, svm_coreset(X, y + 5, 20, random_state=0))
    with pytest.raises(DKernelError, match="two Coreset"):
        merge(a, X)


def test_weighted_fit_equals_replicated_rows(rng):
    from sklearn.svm import SVC

    X, y = _data(rng, n=40, d=2)
    counts = rng.integers(1, 4, size=40)
    C = Coreset(
        X=X,
        y=y,
        weight=counts.astype(float),
        sensitivity=np.ones(40),
        total_sensitivity=40.0,
        source_size=int(counts.sum()),
        classes=(0, 1),
    )
    weighted = C.fit(SVC(kernel="linear", C=0.7, tol=1e-8))
    replicated = SVC(kernel="linear", C=0.7, tol=1e-8).fit(
        np.repeat(X, counts, 0), np.repeat(y, counts)
    )
    np.testing.assert_allclose(
        weighted.decision_function(X), replicated.decision_function(X), atol=1e-5
    )
    np.testing.assert_allclose(weighted.coef_, replicated.coef_, atol=1e-5)


def test_fit_weight_conventions(rng):
    X, y = _data(rng)
    S = svm_coreset(X, y, 50, random_state=0)

    class Spy:
        def __init__(self, alpha=1e-4):
            self.alpha = alpha

        def get_params(self, deep=True):
            return {"alpha": self.alpha}

        def fit(self, X, y, sample_weight=None):
            self.sw_ = sample_weight
            return self

    spy = S.fit(Spy())
    # mean-loss estimators get weights normalised to mean 1 (alpha kept)
    assert spy.sw_.mean() == pytest.approx(1.0) and spy.alpha == 1e-4
    np.testing.assert_allclose(spy.sw_ / spy.sw_.sum(), S.weight / S.weight.sum())

    from sklearn.linear_model import SGDClassifier
    from sklearn.svm import LinearSVC

    assert S.fit(SGDClassifier(random_state=0)).score(X, y) > 0.7
    assert S.fit(LinearSVC(random_state=0)).score(X, y) > 0.7

    class NoWeights:
        def fit(self, X, y):
            return self

    with pytest.raises(DKernelError, match="takes no sample_weight"):
        S.fit(NoWeights())


def test_one_vs_rest(rng):
    X = rng.normal(size=(600, 2))
    y = np.digitize(X[:, 0], [-0.5, 0.5])
    out = svm_coreset(X, y, 80, multiclass="ovr", random_state=0)
    assert sorted(out) == [0, 1, 2]
    for _c, S in out.items():
        assert set(np.unique(S.y)) <= {-1, 1} and len(S) <= 80
        assert S.weight.sum() == pytest.approx(600, rel=0.5)
    # binary input with ovr: one coreset as usual
    assert isinstance(svm_coreset(X, y > 0, 50, multiclass="ovr", random_state=0), Coreset)


def test_uniform_coreset(rng):
    X, y = _data(rng)
    S = uniform_coreset(X, y, 50, random_state=0)
    assert S.weight.sum() == pytest.approx(400.0)
    assert S.info["method"] == "uniform" and len(S) <= 50


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"m": 0}, "m must be >= 1"),
        ({"m": 401}, "m=401 exceeds the 400 rows"),
        ({"m": 2.5}, "m must be Integral"),
        ({"C": 0.0}, "C must be > 0"),
        ({"C": -1.0}, "C must be > 0"),
        ({"beta": 1.5}, "beta must be <= 1"),
        ({"sample_weight": -np.ones(400)}, "sample_weight is negative at row 0"),
        ({"sample_weight": np.zeros(400)}, "sample_weight is zero everywhere"),
        ({"sample_weight": np.ones(3)}, r"sample_weight has shape \(3,\)"),
        ({"multiclass": "ovo"}, "multiclass must be None or 'ovr'"),
        ({"k": 0}, "k must be >= 1"),
    ],
)
def test_bad_parameters(rng, kwargs, match):
    X, y = _data(rng)
    args = {"m": 20, **kwargs}
    m = args.pop("m")
    with pytest.raises(DKernelError, match=match):
        svm_coreset(X, y, m, **args)


def test_bad_data(rng):
    X, y = _data(rng)
    Xn = X.copy()
    Xn[7, 1] = np.nan
    with pytest.raises(DKernelError, match="X contains NaN at row 7, column 1"):
        svm_coreset(Xn, y, 10)
    Xn[7, 1] = np.inf
    with pytest.raises(DKernelError, match="X contains inf at row 7"):
        uniform_coreset(Xn, y, 10)
    with pytest.raises(DKernelError, match="one class only"):
        svm_coreset(X, np.zeros(400), 10)
    with pytest.raises(DKernelError, match="3 classes; pass multiclass='ovr'"):
        svm_coreset(X, np.arange(400) % 3, 10)
    with pytest.raises(DKernelError, match=r"y has shape \(399,\)"):
        svm_coreset(X, y[:-1], 10)
    with pytest.raises(DKernelError, match="must be 2-D"):
        svm_coreset(X[:, 0], y, 10)


def test_fit_dkernel_estimators(rng):
    # duck typing on sample_weight: dkernel's BudgetedSVC (alpha: weights normalised to mean
    # 1) and kernel k-means (raw weights)
    from dkernel.cluster import KernelKMeans
    from dkernel.svm import BudgetedSVC

    X = rng.normal(size=(800, 2))
    y = np.where((X**2).sum(1) > 1.5, 1, -1)
    S = svm_coreset(X, y, 150, random_state=0)
    clf = S.fit(BudgetedSVC(budget=40, gamma=1.0, max_iter=3, random_state=0))
    assert clf.score(X, y) > 0.8
    km = S.fit(KernelKMeans(n_clusters=2, random_state=0))
    assert km.labels_.shape == (len(S),)


def test_coreset_beats_uniform_at_equal_size(rng):
    # the benchmark's protocol in small: relative error of the full SVM objective at the
    # solution trained on the coreset, mean over seeds, against a uniform sample of equal m
    X = rng.normal(size=(3000, 4)) * [1.0, 2.0, 0.5, 1.0]
    y = np.where(X[:, 0] + 0.5 * rng.normal(size=3000) > 1.0, 1, -1)  # 18% positive
    best = coarse_svm(with_bias(X), y.astype(float), np.ones(3000), 1.0, tol=1e-6).upper

    def err(S):
        w = coarse_svm(with_bias(S.X), S.signs, S.weight, 1.0, tol=1e-3, max_iter=400).w
        return coreset_cost(X, y, w[:-1], w[-1]) / best - 1.0

    core = np.mean([err(svm_coreset(X, y, 100, random_state=s)) for s in range(6)])
    unif = np.mean([err(uniform_coreset(X, y, 100, random_state=s)) for s in range(6)])
    assert core < 0.7 * unif
