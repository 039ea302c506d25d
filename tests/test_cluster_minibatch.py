"""MiniBatchKernelKMeans: references, truncation invariants, Dask paths, bad input."""

from __future__ import annotations

import os
import pickle

import dask.array as da
import numpy as np
import pytest
from sklearn.datasets import load_digits
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics.pairwise import rbf_kernel
from sklearn.utils.estimator_checks import parametrize_with_checks

from dkernel import DKernelError
from dkernel.cluster import KernelKMeans, MiniBatchKernelKMeans
from dkernel.data import ingest, make_rings
from dkernel.kernels import pairwise_kernels

GAMMA = 0.002


@pytest.fixture(scope="module")
def digits():
    X, y = load_digits(return_X_y=True)
    return X[:500].astype(np.float64), y[:500]


def _params(**kw):
    base = dict(n_clusters=5, gamma=GAMMA, batch_size=64, max_iter=15, random_state=0)
    base.update(kw)
    return base


def _direct_norms(model):
    K = pairwise_kernels(model.center_support_, gamma=model.gamma_)
    return np.einsum("js,st,jt->j", model.center_coef_, K, model.center_coef_)


# ------------------------------------------------------------------ references
def test_untruncated_partial_fit_with_rate_one_is_a_lloyd_step(digits):
    X, _ = digits
    Z = X[[0, 100, 200, 300, 400]]
    mb = MiniBatchKernelKMeans(5, gamma=GAMMA, tau=None, learning_rate=1.0, init=Z).partial_fit(X)
    full = KernelKMeans(5, gamma=GAMMA, init=Z, max_iter=1).fit(X)
    np.testing.assert_allclose(mb.transform(X), full.transform(X), atol=1e-10)
    np.testing.assert_array_equal(mb.predict(X), full.labels_)


def test_truncated_with_large_tau_equals_untruncated(digits):
    X, _ = digits
    a = MiniBatchKernelKMeans(**_params(tau=None)).fit(X)
    b = MiniBatchKernelKMeans(**_params(tau=10**9)).fit(X)
    np.testing.assert_array_equal(a.labels_, b.labels_)
    assert a.inertia_ == pytest.approx(b.inertia_, rel=1e-10)
    np.testing.assert_allclose(a.center_norms_, b.center_norms_, atol=1e-12)
    np.testing.assert_allclose(a.transform(X), b.transform(X), atol=1e-10)
    assert a.history_ == pytest.approx(b.history_, rel=1e-10)


@pytest.mark.parametrize("renormalize", [True, False])
def test_maintained_norms_equal_direct_computation(digits, renormalize):
    X, _ = digits
    m = MiniBatchKernelKMeans(**_params(tau=30, renormalize=renormalize)).fit(X)
    np.testing.assert_allclose(m.center_norms_, _direct_norms(m), atol=1e-12)
    sums = m.center_coef_.sum(axis=1)
    if renormalize:
        np.testing.assert_allclose(sums, 1.0)
    else:
        assert np.all(sums <= 1.0 + 1e-12) and np.any(sums < 1.0)


def test_window_truncation_invariant(digits):
    X, _ = digits
    tau = 30
    m = MiniBatchKernelKMeans(**_params(tau=tau))
    rng = np.random.RandomState(1)
    for _ in range(12):
        m.partial_fit(X[rng.randint(0, len(X), 64)])
        for win in m._state.windows:
            # dropping the oldest remaining batch would go below tau
            assert len(win.count) == 1 or win.total - win.count[0] < tau
    assert m.center_support_.shape[0] <= m.n_clusters * (tau + 64)


@pytest.mark.parametrize("ratio", [0.0, 0.5])
def test_batch_objective_after_update_matches_centers(digits, ratio):
    X, _ = digits
    m = MiniBatchKernelKMeans(**_params(tau=30, tol=1e-12, reassignment_ratio=ratio))
    rng = np.random.RandomState(0)
    for _ in range(5):
        Xb = X[rng.randint(0, len(X), 64)]
        m.partial_fit(Xb)
        assert m._state.f_after == pytest.approx(
            (m.transform(Xb).min(axis=1) ** 2).mean(), rel=1e-10
        )


@pytest.mark.parametrize("tau", [30, None])
def test_fit_callback_sees_each_iteration(digits, tau):
    """``fit(callback=)`` is called once per iteration with the count done and the batch
    objective, truncated or not; an exception it raises ends the fit."""
    X, _ = digits
    seen = []
    m = MiniBatchKernelKMeans(**_params(tau=tau, max_iter=100, max_no_improvement=2))
    m.fit(X, callback=lambda n_iter, f: seen.append((n_iter, f)))
    assert m.n_iter_ < 100 and seen == list(enumerate(m.history_, start=1))

    def stop(n_iter, f):
        if n_iter == 2:
            raise RuntimeError("stop here")

    with pytest.raises(RuntimeError, match="stop here"):
        MiniBatchKernelKMeans(**_params(tau=tau)).fit(X, callback=stop)


def test_tol_stops_early(digits):
    X, _ = digits
    m = MiniBatchKernelKMeans(**_params(tau=30, tol=10.0, max_iter=50)).fit(X)
    assert m.n_iter_ == 1 and len(m.history_) == 1


def test_predict_from_centers_alone(digits):
    X, _ = digits
    m = MiniBatchKernelKMeans(**_params()).fit(X)
    K = pairwise_kernels(X, m.center_support_, gamma=m.gamma_)
    D = 1.0 - 2.0 * K @ m.center_coef_.T + m.center_norms_
    np.testing.assert_array_equal(m.predict(X), D.argmin(axis=1))
    np.testing.assert_array_equal(m.labels_, m.predict(X))
    assert m.inertia_ == pytest.approx(-m.score(X))
    clone = pickle.loads(pickle.dumps(m))
    np.testing.assert_array_equal(clone.predict(X[:50]), m.predict(X[:50]))


@pytest.mark.parametrize("rate", ["beta", "sklearn", 0.3])
def test_learning_rates_cluster_digits(digits, rate):
    X, y = digits
    from sklearn.metrics import adjusted_rand_score

    aris = []
    for seed in range(4):  # one seed's local optimum varies by +-0.1 (ARI)
        m = MiniBatchKernelKMeans(
            10,
            gamma=GAMMA,
            batch_size=128,
            tau=100,
            learning_rate=rate,
            max_iter=30,
            max_no_improvement=None,
            random_state=seed,
        ).fit(X)
        assert len(m.history_) == m.n_iter_ == 30
        aris.append(adjusted_rand_score(y, m.labels_))
    assert np.mean(aris) > 0.3  # clusters found (a random labelling scores 0)


@pytest.mark.parametrize("kernel,params", [("laplacian", {}), ("polynomial", {})])
def test_other_kernels(digits, kernel, params):
    X, _ = digits
    m = MiniBatchKernelKMeans(
        4, kernel=kernel, batch_size=64, max_iter=5, random_state=0, degree=2
    ).fit(X / 16.0)
    assert m.labels_.shape == (len(X),)
    assert np.isfinite(m.inertia_)


def test_sample_weight_equals_repeated_rows(digits):
    X, _ = digits
    Xs = X[:60]
    w = np.arange(60) % 3
    Z = Xs[[1, 2, 4]]
    kw = dict(gamma=GAMMA, tau=None, learning_rate=1.0, init=Z)
    a = MiniBatchKernelKMeans(3, **kw).partial_fit(Xs, sample_weight=w)
    b = MiniBatchKernelKMeans(3, **kw).partial_fit(np.repeat(Xs, w, axis=0))
    np.testing.assert_allclose(a.transform(X), b.transform(X), atol=1e-10)


def test_zero_weight_rows_never_become_support(digits):
    X, _ = digits
    w = np.ones(len(X))
    w[::2] = 0.0
    m = MiniBatchKernelKMeans(**_params(tau=40)).fit(X, sample_weight=w)
    support_rows = {tuple(r) for r in m.center_support_[m.center_coef_.sum(axis=0) > 0]}
    assert support_rows <= {tuple(r) for r in X[1::2]}


def test_empty_cluster_keeps_center_and_warns(digits):
    X, _ = digits
    far = np.full((1, X.shape[1]), 1e3)
    Z = np.vstack([X[[0, 100]], far])
    with pytest.warns(ConvergenceWarning, match=r"center\(s\) \[2\] never won"):
        m = MiniBatchKernelKMeans(
            3, gamma=GAMMA, init=Z, batch_size=64, tau=30, max_iter=5, random_state=0
        ).fit(X)
    # the lonely center is still its single initial point
    j = 2
    nz = np.flatnonzero(m.center_coef_[j])
    assert nz.size == 1 and m.center_coef_[j, nz[0]] == 1.0
    np.testing.assert_array_equal(m.center_support_[nz[0]], far[0])
    assert not np.any(m.labels_ == 2)


@pytest.mark.parametrize("tau", [30, None])
def test_reassignment_reseeds_a_starved_center(digits, tau):
    """The far initial center never wins a row: with reassignment_ratio it restarts as a
    batch row (and wins rows), where without it it stays put (the test above)."""
    X, _ = digits
    far = np.full((1, X.shape[1]), 1e3)
    Z = np.vstack([X[[0, 100]], far])
    m = MiniBatchKernelKMeans(
        3,
        gamma=GAMMA,
        init=Z,
        batch_size=64,
        tau=tau,
        max_iter=5,
        reassignment_ratio=0.01,
        random_state=0,
    ).fit(X)
    assert not np.any(np.all(m.center_support_ == far, axis=1)[m.center_coef_[2] != 0])
    assert np.any(m.labels_ == 2)
    np.testing.assert_allclose(m.center_norms_, _direct_norms(m), atol=1e-12)
    np.testing.assert_allclose(m.center_coef_.sum(axis=1), 1.0)


def test_reassignment_is_seeded_and_skips_zero_weight_rows(digits):
    """Re-seeding draws from random_state (the same model for any chunking), draws rows
    in proportion to w D^2 (never a zero-weight row) and changes the fit when centers
    starve."""
    X, _ = digits
    w = np.ones(len(X))
    w[::2] = 0.0
    kw = _params(tau=30, n_clusters=8, reassignment_ratio=0.5)
    ref = MiniBatchKernelKMeans(**kw).fit(X, sample_weight=w)
    off = MiniBatchKernelKMeans(**{**kw, "reassignment_ratio": 0.0}).fit(X, sample_weight=w)
    assert ref.history_ != off.history_
    support_rows = {tuple(r) for r in ref.center_support_[ref.center_coef_.sum(axis=0) > 0]}
    assert support_rows <= {tuple(r) for r in X[1::2]}
    m = MiniBatchKernelKMeans(**kw).fit(da.from_array(X, chunks=(77, -1)), sample_weight=w)
    np.testing.assert_array_equal(m.labels_, ref.labels_)
    np.testing.assert_array_equal(m.center_coef_, ref.center_coef_)


def test_reproducible_and_seed_dependent(digits):
    X, _ = digits
    a = MiniBatchKernelKMeans(**_params(tau=30)).fit(X)
    b = MiniBatchKernelKMeans(**_params(tau=30)).fit(X)
    c = MiniBatchKernelKMeans(**_params(tau=30, random_state=1)).fit(X)
    np.testing.assert_array_equal(a.labels_, b.labels_)
    assert a.history_ != c.history_


# ---------------------------------------------------------------- Dask inputs
def test_same_model_for_numpy_dask_and_zarr(digits, scheduler, tmp_path):
    X, _ = digits
    ref = MiniBatchKernelKMeans(**_params(tau=30)).fit(X)
    store = os.path.join(tmp_path, "digits.zarr")
    ingest(X, store, dtype="float64", chunk_rows=120)
    for Xin in (da.from_array(X, chunks=(77, -1)), da.from_array(X, chunks=(250, -1)), store):
        m = MiniBatchKernelKMeans(**_params(tau=30)).fit(Xin)
        np.testing.assert_array_equal(m.labels_, ref.labels_)
        assert m.inertia_ == pytest.approx(ref.inertia_, rel=1e-12)
        np.testing.assert_allclose(m.center_norms_, ref.center_norms_, rtol=1e-12)
    np.testing.assert_array_equal(ref.predict(da.from_array(X, chunks=(100, -1))), ref.labels_)


def test_float32_store(scheduler, tmp_path):
    ds = make_rings(2000, random_state=0, store=os.path.join(tmp_path, "r.zarr"), chunk_rows=300)
    m = MiniBatchKernelKMeans(3, batch_size=128, tau=50, max_iter=10, random_state=0).fit(ds)
    assert m.center_support_.dtype == np.float32
    Xn = np.asarray(ds.X.compute())
    ref = MiniBatchKernelKMeans(3, batch_size=128, tau=50, max_iter=10, random_state=0).fit(Xn)
    np.testing.assert_array_equal(m.labels_, ref.labels_)
    # the kernels ran on centred rows; the support holds the rows themselves
    assert {tuple(r) for r in m.center_support_} <= {tuple(r) for r in Xn}


def test_nan_in_dask_input_names_row_and_column(digits, scheduler):
    X = digits[0].copy()
    X[321, 7] = np.nan
    with pytest.raises(DKernelError, match="X contains NaN at row 321, column 7"):
        MiniBatchKernelKMeans(**_params()).fit(da.from_array(X, chunks=(100, -1)))


# -------------------------------------------------------------- graph kernels
def test_knn_kernel_is_transductive():
    X, _ = make_rings(400, n_rings=2, random_state=0)
    m = MiniBatchKernelKMeans(
        2,
        kernel="knn",
        kernel_params={"n_neighbors": 8},
        batch_size=64,
        tau=30,
        max_iter=10,
        random_state=0,
    )
    labels = m.fit_predict(X)
    assert labels.shape == (400,) and set(np.unique(labels)) <= {0, 1}
    assert m.center_support_indices_.max() < 400
    with pytest.raises(DKernelError, match="transductive"):
        m.predict(X)
    with pytest.raises(DKernelError, match="partial_fit does not support"):
        MiniBatchKernelKMeans(2, kernel="knn").partial_fit(X)


def test_heat_kernel_untruncated():
    X, _ = make_rings(200, n_rings=2, random_state=0)
    m = MiniBatchKernelKMeans(
        2,
        kernel="heat",
        kernel_params={"n_neighbors": 6, "t": 2.0},
        batch_size=32,
        tau=None,
        max_iter=3,
        random_state=0,
    ).fit(X)
    assert m.labels_.shape == (200,)


# ------------------------------------------------------------------ bad input
@pytest.mark.parametrize(
    "params,match",
    [
        ({"n_clusters": 0}, "n_clusters must be >= 1"),
        ({"n_clusters": 501}, "n_clusters=501 must be <= n_samples=500"),
        ({"batch_size": 0}, "batch_size must be >= 1"),
        ({"tau": 0}, "tau must be >= 1"),
        ({"reassignment_ratio": -0.1}, "reassignment_ratio must be >= 0.0"),
        ({"reassignment_ratio": 1.5}, "reassignment_ratio must be <= 1.0"),
        ({"learning_rate": "adam"}, "unknown learning_rate 'adam'"),
        ({"learning_rate": 1.5}, r"learning_rate must be 'beta', 'sklearn' or a float in \(0, 1\]"),
        ({"kernel": "nope"}, "unknown kernel 'nope'"),
        ({"init": "spectral"}, "init must be"),
        ({"init": np.zeros((2, 3))}, r"init has shape \(2, 3\)"),
        ({"kernel": "knn", "kernel_params": {"n_neighbors": 0}}, "n_neighbors"),
    ],
)
def test_bad_parameters(digits, params, match):
    X, _ = digits
    with pytest.raises(DKernelError, match=match):
        MiniBatchKernelKMeans(**_params(**params)).fit(X)


@pytest.mark.parametrize("cls", [MiniBatchKernelKMeans, KernelKMeans])
@pytest.mark.parametrize(
    "params,match",
    [
        ({"n_clusters": 0}, "n_clusters must be >= 1"),
        ({"max_iter": 2.5}, "max_iter must be Integral"),
        ({"init": "spectral"}, "init must be"),
        ({"kernel": "nope"}, "unknown kernel 'nope'"),
    ],
)
def test_parameters_are_checked_before_the_data_is_read(tmp_path, cls, params, match):
    """A bad parameter is named even when X is a store that does not exist: the checks
    come before any read, and the public ``check_params`` makes the same ones."""
    est = cls(**params)
    with pytest.raises(DKernelError, match=match):
        est.check_params()
    with pytest.raises(DKernelError, match=match):
        est.fit(str(tmp_path / "no-such-store"))
    cls(n_clusters=3).check_params()  # valid parameters pass without data


def test_bad_data(digits):
    X, _ = digits
    Xbad = X.copy()
    Xbad[12, 3] = np.inf
    with pytest.raises(DKernelError, match="X contains inf at row 12, column 3"):
        MiniBatchKernelKMeans(**_params()).fit(Xbad)
    w = np.ones(len(X))
    w[7] = -1.0
    with pytest.raises(DKernelError, match="sample_weight is negative at row 7"):
        MiniBatchKernelKMeans(**_params()).fit(X, sample_weight=w)
    with pytest.raises(DKernelError, match="sample_weight is zero everywhere"):
        MiniBatchKernelKMeans(**_params()).fit(X, sample_weight=np.zeros(len(X)))
    m = MiniBatchKernelKMeans(**_params(max_iter=2)).fit(X)
    with pytest.raises(
        DKernelError, match="X has 3 features, but MiniBatchKernelKMeans is expecting 64"
    ):
        m.predict(X[:, :3])
    with pytest.raises(DKernelError, match="X has 3 features"):
        m.predict(da.from_array(X[:, :3]))


@parametrize_with_checks(
    [MiniBatchKernelKMeans(3, batch_size=32, max_iter=10, random_state=0)],
    expected_failed_checks=lambda est: {
        "check_sample_weight_equivalence_on_dense_data": "batches are drawn from the rows by index, so repeating a row and doubling its "
        "weight change which rows are sampled (equal only in expectation)",
    },
)
def test_sklearn_estimator_checks(estimator, check):
    check(estimator)


def test_float32_norms_stay_accurate_when_most_mass_is_dropped(digits):
    """The "sklearn" rate makes old batches carry most of the mass; dropping them must not
    cancel catastrophically in float32 (a zero norm would capture every row)."""
    X, y = digits
    from sklearn.metrics import adjusted_rand_score

    m = MiniBatchKernelKMeans(
        10,
        gamma=GAMMA,
        batch_size=128,
        tau=20,
        learning_rate="sklearn",
        max_iter=60,
        max_no_improvement=None,
        random_state=0,
    ).fit(X.astype(np.float32))
    K = pairwise_kernels(m.center_support_.astype(np.float64), gamma=m.gamma_)
    direct = np.einsum("js,st,jt->j", m.center_coef_, K, m.center_coef_)
    np.testing.assert_allclose(m.center_norms_, direct, atol=1e-5)
    assert np.bincount(m.labels_).max() < 0.5 * len(X)  # no center captures the data
    assert adjusted_rand_score(y, m.labels_) > 0.25


# ------------------------------------------------------- cost and memory rules
def test_one_kernel_block_per_iteration(digits):
    """Per iteration: one K(batch, support) block, plus K(B_j, B_j) within each center's
    new rows (no per-center inner-product or truncation-correction calls). The calls are
    seen by a kernel function of the user's (the rbf kernel, counting its calls)."""
    X, _ = digits
    calls = []

    def counting_rbf(A, B, gamma):
        if A is B:  # a symmetric block is called with the same rows twice
            calls.append((A.shape[0], None))
        elif not (len(A) == len(B) == 1 and np.array_equal(A, B)):  # not a diagonal entry
            calls.append((A.shape[0], B.shape[0]))
        return rbf_kernel(A, B, gamma=gamma)

    params = _params(tau=30, max_iter=1, kernel=counting_rbf, kernel_params={"gamma": GAMMA})
    del params["gamma"]
    m = MiniBatchKernelKMeans(**params).fit(X)
    rng = np.random.RandomState(0)
    for _ in range(4):
        s = m.center_support_.shape[0]  # the union of the centers' windows
        calls.clear()
        m.partial_fit(X[rng.randint(0, len(X), 64)])
        big = [c for c in calls if c[1] is not None]
        assert big == [(64, s)]  # the one block: batch x union of windows
        within = [c for c in calls if c[1] is None]
        assert sum(c[0] for c in within) == 64 and len(within) <= m.n_clusters
        assert m.n_kernel_evals_ == 64 * s + sum(c[0] ** 2 for c in within)


def test_default_on_thirty_rows_caps_the_batch(digits):
    X, _ = digits
    m = MiniBatchKernelKMeans(3, max_no_improvement=None, random_state=0).fit(X[:30])
    # batches of 30 rows (not 256) for the default 200 iterations: support <= 3 (50 + 30)
    # and each iteration costs at most 30 x (support + 30) kernel values
    assert m.n_iter_ == 200
    per_iter = m.kernel_evals_["iterations"] / m.n_iter_
    assert per_iter <= 30 * (m.center_support_.shape[0] + 3 * 30) + 30 * 30
    assert per_iter < 30 * 256  # a 256-row batch would cost this much for one center alone


def test_partial_fit_random_init_skips_zero_weight_rows(digits):
    X, _ = digits
    w = np.zeros(len(X))
    w[100:110] = 1.0  # ten rows weigh anything
    for seed in range(5):
        m = MiniBatchKernelKMeans(
            4, gamma=GAMMA, init="random", tau=None, random_state=seed
        ).partial_fit(X, sample_weight=w)
        support = m.center_support_[np.any(m.center_coef_ != 0, axis=0)]
        assert {tuple(r) for r in support} <= {tuple(r) for r in X[100:110]}


@pytest.mark.parametrize("what", ["tau=None", "knn", "partial_fit"])
def test_in_memory_variants_refuse_large_stores(digits, what):
    X, _ = digits
    Xd = da.from_array(X, chunks=(100, -1))
    kw = dict(_params(), max_data_bytes=X.nbytes // 2)
    extra = {"tau=None": {"tau": None}, "knn": {"kernel": "knn", "gamma": None}}.get(what, {})

    def run(X, limit):
        m = MiniBatchKernelKMeans(**{**kw, **extra, "max_data_bytes": limit})
        return m.partial_fit(X) if what == "partial_fit" else m.fit(X)

    with pytest.raises(DKernelError, match="raise max_data_bytes"):
        run(Xd, X.nbytes // 2)
    # at or under the limit, X is read once (values checked) and the model is NumPy's
    a, b = run(Xd, X.nbytes), run(X, X.nbytes // 2)
    if what == "knn":  # transductive: the training labels
        np.testing.assert_array_equal(a.labels_, b.labels_)
    else:
        np.testing.assert_array_equal(a.predict(X), b.predict(X))
    # the default (truncated) fit streams batches: no limit applies
    m = MiniBatchKernelKMeans(**kw).fit(Xd)
    np.testing.assert_array_equal(m.labels_, MiniBatchKernelKMeans(**_params()).fit(X).labels_)


# ------------------------------------------------------------ early stopping
def _plateau_stop(history, alpha, patience):
    """Reference: the first iteration (1-based) after which the exponentially weighted
    average of ``history`` has gone ``patience`` iterations without a new minimum."""
    best, since, ewa = np.inf, 0, None
    for i, f in enumerate(history):
        ewa = f if ewa is None else (1 - alpha) * ewa + alpha * f
        best, since = (ewa, 0) if ewa < best else (best, since + 1)
        if since >= patience:
            return i + 1
    return None


@pytest.mark.parametrize("tau", [100, None])
def test_max_no_improvement_stops_on_the_smoothed_objective(digits, tau):
    X, _ = digits
    kw = dict(gamma=GAMMA, batch_size=128, tau=tau, max_iter=300, random_state=0)
    m = MiniBatchKernelKMeans(10, max_no_improvement=5, **kw).fit(X)
    alpha = min(1.0, 2 * 128 / (len(X) + 1))
    assert m.n_iter_ < 300  # the batch objective plateaus long before 300 batches
    assert _plateau_stop(m.history_, alpha, 5) == m.n_iter_ == len(m.history_)
    # the same fit without the rule runs every iteration and passes the same states
    full = MiniBatchKernelKMeans(10, max_no_improvement=None, **kw).fit(X)
    assert full.n_iter_ == 300
    assert full.history_[: m.n_iter_] == m.history_
