"""Defaults that work or say why not: gamma selection by a comparable score, sparse input to
the bandwidth helpers, more clusters than distinct points."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import make_blobs
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import adjusted_rand_score
from sklearn.model_selection import GridSearchCV

from dkernel import DKernelError
from dkernel.cluster import (
    KernelKMeans,
    MiniBatchKernelKMeans,
    kernel_alignment_score,
    select_gamma,
)
from dkernel.kernels import estimate_gamma

GAMMAS = [0.001, 0.01, 0.1, 1.0, 10.0, 100.0]


@pytest.fixture(scope="module")
def blobs():
    centers = [[0.0, 0.0], [8.0, 0.0], [0.0, 8.0], [8.0, 8.0]]  # well separated
    return make_blobs(400, centers=centers, cluster_std=1.0, random_state=0)


def test_grid_search_recipe_picks_a_sensible_gamma(blobs):
    X, y = blobs
    km = MiniBatchKernelKMeans(4, batch_size=64, max_iter=20, random_state=0)
    search = GridSearchCV(km, {"gamma": GAMMAS}, scoring=kernel_alignment_score, cv=2).fit(X)
    best = search.best_params_["gamma"]
    assert best not in (GAMMAS[0], GAMMAS[-1])  # an interior width, not the smallest
    assert adjusted_rand_score(y, search.best_estimator_.labels_) > 0.95
    scores = search.cv_results_["mean_test_score"]
    assert scores[GAMMAS.index(best)] > scores[0] + 0.05  # a clear optimum, not a tie
    # the estimator's own score (negative objective) is not comparable across widths
    plain = GridSearchCV(km, {"gamma": GAMMAS}, cv=2).fit(X)
    assert plain.best_params_["gamma"] == GAMMAS[0]


def test_alignment_score_full_batch_and_bounds(blobs):
    X, _ = blobs
    good = KernelKMeans(4, gamma=0.1, random_state=0).fit(X)
    narrow = KernelKMeans(4, gamma=100.0, random_state=0).fit(X)
    a_good = kernel_alignment_score(good, X)
    a_narrow = kernel_alignment_score(narrow, X)
    assert -1.0 <= a_narrow < a_good <= 1.0
    assert kernel_alignment_score(good, X) == a_good  # the sample is seeded
    graph = MiniBatchKernelKMeans(4, kernel="knn", batch_size=64, max_iter=5, random_state=0)
    with pytest.raises(DKernelError, match="numeric kernel"):
        kernel_alignment_score(graph.fit(X), X)


@pytest.mark.parametrize("fmt", ["csr", "csc", "coo"])
def test_sparse_input_to_bandwidth_helpers(fmt):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 6))
    X[X < 0.5] = 0.0
    S = sp.csr_matrix(X).asformat(fmt)
    assert estimate_gamma(S, random_state=0) == estimate_gamma(X, random_state=0)
    assert select_gamma(S, 3, sample_size=100, random_state=0) == select_gamma(
        X, 3, sample_size=100, random_state=0
    )


def test_more_clusters_than_distinct_points_warns():
    X = np.repeat(np.eye(3), 10, axis=0)
    with pytest.warns(ConvergenceWarning, match="KernelKMeans found 3 distinct clusters"):
        km = KernelKMeans(5, gamma=1.0, random_state=0).fit(X)
    assert np.unique(km.labels_).size == 3
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        KernelKMeans(3, gamma=1.0, random_state=0).fit(X)  # enough distinct points: silent


def test_default_gamma_is_the_scale_rule():
    """gamma=None: 1 / (n_features * X.var()) of the initial sample for rbf (scikit-learn's
    "scale"; 1 / n_features on standardised data), the median heuristic for laplacian."""
    X, _ = make_blobs(500, n_features=6, centers=3, random_state=0)
    X = X * 7.0 + 3.0
    for est in (
        MiniBatchKernelKMeans(3, batch_size=500, max_iter=2, random_state=0),
        KernelKMeans(3, max_iter=2, random_state=0),
    ):
        g = est.fit(X).gamma_
        assert g == pytest.approx(1.0 / (6 * X.var()), rel=1e-12)  # the sample is all of X
    Xs = (X - X.mean(0)) / X.std(0)
    g = MiniBatchKernelKMeans(3, batch_size=500, max_iter=2, random_state=0).fit(Xs).gamma_
    assert g == pytest.approx(1.0 / 6, rel=1e-9)
    lap = MiniBatchKernelKMeans(3, kernel="laplacian", max_iter=2, random_state=0).fit(X)
    assert lap.gamma_ == pytest.approx(estimate_gamma(X, kernel="laplacian"), rel=0.5)
    # partial_fit takes the same rule on its first batch
    pf = MiniBatchKernelKMeans(3, random_state=0).partial_fit(X)
    assert pf.gamma_ == pytest.approx(1.0 / (6 * X.var()), rel=1e-12)
