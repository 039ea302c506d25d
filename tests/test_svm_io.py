"""BudgetedSVC model files: round trip, string classes, corrupt and foreign files."""

from __future__ import annotations

import json

import numpy as np
import pytest

from dkernel import DKernelError
from dkernel.data import make_checkerboard
from dkernel.svm import BudgetedSVC, load_model


def _data(n=500, seed=0):
    X, y = make_checkerboard(n, n_cells=2, random_state=seed)
    return X - 1.0, y


@pytest.mark.parametrize("maintenance", ["merge", "project"])
def test_round_trip_predicts_the_same(tmp_path, maintenance):
    X, y = _data()
    clf = BudgetedSVC(budget=20, maintenance=maintenance, gamma=2.0, random_state=0).fit(X, y)
    path = tmp_path / "m.npz"
    clf.save(path)
    back = BudgetedSVC.load(path)
    np.testing.assert_array_equal(back.predict(X), clf.predict(X))
    np.testing.assert_allclose(back.decision_function(X), clf.decision_function(X), rtol=1e-12)
    assert back.get_params() == clf.get_params()
    for k in ("t_", "n_iter_", "weight_degradation_", "n_maintenance_", "gamma_"):
        assert getattr(back, k) == getattr(clf, k)
    # the loaded model keeps learning like the original
    X2, y2 = _data(300, seed=1)
    a = clf.partial_fit(X2, y2).decision_function(X)
    b = back.partial_fit(X2, y2).decision_function(X)
    np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-9)


def test_string_classes_multiclass(tmp_path):
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    names = np.array(["zero", "one", "two"])[y[y < 3]]
    X = X[y < 3] / 16.0
    clf = BudgetedSVC(budget=30, gamma=0.05, random_state=0).fit(X, names)
    clf.save(tmp_path / "s.npz")
    back = load_model(tmp_path / "s.npz")
    assert back.classes_.dtype.kind == "U"
    np.testing.assert_array_equal(back.predict(X), clf.predict(X))
    with np.load(tmp_path / "s.npz", allow_pickle=False) as f:  # no pickles inside
        header = json.loads(str(f["header"]))
    assert header["format"] == "dkernel.BudgetedSVC" and header["version"] == 2


def test_bad_files(tmp_path):
    X, y = _data()
    clf = BudgetedSVC(budget=10, gamma=2.0, random_state=0).fit(X, y)
    good = tmp_path / "m.npz"
    clf.save(good)
    with pytest.raises(DKernelError, match="no model file"):
        load_model(tmp_path / "missing.npz")
    junk = tmp_path / "junk.npz"
    junk.write_bytes(b"not a zip at all")
    with pytest.raises(DKernelError, match="not a dkernel model file"):
        load_model(junk)
    foreign = tmp_path / "foreign.npz"
    np.savez(foreign, X=np.zeros(3))
    with pytest.raises(DKernelError, match="not a dkernel model file"):
        load_model(foreign)
    data = dict(np.load(good, allow_pickle=False))
    h = json.loads(str(data["header"]))
    h["version"] = 99
    np.savez(tmp_path / "v99.npz", **{**data, "header": np.array(json.dumps(h))})
    with pytest.raises(DKernelError, match="format version 99"):
        load_model(tmp_path / "v99.npz")
    np.savez(tmp_path / "shape.npz", **{**data, "dual_coef": data["dual_coef"][:3]})
    with pytest.raises(DKernelError, match="corrupt: array shapes"):
        load_model(tmp_path / "shape.npz")
    np.savez(tmp_path / "hdr.npz", **{**data, "header": np.array("{oops")})
    with pytest.raises(DKernelError, match="corrupt header"):
        load_model(tmp_path / "hdr.npz")
    with pytest.raises(Exception, match="not fitted"):
        BudgetedSVC().save(tmp_path / "x.npz")


def _edited(tmp_path, data, name, **changes):
    """A copy of a model file with header entries replaced (``params`` / ``fitted``)."""
    h = json.loads(str(data["header"]))
    for section, values in changes.items():
        h[section].update(values)
    path = tmp_path / f"{name}.npz"
    np.savez(path, **{**data, "header": np.array(json.dumps(h))})
    return path


@pytest.mark.parametrize(
    ("section", "values", "message"),
    [
        ("params", {"budget": -3}, "budget must be >= 2"),
        ("params", {"budget": "500"}, "budget must be Integral"),
        ("params", {"maintenance": "shred"}, "maintenance must be one of"),
        ("params", {"alpha": -1.0}, "alpha must be >= 0"),
        ("params", {"kernel": "precomputed"}, "needs a named kernel"),
        ("params", {"max_iter": 0}, "max_iter must be >= 1"),
        ("params", {"checkpoint_every": 1.5}, "checkpoint_every must be Integral"),
        ("params", {"unknown": 1}, "unexpected keyword"),
        ("fitted", {"t_": -1}, "t_ must be >= 0"),
        ("fitted", {"gamma_": "wide"}, "gamma_ must be Real"),
        ("fitted", {"n_features_in_": 2.5}, "n_features_in_ must be Integral"),
        ("fitted", {"kernel": "magic"}, "kernel 'magic' of the fitted model is unknown"),
    ],
)
def test_header_values_are_checked(tmp_path, section, values, message):
    X, y = _data()
    good = tmp_path / "m.npz"
    BudgetedSVC(budget=10, gamma=2.0, random_state=0).fit(X, y).save(good)
    data = dict(np.load(good, allow_pickle=False))
    bad = _edited(tmp_path, data, "bad", **{section: values})
    with pytest.raises(DKernelError, match="corrupt header") as info:
        load_model(bad)
    assert message in str(info.value)


def test_more_support_vectors_than_the_budget_is_refused(tmp_path):
    X, y = _data()
    good = tmp_path / "m.npz"
    BudgetedSVC(budget=10, gamma=2.0, random_state=0).fit(X, y).save(good)
    data = dict(np.load(good, allow_pickle=False))
    with pytest.raises(DKernelError, match="10 support vectors for a budget of 5"):
        load_model(_edited(tmp_path, data, "b5", params={"budget": 5}))


def test_size_limit(tmp_path):
    X, y = _data()
    path = tmp_path / "m.npz"
    BudgetedSVC(budget=10, gamma=2.0, random_state=0).fit(X, y).save(path)
    size = path.stat().st_size
    with pytest.raises(DKernelError, match=f"{size:,} bytes, above the limit of 1,000"):
        load_model(path, max_bytes=1000)
    assert load_model(path, max_bytes=size + 100_000).budget == 10
    # a small file that unpacks to much more (a compressed entry) is refused unread
    bomb = tmp_path / "bomb.npz"
    data = dict(np.load(path, allow_pickle=False))
    np.savez_compressed(bomb, **{**data, "pad": np.zeros(2_000_000)})
    assert bomb.stat().st_size < 200_000
    with pytest.raises(DKernelError, match="unpacks to .* above the limit of 1,000,000"):
        load_model(bomb, max_bytes=1_000_000)


def test_checkpoint_path_parameter_is_saved_as_text(tmp_path):
    X, y = _data()
    clf = BudgetedSVC(budget=10, gamma=2.0, random_state=0, checkpoint=tmp_path / "c.npz")
    clf.fit(X, y).save(tmp_path / "m.npz")
    assert load_model(tmp_path / "m.npz").checkpoint == str(tmp_path / "c.npz")
