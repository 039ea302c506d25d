"""BudgetedSVC.predict_proba: Platt scaling on held-out rows (``probability=True``)."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
from sklearn.datasets import load_digits
from sklearn.metrics import log_loss

from dkernel import DKernelError
from dkernel.data import make_checkerboard
from dkernel.svm import BudgetedSVC, load_model


def _binary(n=2000, seed=0):
    return make_checkerboard(n, random_state=seed)


def _digits():
    X, y = load_digits(return_X_y=True)
    names = np.array([f"d{k}" for k in range(10)])[y]
    return X / 16.0, names


def _check_probabilities(clf, X, y):
    P = clf.predict_proba(X)
    assert P.shape == (len(X), len(clf.classes_))
    assert np.all((P >= 0) & (P <= 1))
    np.testing.assert_allclose(P.sum(axis=1), 1.0, atol=1e-12)
    agree = np.mean(clf.classes_[P.argmax(axis=1)] == clf.predict(X))
    assert agree >= 0.9, agree
    # better than knowing the class shares alone
    shares = np.unique(y, return_counts=True)[1] / len(y)
    assert log_loss(y, P, labels=clf.classes_) < log_loss(y, np.tile(shares, (len(y), 1)))
    with np.errstate(divide="ignore"):
        np.testing.assert_allclose(clf.predict_log_proba(X), np.log(P))
    return P


def test_binary_probabilities():
    X, y = _binary()
    Xt, yt = _binary(seed=1)
    clf = BudgetedSVC(budget=40, probability=True, random_state=0).fit(X, y)
    assert clf.probA_.shape == clf.probB_.shape == (1,)
    assert clf.probA_[0] < 0  # a higher score means classes_[1] more likely
    _check_probabilities(clf, Xt, yt)


def test_multiclass_probabilities_with_string_labels():
    X, y = _digits()
    clf = BudgetedSVC(budget=80, probability=True, random_state=0).fit(X[::2], y[::2])
    assert clf.probA_.shape == (10,)
    _check_probabilities(clf, X[1::2], y[1::2])


def test_training_rows_exclude_the_held_out_part():
    X, y = _binary(500)
    clf = BudgetedSVC(budget=20, max_iter=1, probability=True, random_state=3).fit(X, y)
    plain = BudgetedSVC(budget=20, max_iter=1, random_state=3).fit(X, y)
    assert clf.t_ == 450 and plain.t_ == 500  # one epoch over the 90 % trained on
    w = np.ones(len(y))
    weighted = BudgetedSVC(budget=20, max_iter=1, probability=True, random_state=3)
    np.testing.assert_allclose(
        weighted.fit(X, y, sample_weight=w).predict_proba(X), clf.predict_proba(X)
    )


def test_dask_input_is_lazy_and_equal(scheduler):
    X, y = _binary(1200)
    clf = BudgetedSVC(budget=30, max_iter=2, probability=True, random_state=0).fit(X, y)
    Xd = da.from_array(X, chunks=(300, 2))
    lazy = clf.predict_proba(Xd)
    assert isinstance(lazy, da.Array) and lazy.name.startswith("svm-proba")
    np.testing.assert_allclose(lazy.compute(), clf.predict_proba(X), rtol=1e-12)
    # trained from dask input: the same held-out rows, the same model
    dask_fit = BudgetedSVC(budget=30, max_iter=2, probability=True, random_state=0)
    dask_fit.fit(Xd, da.from_array(y, chunks=300))
    np.testing.assert_allclose(dask_fit.probA_, clf.probA_, rtol=1e-9)
    np.testing.assert_allclose(dask_fit.predict_proba(X), clf.predict_proba(X), atol=1e-9)


def test_store_input(tmp_path):
    path = str(tmp_path / "cb.zarr")
    ds = make_checkerboard(1000, random_state=0, store=path, chunk_rows=128)
    clf = BudgetedSVC(budget=30, max_iter=2, probability=True, random_state=0).fit(path)
    X = np.asarray(ds.X.compute())
    np.testing.assert_allclose(clf.predict_proba(path).compute(), clf.predict_proba(X))


def test_save_load_keeps_the_calibration(tmp_path):
    X, y = _digits()
    clf = BudgetedSVC(budget=50, max_iter=2, probability=True, random_state=0).fit(X, y)
    clf.save(tmp_path / "p.npz")
    back = load_model(tmp_path / "p.npz")
    np.testing.assert_array_equal(back.probA_, clf.probA_)
    np.testing.assert_array_equal(back.predict_proba(X), clf.predict_proba(X))
    assert back.summary()["probability"] is True


def test_without_probability_there_is_no_predict_proba():
    from sklearn.calibration import CalibratedClassifierCV

    X, y = _binary(600)
    clf = BudgetedSVC(budget=20, max_iter=1, random_state=0).fit(X, y)
    assert not hasattr(clf, "predict_proba") and clf.probA_ is None
    # the documented alternative: scikit-learn's calibration on the decision function
    cal = CalibratedClassifierCV(BudgetedSVC(budget=20, max_iter=1, random_state=0), cv=3)
    P = cal.fit(X, y).predict_proba(X)
    np.testing.assert_allclose(P.sum(axis=1), 1.0)


def test_partial_fit_drops_a_stale_calibration():
    X, y = _binary(600)
    clf = BudgetedSVC(budget=20, max_iter=1, probability=True, random_state=0).fit(X, y)
    clf.partial_fit(X[:100], y[:100])
    with pytest.raises(DKernelError, match="needs the Platt scaling"):
        clf.predict_proba(X)


def test_bad_probability_settings():
    X, y = _binary(15)
    with pytest.raises(DKernelError, match="probability must be True or False"):
        BudgetedSVC(probability="yes").fit(X, y)
    with pytest.raises(DKernelError, match="holds out 1 of 2 rows"):
        BudgetedSVC(budget=2, probability=True).fit(X[:2], np.array([0, 1]))
