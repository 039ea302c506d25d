"""The dashboard says what runs: every task of a dkernel fit, predict or score has a key
prefix that names the algorithm and its step.

The test reads what the dashboard itself shows: the scheduler's task prefixes (the
Progress panel's bars and the Groups page are drawn from them), after each algorithm ran on
a fresh in-process LocalCluster.
"""

from __future__ import annotations

import re

import dask.array as da
import numpy as np
import pytest
from distributed import Client, LocalCluster

from dkernel.cluster import MiniBatchKernelKMeans
from dkernel.coreset import distributed_coreset
from dkernel.data import ingest, open_dataset
from dkernel.svm import BudgetedSVC

#: Distributed fits here train in rounds from the first step (no stream prefix).
pytestmark = pytest.mark.usefixtures("rounds_only")

#: A named dkernel step: the algorithm, then the step (``kkmeans-labels``, ``bsgd-round``,
#: ``coreset-sample``), the data layer's row gathers and a store's chunk reads.
STEP = re.compile(r"(kkmeans|bsgd|svm|coreset)(-[a-z]+)+|take-rows|dkernel-(X|y)")
#: Dask's own names that stay, each for a reason; nothing else may appear.
DASK_INTERNAL = {
    "array",  # the chunks of the test's own da.from_array input
    "getitem",  # row ranges of that input (a BSGD shard, a streamed block, a refit part)
    "finalize-hlgfinalizecompute",  # .compute() joining a lazy result's chunks
}

N, D, CHUNK = 4000, 5, 1000


def _known(prefix: str) -> bool:
    """A named step or an allowed internal; Dask's linear fusion names a read of the input
    fused into the task that consumes it by joining both (``array-kkmeans-labels``)."""
    if prefix.startswith("array-"):
        prefix = prefix[len("array-") :]
    return prefix in DASK_INTERNAL or STEP.fullmatch(prefix) is not None


@pytest.fixture
def client():
    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None
        ) as cluster,
        Client(cluster) as c,
    ):
        yield c


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(N, D))
    y = np.where(X[:, 0] + 0.3 * rng.normal(size=N) > 0, 1, -1)
    return X, y


def _dask(data):
    X, y = data
    return da.from_array(X, chunks=CHUNK), da.from_array(y, chunks=CHUNK)


def _prefixes(client) -> set[str]:
    return set(client.run_on_scheduler(lambda dask_scheduler: list(dask_scheduler.task_prefixes)))


def _check(client, expected: set[str]) -> set[str]:
    seen = _prefixes(client)
    unnamed = sorted(p for p in seen if not _known(p))
    assert not unnamed, f"tasks the dashboard shows without a dkernel step name: {unnamed}"
    assert expected <= seen, f"steps missing: {sorted(expected - seen)} (saw {sorted(seen)})"
    return seen


def test_kernel_kmeans_fit_predict_score(client, data):
    Xd, _ = _dask(data)
    km = MiniBatchKernelKMeans(3, batch_size=128, max_iter=5, random_state=0).fit(Xd)
    # the fit itself: its steps and the input's chunks, no Dask-internal join; the labels
    # pass (one task per chunk) and its distance totals; the label column is cut from the
    # pass's parts when labels_ is computed
    labels_pass = {"kkmeans-labels", "kkmeans-labels-total"}
    seen = _check(client, {"kkmeans-batch"} | labels_pass)
    assert seen <= {"array", "kkmeans-batch", "array-kkmeans-labels"} | labels_pass
    km.labels_.compute()
    _check(client, {"kkmeans-labels-column"})  # absent from the fit's (seen above)
    km.predict(Xd).compute()
    km.transform(Xd).compute()
    km.score(Xd)
    _check(
        client,
        {"kkmeans-batch", "kkmeans-labels", "kkmeans-predict", "kkmeans-transform"}
        | {"kkmeans-score", "kkmeans-score-total"},
    )


def test_kernel_kmeans_on_a_store(client, data, tmp_path):
    X, y = data
    path = str(tmp_path / "g.zarr")
    ingest(X, path, y=y, chunk_rows=CHUNK)
    km = MiniBatchKernelKMeans(3, batch_size=128, max_iter=5, random_state=0).fit(path)
    # a store's chunks are read by the named steps themselves: nothing else runs
    labels_pass = {"kkmeans-labels", "kkmeans-labels-total"}
    assert _check(client, {"kkmeans-batch"} | labels_pass) == {"kkmeans-batch"} | labels_pass
    km.predict(path).compute()
    _check(client, {"kkmeans-predict"})


def test_budgeted_svc_distributed(client, data):
    Xd, yd = _dask(data)
    clf = BudgetedSVC(
        budget=30, max_iter=1, n_rounds=2, distributed=True, standardize=True, random_state=0
    )
    clf.fit(Xd, yd)
    clf.predict(Xd).compute()
    clf.decision_function(Xd).compute()
    clf.score(Xd, yd)
    _check(
        client,
        {
            "svm-classes",
            "svm-standardize",
            "bsgd-shard",
            "bsgd-round",
            "bsgd-merge",
            # the refit's parts are cut from the shards (no svm-refit-rows: X is read once)
            # and each pass's sums come to the client in one gather (no svm-refit-sum)
            "svm-refit-part",
            "svm-refit-grad",
            "svm-predict",
            "svm-scores",
        },
    )


def test_budgeted_svc_streaming(client, data):
    Xd, yd = _dask(data)
    clf = BudgetedSVC(budget=30, max_iter=1, distributed=False, refit=False, random_state=0)
    clf.fit(Xd, yd).predict(Xd).compute()
    _check(client, {"svm-classes", "svm-predict"})


@pytest.mark.parametrize(
    ("method", "steps"),
    [
        (
            "two-pass",
            {
                "coreset-certificate",
                "coreset-certificate-stats",
                "coreset-sensitivity-total",
                "coreset-sample",
            },
        ),
        ("merge-reduce", {"coreset-leaf", "coreset-merge"}),
    ],
)
def test_distributed_coreset(client, data, method, steps):
    Xd, yd = _dask(data)
    S = distributed_coreset(Xd, yd, 100, method=method, leaf_size=CHUNK, random_state=0)
    assert len(S) > 0
    seen = _check(client, {"coreset-classes", *steps})
    assert not any(p.startswith("rechunk") for p in seen)


def test_svm_and_coreset_on_a_store(client, data, tmp_path):
    """A store's chunks are read by the named tasks that use them (a shard's load, and a
    chunk two shards share by a read under the shards' name): nothing of Dask's own runs but
    the join of the test's ``.compute()`` and the coreset's sample."""
    X, y = data
    path = str(tmp_path / "g.zarr")
    ingest(X, path, y=y, chunk_rows=1024)
    clf = BudgetedSVC(budget=30, max_iter=1, n_rounds=2, distributed=True, random_state=0)
    clf.fit(path).predict(path).compute()
    distributed_coreset(path, None, 100, random_state=0)
    seen = _check(client, {"bsgd-shard", "bsgd-round", "svm-refit-grad", "coreset-sample"})
    assert "coreset-solve-sample" in seen  # the coarse solve's rows, gathered by name
    assert seen - {"finalize-hlgfinalizecompute"} == {p for p in seen if STEP.fullmatch(p)}


def test_budgeted_svc_probabilities_weights_and_score(client, data):
    """probability=True (held-out rows gathered by name), dask weights checked in one named
    pass, predict_proba and the one-pass score: named steps only."""
    Xd, yd = _dask(data)
    wd = da.from_array(np.ones(N), chunks=CHUNK)
    clf = BudgetedSVC(
        budget=30, max_iter=1, distributed=False, probability=True, random_state=0
    ).fit(Xd, yd, sample_weight=wd)
    clf.predict_proba(Xd).compute()
    clf.predict_log_proba(Xd).compute()
    clf.score(Xd, yd, sample_weight=wd)
    _check(
        client,
        {
            "svm-classes",
            "svm-weights",
            "svm-calibration-rows",
            "svm-proba",
            "svm-log-proba",
            "svm-score",
        },
    )


def test_a_stores_own_labels_are_not_read_for_their_classes(client, data, tmp_path):
    """``fit(ds.X, ds.y)`` takes the classes the store recorded, as ``fit(ds)`` does: no
    pass over y (no ``svm-classes`` or ``coreset-classes`` task); a cut of the rows may
    lack a class, so its classes are read from it."""
    X, y = data
    path = str(tmp_path / "g.zarr")
    ingest(X, path, y=y, chunk_rows=CHUNK)
    ds = open_dataset(path)
    np.testing.assert_array_equal(ds.y.blocks_of(300).recorded_classes, [-1, 1])
    assert ds.y[:10].recorded_classes is None and ds.X.recorded_classes is None
    params = dict(budget=30, max_iter=1, n_rounds=2, distributed=True, random_state=0)
    clf = BudgetedSVC(**params).fit(ds.X, ds.y)
    distributed_coreset(ds.X, ds.y, 100, random_state=0)
    seen = _check(client, {"bsgd-shard", "coreset-sample"})
    assert not {"svm-classes", "coreset-classes"} & seen
    np.testing.assert_array_equal(clf.classes_, [-1, 1])
    assert clf.classes_.dtype == ds.y.dtype
    np.testing.assert_array_equal(clf.predict(X), BudgetedSVC(**params).fit(path).predict(X))
    BudgetedSVC(**params).fit(ds.X[: N // 2], ds.y[: N // 2])
    _check(client, {"svm-classes"})
