"""Bad input to the estimators ends in a named DKernelError before the work (issue 25's
sweep: cases that were accepted and silently wrong, or failed with an unhelpful error)."""

from __future__ import annotations

import json

import dask.array as da
import numpy as np
import pytest

from dkernel import DKernelError
from dkernel.cluster import KernelKMeans, MiniBatchKernelKMeans
from dkernel.data import make_checkerboard
from dkernel.kernels import pairwise_kernels
from dkernel.svm import BudgetedSVC, load_model

#: Distributed fits here train in rounds from the first step (no stream prefix).
pytestmark = pytest.mark.usefixtures("rounds_only")


@pytest.fixture(scope="module")
def data():
    X, y = make_checkerboard(400, random_state=0)
    return X, y


def _km(**kw):
    return MiniBatchKernelKMeans(2, batch_size=64, max_iter=3, random_state=0, **kw)


def _svm(**kw):
    return BudgetedSVC(budget=20, max_iter=1, random_state=0, **kw)


def _fitters(X, y, **kw):
    """Fit calls of each estimator with the same parameters."""
    return {
        "minibatch": lambda: _km(**kw).fit(X),
        "full": lambda: KernelKMeans(2, max_iter=2, random_state=0, **kw).fit(X),
        "svm": lambda: _svm(**kw).fit(X, y),
    }


# ------------------------------------------------------------------ parameters
@pytest.mark.parametrize("which", ["minibatch", "full", "svm"])
def test_unknown_kernel_params_are_named(data, which):
    X, y = data
    fit = _fitters(X, y, kernel_params={"degre": 2})[which]
    with pytest.raises(DKernelError, match=r"kernel_params \['degre'\] are not used by kernel"):
        fit()


def test_kernel_params_must_be_a_dict(data):
    X, y = data
    with pytest.raises(DKernelError, match="kernel_params must be a dict or None, got 'x'"):
        _svm(kernel_params="x").fit(X, y)


def test_kernel_params_still_reach_callables_and_graph_kernels(data):
    X, _ = data

    def scaled_linear(A, B, scale=1.0):
        return scale * (A @ B.T)

    K = pairwise_kernels(X[:5], kernel=scaled_linear, kernel_params={"scale": 2.0})
    np.testing.assert_allclose(K, 2.0 * X[:5] @ X[:5].T)
    _km(kernel="knn", kernel_params={"n_neighbors": 5}).fit(X)


@pytest.mark.parametrize("name", ["fit_intercept", "shuffle"])
def test_svm_flags_must_be_booleans(data, name):
    X, y = data
    with pytest.raises(DKernelError, match=f"{name} must be True or False; got 'no'"):
        _svm(**{name: "no"}).fit(X, y)


def test_a_budget_beyond_memory_is_refused_before_any_allocation(data):
    X, y = data
    for budget in (10**7, 10**12):
        with pytest.raises(DKernelError, match=f"budget={budget} needs .* GiB for the model"):
            BudgetedSVC(budget=budget).fit(X, y)
    with pytest.raises(DKernelError, match="budget=10000000 needs"):
        BudgetedSVC(budget=10**7).partial_fit(X, y, classes=[-1, 1])


# ------------------------------------------------------- kernels off the data's scale
@pytest.mark.parametrize("which", ["minibatch", "full", "svm"])
@pytest.mark.parametrize(
    ("gamma", "message"), [(1e300, "far too large"), (1e-300, "far too small")]
)
def test_a_width_off_the_data_scale_is_named(data, which, gamma, message):
    X, y = data
    with pytest.raises(DKernelError, match=f"gamma=1e[+-]300 is {message} for the scale of X"):
        _fitters(X, y, gamma=gamma)[which]()


@pytest.mark.parametrize("which", ["minibatch", "full", "svm"])
@pytest.mark.parametrize(("scale", "message"), [(1e200, "overflow"), (1e-200, "underflow")])
def test_data_at_the_ends_of_the_float_range_is_named(data, which, scale, message):
    X, y = data
    with pytest.raises(DKernelError, match=f"X's values .* {message}"):
        _fitters(X * scale, y)[which]()


@pytest.mark.parametrize("which", ["minibatch", "full"])
def test_a_polynomial_that_overflows_is_named(data, which):
    X, y = data
    with pytest.raises(DKernelError, match=r"'polynomial' \(degree=400\) overflows"):
        _fitters(X, y, kernel="polynomial", degree=400)[which]()


def test_a_polynomial_that_overflows_in_the_svm(data):
    X, y = data
    with pytest.raises(DKernelError, match=r"'polynomial' \(degree=400\) overflows on rows"):
        _svm(kernel="polynomial", degree=400, maintenance="remove").fit(X, y)


def test_a_distributed_fit_checks_the_support_vectors(data):
    """A distributed fit reads no block up front: the kernel is checked on the support
    vectors the SGD rounds chose, before the refit, and the estimator stays unfitted."""
    X, y = data
    clf = _svm(gamma=1e300, distributed=True, n_shards=2, n_rounds=2)
    with pytest.raises(DKernelError, match=r"on the support vectors .* gamma=1e\+300 is far"):
        clf.fit(da.from_array(X, chunks=100), da.from_array(y, chunks=100))
    assert not hasattr(clf, "dual_coef_")


def test_sensible_widths_pass(data):
    """Widths across six orders of magnitude are not refused: each fit gives a model."""
    X, y = data
    for g in (1e-3, 1.0, 1e3):
        km = _km(gamma=g).fit(X)
        assert km.gamma_ == g and km.labels_.shape == (len(X),)
        clf = _svm(gamma=g).fit(X, y)
        assert clf.gamma_ == g and np.isfinite(clf.dual_coef_).all()


@pytest.mark.parametrize("which", ["minibatch", "full"])
def test_callable_kernels_of_the_wrong_shape_or_nan(data, which):
    X, y = data

    def wrong_shape(A, B):
        return np.ones((3, 3))

    def nan_kernel(A, B):
        return np.full((len(A), len(B)), np.nan)

    with pytest.raises(DKernelError, match="'wrong_shape' returned shape \\(3, 3\\)"):
        _fitters(X, y, kernel=wrong_shape)[which]()
    with pytest.raises(DKernelError, match="'nan_kernel' returned NaN or inf"):
        _fitters(X, y, kernel=nan_kernel)[which]()


# ------------------------------------------------------------------ labels, weights
@pytest.mark.parametrize("on_dask", [False, True])
def test_svm_sample_weight_checked_on_dask_input(data, on_dask):
    X, y = data
    wrap = (lambda a: da.from_array(a, chunks=100)) if on_dask else (lambda a: a)
    w = np.ones(len(y))
    w_neg = w.copy()
    w_neg[123] = -1.0
    w_nan = w.copy()
    w_nan[250] = np.nan
    cases = [
        (np.zeros(len(y)), "is zero everywhere"),
        (w_neg, r"is negative at row 123 \(-1.0\)"),
        (w_nan, "contains NaN at row 250"),
        (np.where(np.arange(len(y)) == 7, np.inf, 1.0), "contains inf at row 7"),
    ]
    for weights, message in cases:
        with pytest.raises(DKernelError, match=f"sample_weight {message}"):
            _svm().fit(wrap(X), wrap(y), sample_weight=wrap(weights))


@pytest.mark.parametrize("on_dask", [False, True])
def test_svm_weights_that_overflow_training(data, on_dask):
    X, y = data
    w = np.full(len(y), 1e300)
    if on_dask:
        X, y, w = (da.from_array(a, chunks=100) for a in (X, y, w))
    clf = _svm()
    with np.errstate(over="ignore", invalid="ignore"):
        with pytest.raises(DKernelError, match="training diverged.*reaches 1e\\+300"):
            clf.fit(X, y, sample_weight=w)
    assert not hasattr(clf, "dual_coef_")


@pytest.mark.parametrize("on_dask", [False, True])
def test_svm_labels_that_cannot_be_classes(data, on_dask):
    X, y = data
    wrap = (lambda a: da.from_array(a, chunks=100)) if on_dask else (lambda a: a)
    continuous = np.random.default_rng(0).normal(size=len(y))
    with pytest.raises(DKernelError, match="look continuous: an SVM needs class labels"):
        _svm().fit(wrap(X), wrap(continuous))
    mixed = np.array([1, "a"] * (len(y) // 2), dtype=object)
    with pytest.raises(DKernelError, match=r"y mixes label types \(int, str\)"):
        _svm().fit(wrap(X), wrap(mixed))
    if on_dask:  # NumPy y with NaN is refused by _prepare already
        holes = y.astype(float)
        holes[5] = np.nan
        with pytest.raises(DKernelError, match="y contains NaN"):
            _svm().fit(wrap(X), wrap(holes))


def test_dask_arrays_of_unknown_chunk_sizes(data):
    X, y = data
    Xd, yd = da.from_array(X, chunks=100), da.from_array(y, chunks=100)
    keep = Xd[:, 0] > 0
    for fit in (lambda: _km().fit(Xd[keep]), lambda: _svm().fit(Xd[keep], yd[keep])):
        with pytest.raises(DKernelError, match=r"unknown chunk sizes.*compute_chunk_sizes\(\)"):
            fit()
    clf = _svm().fit(X, y)
    with pytest.raises(DKernelError, match="X has unknown chunk sizes"):
        clf.predict(Xd[keep])
    with pytest.raises(DKernelError, match="y has unknown chunk sizes"):
        _svm().fit(Xd, yd[yd > 0])


# ---------------------------------------------------------------- model files
def test_model_files_with_a_width_off_the_scale_are_refused(tmp_path, data):
    X, y = data
    _svm().fit(X, y).save(tmp_path / "s.npz")
    _km().fit(X).save(tmp_path / "k.npz")
    for name in ("s", "k"):
        f = dict(np.load(tmp_path / f"{name}.npz", allow_pickle=False))
        header = json.loads(str(f["header"]))
        header["fitted"]["gamma_"] = 1e300
        bad = tmp_path / f"{name}-bad.npz"
        np.savez(bad, **{**f, "header": np.array(json.dumps(header))})
        with pytest.raises(DKernelError, match="corrupt.*gamma=1e\\+300 is far too large"):
            load_model(bad)


# ---------------------------------------------------------------- no workers
@pytest.mark.timeout(120)
def test_work_without_workers_is_a_named_dkernel_error(data):
    """A fit or score under a client whose cluster has no worker ends, after the configured
    timeout, in a DKernelError that names the config key (not distributed's bare error)."""
    import dask
    from distributed import LocalCluster

    from dkernel.runtime import NoWorkersError, get_client

    X, y = data
    Xd, yd = da.from_array(X, chunks=100), da.from_array(y, chunks=100)
    fitted = _svm().fit(X, y)
    cluster = LocalCluster(n_workers=0, processes=False, dashboard_address="127.0.0.1:0")
    try:
        with dask.config.set({"dkernel.cluster.no-workers-timeout": "1s"}):
            client = get_client(cluster.scheduler_address, new=True)
        try:
            with client.as_current(), dask.config.set(scheduler=client):
                for call in (lambda: _km().fit(Xd), lambda: fitted.score(Xd, yd)):
                    with pytest.raises(NoWorkersError, match="raise dkernel.cluster.no-wor"):
                        call()
        finally:
            client.close()
    finally:
        cluster.close()
    assert issubclass(NoWorkersError, DKernelError)


# ------------------------------------------------------------ one reader, one text
def _one_reader_cases():
    """(name, X, y, sample_weight, the message): bad X, y or weights, NumPy and dask."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 3))
    y = np.arange(40) % 2
    nan = X.copy()
    nan[3, 1] = np.nan
    w = np.ones(40)
    return [
        ("X NaN", nan, y, None, "X contains NaN at row 3, column 1"),
        ("X NaN dask", da.from_array(nan, chunks=20), y, None, "X contains NaN at row 3, column 1"),
        ("X 1-D", X[:, 0], y, None, "Expected 2D array, got 1D array instead"),
        ("X no rows", X[:0], y[:0], None, r"Found array with 0 sample\(s\) \(shape=\(0, 3\)\)"),
        ("X complex", X + 1j, y, None, "X has complex dtype complex128: Complex data not"),
        ("X complex dask", da.from_array(X + 1j, chunks=20), y, None, "X has complex dtype"),
        ("X sparse", __import__("scipy.sparse").sparse.csr_matrix(X), y, None, "sparse input"),
        ("y short", X, y[:-1], None, "y has 39 labels but X has 40 rows"),
        ("y dask short", X, da.from_array(y[:-1], chunks=10), None, "y has 39 labels but X"),
        ("y 2-D", X, np.c_[y, y], None, r"y must be 1-D, got shape \(40, 2\)"),
        ("y NaN", X, np.where(np.arange(40) == 5, np.nan, y), None, "y contains NaN or inf"),
        ("y None", X, None, None, "requires y to be passed, but the target y is None"),
        ("w negative", X, y, -w, r"sample_weight is negative at row 0 \(-1.0\)"),
        ("w short", X, y, w[:-1], r"sample_weight has shape \(39,\), expected \(40,\) to match"),
        ("w dask short", X, y, da.ones(39, chunks=10), r"sample_weight has shape \(39,\)"),
        ("w NaN", X, y, np.r_[np.nan, w[1:]], "sample_weight contains NaN at row 0"),
    ]


@pytest.mark.parametrize(
    "name,X,y,w,match", _one_reader_cases(), ids=[c[0] for c in _one_reader_cases()]
)
def test_one_reader_gives_one_message(name, X, y, w, match):
    """BudgetedSVC.fit, MiniBatchKernelKMeans.fit and distributed_coreset read X, y and the
    weights through the floor's one reader: the same bad input, the same text (each call
    that takes the argument)."""
    from dkernel.coreset import distributed_coreset

    calls = {"svm": lambda: _svm().fit(X, y, sample_weight=w)}
    if not name.startswith("y"):
        calls["minibatch"] = lambda: _km().fit(X, sample_weight=w)
    if not name.startswith("w"):
        calls["coreset"] = lambda: distributed_coreset(X, y, 10, random_state=0)
    texts = {}
    for who, call in calls.items():
        with pytest.raises(DKernelError, match=match) as err:
            call()
        texts[who] = str(err.value)
    assert len(set(texts.values())) == 1, texts


# --- issue 37: labels named for what they are ---------------------------------------------


@pytest.mark.parametrize("where", ["numpy", "dask"])
def test_nan_and_mixed_labels_named(where):
    from dkernel.coreset import distributed_coreset, svm_coreset

    X = np.random.default_rng(0).standard_normal((400, 3))
    y = (X[:, 0] > 0).astype(float)
    y[250] = np.nan
    mixed = np.array([1, "a"] * 200, dtype=object)

    def run(labels):
        if where == "numpy":
            return svm_coreset(X, labels, m=50, C=1.0)
        return distributed_coreset(da.from_array(X, chunks=100), da.from_array(labels, chunks=100),
                                   m=50)  # fmt: skip

    with pytest.raises(DKernelError, match="y contains NaN at row 250: every row needs a label"):
        run(y)
    with pytest.raises(DKernelError, match=r"y mixes label types \(int, str\)"):
        run(mixed)


def test_extreme_finite_values_named():
    from dkernel.coreset import svm_coreset
    from dkernel.kernels import estimate_gamma

    rng = np.random.default_rng(0)
    X = rng.standard_normal((400, 3))
    y = (X[:, 0] > 0).astype(int)
    with pytest.raises(DKernelError, match="finite but too large.*overflow"):
        BudgetedSVC(budget=20, standardize=True, max_iter=1, random_state=0).fit(X * 1e200, y)
    with pytest.raises(DKernelError, match="underflow"):
        estimate_gamma(X * 1e-200)
    with pytest.raises(DKernelError, match="finite but too large.*overflow"):
        estimate_gamma(X * 1e200)
    with pytest.raises(DKernelError, match="sample_weight .* finite but overflows"):
        svm_coreset(X, y, m=50, C=1.0, sample_weight=np.full(400, 1e300))


def test_sparse_dask_chunks_named():
    import scipy.sparse as sp

    X = da.from_array(sp.random(400, 5, density=0.3, format="csr", random_state=0),
                      chunks=(100, 5), asarray=False)  # fmt: skip
    y = da.from_array(np.arange(400) % 2, chunks=100)
    with pytest.raises(DKernelError, match="sparse chunks"):
        MiniBatchKernelKMeans(2, random_state=0).fit(X)
    with pytest.raises(DKernelError, match="sparse chunks"):
        BudgetedSVC(budget=10, max_iter=1).fit(X, y)
