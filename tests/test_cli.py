"""The ``dkernel`` command: ingest/info, one-line errors with exit code 2, the demo."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from dkernel.cli.main import main
from dkernel.data import open_dataset


def _json_out(capsys) -> dict:
    out = capsys.readouterr().out
    return json.loads(out[out.index("{") :])


def _one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith("dkernel: error: ")
    return err[0]


@pytest.fixture
def npz(tmp_path, rng):
    X = rng.standard_normal((300, 3))
    y = np.where(X[:, 0] > 0, 1, -1)
    path = tmp_path / "d.npz"
    np.savez(path, X=X, y=y, X_test=X[:40], y_test=y[:40])
    return path, X, y


def test_ingest_and_info(tmp_path, npz, capsys):
    path, X, _y = npz
    store = str(tmp_path / "d.zarr")
    assert main(["ingest", str(path), store, "--chunk-rows", "128", "--dtype", "float64"]) == 0
    summary = _json_out(capsys)
    assert summary["n_samples"] == 300 and summary["n_features"] == 3
    assert summary["chunks"] == [128, 3] and summary["n_chunks"] == 3
    assert summary["classes"] == [-1, 1] and summary["n_test"] == 40
    assert summary["dtype"] == "float64" and summary["labels"] is True
    np.testing.assert_array_equal(open_dataset(store).X.compute(), X)
    assert main(["info", store]) == 0
    info = _json_out(capsys)
    assert info == summary


def test_ingest_csv_options(tmp_path, capsys):
    src = tmp_path / "d.txt"
    src.write_text("1\t2\t1\n3\t4\t-1\n", encoding="utf-8")
    store = str(tmp_path / "d.zarr")
    assert (
        main(["ingest", str(src), store, "--format", "csv", "--delimiter", "\\t", "--uncompressed"])
        == 0
    )
    assert _json_out(capsys)["n_features"] == 2
    assert open_dataset(store).array("X").compressors == ()
    assert (
        main(
            [
                "ingest",
                str(src),
                store,
                "--format",
                "csv",
                "--delimiter",
                "tab",
                "--no-labels",
                "--overwrite",
            ]
        )
        == 0
    )
    out = _json_out(capsys)
    assert out["n_features"] == 3 and out["labels"] is False


def test_ingest_libsvm_options(tmp_path, capsys):
    src = tmp_path / "d.svm"
    src.write_text("1 0:1 2:5\n-1 1:2\n", encoding="utf-8")
    store = str(tmp_path / "d.zarr")
    assert main(["ingest", str(src), store, "--zero-based", "--n-features", "5"]) == 0
    assert _json_out(capsys)["n_features"] == 5
    np.testing.assert_array_equal(
        open_dataset(store).X.compute(), [[1, 0, 5, 0, 0], [0, 2, 0, 0, 0]]
    )


@pytest.mark.parametrize(
    "argv, match",
    [
        (["ingest", "{tmp}/missing.npz", "{tmp}/o.zarr"], "no such file"),
        (["ingest", "{tmp}/bad.csv", "{tmp}/o.zarr"], "line 3 has 2 columns, expected 3"),
        (["ingest", "{tmp}/bad.svm", "{tmp}/o.zarr"], "line 2: bad feature index '0'"),
        (
            ["ingest", "{tmp}/bad.csv", "{tmp}/o.zarr", "--chunk-rows", "0"],
            "chunk_rows must be >= 1",
        ),
        (["ingest", "{tmp}/good.csv", "{tmp}/exists"], "already exists; pass --overwrite"),
        (["ingest", "{tmp}/good.csv", "{tmp}/o.zarr", "--delimiter", ""], "must not be empty"),
        (["info", "{tmp}/nothing.zarr"], "no dataset store"),
        (["info", "{tmp}/exists"], "not a zarr dataset store"),
        (["--cluster", "{tmp}/bad.yaml", "demo", "--workdir", "{tmp}/w"], "is not valid YAML"),
        (["--cluster", "{tmp}/nope.yaml", "demo", "--workdir", "{tmp}/w"], "does not exist"),
        (["demo", "--rows", "100", "--workdir", "{tmp}/w"], "--rows must be at least 10000"),
        (["demo", "--only", "x", "--workdir", "{tmp}/w"], "--only takes comma-separated"),
        (["demo", "--only", "99", "--workdir", "{tmp}/w"], "--only: steps are numbered 1 to"),
        (["bogus-command"], "invalid choice: 'bogus-command'"),
        (["info"], "the following arguments are required: store"),
        (["ingest", "a", "b", "--dtype", "int8"], "argument --dtype: invalid choice"),
        (["ingest", "a", "b", "--chunk-rows", "many"], "argument --chunk-rows: invalid int"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, argv, match):
    (tmp_path / "bad.csv").write_text("1,2,3\n4,5,6\n7,8\n", encoding="utf-8")
    (tmp_path / "good.csv").write_text("1,2,3\n", encoding="utf-8")
    (tmp_path / "bad.svm").write_text("1 1:1\n1 0:1\n", encoding="utf-8")
    (tmp_path / "bad.yaml").write_text("cluster: [unclosed\n  - x", encoding="utf-8")
    (tmp_path / "exists").mkdir()
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    assert main(argv) == 2
    line = _one_error_line(capsys)
    assert match in line, line
    assert not (tmp_path / "o.zarr").exists() and not (tmp_path / "w").exists()
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".")]  # no temp folders


def test_help_exits_zero(capsys):
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "usage: dkernel" in out and "ingest" in out and "demo" in out


def test_python_dash_m():
    """``python -m dkernel`` runs main and exits with its code (one process: ~1 s each)."""
    res = subprocess.run(
        [sys.executable, "-m", "dkernel", "info", "/nonexistent.zarr"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 2
    assert res.stderr.strip().splitlines() == [
        "dkernel: error: no dataset store at '/nonexistent.zarr'"
    ]


def test_demo_data_and_kernel_steps(tmp_path, capsys, cli_cluster):
    """Steps 1-2 of the demo on 10000 rows (its minimum), on the shared in-process cluster."""
    cfg = cli_cluster
    summary_path = tmp_path / "summary.json"
    argv = [
        "--cluster",
        str(cfg),
        "demo",
        "--rows",
        "10000",
        "--workdir",
        str(tmp_path / "w"),
        "--only",
        "1,2",
        "--json",
        str(summary_path),
    ]
    assert main(argv) == 0
    captured = capsys.readouterr()
    out = captured.out
    assert "dashboard: http" in captured.err and "dashboard" not in out
    assert "[1/" in out and "[2/" in out
    # the one-time compilation is announced before the steps and timed apart from them
    assert "numba kernels" in out and out.index("numba kernels ready") < out.index("[1/")
    assert "same rows under another chunking: True" in out
    summary = json.loads(summary_path.read_text(encoding="utf-8"))
    data = summary["data"]
    assert data["rows"] == 10000 and data["reproducible_across_chunking"] is True
    assert data["batch_ms"] > 0 and data["seconds"] > 0
    assert summary["kernels"]["blocks"] >= 1 and summary["kernels"]["gamma"] > 0
    assert summary["total_seconds"] > 0
    assert summary["compile_seconds"] > 0 and summary["steps_seconds"] > 0
    ds = open_dataset(tmp_path / "w" / "checkerboard.zarr")
    assert ds.n_samples == 10000 and ds.attrs["classes"] == [-1, 1]


def test_examples_are_valid():
    """quickstart.py compiles and fits and predicts with every estimator (run by hand: ~10 s)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    quick = os.path.join(root, "examples", "quickstart.py")
    with open(quick, encoding="utf-8") as fh:
        tree = ast.parse(fh.read(), quick)
    compile(tree, quick, "exec")
    called = {
        node.func.id if isinstance(node.func, ast.Name) else node.func.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, (ast.Name, ast.Attribute))
    }
    for name in ("MiniBatchKernelKMeans", "KernelKMeans", "BudgetedSVC", "svm_coreset"):
        assert name in called, f"quickstart.py does not use {name}"
    assert {"fit", "predict"} <= called
    # the batch scripts: tests/test_hpc_scripts.py (and make test-hpc on a real SLURM)


def test_ingest_test_size(tmp_path, rng, capsys):
    X = rng.standard_normal((400, 3))
    src = tmp_path / "d.csv"
    np.savetxt(src, np.column_stack([X, X[:, 0] > 0]), delimiter=",")
    store = str(tmp_path / "d.zarr")
    assert main(["ingest", str(src), store, "--test-size", "0.25", "--seed", "3"]) == 0
    summary = _json_out(capsys)
    assert summary["split"]["seed"] == 3 and summary["split"]["test_size"] == 0.25
    assert summary["n_samples"] + summary["n_test"] == 400
    assert summary["n_test"] == summary["split"]["n_test"] > 0
