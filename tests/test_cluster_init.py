"""kernel_kmeans_plusplus and select_gamma."""

from __future__ import annotations

import numpy as np
import pytest

from dkernel import DKernelError
from dkernel.cluster import kernel_kmeans_plusplus, select_gamma
from dkernel.data import make_gauss


def _blobs(rng):
    centers = np.array([[0.0, 0.0], [10.0, 0.0], [0.0, 10.0]])
    X = np.concatenate([c + 0.1 * rng.normal(size=(40, 2)) for c in centers])
    return X, np.repeat(np.arange(3), 40)


def test_plusplus_picks_one_point_per_blob(rng):
    X, y = _blobs(rng)
    centers, idx = kernel_kmeans_plusplus(X, 3, gamma=0.01, random_state=0)
    assert sorted(y[idx].tolist()) == [0, 1, 2]
    np.testing.assert_array_equal(centers, X[idx])


def test_plusplus_respects_zero_weights(rng):
    X, _ = _blobs(rng)
    w = np.zeros(len(X))
    w[40:] = 1.0
    _, idx = kernel_kmeans_plusplus(X, 2, gamma=0.01, sample_weight=w, random_state=0)
    assert np.all(idx >= 40)


def test_plusplus_identical_rows_do_not_crash():
    X = np.ones((10, 3))
    _, idx = kernel_kmeans_plusplus(X, 3, gamma=1.0, random_state=0)
    assert len(set(idx.tolist())) == 3


def test_plusplus_bad_input(rng):
    X, _ = _blobs(rng)
    with pytest.raises(DKernelError, match="n_clusters must be <= 120"):
        kernel_kmeans_plusplus(X, 121)
    with pytest.raises(DKernelError, match="n_clusters must be >= 1"):
        kernel_kmeans_plusplus(X, 0)
    Xn = X.copy()
    Xn[3, 1] = np.nan
    with pytest.raises(DKernelError, match="X contains NaN at row 3, column 1"):
        kernel_kmeans_plusplus(Xn, 2)
    with pytest.raises(DKernelError, match="unknown kernel"):
        kernel_kmeans_plusplus(X, 2, kernel="nope")


def test_select_gamma_returns_a_candidate_and_scores(rng):
    X, _ = _blobs(rng)
    g, scores = select_gamma(X, 3, sample_size=100, random_state=0, return_scores=True)
    assert g in scores and len(scores) == 5
    assert scores[g] == max(scores.values())
    # well-separated blobs: the chosen clustering has a high silhouette
    assert scores[g] > 0.5


def test_select_gamma_is_seeded():
    X, _ = make_gauss(600, random_state=0)
    a = select_gamma(X, 2, sample_size=200, random_state=3)
    b = select_gamma(X, 2, sample_size=200, random_state=3)
    assert a == b


def test_select_gamma_bad_input(rng):
    X, _ = _blobs(rng)
    with pytest.raises(DKernelError, match="supports 'rbf', 'laplacian'"):
        select_gamma(X, 3, kernel="polynomial")
    with pytest.raises(DKernelError, match="candidates must be"):
        select_gamma(X, 3, candidates=[])
    with pytest.raises(DKernelError, match="n_clusters=50 must be < the 40 sampled rows"):
        select_gamma(X, 50, sample_size=40)
