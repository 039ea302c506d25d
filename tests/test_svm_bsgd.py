"""BudgetedSVC: fitting, streaming equivalences, partial_fit, bad input, estimator checks."""

from __future__ import annotations

import dask
import numpy as np
import pytest
from sklearn.utils.estimator_checks import parametrize_with_checks

from dkernel import DKernelError
from dkernel.data import make_checkerboard, make_gauss, write_arrays
from dkernel.svm import BudgetedSVC
from dkernel.svm.stream import BlockTask, block_plan, prefetch, visit_order

#: The paper's one-pass algorithm (the defaults before averaging and epochs), the SGD coefficients as they are (no refit).
ONE_PASS = dict(max_iter=1, average=False, distributed=False, refit=False)


def _board(n=600, seed=0):
    X, y = make_checkerboard(n, n_cells=2, random_state=seed)
    return X - 1.0, y


def _assert_same_model(a, b):
    np.testing.assert_array_equal(a.support_vectors_, b.support_vectors_)
    np.testing.assert_allclose(a.dual_coef_, b.dual_coef_, rtol=1e-12, atol=0)
    np.testing.assert_allclose(a.intercept_, b.intercept_, rtol=1e-12, atol=0)
    assert a.t_ == b.t_


@pytest.mark.parametrize("maintenance", ["remove", "project", "merge"])
@pytest.mark.parametrize("algorithm", ["pegasos", "norma", "perceptron"])
def test_learns_a_nonlinear_problem(maintenance, algorithm):
    X, y = _board(3000)
    Xt, yt = _board(1000, seed=1)
    clf = BudgetedSVC(
        budget=40,
        maintenance=maintenance,
        algorithm=algorithm,
        gamma=2.0,
        alpha=1e-3,
        max_iter=2,
        random_state=0,
    ).fit(X, y)
    assert clf.support_vectors_.shape[0] <= 40
    assert clf.dual_coef_.shape == (clf.support_vectors_.shape[0], 1)
    assert clf.n_iter_ == 2 and clf.t_ == 6000
    assert clf.n_maintenance_ > 0 and clf.weight_degradation_ > 0
    floor = 0.7 if maintenance == "remove" else 0.85
    assert clf.score(Xt, yt) > floor


def test_multiclass_string_labels_and_decision_shape():
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    X = X / 16.0
    names = np.array([f"digit-{v}" for v in y])
    clf = BudgetedSVC(budget=100, gamma=0.05, alpha=1e-4, max_iter=3, random_state=0)
    clf.fit(X[:1200], names[:1200])
    assert list(clf.classes_) == sorted(set(names))
    assert clf.dual_coef_.shape == (100, 10)
    D = clf.decision_function(X[1200:])
    assert D.shape == (597, 10)
    pred = clf.predict(X[1200:])
    np.testing.assert_array_equal(pred, clf.classes_[np.argmax(D, axis=1)])
    # a sanity bound: over seeds 0-4 this setting scores 0.84-0.92 (mean 0.895)
    assert np.mean(pred == names[1200:]) > 0.8


def test_decision_function_matches_kernel_expansion(rng):
    from dkernel.kernels import pairwise_kernels

    X, y = _board(500)
    for kernel in ("rbf", "laplacian", "polynomial", "linear"):
        clf = BudgetedSVC(
            budget=20,
            maintenance="project" if kernel in ("polynomial", "linear") else "merge",
            kernel=kernel,
            gamma=0.5,
            random_state=0,
        ).fit(X, y)
        K = pairwise_kernels(
            X[:50], clf.support_vectors_, kernel=kernel, gamma=0.5, degree=3, coef0=1.0
        )
        ref = K @ clf.dual_coef_[:, 0] + clf.intercept_[0]
        np.testing.assert_allclose(clf.decision_function(X[:50]), ref, rtol=1e-9, atol=1e-9)


def test_intercept_is_learned_and_can_be_off():
    X, y = make_gauss(2000, random_state=0)
    on = BudgetedSVC(budget=30, gamma=0.5, fit_intercept=True, random_state=0).fit(X, y)
    off = BudgetedSVC(budget=30, gamma=0.5, fit_intercept=False, random_state=0).fit(X, y)
    assert on.intercept_[0] != 0.0
    assert off.intercept_[0] == 0.0
    assert BudgetedSVC().fit_intercept is False


def test_default_one_pass_accuracy_on_digits_is_not_lost_to_the_intercept():
    # Regression: the default used to be fit_intercept=True; in one pass of Pegasos the
    # regularised constant feature (k = 1 against every example) cost ~4 points here
    # (mean 86.7% over these seeds, against 90.8% without it) and 3-7 points on usps,
    # dna, a9a, letter in benchmarks/bsgd.py.
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    sd = X.std(axis=0)
    X = (X - X.mean(axis=0)) / np.where(sd > 0, sd, 1.0)
    acc = {}
    for fi in (None, True):
        kw = {} if fi is None else {"fit_intercept": fi}
        acc[fi] = np.mean(
            [
                BudgetedSVC(budget=50, gamma=1 / 64, alpha=1e-3, random_state=s, **ONE_PASS, **kw)
                .fit(X[:1200], y[:1200])
                .score(X[1200:], y[1200:])
                for s in range(5)
            ]
        )
    assert acc[None] >= 0.895
    assert acc[None] >= acc[True] + 0.02


def test_sample_weight_zero_rows_are_skipped_and_weights_change_the_model():
    """Weights scale the step (checked against NumPy in test_svm_budget); here: rows of
    zero weight never become support vectors, and non-uniform weights change the model."""
    X, y = _board(400)
    w = np.zeros(400)
    w[::2] = 1.0
    b = BudgetedSVC(budget=500, gamma=1.0, alpha=1e-2, shuffle=False, **ONE_PASS)
    b.fit(X, y, sample_weight=w)
    assert b.support_vectors_.shape[0] > 0
    assert {tuple(r) for r in b.support_vectors_} <= {tuple(r) for r in X[::2]}
    plain = BudgetedSVC(budget=30, gamma=1.0, random_state=0).fit(X, y)
    heavy = BudgetedSVC(budget=30, gamma=1.0, random_state=0).fit(
        X, y, sample_weight=np.where(y > 0, 3.0, 1.0)
    )
    assert not np.allclose(plain.decision_function(X), heavy.decision_function(X))
    same = BudgetedSVC(budget=30, gamma=1.0, random_state=0).fit(X, y, sample_weight=np.ones(400))
    np.testing.assert_array_equal(same.decision_function(X), plain.decision_function(X))


def test_same_seed_same_model_numpy_dask_zarr(tmp_path, scheduler, dkernel_config):
    import dask.array as da

    X, y = _board(700)
    kw = dict(budget=25, gamma=2.0, alpha=1e-3, random_state=3, **ONE_PASS)
    dkernel_config({"svm.block-rows": 128})

    def est():
        return BudgetedSVC(**kw)

    ref = est().fit(X, y)
    for chunks in (50, 333):
        _assert_same_model(
            ref, est().fit(da.from_array(X, chunks=(chunks, 2)), da.from_array(y, chunks=chunks))
        )
    ds = write_arrays(
        tmp_path / "board.zarr",
        [(X[:300], y[:300]), (X[300:], y[300:])],
        n=700,
        n_features=2,
        dtype=np.float64,
        chunk_rows=97,
        has_y=True,
        attrs={},
    )
    _assert_same_model(ref, est().fit(str(ds.path)))
    _assert_same_model(ref, est().fit(ds))
    other = BudgetedSVC(**{**kw, "random_state": 4})
    assert not np.array_equal(other.fit(X, y).support_vectors_, ref.support_vectors_)


def test_predict_on_dask_runs_blockwise(scheduler):
    import dask.array as da

    X, y = _board(600)
    clf = BudgetedSVC(budget=30, gamma=2.0, random_state=0).fit(X, y)
    Xd = da.from_array(X, chunks=(128, 2))
    D = clf.decision_function(Xd)
    assert D.npartitions == Xd.numblocks[0]
    np.testing.assert_allclose(D.compute(), clf.decision_function(X), rtol=1e-12)
    np.testing.assert_array_equal(clf.predict(Xd).compute(), clf.predict(X))


def test_partial_fit_chunks_equal_fit_same_order():
    X, y = _board(900)
    clf = BudgetedSVC(budget=30, gamma=2.0, alpha=1e-3, random_state=7, **ONE_PASS)
    with dask.config.set({"dkernel.svm.block-rows": 200}):  # read when the fit starts
        clf.fit(X, y)
    seed = np.random.RandomState(7).randint(np.iinfo(np.int32).max)
    order = visit_order(900, seed=seed, block_rows=200)
    inc = BudgetedSVC(budget=30, gamma=2.0, alpha=1e-3, **ONE_PASS)
    for lo in range(0, 900, 170):
        idx = order[lo : lo + 170]
        inc.partial_fit(X[idx], y[idx], classes=[-1, 1] if lo == 0 else None)
    _assert_same_model(clf, inc)
    # without shuffling, the order is the stored one
    a = BudgetedSVC(budget=30, gamma=2.0, alpha=1e-3, shuffle=False, **ONE_PASS).fit(X, y)
    b = BudgetedSVC(budget=30, gamma=2.0, alpha=1e-3, **ONE_PASS)
    for lo in range(0, 900, 250):
        b.partial_fit(X[lo : lo + 250], y[lo : lo + 250], classes=np.array([1, -1]))
    _assert_same_model(a, b)


def test_visit_order_is_a_seeded_permutation():
    o = visit_order(1000, seed=1, block_rows=64)
    assert sorted(o.tolist()) == list(range(1000))
    np.testing.assert_array_equal(o, visit_order(1000, seed=1, block_rows=64))
    assert not np.array_equal(o, visit_order(1000, seed=2, block_rows=64))
    plan = block_plan(1000, seed=1, epoch=0, shuffle=True, block_rows=64)
    assert len(plan) == 16 and all(isinstance(t, BlockTask) for t in plan)
    assert not np.array_equal(o, visit_order(1000, seed=1, epoch=1, block_rows=64))


def test_prefetch_is_bounded_and_ordered():
    started = []

    def reader(i):
        started.append(i)
        return i * 10

    gen = prefetch(reader, list(range(10)), depth=2)
    first = next(gen)
    assert first == 0
    # at most depth tasks beyond the one consumed were ever submitted
    assert len(started) <= 3
    assert list(gen) == [10 * i for i in range(1, 10)]


def test_failed_fit_keeps_previous_model():
    X, y = _board(300)
    clf = BudgetedSVC(budget=20, gamma=2.0, random_state=0).fit(X, y)
    before = clf.predict(X)
    Xbad = X.copy()
    Xbad[5, 1] = np.nan
    with pytest.raises(DKernelError, match="NaN at row 5, column 1"):
        clf.fit(Xbad, y)
    np.testing.assert_array_equal(clf.predict(X), before)


def test_nan_in_a_dask_block_names_global_row(dkernel_config):
    import dask.array as da

    X, y = _board(300)
    X[250, 0] = np.inf
    clf = BudgetedSVC(budget=20, gamma=2.0, random_state=0)
    dkernel_config({"svm.block-rows": 64})
    with pytest.raises(DKernelError, match="inf at row 250, column 0"):
        clf.fit(da.from_array(X, chunks=(100, 2)), da.from_array(y, chunks=100))
    assert not hasattr(clf, "dual_coef_")


@pytest.mark.parametrize(
    "params,match",
    [
        ({"budget": 1}, "budget must be >= 2"),
        ({"alpha": -1.0}, "alpha must be >= 0"),
        ({"alpha": 0.0}, "alpha must be > 0 for algorithm='pegasos'"),
        ({"eta0": 0.0}, "eta0 must be > 0"),
        ({"maintenance": "drop"}, "maintenance must be one of remove, project, merge"),
        ({"algorithm": "adam"}, "algorithm must be one of"),
        (
            {"kernel": "polynomial"},
            r"maintenance='merge' cannot merge support vectors of kernel.*'remove' or 'project'",
        ),
        ({"kernel": "precomputed"}, "callables and 'precomputed' are not supported"),
        ({"radius": -1.0}, "radius must be > 0"),
    ],
)
def test_bad_parameters(params, match):
    X, y = _board(50)
    with pytest.raises(DKernelError, match=match):
        BudgetedSVC(**params).fit(X, y)


def test_bad_data():
    X, y = _board(50)
    with pytest.raises(DKernelError, match="one class only"):
        BudgetedSVC().fit(X, np.ones(50))
    with pytest.raises(DKernelError, match="y has 49 labels but X has 50 rows"):
        BudgetedSVC().fit(X, y[:49])
    with pytest.raises(DKernelError, match="classes must be passed to the first call"):
        BudgetedSVC().partial_fit(X, y)
    clf = BudgetedSVC(budget=5).partial_fit(X, y, classes=[-1, 1])
    with pytest.raises(DKernelError, match="label 7 at row 3, which is not one of the classes"):
        yy = y.copy()
        yy[3] = 7
        clf.partial_fit(X, yy)
    with pytest.raises(DKernelError, match="X has 3 features, but BudgetedSVC is expecting 2"):
        clf.predict(np.zeros((4, 3)))
    with pytest.raises(DKernelError, match="sample_weight is negative at row 2"):
        BudgetedSVC().fit(X, y, sample_weight=np.r_[1.0, 1.0, -1.0, np.ones(47)])


def test_partial_fit_continues_after_fit():
    X, y = _board(600)
    kw = dict(budget=20, gamma=2.0, alpha=1e-3, shuffle=False, **ONE_PASS)
    a = BudgetedSVC(**kw).fit(X[:300], y[:300])
    a.partial_fit(X[300:], y[300:])
    b = BudgetedSVC(**kw).fit(X, y)
    _assert_same_model(a, b)


# scikit-learn's checks; each expected failure named with its reason. Object-dtype input
# (check_dtype_object) passes: validation converts it to float or raises a clear error.
EXPECTED_FAILED = {
    "check_sample_weight_equivalence_on_dense_data": (
        "SGD: an integer weight w scales one step (eta_t w) and advances the clock t once, "
        "while repeating the row takes w steps at other clocks and other places in the "
        "visiting order (scikit-learn marks SGDClassifier with the same expected failure)"
    ),
}


def test_expected_failures_still_fail():
    """The one expected failure is real (not stale): weight 2 differs from a repeated row."""
    X, y = _board(200)
    kw = dict(budget=20, gamma=2.0, alpha=1e-3, shuffle=False, **ONE_PASS)
    w = np.ones(len(y))
    w[:100] = 2.0
    weighted = BudgetedSVC(**kw).fit(X, y, sample_weight=w)
    order = np.r_[np.repeat(np.arange(100), 2), np.arange(100, 200)]
    repeated = BudgetedSVC(**kw).fit(X[order], y[order])
    assert weighted.t_ == 200 and repeated.t_ == 300
    assert not np.allclose(weighted.decision_function(X), repeated.decision_function(X))


@parametrize_with_checks(
    [BudgetedSVC(budget=20, random_state=0)], expected_failed_checks=lambda est: EXPECTED_FAILED
)
def test_sklearn_estimator_checks(estimator, check):
    check(estimator)


def test_many_classes_fit_without_a_warning():
    """26 classes (letter's count): the label check runs on the classes themselves and
    must not warn that they look like a regression target (warnings are errors here)."""
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(26), 20)
    X = rng.standard_normal((len(y), 4)) + y[:, None]
    clf = BudgetedSVC(budget=60, max_iter=1, random_state=0).fit(X, y)
    assert clf.classes_.tolist() == list(range(26))
