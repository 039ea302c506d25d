"""The ``dkernel`` command's own options: --version, unknown flags, --progress, --cluster,
``info`` listing every array, CLI wording of library errors."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
import yaml

import dkernel
from dkernel.cli.main import main
from dkernel.data import make_checkerboard


def _json_out(text: str) -> dict:
    return json.loads(text[text.index("{") :])


def _error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith("dkernel: error: ")
    return err[0]


def test_version(capsys):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"dkernel {dkernel.__version__}"


def test_python_dash_m_version():
    res = subprocess.run(
        [sys.executable, "-m", "dkernel", "--version"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0 and res.stdout.strip() == f"dkernel {dkernel.__version__}"


@pytest.mark.parametrize(
    "argv, named, hint",
    [
        # argparse would first say "--n-clusters is required" and never name the typo
        (["kmeans", "s.zarr", "--nclusters", "3"], "--nclusters", "did you mean --n-clusters?"),
        (["kmeans", "s.zarr", "--bogus"], "--bogus", None),
        (["svm", "train", "--budgett", "5"], "--budgett", "did you mean --budget?"),
        (["ingest", "a.csv", "b.zarr", "--overwrit"], None, None),  # a prefix: accepted
        (["-vv", "kmeans", "s.zarr"], None, None),  # short flags together: accepted
        (["kmeans", "s.zarr", "-x"], "-x", None),
        (
            ["ingest", "a.svm", "b.zarr", "--zero_based"],
            "--zero_based",
            "did you mean --zero-based?",
        ),
        (["--clsuter", "x.yaml", "info", "s.zarr"], "--clsuter", "did you mean --cluster?"),
        (["--frobnicate"], "--frobnicate", None),
    ],
)
def test_unknown_flag_is_named(tmp_path, capsys, argv, named, hint):
    rc = main(argv)
    if named is None:  # accepted: fails later for the missing file, not for the flag
        assert rc == 2 and "unrecognized" not in _error_line(capsys)
        return
    assert rc == 2
    line = _error_line(capsys)
    assert f"unrecognized arguments: {named}" in line, line
    if hint:
        assert hint in line, line


def test_negative_numbers_are_values_not_flags(tmp_path, capsys):
    # --gamma -1 is a value (rejected by kmeans for its sign, not by the parser)
    rc = main(["kmeans", str(tmp_path / "none.zarr"), "--n-clusters", "2", "--seed", "-1"])
    assert rc == 2
    assert "unrecognized" not in _error_line(capsys)


@pytest.fixture
def npz(tmp_path, rng):
    X = rng.standard_normal((200, 3))
    path = tmp_path / "d.npz"
    np.savez(path, X=X, y=(X[:, 0] > 0).astype(int), X_test=X[:20], y_test=(X[:20, 0] > 0))
    return path


def test_ingest_error_speaks_of_the_cli_flag(tmp_path, npz, capsys):
    store = tmp_path / "d.zarr"
    store.mkdir()
    assert main(["ingest", str(npz), str(store)]) == 2
    line = _error_line(capsys)
    assert "already exists; pass --overwrite" in line and "overwrite=True" not in line
    assert main(["ingest", str(npz), str(store), "--overwrite"]) == 0


def test_ingest_and_info_say_they_do_not_use_cluster(tmp_path, npz, capsys):
    store = str(tmp_path / "d.zarr")
    # --cluster accepted before or after the command; neither starts a cluster
    assert main(["--cluster", "tcp://127.0.0.1:1", "ingest", str(npz), store]) == 0
    err = capsys.readouterr().err
    assert "ingest runs in this process, without a Dask cluster; --cluster tcp://" in err
    assert main(["--cluster", "cluster-configs/local.yaml", "info", store]) == 0
    captured = capsys.readouterr()
    assert "info runs in this process, without a Dask cluster; --cluster cl" in captured.err
    assert _json_out(captured.out)["n_samples"] == 200


def test_info_lists_every_array_including_job_outputs(tmp_path, npz, capsys):
    store = str(tmp_path / "d.zarr")
    assert main(["ingest", str(npz), store, "--chunk-rows", "64"]) == 0
    arrays = _json_out(capsys.readouterr().out)["arrays"]
    assert arrays == {
        "X": {"shape": [200, 3], "dtype": "float64", "chunks": [64, 3]},
        "X_test": {"shape": [20, 3], "dtype": "float64", "chunks": [20, 3]},
        "y": {"shape": [200], "dtype": "int64", "chunks": [64]},
        "y_test": {"shape": [20], "dtype": "int64", "chunks": [20]},
    }


def test_info_lists_labels_a_kmeans_job_wrote(tmp_path, capsys):
    store = str(tmp_path / "cb.zarr")
    make_checkerboard(600, random_state=0, store=store, chunk_rows=200)
    cfg = tmp_path / "inproc.yaml"
    cfg.write_text(
        yaml.safe_dump(
            {
                "cluster": {
                    "kind": "local",
                    "options": {"n_workers": 1, "threads_per_worker": 1, "processes": False},
                }
            }
        ),
        encoding="utf-8",
    )
    argv = ["--cluster", str(cfg), "--no-progress", "kmeans", store, "--n-clusters", "2"]
    argv += ["--batch-size", "64", "--max-iter", "3", "--gamma", "1"]
    assert main(argv) == 0
    capsys.readouterr()
    assert main(["info", store]) == 0
    arrays = _json_out(capsys.readouterr().out)["arrays"]
    assert set(arrays) >= {"X", "y", "labels"}
    assert arrays["labels"]["shape"] == [600]


def test_progress_flag_turns_bars_on_and_off(tmp_path, capsys):
    src = tmp_path / "d.csv"
    src.write_text("".join(f"{i},{i % 2}\n" for i in range(500)), encoding="utf-8")
    assert main(["--progress", "ingest", str(src), str(tmp_path / "a.zarr")]) == 0
    err = capsys.readouterr().err
    assert "ingest d.csv" in err and "500/500" in err
    # after the command too; --no-progress wins over the one before the command
    argv = ["--progress", "ingest", str(src), str(tmp_path / "b.zarr"), "--no-progress"]
    assert main(argv) == 0
    assert capsys.readouterr().err == ""
    # default: off when stderr is not a terminal (pytest captures it)
    assert main(["ingest", str(src), str(tmp_path / "c.zarr")]) == 0
    assert capsys.readouterr().err == ""


def test_zero_based_libsvm_error_names_the_flag(tmp_path, capsys):
    src = tmp_path / "d.svm"
    src.write_text("1 1:0.5\n-1 0:2 3:1\n", encoding="utf-8")
    assert main(["ingest", str(src), str(tmp_path / "d.zarr")]) == 2
    line = _error_line(capsys)
    assert "line 2: bad feature index '0' (indices are 1-based)" in line
    assert line.endswith("a zero-based file needs --zero-based"), line
    assert main(["ingest", str(src), str(tmp_path / "d.zarr"), "--zero-based"]) == 0


def test_command_option_before_the_command_is_explained(capsys):
    assert main(["--n-clusters", "3", "kmeans", "s.zarr"]) == 2
    line = _error_line(capsys)
    assert "--n-clusters is an option of a command: put it after the command" in line, line
