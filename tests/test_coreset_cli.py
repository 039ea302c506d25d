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
