"""Kernel k-means model files, fitted summaries, and the one-pass score of BudgetedSVC."""

from __future__ import annotations

import json

import dask.array as da
import numpy as np
import pytest

import dkernel
from dkernel import DKernelError
from dkernel.cluster import KernelKMeans, MiniBatchKernelKMeans
from dkernel.data import make_checkerboard, make_rings
from dkernel.svm import BudgetedSVC, load_model


def _rings(n=400, dtype=np.float64):
    X, _ = make_rings(n, n_rings=2, n_features=3, random_state=0)
    return X.astype(dtype)


def _models():
    return [
        MiniBatchKernelKMeans(3, batch_size=64, tau=50, max_iter=8, random_state=0),
        MiniBatchKernelKMeans(
            2, kernel="laplacian", batch_size=64, tau=None, max_iter=4, random_state=1
        ),
        MiniBatchKernelKMeans(
            2,
            kernel="polynomial",
            degree=2,
            kernel_params=None,
            batch_size=50,
            max_iter=4,
            random_state=0,
        ),
        KernelKMeans(2, max_iter=3, random_state=0),
    ]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("index", range(4))
def test_kmeans_round_trip_predicts_the_same_bits(tmp_path, index, dtype):
    X = _rings(dtype=dtype)
    model = _models()[index].fit(X)
    for where in (str(tmp_path / "km.npz"), f"memory://models-{index}-{dtype.__name__}/km.npz"):
        model.save(where)
        back = type(model).load(where)
        assert type(back) is type(model) and back.get_params() == model.get_params()
        np.testing.assert_array_equal(back.predict(X), model.predict(X))
        np.testing.assert_array_equal(back.transform(X), model.transform(X))
        assert back.score(X) == model.score(X)
        assert back.summary() == model.summary()
        assert back.center_support_.dtype == model.center_support_.dtype
        # the one reader of model files finds the class in the header
        any_back = dkernel.load_model(where)
        assert type(any_back) is type(model) and type(load_model(where)) is type(model)
        np.testing.assert_array_equal(any_back.predict(X), model.predict(X))


def test_kmeans_round_trip_on_dask_input(tmp_path):
    X = _rings()
    Xd = da.from_array(X, chunks=(90, 3))
    model = MiniBatchKernelKMeans(2, batch_size=64, max_iter=5, random_state=0).fit(Xd)
    model.save(tmp_path / "m.npz")
    back = load_model(tmp_path / "m.npz")
    np.testing.assert_array_equal(back.predict(Xd).compute(), model.predict(X))


def test_kmeans_file_is_plain_npz_with_a_json_header(tmp_path):
    X = _rings()
    init = X[[0, 5]]
    model = MiniBatchKernelKMeans(2, init=init, batch_size=64, max_iter=3).fit(X)
    model.save(tmp_path / "m.npz")
    with np.load(tmp_path / "m.npz", allow_pickle=False) as f:
        header = json.loads(str(f["header"]))
        assert set(f.files) == {"header", "center_support", "center_coef", "center_norms"}
    assert header["format"] == "dkernel.MiniBatchKernelKMeans" and header["version"] == 1
    assert header["params"]["init"] == init.tolist()
    assert header["fitted"]["cluster_sizes"] == np.bincount(model.labels_).tolist()
    back = MiniBatchKernelKMeans.load(tmp_path / "m.npz")
    np.testing.assert_array_equal(back.init, init)
    assert not hasattr(back, "labels_")


def test_kmeans_models_that_cannot_be_saved(tmp_path):
    X = _rings(200)
    with pytest.raises(Exception, match="not fitted"):
        MiniBatchKernelKMeans(2).save(tmp_path / "x.npz")
    graph = MiniBatchKernelKMeans(2, kernel="knn", batch_size=50, max_iter=3, random_state=0)
    with pytest.raises(DKernelError, match="transductive kernel 'knn' cannot be saved"):
        graph.fit(X).save(tmp_path / "g.npz")

    def linear(A, B):
        return A @ B.T

    call = KernelKMeans(2, kernel=linear, max_iter=2, random_state=0).fit(X)
    with pytest.raises(DKernelError, match="callable kernel cannot be saved"):
        call.save(tmp_path / "c.npz")
    assert not (tmp_path / "g.npz").exists() and not (tmp_path / "c.npz").exists()


def _saved(tmp_path):
    X = _rings(300)
    path = tmp_path / "m.npz"
    MiniBatchKernelKMeans(2, batch_size=64, max_iter=3, random_state=0).fit(X).save(path)
    return dict(np.load(path, allow_pickle=False))


def _write(tmp_path, data, name, header=None):
    path = tmp_path / f"{name}.npz"
    if header is not None:
        data = {**data, "header": np.array(json.dumps(header))}
    np.savez(path, **data)
    return path


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (("version", 7), "format version 7"),
        (("params", {"n_clusters": 5}), "array shapes do not agree"),
        (("params", {"tau": -1}), "tau must be >= 1"),
        (("params", {"bogus": 1}), "unexpected keyword"),
        (("fitted", {"gamma_": -2.0}), "gamma_ must be > 0"),
        (("fitted", {"kernel": "knn"}), "kernel 'knn' of the fitted model is unknown"),
        (("fitted", {"n_features_in_": 7}), "array shapes do not agree"),
        (("fitted", {"inertia_": "low"}), "inertia_ must be Real"),
    ],
)
def test_kmeans_corrupt_headers_are_named(tmp_path, edit, message):
    data = _saved(tmp_path)
    header = json.loads(str(data["header"]))
    key, value = edit
    if isinstance(value, dict):
        header[key].update(value)
    else:
        header[key] = value
    with pytest.raises(DKernelError, match=message):
        load_model(_write(tmp_path, data, "bad", header))


def test_kmeans_corrupt_arrays_and_foreign_files(tmp_path):
    data = _saved(tmp_path)
    nan = data["center_coef"].copy()
    nan[0, 0] = np.nan
    with pytest.raises(DKernelError, match="non-finite centers"):
        load_model(_write(tmp_path, {**data, "center_coef": nan}, "nan"))
    short = {k: v for k, v in data.items() if k != "center_norms"}
    with pytest.raises(DKernelError, match=r"arrays \['center_norms'\] missing"):
        load_model(_write(tmp_path, short, "short"))
    with pytest.raises(DKernelError, match="not a dkernel.KernelKMeans model file .*MiniBatch"):
        KernelKMeans.load(_write(tmp_path, data, "mb"))
    header = json.loads(str(data["header"]))
    header["format"] = "dkernel.Other"
    with pytest.raises(DKernelError, match="format 'dkernel.Other'; this dkernel reads"):
        load_model(_write(tmp_path, data, "other", header))
    X, y = make_checkerboard(200, random_state=0)
    BudgetedSVC(budget=10, random_state=0).fit(X, y).save(tmp_path / "svm.npz")
    with pytest.raises(DKernelError, match="holds a BudgetedSVC"):
        MiniBatchKernelKMeans.load(tmp_path / "svm.npz")


def test_loaded_minibatch_partial_fit_starts_a_new_model(tmp_path):
    X = _rings()
    model = MiniBatchKernelKMeans(2, batch_size=64, max_iter=3, random_state=0).fit(X)
    model.save(tmp_path / "m.npz")
    back = MiniBatchKernelKMeans.load(tmp_path / "m.npz").partial_fit(X[:100])
    assert back.summary()["cluster_sizes"] == [] and back.summary()["inertia"] is not None


# ------------------------------------------------------------------------ summaries
def test_kmeans_summary():
    X = _rings()
    m = MiniBatchKernelKMeans(3, batch_size=64, max_iter=5, random_state=0).fit(X)
    s = m.summary()
    assert s["estimator"] == "MiniBatchKernelKMeans" and s["kernel"] == "rbf"
    assert s["gamma"] == m.gamma_ and s["n_support"] == m.center_coef_.shape[1]
    assert s["inertia"] == m.inertia_ and s["n_iter"] == m.n_iter_
    assert sum(s["cluster_sizes"]) == len(X)
    assert set(s["timings"]) == {"setup", "init", "iterations", "labels"}
    json.dumps(s)  # JSON-ready as it is
    full = KernelKMeans(2, max_iter=2, random_state=0).fit(X).summary()
    assert full["n_support"] >= len(X) and "timings" not in full


def test_svm_summary_round_trips(tmp_path):
    X, y = make_checkerboard(400, random_state=0)
    clf = BudgetedSVC(budget=15, standardize=True, random_state=0).fit(X, y)
    s = clf.summary()
    assert s["n_support_vectors"] == clf.support_vectors_.shape[0] <= 15
    assert s["classes"] == clf.classes_.tolist() and s["standardize"] is True
    assert s["gamma"] == clf.gamma_ and s["alpha"] == clf.alpha_ and s["t"] == clf.t_
    assert set(s["timings"]) == set(s["phases"]) >= {"setup", "stream", "refit solve"}
    json.dumps(s)
    clf.save(tmp_path / "s.npz")
    # the fit's timings belong to the fit, not to the model a file keeps
    model_part = {k: v for k, v in s.items() if k not in ("timings", "phases")}
    assert load_model(tmp_path / "s.npz").summary() == model_part


# ------------------------------------------------------------------ one-pass score
@pytest.mark.parametrize("weighted", [False, True])
def test_svm_score_on_dask_input_matches_numpy(weighted, scheduler):
    X, y = make_checkerboard(600, n_cells=3, random_state=0)
    clf = BudgetedSVC(budget=20, max_iter=1, random_state=0).fit(X, y)
    w = np.random.default_rng(0).uniform(0.1, 2.0, len(y)) if weighted else None
    ref = clf.score(X, y, sample_weight=w)
    Xd = da.from_array(X, chunks=(150, 2))
    assert clf.score(Xd, y, sample_weight=w) == pytest.approx(ref, abs=1e-12)
    yd = da.from_array(y, chunks=100)  # chunked unlike X
    wd = None if w is None else da.from_array(w, chunks=200)
    assert clf.score(Xd, yd, sample_weight=wd) == pytest.approx(ref, abs=1e-12)
    assert clf.score(X, yd, sample_weight=wd) == pytest.approx(ref, abs=1e-12)


def test_svm_score_errors_before_reading():
    X, y = make_checkerboard(300, random_state=0)
    clf = BudgetedSVC(budget=10, max_iter=1, random_state=0).fit(X, y)
    Xd = da.from_array(X, chunks=(100, 2))
    with pytest.raises(DKernelError, match=r"y has shape \(299,\), expected \(300,\)"):
        clf.score(Xd, y[:-1])
    with pytest.raises(DKernelError, match="labels of dtype <U1.*cannot match"):
        clf.score(Xd, np.array(["a"] * 300))
    with pytest.raises(DKernelError, match="requires y"):
        clf.score(Xd)
    with pytest.raises(DKernelError, match="sums to 0"):
        clf.score(Xd, y, sample_weight=np.zeros(300))


@pytest.fixture
def chunk_reads(file_reads):
    """Reads of every chunk file of X and y, as ``"X/<chunk>"`` / ``"y/<chunk>"``: each
    opening of a chunk file for reading, by zarr or by the data layer's direct reads of
    plain-layout chunks (as ``tests/test_chunk_reads.py`` counts X's)."""
    import re

    def key(path: str) -> str | None:
        m = re.search(r"/(X|y)/c/(\d+)(?:/0)?$", path)
        return f"{m[1]}/{m[2]}" if m else None

    return file_reads(key)


@pytest.mark.parametrize("weighted", [False, True])
def test_svm_score_on_a_store_reads_each_chunk_once(tmp_path, chunk_reads, scheduler, weighted):
    from dkernel.data import open_dataset

    path = str(tmp_path / "cb.zarr")
    ds = make_checkerboard(1200, random_state=0, store=path, chunk_rows=100)  # 12 chunks
    X, y = np.asarray(ds.X.compute()), np.asarray(ds.y.compute())
    clf = BudgetedSVC(budget=20, max_iter=1, random_state=0).fit(X, y)
    w = np.linspace(0.5, 1.5, len(y)) if weighted else None
    ref = clf.score(X, y, sample_weight=w)
    chunk_reads.clear()
    got = clf.score(path, sample_weight=w)  # y from the store
    assert got == pytest.approx(ref, abs=1e-12)
    expected = {f"{a}/{i}": 1 for a in ("X", "y") for i in range(12)}
    assert dict(chunk_reads) == expected
    chunk_reads.clear()
    ds = open_dataset(path)
    assert clf.score(ds.X, ds.y, sample_weight=w) == pytest.approx(ref, abs=1e-12)
    assert dict(chunk_reads) == expected


def test_feature_names_survive_save_and_load(tmp_path):
    """Column names a model was fitted with (scikit-learn's ``feature_names_in_``, set by a
    fit on a DataFrame) come back with it, for both model files; a model without them
    loads without them."""
    X, y = make_checkerboard(300, random_state=0)
    names = np.array(["width", "height"], dtype=object)
    clf = BudgetedSVC(budget=15, max_iter=1, random_state=0).fit(X, y)
    km = MiniBatchKernelKMeans(2, gamma=1.0, max_iter=5, random_state=0).fit(X)
    for model, name in ((clf, "s.npz"), (km, "k.npz")):
        model.save(tmp_path / ("plain-" + name))
        assert not hasattr(load_model(tmp_path / ("plain-" + name)), "feature_names_in_")
        model.feature_names_in_ = names  # as a fit on a DataFrame sets it
        model.save(tmp_path / name)
        back = load_model(tmp_path / name)
        assert back.feature_names_in_.tolist() == ["width", "height"]
        assert back.feature_names_in_.dtype == object
