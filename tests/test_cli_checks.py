"""The CLI checks every argument, --cluster included, before it starts a cluster."""

from __future__ import annotations

import os

import numpy as np
import pytest

from dkernel.cli.main import main
from dkernel.data import ingest


@pytest.fixture
def store(tmp_path):
    X = np.random.default_rng(0).standard_normal((60, 2))
    return ingest(X, tmp_path / "s.zarr", y=np.where(X[:, 0] > 0, 1, -1), chunk_rows=20).path


def _one_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("dkernel: error: "), err
    return err[0]


@pytest.mark.parametrize(
    "argv",
    [
        ["ingest", "{tmp}/d.npz", "{tmp}/o.zarr"],
        ["info", "{store}"],
        ["kmeans", "{store}", "--n-clusters", "2"],
        ["svm", "train", "{store}", "{tmp}/m.npz"],
        ["svm", "predict", "{tmp}/m.npz", "{store}"],
        ["coreset", "{store}", "{tmp}/o.zarr", "--size", "10"],
        ["demo", "--workdir", "{tmp}/w"],
    ],
    ids=lambda a: " ".join(a[:2]),
)
def test_missing_cluster_config_is_an_error_for_every_subcommand(
    tmp_path, store, no_cluster, capsys, argv
):
    np.savez(tmp_path / "d.npz", X=np.ones((3, 2)))
    argv = [a.format(tmp=tmp_path, store=store) for a in argv]
    assert main(["--cluster", str(tmp_path / "missing.yaml"), *argv]) == 2
    assert "missing.yaml' does not exist" in _one_line(capsys)
    assert sorted(os.listdir(tmp_path)) == ["d.npz", "s.zarr"]


@pytest.mark.parametrize(
    "argv, match",
    [
        (["kmeans", "{store}", "--n-clusters", "2", "--gamma", "-1"], "--gamma must be > 0"),
        (["kmeans", "{store}", "--n-clusters", "2", "--kernel", "nope"], "nope"),
        (["kmeans", "{store}", "--n-clusters", "2", "--labels-name", "y"], "is not allowed"),
        (["svm", "train", "{store}", "{tmp}/m.npz", "--budget", "1"], "budget must be >= 2"),
        (["svm", "train", "{store}", "{tmp}/no/m.npz"], "does not exist"),
        (["coreset", "{store}", "{tmp}/o.zarr", "--size", "10", "--beta", "2"], "--beta must be"),
        (["coreset", "{store}", "{tmp}/o.zarr", "--size", "30", "--leaf-size", "5"], "--leaf-size"),
        (
            ["coreset", "{store}", "{tmp}/o.zarr", "--size", "30", "--method", "merge-reduce"],
            "pass --leaf-size >= --size",
        ),
        (["coreset", "{store}", "{tmp}/no/o.zarr", "--size", "10"], "does not exist"),
        (["coreset", "{store}", "{tmp}/o.zarr", "--size", "0"], "--size must be in"),
    ],
)
def test_bad_arguments_fail_fast_without_a_cluster(
    tmp_path, store, no_cluster, capsys, argv, match
):
    argv = [a.format(tmp=tmp_path, store=store) for a in argv]
    assert main(argv) == 2  # no_cluster: starting a cluster would raise instead
    assert match in _one_line(capsys)
    assert sorted(os.listdir(tmp_path)) == ["s.zarr"]
