"""BudgetedSVC.partial_fit: stores as fit takes them, the seeded order, the reservoir and the
refit over it; MiniBatchKernelKMeans.partial_fit's inertia_."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from dkernel import DKernelError
from dkernel.cluster import MiniBatchKernelKMeans
from dkernel.data import ingest, make_checkerboard
from dkernel.svm import BudgetedSVC
from dkernel.svm.state import reservoir_add


def _board(n=2000, seed=0):
    X, y = make_checkerboard(n, n_cells=2, random_state=seed)
    return X - 1.0, y


@pytest.fixture
def store(tmp_path):
    X, y = _board()
    np.savez(tmp_path / "b.npz", X=X, y=y)
    return str(ingest(tmp_path / "b.npz", tmp_path / "b.zarr", chunk_rows=512).path)


def test_partial_fit_takes_a_store_with_its_labels_and_classes(store):
    from dkernel.data import open_dataset

    ds = open_dataset(store)
    a = BudgetedSVC(budget=30, gamma=2.0, random_state=0).partial_fit(store)
    b = BudgetedSVC(budget=30, gamma=2.0, random_state=0).partial_fit(
        np.asarray(ds.X), np.asarray(ds.y), classes=[-1, 1]
    )
    np.testing.assert_array_equal(a.classes_, [-1, 1])
    np.testing.assert_array_equal(a.support_vectors_, b.support_vectors_)
    np.testing.assert_allclose(a.dual_coef_, b.dual_coef_)


def test_the_sample_starts_again_after_a_fit():
    X, y = _board(600)
    clf = BudgetedSVC(budget=20, gamma=2.0, random_state=0)
    clf.partial_fit(X[:300], y[:300], classes=[-1, 1]).partial_fit(X[300:], y[300:], refit=True)
    # alpha=None: the refit's alpha is 1 / (10 t) for the t rows the sample has seen
    assert clf.refit_alpha_ == pytest.approx(0.1 / 600)
    clf.fit(X[:200], y[:200]).partial_fit(X[200:300], y[200:300], refit=True)
    assert clf.refit_alpha_ == pytest.approx(0.1 / 100)  # the rows of the fit are not in it


def test_reservoir_keeps_a_uniform_sample_of_every_row():
    rng = np.random.RandomState(0)
    X = np.arange(1000.0)[:, None]
    res = None
    for s in range(0, 1000, 100):  # ten calls of 100 rows
        res = reservoir_add(res, X[s : s + 100], np.arange(s, s + 100), None, rng=rng, cap=300)
    assert res.seen == 1000 and len(res.y) == 300 and res.w is None
    assert len(np.unique(res.y)) == 300
    np.testing.assert_array_equal(res.X[:, 0], res.y)  # rows and labels stay together
    # uniform: each tenth of the stream holds about 30 of the 300 (binomial sd ~5)
    counts = np.bincount(res.y // 100, minlength=10)
    assert counts.min() > 10 and counts.max() < 50
    small = reservoir_add(None, X[:50], np.arange(50), np.full(50, 2.0), rng=rng, cap=300)
    np.testing.assert_array_equal(np.sort(small.y), np.arange(50))
    np.testing.assert_array_equal(small.w, 2.0)


def test_refit_on_the_last_call_matches_fit():
    X, y = _board(4000)
    Xt, yt = _board(2000, seed=1)
    fit = BudgetedSVC(budget=40, gamma=2.0, random_state=0).fit(X, y)
    clf = BudgetedSVC(budget=40, gamma=2.0, random_state=0)
    bounds = np.arange(0, 4001, 500)
    for i, (a, b) in enumerate(itertools.pairwise(bounds)):
        clf.partial_fit(X[a:b], y[a:b], classes=[-1, 1], refit=i == len(bounds) - 2)
    assert clf.refit_alpha_ == pytest.approx(1 / (10 * 4000))
    assert clf.score(Xt, yt) >= fit.score(Xt, yt) - 0.01
    plain = BudgetedSVC(budget=40, gamma=2.0, random_state=0)
    for a, b in itertools.pairwise(bounds):
        plain.partial_fit(X[a:b], y[a:b], classes=[-1, 1])
    assert plain.refit_alpha_ is None
    np.testing.assert_array_equal(plain.support_vectors_, clf.support_vectors_)


def test_refit_needs_the_estimators_refit():
    X, y = _board(200)
    with pytest.raises(DKernelError, match="refit on"):
        BudgetedSVC(budget=20, refit=False).partial_fit(X, y, classes=[-1, 1], refit=True)


def test_kmeans_partial_fit_sets_inertia():
    X, _ = _board(600)
    km = MiniBatchKernelKMeans(3, gamma=2.0, random_state=0).partial_fit(X[:300])
    assert km.inertia_ == pytest.approx(300 * km.history_[-1])
    before = MiniBatchKernelKMeans(3, gamma=2.0, random_state=0).partial_fit(X[:300])
    _, dist = before._labels_and_distances(X[300:], False)  # the centers the rows meet
    km.partial_fit(X[300:], sample_weight=np.full(300, 2.0))
    assert km.inertia_ == pytest.approx(2 * float(dist.sum()), rel=1e-6)
