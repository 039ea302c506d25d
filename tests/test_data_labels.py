"""Labels that are class names (issue 36): one rule for a CSV column, an array, a pandas
Series or DataFrame column. A store keeps them coded (indices in the sorted names, the
names in ``label_names``); fits see the names, so ``classes_`` and predictions are the
user's names whichever way the rows came."""

from __future__ import annotations

import json

import dask
import dask.array as da
import numpy as np
import pytest

from dkernel import DKernelError
from dkernel.cli.main import main
from dkernel.coreset import (
    distributed_coreset,
    read_coreset,
    svm_coreset,
    uniform_store_coreset,
    write_coreset,
)
from dkernel.data import ingest, open_dataset
from dkernel.svm import BudgetedSVC

NAMES = np.array(["bird", "cat", "dog"])


@pytest.fixture
def rows(rng):
    """float32 rows (stored exactly by a CSV and a store) and their names, 3 classes."""
    X = rng.standard_normal((400, 3)).astype(np.float32)
    y = NAMES[(X[:, 0] > 0.4).astype(int) + (X[:, 1] > 0).astype(int)]
    return X, y


@pytest.fixture
def csv_store(tmp_path, rows):
    """The reference route: a CSV whose last column holds the names, ingested."""
    X, y = rows
    lines = ["a,b,c,species"] + [
        f"{a!r},{b!r},{c!r},{lab}" for (a, b, c), lab in zip(X.tolist(), y)
    ]
    path = tmp_path / "d.csv"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return ingest(path, tmp_path / "csv.zarr")


def assert_same_store(ds, ref):
    np.testing.assert_array_equal(ds.X.compute(), ref.X.compute())
    np.testing.assert_array_equal(ds.y.compute(), ref.y.compute())
    assert ds.y.dtype == np.int64
    assert ds.attrs["label_names"] == ref.attrs["label_names"] == NAMES.tolist()
    assert ds.attrs["classes"] == ref.attrs["classes"] == [0, 1, 2]


# ------------------------------------------------------------------------------ ingest
@pytest.mark.parametrize("kind", ["str", "object", "bytes"])
def test_numpy_names_are_coded_as_a_csv_codes_them(tmp_path, rows, csv_store, kind):
    X, y = rows
    y = {"str": y, "object": y.astype(object), "bytes": np.char.encode(y)}[kind]
    ds = ingest(X, tmp_path / "a.zarr", y=y)
    assert_same_store(ds, csv_store)
    np.testing.assert_array_equal(ds.labels("y").compute(), rows[1])  # the names come back


def test_dask_names_are_coded_as_a_csv_codes_them(tmp_path, rows, csv_store):
    X, y = rows
    ds = ingest(da.from_array(X, chunks=150), tmp_path / "a.zarr", y=da.from_array(y, chunks=150))
    assert_same_store(ds, csv_store)
    np.testing.assert_array_equal(ds.labels("y").compute(), y)  # the names come back


def test_labels_give_the_names_back(csv_store, rows):
    np.testing.assert_array_equal(csv_store.labels("y").compute(), rows[1])
    np.testing.assert_array_equal(csv_store.label_classes(), NAMES)


def test_a_missing_name_is_named_by_its_row(tmp_path, rows):
    X, y = rows
    y = y.astype(object)
    y[7] = None
    with pytest.raises(DKernelError, match=r"label at row 7 is missing \(None\)"):
        ingest(X, tmp_path / "a.zarr", y=y)
    y[7] = 3
    with pytest.raises(DKernelError, match=r"label at row 7 is not text \(3\)"):
        ingest(X, tmp_path / "a.zarr", y=y)


def test_too_many_names_are_not_class_labels(tmp_path, dkernel_config):
    dkernel_config({"data.max-label-names": 3})
    y = np.array([f"id{i}" for i in range(10)])
    with pytest.raises(DKernelError, match="more than 3 distinct text values"):
        ingest(np.eye(10), tmp_path / "a.zarr", y=y)


def test_a_named_label_column_needs_a_dataframe(tmp_path, rows):
    with pytest.raises(DKernelError, match="must be a pandas DataFrame"):
        ingest(rows[0], tmp_path / "a.zarr", label_column="species")


# ------------------------------------------------------------------------ estimators
def test_store_of_names_fits_on_the_names(csv_store, rows):
    """The CSV route: ``classes_`` and predictions are the names, and the model is the
    one the names themselves give."""
    X, y = rows
    kw = dict(budget=30, max_iter=2, random_state=0)
    ref = BudgetedSVC(**kw).fit(X, y)
    clf = BudgetedSVC(**kw).fit(csv_store)
    assert clf.classes_.tolist() == NAMES.tolist()
    np.testing.assert_array_equal(clf.dual_coef_, ref.dual_coef_)
    np.testing.assert_array_equal(clf.support_vectors_, ref.support_vectors_)
    pred = clf.predict(csv_store).compute()
    np.testing.assert_array_equal(pred, ref.predict(X))
    assert set(pred) <= set(NAMES) and len(set(pred)) > 1
    assert clf.score(csv_store) == pytest.approx(ref.score(X, y))


def test_coresets_of_a_store_of_names(tmp_path, csv_store, rows):
    X, y = rows
    two = y != "dog"
    ds = ingest(X[two], tmp_path / "two.zarr", y=y[two])
    ref = distributed_coreset(X[two], y[two], 60, random_state=0)
    got = distributed_coreset(ds, None, 60, random_state=0)
    assert got.classes == ref.classes == ("bird", "cat")
    np.testing.assert_array_equal(np.asarray(got.y), np.asarray(ref.y))
    unif = uniform_store_coreset(ds, 60, random_state=0)
    assert unif.classes == ("bird", "cat") and set(np.asarray(unif.y)) == {"bird", "cat"}
    back = read_coreset(write_coreset(svm_coreset(X[two], y[two], 60, random_state=0),
                                      tmp_path / "c.zarr"))  # fmt: skip
    assert back.classes == ("bird", "cat") and set(back.y) == {"bird", "cat"}
    ovr = distributed_coreset(csv_store, None, 60, multiclass="ovr", random_state=0)
    assert sorted(read_coreset(write_coreset(ovr, tmp_path / "o.zarr"))) == NAMES.tolist()


def test_cli_trains_and_predicts_names(tmp_path, csv_store, cli_cluster, capsys):
    model = str(tmp_path / "m.npz")
    argv = ["--cluster", cli_cluster, "svm"]
    assert main([*argv, "train", csv_store.path, model, "--max-iter", "2", "--seed", "0"]) == 0
    capsys.readouterr()
    assert main([*argv, "predict", model, csv_store.path]) == 0
    out = capsys.readouterr().out
    summary = json.loads(out[out.index("{") :])
    ds = open_dataset(csv_store.path)
    pred = ds.labels("predictions").compute()
    assert set(pred) <= set(NAMES)
    assert summary["accuracy"] == pytest.approx(np.mean(pred == ds.labels("y").compute()))
    assert ds.read("predictions").dtype == np.int64  # kept as a store keeps names


# ---------------------------------------------------------------------------- pandas
@pytest.fixture(params=["str", "object", "category"])
def frame(request, rows):
    pd = pytest.importorskip("pandas")
    X, y = rows
    df = pd.DataFrame(X, columns=["a", "b", "c"])
    return df, pd.Series(y, name="species").astype(request.param)


def test_series_of_names_is_coded_as_a_csv_codes_it(tmp_path, frame, csv_store):
    df, y = frame
    assert_same_store(ingest(df, tmp_path / "a.zarr", y=y), csv_store)
    both = df.assign(species=y)
    assert_same_store(ingest(both, tmp_path / "b.zarr", label_column="species"), csv_store)
    with pytest.raises(DKernelError, match="not a column"):
        ingest(both, tmp_path / "c.zarr", label_column="kind")
    with pytest.raises(DKernelError, match="not both"):
        ingest(both, tmp_path / "c.zarr", y=y, label_column="species")


def test_dataframe_and_series_give_the_csv_model(frame, csv_store):
    df, y = frame
    kw = dict(budget=30, max_iter=2, random_state=0)
    clf = BudgetedSVC(**kw).fit(df, y)
    ref = BudgetedSVC(**kw).fit(csv_store)
    assert clf.classes_.tolist() == ref.classes_.tolist() == NAMES.tolist()
    np.testing.assert_array_equal(clf.dual_coef_, ref.dual_coef_)
    np.testing.assert_array_equal(clf.support_vectors_, ref.support_vectors_)
    np.testing.assert_array_equal(clf.intercept_, ref.intercept_)
    pred = clf.predict(df)
    assert isinstance(pred[0], str)
    np.testing.assert_array_equal(pred, ref.predict(df.to_numpy()))
    assert clf.score(df, y) == pytest.approx(ref.score(csv_store))


def test_partial_fit_with_named_classes(frame):
    df, y = frame
    clf = BudgetedSVC(budget=30, random_state=0).partial_fit(df, y, classes=NAMES.tolist())
    assert clf.classes_.tolist() == NAMES.tolist()
    assert set(clf.predict(df)) <= set(NAMES)


def test_coresets_of_a_series_of_names(frame, rows):
    df, y = frame
    X, names = rows
    two = names != "dog"
    df, y = df[two], y[two].astype(str)
    ref = svm_coreset(X[two], names[two], 60, random_state=0)
    got = svm_coreset(df, y, 60, random_state=0)
    assert got.classes == ref.classes == ("bird", "cat")
    np.testing.assert_array_equal(got.weight, ref.weight)
    assert distributed_coreset(df, y, 60, random_state=0).classes == ("bird", "cat")


def test_distributed_fit_on_a_store_of_names(csv_store, rows, local_cluster_client, rounds_only):
    """The rounds on the workers read the store's indices and train on the names."""
    X, y = rows
    kw = dict(budget=30, max_iter=2, random_state=0, distributed=True, n_shards=2)
    with local_cluster_client.as_current(), dask.config.set(scheduler=local_cluster_client):
        ref = BudgetedSVC(**kw).fit(da.from_array(X, chunks=150), da.from_array(y, chunks=150))
        clf = BudgetedSVC(**kw).fit(csv_store)
        pred = clf.predict(csv_store).compute()
    assert clf.classes_.tolist() == ref.classes_.tolist() == NAMES.tolist()
    np.testing.assert_array_equal(clf.dual_coef_, ref.dual_coef_)
    np.testing.assert_array_equal(pred, ref.predict(X))
