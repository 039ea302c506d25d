"""``dkernel kmeans``: labels written back atomically, JSON summary, errors; the demo step."""

from __future__ import annotations

import json
import os

import pytest
import zarr
from sklearn.metrics import adjusted_rand_score

from dkernel.cli.main import main
from dkernel.data import make_rings, open_dataset


@pytest.fixture
def cluster_cfg(cli_cluster):
    return cli_cluster


@pytest.fixture
def rings_store(tmp_path):
    path = str(tmp_path / "rings.zarr")
    make_rings(1500, random_state=0, store=path, chunk_rows=400)
    return path


def test_kmeans_writes_labels_and_summary(rings_store, cluster_cfg, tmp_path, capsys):
    out = str(tmp_path / "summary.json")
    argv = [
        "--cluster",
        cluster_cfg,
        "kmeans",
        rings_store,
        "--n-clusters",
        "3",
        "--batch-size",
        "128",
        "--tau",
        "50",
        "--max-iter",
        "10",
        "--gamma",
        "5",
        "--summary",
        out,
    ]
    assert main(argv) == 0
    summary = json.loads(open(out).read())
    printed = capsys.readouterr().out
    assert '"inertia"' in printed
    assert summary["n_iter"] == 10 and summary["n_clusters"] == 3
    labels = zarr.open_array(os.path.join(rings_store, "labels"), mode="r")[:]
    y = open_dataset(rings_store).y.compute()
    assert summary["ari"] == pytest.approx(adjusted_rand_score(y, labels), abs=1e-12)
    assert labels.shape == (1500,) and labels.max() < 3
    assert sum(summary["cluster_sizes"]) == 1500
    # the store still opens and holds its data; no temporary array is left behind
    ds = open_dataset(rings_store)
    assert ds.n_samples == 1500
    assert not [f for f in os.listdir(rings_store) if f.startswith(".")]
    # a second run with another name and the untruncated variant
    argv2 = [
        "--cluster",
        cluster_cfg,
        "kmeans",
        rings_store,
        "--n-clusters",
        "2",
        "--tau",
        "none",
        "--max-iter",
        "3",
        "--batch-size",
        "64",
        "--labels-name",
        "labels",
        "--overwrite",  # the same name: replaced only when asked
        "--seed",
        "1",
    ]
    assert main(argv2) == 0
    labels2 = zarr.open_array(os.path.join(rings_store, "labels"), mode="r")[:]
    assert labels2.max() < 2


@pytest.mark.parametrize(
    "extra,match",
    [
        (["--n-clusters", "0"], "--n-clusters must be in"),
        (["--n-clusters", "3", "--tau", "abc"], "--tau must be an integer or 'none'"),
        (["--n-clusters", "3", "--learning-rate", "fast"], "--learning-rate must be"),
        (["--n-clusters", "3", "--gamma", "wide"], "--gamma must be"),
        (["--n-clusters", "3", "--labels-name", "X"], "--labels-name 'X' is not allowed"),
        (["--n-clusters", "3", "--batch-size", "0"], "--batch-size must be >= 1"),
        (["--n-clusters", "3", "--tau", "0"], "--tau must be >= 1"),
        (["--n-clusters", "3", "--gamma", "-1"], "--gamma must be > 0"),
        (["--n-clusters", "3", "--kernel", "bogus"], "bogus"),
    ],
)
def test_bad_input_leaves_store_untouched(rings_store, cluster_cfg, capsys, extra, match):
    before = sorted(os.listdir(rings_store))
    assert main(["--cluster", cluster_cfg, "kmeans", rings_store, *extra]) == 2
    err = capsys.readouterr().err
    assert err.startswith("dkernel: error:") and match in err
    assert sorted(os.listdir(rings_store)) == before


def test_missing_store(tmp_path, capsys):
    assert main(["kmeans", str(tmp_path / "none.zarr"), "--n-clusters", "2"]) == 2
    assert "no dataset store" in capsys.readouterr().err


def test_demo_step_rings(tmp_path, cli_cluster, capsys, demo_step):
    idx = demo_step("kernel k-means: rings, k-means vs mini-batch kernel k-means")
    summary = tmp_path / "summary.json"
    argv = ["--cluster", cli_cluster, "demo", "--rows", "10000", "--workdir", str(tmp_path / "w")]
    assert main([*argv, "--only", f"1,{idx}", "--json", str(summary)]) == 0
    out = json.loads(summary.read_text(encoding="utf-8"))["kmeans"]
    assert out["rows"] == 10000
    # a compact ring inside a wide one: k-means cuts both in half, kernel k-means separates them
    assert out["ari_kmeans"] < 0.5 and out["ari_kernel_kmeans"] > 0.95
    assert out["kernel_kmeans_s"] > 0 and out["inertia"] > 0
    printed = capsys.readouterr().out
    assert "scikit-learn KMeans" in printed and "MiniBatchKernelKMeans" in printed


def test_killed_workers_are_one_error_line(rings_store, cluster_cfg, capsys, monkeypatch):
    """A task lost to dying workers (memory, most often) is a one-line error, not a trace."""
    from distributed import KilledWorker

    from dkernel.cluster import MiniBatchKernelKMeans

    def die(self, X, *a, **k):
        raise KilledWorker("take-rows-123", None, 3)

    monkeypatch.setattr(MiniBatchKernelKMeans, "fit", die)
    argv = ["--cluster", cluster_cfg, "kmeans", rings_store, "--n-clusters", "2"]
    assert main(argv) == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("dkernel: error")]
    assert len(err) == 1 and "task 'take-rows-123' was lost: 4 workers died" in err[0]
    assert "memory_limit" in err[0] and "labels" not in os.listdir(rings_store)


def test_kmeans_gamma_options(rings_store, cluster_cfg, capsys):
    base = ["kmeans", rings_store, "--n-clusters", "2", "--max-iter", "3", "--batch-size", "64"]
    assert main([*base, "--gamma", "nope"]) != 0
    assert "'scale', 'median' or 'select'" in capsys.readouterr().err
    assert main([*base, "--gamma", "median", "--kernel", "polynomial"]) != 0
    assert "needs a --kernel of " in capsys.readouterr().err
    out = {}
    for opt in ("scale", "median"):
        argv = ["--cluster", cluster_cfg, *base, "--gamma", opt, "--labels-name", opt]
        assert main(argv) == 0
        out[opt] = json.loads(capsys.readouterr().out)["gamma"]
    X = open_dataset(rings_store).X.compute()
    assert out["scale"] == pytest.approx(1.0 / (X.shape[1] * X.var()), rel=0.2)  # a sample's
    assert out["median"] != out["scale"]
