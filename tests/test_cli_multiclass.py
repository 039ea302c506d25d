"""One-vs-rest SVM coresets across the workers: ``distributed_coreset(multiclass="ovr")`` and
``dkernel coreset`` on a store with more than two classes."""

from __future__ import annotations

import json

import dask
import numpy as np
import pytest

from dkernel import DKernelError
from dkernel.cli.main import main
from dkernel.coreset import distributed_coreset
from dkernel.data import ingest, open_dataset


@pytest.fixture
def three_classes(tmp_path):
    rng = np.random.default_rng(0)
    centers = np.array([[0.0, 0.0], [4.0, 0.0], [0.0, 4.0]])
    y = rng.integers(0, 3, 3000)
    X = centers[y] + rng.standard_normal((3000, 2))
    return ingest(X, tmp_path / "three.zarr", y=y, chunk_rows=1000)


def test_distributed_coreset_one_vs_rest(three_classes):
    ds = three_classes
    y = np.asarray(ds.y.compute())
    with dask.config.set(scheduler="sync"):
        with pytest.raises(DKernelError, match="3 classes; pass multiclass='ovr'"):
            distributed_coreset(ds, None, 100, random_state=0)
        cores = distributed_coreset(ds, None, 100, multiclass="ovr", random_state=0)
        again = distributed_coreset(ds, None, 100, multiclass="ovr", random_state=0)
    assert sorted(cores) == [0, 1, 2]
    X = np.asarray(ds.X.compute())
    for c, core in cores.items():
        assert core.classes == (-1, 1) and 0 < len(core) <= 100
        assert set(np.unique(core.y)) <= {-1, 1}
        # every row is a row of the data, +1 exactly where its class is c
        rows = [int(np.flatnonzero((X == row).all(axis=1))[0]) for row in core.X]
        np.testing.assert_array_equal(core.y, np.where(y[rows] == c, 1, -1))
        assert core.weight.sum() == pytest.approx(3000, rel=0.25)
        np.testing.assert_array_equal(core.X, again[c].X)
    # the classes draw from their own seeds: not the same sample three times
    assert not np.array_equal(cores[0].X, cores[1].X)


def test_binary_input_is_unchanged_by_multiclass(tmp_path):
    rng = np.random.default_rng(1)
    X = rng.standard_normal((1000, 2))
    y = np.where(X[:, 0] > 0, 1, -1)
    with dask.config.set(scheduler="sync"):
        a = distributed_coreset(X, y, 50, random_state=0)
        b = distributed_coreset(X, y, 50, multiclass="ovr", random_state=0)
    np.testing.assert_array_equal(a.X, b.X)
    np.testing.assert_array_equal(a.weight, b.weight)


@pytest.mark.parametrize("method", ["two-pass", "merge-reduce"])
def test_cli_coreset_of_three_classes(three_classes, tmp_path, cli_cluster, capsys, method):
    out = str(tmp_path / "core.zarr")
    argv = ["--cluster", cli_cluster, "coreset", three_classes.path, out, "--size", "100"]
    assert main([*argv, "--method", method, "--leaf-size", "1000"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["multiclass"] == "ovr" and summary["classes"] == [0, 1, 2]
    assert set(summary["per_class"]) == {"0", "1", "2"}
    core = open_dataset(out)
    owner = np.asarray(core.read("ovr_class").compute())
    weight = np.asarray(core.read("weight").compute())
    assert core.n_samples == summary["rows"] == len(owner)
    assert set(np.unique(np.asarray(core.y.compute()))) <= {-1, 1}
    for c in (0, 1, 2):
        assert summary["per_class"][str(c)]["rows"] == int((owner == c).sum())
        assert weight[owner == c].sum() == pytest.approx(3000, rel=0.25)
