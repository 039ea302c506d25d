"""A CLI that composes: results on stdout, messages on stderr, every path checked before
the work, no array or store replaced unless asked, help that shows defaults, stores
verified chunk by chunk (``dkernel check``, ``info --verify``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import yaml

from dkernel import DKernelError
from dkernel.cli.main import build_parser, main
from dkernel.data import ingest, write_array

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def store(tmp_path):
    X = np.random.default_rng(0).standard_normal((60, 2))
    return ingest(X, tmp_path / "s.zarr", y=np.where(X[:, 0] > 0, 1, -1), chunk_rows=20).path


def _error(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("dkernel: error: "), err
    return err[0]


def _corrupt(path: str) -> None:
    raw = bytearray(open(path, "rb").read())
    raw[len(raw) // 2] ^= 0xFF
    open(path, "wb").write(bytes(raw))


def _chunk_file(store: str, name: str, index: int) -> str:
    from dkernel.data import open_dataset

    arr = open_dataset(store).array(name)
    key = arr.metadata.encode_chunk_key((index,) + (0,) * (arr.ndim - 1))
    return os.path.join(store, name, key)


# --- stdout carries the result only --------------------------------------------------------


def test_kmeans_output_pipes_into_json_tool(store, tmp_path):
    """``dkernel kmeans ... | python -m json.tool``: the dashboard link is on stderr."""
    cfg = tmp_path / "c.yaml"
    cfg.write_text(
        yaml.safe_dump(
            {"cluster": {"kind": "local", "options": {"n_workers": 1, "processes": False}}}
        ),
        encoding="utf-8",
    )
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    argv = ["--cluster", str(cfg), "kmeans", store, "--n-clusters", "2", "--max-iter", "3"]
    run = subprocess.run(
        [sys.executable, "-m", "dkernel", *argv, "--batch-size", "16"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    tool = subprocess.run(
        [sys.executable, "-m", "json.tool"], input=run.stdout, capture_output=True, text=True
    )
    assert tool.returncode == 0 and json.loads(tool.stdout)["n_clusters"] == 2
    assert "dashboard: http" in run.stderr


def test_svm_shows_the_dashboard_on_stderr(store, tmp_path, cli_cluster, capsys):
    model = str(tmp_path / "m.npz")
    argv = ["--cluster", cli_cluster, "svm", "train", store, model, "--max-iter", "1"]
    assert main([*argv, "--budget", "10"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["n_support_vectors"] >= 1
    assert "dkernel: dashboard: " in captured.err


# --- paths checked before a cluster starts --------------------------------------------------


def test_tilde_is_expanded_in_store_and_output_paths(store, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HOME", str(tmp_path))
    assert main(["info", "~/s.zarr"]) == 0
    assert json.loads(capsys.readouterr().out)["store"] == store
    # a relative path is taken from the working directory
    monkeypatch.chdir(tmp_path)
    assert main(["info", "s.zarr"]) == 0
    assert json.loads(capsys.readouterr().out)["store"] == store


@pytest.mark.parametrize(
    "argv, match",
    [
        (["kmeans", "{store}", "--n-clusters", "2", "--summary", "{tmp}/no/s.json"], "no' for"),
        (["kmeans", "{store}", "--n-clusters", "2", "--summary", "~/no/s.json"], "no' for"),
        (["kmeans", "{store}", "--n-clusters", "2", "--summary", "{tmp}"], "is a folder"),
        (["kmeans", "{store}", "--n-clusters", "2", "--checkpoint", "{tmp}/no/c"], "does not"),
        (["kmeans", "{store}", "--n-clusters", "2", "--summary", "/proc/s.json"], "cannot be"),
        (["svm", "train", "{store}", "{tmp}"], "model file"),
        (["svm", "train", "{store}", "/proc/m.npz"], "cannot be written"),
        (["svm", "train", "{store}", "{tmp}/m.npz", "--summary", "{tmp}/no/s"], "does not exist"),
        (["svm", "predict", "{tmp}", "{store}"], "is a folder"),
        (["svm", "predict", "{tmp}/m.npz", "{store}", "--summary", "{tmp}/no/s"], "not exist"),
        (["coreset", "{store}", "{store}", "--size", "5", "--overwrite"], "is the input store"),
        (["coreset", "{store}", "{store}/sub", "--size", "5"], "is the input store"),
        (["coreset", "{store}", "{tmp}", "--size", "5", "--overwrite"], "is the input store"),
        (["coreset", "{store}", "{tmp}/o.zarr", "--size", "5", "--summary", "{tmp}"], "folder"),
        (["demo", "--json", "{tmp}/no/s.json"], "does not exist"),
        (["demo", "--workdir", "{tmp}/no/w"], "for --workdir does not exist"),
    ],
)
def test_paths_are_checked_before_any_work(
    store, tmp_path, no_cluster, capsys, monkeypatch, argv, match
):
    monkeypatch.setenv("HOME", str(tmp_path))
    argv = [a.format(tmp=tmp_path, store=store) for a in argv]
    before = sorted(os.listdir(tmp_path)), sorted(os.listdir(store))
    assert main(argv) == 2
    assert match in _error(capsys)
    assert (sorted(os.listdir(tmp_path)), sorted(os.listdir(store))) == before


def test_existing_arrays_are_not_replaced_without_overwrite(store, tmp_path, no_cluster, capsys):
    write_array(store, "labels", np.zeros(60, dtype=np.int64))
    write_array(store, "predictions", np.zeros(60, dtype=np.int64))
    assert main(["kmeans", store, "--n-clusters", "2"]) == 2
    line = _error(capsys)
    assert "already has an array 'labels'; pass --overwrite to replace it" in line
    assert main(["kmeans", store, "--n-clusters", "2", "--labels-name", "predictions"]) == 2
    assert "already has an array 'predictions'" in _error(capsys)


def test_predict_name_refused_before_loading_work(store, tmp_path, cli_cluster, capsys):
    model = str(tmp_path / "m.npz")
    base = ["--cluster", cli_cluster]
    assert main([*base, "svm", "train", store, model, "--max-iter", "1", "--budget", "10"]) == 0
    assert main([*base, "svm", "predict", model, store]) == 0
    capsys.readouterr()
    assert main([*base, "svm", "predict", model, store]) == 2
    assert "already has an array 'predictions'; pass --overwrite" in _error(capsys)
    assert main([*base, "svm", "predict", model, store, "--overwrite"]) == 0


# --- help -------------------------------------------------------------------------------------


def _help(*command: str) -> str:
    parser = build_parser()
    for action in parser._actions:
        if hasattr(action, "choices") and isinstance(action.choices, dict):
            sub = action.choices[command[0]]
            break
    for name in command[1:]:
        for action in sub._actions:
            if hasattr(action, "choices") and isinstance(action.choices, dict):
                sub = action.choices[name]
                break
    return " ".join(sub.format_help().split())


def test_help_shows_defaults_and_says_what_commands_do():
    kmeans = _help("kmeans")
    assert "rows per mini-batch (default: 256)" in kmeans
    assert "mini-batch iterations (default: 200)" in kmeans
    assert "random seed (default: 0)" in kmeans
    train = _help("svm", "train")
    assert "one streaming pass" not in train
    assert "--max-iter streaming passes" in train
    assert "epochs: passes over the data (default: 5)" in train
    assert "(default: merge)" in train and "(default: pegasos)" in train
    demo = _help("demo")
    assert "1 data layer" in demo and "3 kernel k-means" in demo and "5 SVM coreset" in demo
    info = _help("info")
    assert "--cluster" not in info and "--verify" in info
    assert "--cluster" not in _help("ingest")
    assert "--cluster" in _help("check")


def test_info_cluster_after_the_command_is_unknown(store, capsys):
    assert main(["info", store, "--cluster", "tcp://127.0.0.1:1"]) == 2
    assert "unrecognized arguments: --cluster" in _error(capsys)


# --- dkernel check / info --verify -----------------------------------------------------------


def test_check_and_info_verify_a_whole_store(store, cli_cluster, capsys):
    write_array(store, "labels", np.arange(60) % 3)
    assert main(["--cluster", cli_cluster, "check", store]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out == {"store": store, "ok": True, "verified": {"X": 3, "labels": 3, "y": 3}}
    assert main(["info", store, "--verify"]) == 0
    assert json.loads(capsys.readouterr().out)["verified"]["labels"] == 3


@pytest.mark.parametrize("name", ["X", "y", "labels"])
def test_check_and_info_verify_name_a_corrupt_chunk(store, cli_cluster, capsys, name):
    write_array(store, "labels", np.arange(60) % 3)
    _corrupt(_chunk_file(store, name, 1))
    assert main(["info", store]) == 0  # without --verify nothing is read
    capsys.readouterr()
    assert main(["--cluster", cli_cluster, "check", store]) == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("dkernel: error")]
    assert len(err) == 1
    assert store in err[0] and f"array {name!r}, chunk 1 (rows 20-39) is corrupt" in err[0]
    assert main(["info", store, "--verify"]) == 2
    assert f"array {name!r}, chunk 1 (rows 20-39) is corrupt" in _error(capsys)


def test_check_names_a_missing_chunk(store, no_cluster, capsys):
    os.remove(_chunk_file(store, "X", 2))
    assert main(["check", store]) == 2
    line = _error(capsys)
    assert store in line and "array 'X' is missing chunk 2" in line


def test_urls_are_not_local_paths():
    from dkernel.cli import check_output_store, local_path

    assert local_path("s3://bucket/d.zarr") == "s3://bucket/d.zarr"
    assert check_output_store("s3://bucket/out.zarr", "output store") == "s3://bucket/out.zarr"
    for out in ("s3://bucket/d/x.zarr", "s3://bucket/d/x.zarr/sub", "s3://bucket/d"):
        with pytest.raises(DKernelError, match="is the input store"):
            check_output_store(out, "output store", inputs=("s3://bucket/d/x.zarr",))
