"""BudgetedSVC(standardize=True): statistics from the training data, applied everywhere."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest

from dkernel import DKernelError
from dkernel.data import make_checkerboard
from dkernel.svm import BudgetedSVC, load_model

#: Distributed fits here train in rounds from the first step (no stream prefix).
pytestmark = pytest.mark.usefixtures("rounds_only")

KW = dict(budget=30, gamma=0.5, alpha=1e-3, max_iter=2, random_state=0)


@pytest.fixture
def skewed():
    """The checkerboard with one feature stretched 100x and shifted: unscaled it is
    degenerate for an RBF kernel."""
    X, y = make_checkerboard(3000, n_cells=2, random_state=0)
    Xt, yt = make_checkerboard(1000, n_cells=2, random_state=1)
    stretch = np.array([100.0, 1.0]), np.array([50.0, -3.0])
    return X * stretch[0] + stretch[1], y, Xt * stretch[0] + stretch[1], yt


def test_same_model_as_standardising_by_hand(skewed):
    X, y, Xt, yt = skewed
    clf = BudgetedSVC(**KW, standardize=True, distributed=False).fit(X, y)
    np.testing.assert_allclose(clf.feature_mean_, X.mean(axis=0))
    np.testing.assert_allclose(clf.feature_scale_, X.std(axis=0))
    by_hand = BudgetedSVC(**KW, distributed=False)
    by_hand.fit((X - clf.feature_mean_) / clf.feature_scale_, y)
    np.testing.assert_array_equal(clf.dual_coef_, by_hand.dual_coef_)
    np.testing.assert_array_equal(clf.support_vectors_, by_hand.support_vectors_)
    Zt = (Xt - clf.feature_mean_) / clf.feature_scale_
    np.testing.assert_allclose(clf.decision_function(Xt), by_hand.decision_function(Zt))
    raw = BudgetedSVC(**KW, distributed=False).fit(X, y)
    assert clf.score(Xt, yt) > 0.9 > raw.score(Xt, yt) + 0.1
    assert raw.feature_mean_ is None and raw.feature_scale_ is None


@pytest.mark.parametrize("distributed", [False, True])
def test_dask_input_blockwise(skewed, distributed):
    X, y, Xt, yt = skewed
    ref = BudgetedSVC(**KW, standardize=True, distributed=distributed).fit(X, y)
    Xd = da.from_array(X, chunks=500)
    clf = BudgetedSVC(**KW, standardize=True, distributed=distributed)
    clf.fit(Xd, da.from_array(y, chunks=500))
    np.testing.assert_allclose(clf.feature_mean_, ref.feature_mean_, rtol=1e-12)
    np.testing.assert_allclose(clf.feature_scale_, ref.feature_scale_, rtol=1e-10)
    got = clf.predict(da.from_array(Xt, chunks=300))
    assert isinstance(got, da.Array)
    np.testing.assert_array_equal(got.compute(), clf.predict(Xt))  # blockwise = in memory
    if not distributed:  # same visiting order; statistics equal to ~1e-12
        assert np.mean(got.compute() == ref.predict(Xt)) > 0.99
    assert clf.score(Xt, yt) > 0.9


def test_constant_feature_and_round_trip(tmp_path, skewed):
    X, y, Xt, _ = skewed
    X = np.c_[X, np.full(len(X), 7.0)]
    Xt = np.c_[Xt, np.full(len(Xt), 7.0)]
    clf = BudgetedSVC(**KW, standardize=True).fit(X, y)
    assert clf.feature_scale_[2] == 1.0 and clf.feature_mean_[2] == 7.0
    clf.save(tmp_path / "m.npz")
    back = load_model(tmp_path / "m.npz")
    np.testing.assert_array_equal(back.feature_scale_, clf.feature_scale_)
    np.testing.assert_array_equal(back.decision_function(Xt), clf.decision_function(Xt))


def test_partial_fit_uses_the_first_batch(skewed):
    X, y, Xt, yt = skewed
    clf = BudgetedSVC(budget=30, gamma=0.5, standardize=True)
    clf.partial_fit(X[:1000], y[:1000], classes=[-1, 1])
    mean = clf.feature_mean_.copy()
    np.testing.assert_allclose(mean, X[:1000].mean(axis=0))
    clf.partial_fit(X[1000:], y[1000:])
    np.testing.assert_array_equal(clf.feature_mean_, mean)  # fixed after the first call
    assert clf.score(Xt, yt) > 0.85


def test_bad_value_and_nan():
    with pytest.raises(DKernelError, match="standardize must be True or False"):
        BudgetedSVC(standardize="auto").fit(np.zeros((4, 2)), [0, 1, 0, 1])
    X = np.ones((40, 2))
    X[33, 1] = np.nan
    with pytest.raises(DKernelError, match="NaN or inf"):
        BudgetedSVC(standardize=True).fit(da.from_array(X, chunks=10), np.arange(40) % 2)


def test_default_gamma_is_the_shared_scale_rule(skewed):
    X, y, _, _ = skewed
    X, y = X[:800], y[:800]  # under the 1000-row sample: the rule sees every row
    clf = BudgetedSVC(budget=20, max_iter=1).fit(X, y)
    assert clf.gamma_ == pytest.approx(1.0 / (2 * X.var()), rel=1e-12)
    assert BudgetedSVC(budget=20, max_iter=1, standardize=True).fit(X, y).gamma_ == 0.5
    assert BudgetedSVC(budget=20, max_iter=1, gamma=3.0).fit(X, y).gamma_ == 3.0
    lin = BudgetedSVC(budget=20, max_iter=1, kernel="linear", maintenance="remove")
    assert lin.fit(X, y).gamma_ == 0.5
