"""Kernel k-means coresets: sensitivity bound, unbiased cost, fitting the estimators."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import adjusted_rand_score

from dkernel import DKernelError
from dkernel.cluster import KernelKMeans, MiniBatchKernelKMeans, NumericOracle
from dkernel.coreset import (
    draw_systematic,
    inclusion,
    kernel_kmeans_coreset,
    kernel_kmeans_sensitivity,
    merge,
    svm_coreset,
)
from dkernel.kernels import resolve_kernel


def _blobs(rng, n=600):
    centers = np.array([[0.0, 0.0], [6.0, 0.0], [0.0, 6.0]])
    return np.vstack([c + rng.normal(size=(n // 3, 2)) for c in centers])


def _feature_cost(X, Y, u, gamma):
    """sum_p u(p) min_c |phi(p) - phi(c)|^2 for centres at rows Y (rbf: k(x, x) = 1)."""
    K = np.exp(-gamma * ((X[:, None, :] - Y[None, :, :]) ** 2).sum(-1))
    return float(u @ (2.0 - 2.0 * K).min(1))


def test_sensitivity_bounds_the_share_of_any_centres(rng):
    X = _blobs(rng, 150)
    u = rng.uniform(0.5, 2.0, len(X))
    spec = resolve_kernel("rbf", 0.5, 3, 1.0, None, n_features=2)
    oracle = NumericOracle(spec)
    seeds = np.array([0, 60, 120])
    gamma, labels = kernel_kmeans_sensitivity(X, seeds, u, oracle)
    assert gamma.sum() == pytest.approx(1.0 + 3)  # cost share + one per cluster
    assert labels.shape == (len(X),) and set(labels.tolist()) <= {0, 1, 2}
    # the bound of the sensitivity framework (up to its constant): for random centre sets,
    # a point's share u d^2 / cost stays within a small multiple of gamma
    for _ in range(50):
        Y = X[rng.choice(len(X), 3, replace=False)] + rng.normal(scale=0.5, size=(3, 2))
        K = np.exp(-0.5 * ((X[:, None, :] - Y[None, :, :]) ** 2).sum(-1))
        share = u * (2.0 - 2.0 * K).min(1) / _feature_cost(X, Y, u, 0.5)
        assert (share <= 8.0 * gamma).all()


def test_cost_estimate_unbiased(rng):
    X = _blobs(rng)
    Y = X[[5, 250, 480]]
    full = _feature_cost(X, Y, np.ones(len(X)), 0.5)
    vals = [
        _feature_cost(
            (S := kernel_kmeans_coreset(X, 60, 3, gamma=0.5, random_state=s)).X, Y, S.weight, 0.5
        )
        for s in range(200)
    ]
    assert abs(np.mean(vals) - full) < 4 * np.std(vals) / np.sqrt(len(vals))


def test_fit_kernel_kmeans_estimators(rng):
    X = _blobs(rng)
    S = kernel_kmeans_coreset(X, 120, 3, gamma=0.5, random_state=0)
    assert S.y is None and S.info["method"] == "kernel-kmeans" and len(S) <= 120
    assert S.weight.sum() == pytest.approx(len(X), rel=0.3)
    for est in (
        KernelKMeans(n_clusters=3, gamma=0.5, random_state=0),
        MiniBatchKernelKMeans(n_clusters=3, gamma=0.5, batch_size=64, random_state=0),
    ):
        fitted = S.fit(est)
        # the three blobs are recovered from 120 weighted rows
        assert adjusted_rand_score(np.repeat([0, 1, 2], 200), fitted.predict(X)) > 0.95


def test_errors(rng):
    X = _blobs(rng)
    S = kernel_kmeans_coreset(X, 50, 3, gamma=0.5, random_state=0)
    with pytest.raises(DKernelError, match="no SVM labels"):
        S.reduce(10)
    with pytest.raises(DKernelError, match="unlabelled"):
        merge(S, svm_coreset(X, np.arange(len(X)) % 2, 20, random_state=0))
    assert len(merge(S, S)) == 2 * len(S)
    with pytest.raises(DKernelError, match="n_clusters must be <= 600"):
        kernel_kmeans_coreset(X, 50, 601)
    with pytest.raises(DKernelError, match="m=601 exceeds"):
        kernel_kmeans_coreset(X, 601, 3)


def test_beats_uniform_on_unbalanced_clusters(rng):
    """One blob holds 90 % of the rows, two small ones and a few outliers the rest: the
    coreset's full-data cost error for fixed centres is below a uniform sample's."""
    X = _unbalanced(rng)
    core, unif = _median_errors(
        X, lambda s: kernel_kmeans_coreset(X, 100, 3, gamma=0.1, random_state=s), 60, rng
    )
    assert core < 0.6 * unif, (core, unif)


def test_systematic_draw_has_exact_inclusion_probabilities(rng):
    """m distinct rows; each row drawn with probability pi = min(1, c q) (sum m), the
    heavy rows always, zero-q rows never; along a grouped order every group gets its
    sum of pi rows up to one (the stratification); the Horvitz-Thompson total is unbiased."""
    q = np.array([0.0, 0.3, 0.02, 0.05, 0.01, 0.2, 0.04, 0.0, 0.08, 0.1, 0.03, 0.17])
    u = rng.uniform(0.5, 2.0, len(q))
    m = 5
    pi = inclusion(q, m)
    assert pi.sum() == pytest.approx(m) and pi[1] == 1.0 and pi[0] == pi[7] == 0.0
    assert np.all(pi <= 1.0)
    group = np.arange(len(q)) % 3
    order = np.lexsort((q, group))
    band = [pi[group == g].sum() for g in range(3)]
    gen = np.random.default_rng(0)
    hits = np.zeros(len(q))
    totals = []
    for _ in range(4000):
        idx, w = draw_systematic(q, u, m, order, gen)
        assert len(idx) == m and np.all(np.diff(idx) > 0)
        for g in range(3):
            assert np.floor(band[g] - 1e-9) <= np.sum(group[idx] == g) <= np.ceil(band[g] + 1e-9)
        hits[idx] += 1
        totals.append(w @ q[idx] * 10.0)  # estimates sum u q * 10
    freq = hits / 4000
    np.testing.assert_allclose(freq, pi, atol=4 * np.sqrt(0.25 / 4000))
    np.testing.assert_allclose(w, u[idx] / pi[idx])
    assert abs(np.mean(totals) - 10.0 * (u @ q)) < 4 * np.std(totals) / np.sqrt(len(totals))


def test_coreset_has_m_distinct_rows_and_skips_zero_weights(rng):
    X = _unbalanced(rng)
    u = np.ones(len(X))
    u[::3] = 0.0
    S = kernel_kmeans_coreset(X, 150, 3, gamma=0.1, sample_weight=u, random_state=0)
    assert len(S) == 150 and len(np.unique(S.X, axis=0)) == 150
    rows = {tuple(r) for r in X[u > 0]}
    assert all(tuple(r) in rows for r in S.X)
    # fewer drawable rows than m: all of them, each standing for itself
    few = np.zeros(len(X))
    few[:40] = 2.0
    T = kernel_kmeans_coreset(X, 150, 3, gamma=0.1, sample_weight=few, random_state=0)
    np.testing.assert_array_equal(T.X, X[:40])
    np.testing.assert_array_equal(T.weight, few[:40])


def _median_errors(X, build, draws, rng, m=100, g=0.1):
    """Median full-data cost errors, over ``draws``, of ``build(seed)``'s coresets and of
    uniform samples of m rows, for 4 sets of 3 fixed centres (rbf, gamma g)."""
    n = len(X)
    centre_sets = [X[rng.choice(n, 3, replace=False)] for _ in range(4)]
    full = [_feature_cost(X, Y, np.ones(n), g) for Y in centre_sets]

    def error(Z, w):
        return np.mean([abs(_feature_cost(Z, Y, w, g) - f) / f for Y, f in zip(centre_sets, full)])

    core, unif = [], []
    for s in range(draws):
        S = build(s)
        core.append(error(S.X, S.weight))
        idx = rng.choice(n, m)
        unif.append(error(X[idx], np.full(m, n / m)))
    return np.median(core), np.median(unif)


def _unbalanced(rng):
    """One blob with 90 % of the rows, two small ones and a few outliers."""
    return np.vstack(
        [
            rng.normal(size=(1800, 2)),
            [6.0, 0.0] + 0.5 * rng.normal(size=(100, 2)),
            [0.0, 6.0] + 0.5 * rng.normal(size=(80, 2)),
            rng.uniform(-12, 12, size=(20, 2)),
        ]
    )


def test_tree_build_from_dask_and_store_is_the_same_for_any_chunking(rng, tmp_path):
    """Dask or store input: merge-and-reduce over leaves of rows; the leaves and seeds
    follow the rows, so storage chunking and the scheduler do not change the coreset."""
    import dask
    import dask.array as da
    from distributed import Client, LocalCluster

    from dkernel.data import ingest

    X = _unbalanced(rng)[rng.permutation(2000)]
    kw = {"gamma": 0.1, "leaf_size": 256, "random_state": 3}
    with dask.config.set(scheduler="sync"):
        a = kernel_kmeans_coreset(da.from_array(X, chunks=300), 100, 3, **kw)
        b = kernel_kmeans_coreset(da.from_array(X, chunks=(777, 2)), 100, 3, **kw)
    ingest(X, str(tmp_path / "s.zarr"), chunk_rows=128)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False) as cl, Client(cl):
        c = kernel_kmeans_coreset(str(tmp_path / "s.zarr"), 100, 3, **kw)
    for other in (b, c):
        np.testing.assert_array_equal(a.X, other.X)
        np.testing.assert_array_equal(a.weight, other.weight)
    assert a.info["method"] == "kernel-kmeans merge-reduce"
    assert a.info["n_leaves"] == 8 and a.info["tree_levels"] == 3
    assert a.source_size == 2000 and len(a) <= 100
    # every row's weight is accounted for: the weights estimate n
    assert a.weight.sum() == pytest.approx(2000, rel=0.25)


def test_tree_build_beats_uniform_on_unbalanced_clusters(rng):
    """The tree's coreset (8 leaves, 3 levels) estimates the full-data cost of fixed
    centres better than a uniform sample of the same size."""
    import dask
    import dask.array as da

    X = _unbalanced(rng)[rng.permutation(2000)]
    Xd = da.from_array(X, chunks=500)
    with dask.config.set(scheduler="sync"):
        core, unif = _median_errors(
            X,
            lambda s: kernel_kmeans_coreset(Xd, 100, 3, gamma=0.1, leaf_size=256, random_state=s),
            30,
            rng,
        )
    assert core < 0.8 * unif, (core, unif)


def test_tree_build_checks(rng):
    import dask.array as da

    Xd = da.from_array(_blobs(rng), chunks=200)
    with pytest.raises(DKernelError, match="n_clusters must be <= 50"):
        kernel_kmeans_coreset(Xd, 50, 51)
    with pytest.raises(DKernelError, match="split_every must be >= 2"):
        kernel_kmeans_coreset(Xd, 50, 3, split_every=1)
    with pytest.raises(DKernelError, match="sample_weight"):
        kernel_kmeans_coreset(Xd, 50, 3, sample_weight=np.ones(600))
    bad = _blobs(rng)
    bad[333, 1] = np.nan
    with pytest.raises(DKernelError, match="333"):
        kernel_kmeans_coreset(da.from_array(bad, chunks=200), 50, 3, leaf_size=128)
