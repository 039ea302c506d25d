"""``dkernel coreset``: store in, coreset store out, JSON summary, errors."""

from __future__ import annotations

import json

import numpy as np
import pytest

from dkernel.cli.main import main
from dkernel.data import make_gauss, open_dataset


@pytest.fixture
def store(tmp_path):
    return make_gauss(4000, random_state=0, store=str(tmp_path / "g.zarr"), chunk_rows=1000).path


@pytest.mark.parametrize("method", ["merge-reduce", "uniform"])
def test_cli_writes_coreset_store(store, tmp_path, capsys, method, cli_cluster):
    out = str(tmp_path / "c.zarr")
    summary = str(tmp_path / "s.json")
    rc = main(
        [
            "--cluster",
            cli_cluster,
            "coreset",
            store,
            out,
            "--size",
            "200",
            "--method",
            method,
            "--seed",
            "3",
            "--summary",
            summary,
        ]
    )
    assert rc == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == json.load(open(summary))
    assert printed["n_samples"] == 4000 and printed["method"] == method
    ds = open_dataset(out)
    weight = np.asarray(ds.array("weight")[:], dtype=float)
    assert ds.n_samples == printed["rows"] <= 200 and weight.shape == (ds.n_samples,)
    assert weight.sum() == pytest.approx(printed["total_weight"])
    assert set(np.unique(ds.y.compute())) <= {-1, 1}


def test_cli_errors(store, tmp_path, capsys):
    out = str(tmp_path / "c.zarr")
    assert main(["coreset", store, out, "--size", "0"]) == 2
    assert "--size must be in [1, 4000]" in capsys.readouterr().err
    assert main(["coreset", str(tmp_path / "none.zarr"), out, "--size", "5"]) == 2
    assert "no dataset store" in capsys.readouterr().err
    assert main(["coreset", store, store, "--size", "5"]) == 2
    assert "is the input store" in capsys.readouterr().err
    assert main(["coreset", store, out, "--size", "50", "--C", "-1"]) == 2
    assert "C must be > 0" in capsys.readouterr().err


def test_svm_train_and_kmeans_use_a_coreset_stores_weights(store, tmp_path, capsys, cli_cluster):
    """`dkernel svm train core.zarr` trains with the store's `weight` array: the model equals
    Coreset.fit in Python on the coreset the store holds (and on the one written)."""
    from dkernel.cluster import MiniBatchKernelKMeans
    from dkernel.coreset import read_coreset, svm_coreset, write_coreset
    from dkernel.svm import BudgetedSVC, load_model

    src = open_dataset(store)
    core = svm_coreset(np.asarray(src.X), np.asarray(src.y), 300, random_state=0)
    path = str(tmp_path / "core.zarr")
    write_coreset(core, path)
    back = read_coreset(path)
    np.testing.assert_array_equal(back.weight, core.weight)
    np.testing.assert_array_equal(back.X, core.X)
    assert back.source_size == core.source_size and back.C == core.C
    model = str(tmp_path / "m.npz")
    argv = ["--cluster", cli_cluster, "svm", "train", path, model, "--budget", "30"]
    assert main([*argv, "--gamma", "0.5", "--seed", "0"]) == 0
    out = capsys.readouterr()
    printed = json.loads(out.out)
    assert printed["sample_weight"] == "weight" and printed["coreset_source_size"] == 4000
    assert "is a coreset: training on its" in out.err
    ref = core.fit(BudgetedSVC(budget=30, gamma=0.5, random_state=0))
    got = load_model(model)
    np.testing.assert_array_equal(got.support_vectors_, ref.support_vectors_)
    np.testing.assert_allclose(got.dual_coef_, ref.dual_coef_, rtol=1e-12)
    unweighted = BudgetedSVC(budget=30, gamma=0.5, random_state=0).fit(core.X, core.y)
    assert not np.allclose(unweighted.dual_coef_, ref.dual_coef_)  # the weights mattered
    # kernel k-means: the weights as sample_weight
    summary = tmp_path / "km.json"
    argv = ["--cluster", cli_cluster, "kmeans", path, "--n-clusters", "2", "--gamma", "0.5"]
    assert main([*argv, "--seed", "0", "--summary", str(summary)]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["sample_weight"] == "weight"
    km = MiniBatchKernelKMeans(2, gamma=0.5, random_state=0)
    km.fit(np.asarray(open_dataset(path).X), sample_weight=core.weight)
    assert printed["inertia"] == pytest.approx(km.inertia_, rel=1e-6)
