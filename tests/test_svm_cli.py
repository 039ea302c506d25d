"""``dkernel svm train`` / ``dkernel svm predict`` and the demo's SVM step."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from dkernel.cli.main import main
from dkernel.data import make_checkerboard, open_dataset, write_arrays
from dkernel.svm import load_model


@pytest.fixture
def cluster_cfg(cli_cluster):
    return cli_cluster


@pytest.fixture
def store(tmp_path):
    X, y = make_checkerboard(3000, n_cells=2, random_state=0)
    Xt, yt = make_checkerboard(500, n_cells=2, random_state=1)
    return write_arrays(
        tmp_path / "board.zarr",
        [(X, y)],
        n=3000,
        n_features=2,
        dtype=np.float32,
        chunk_rows=700,
        has_y=True,
        attrs={},
        extra={"X_test": Xt, "y_test": yt},
    )


def _json(capsys) -> dict:
    out = capsys.readouterr().out
    return json.loads(out[out.index("{") :])


def test_train_then_predict_into_store(tmp_path, store, cluster_cfg, capsys):
    model = str(tmp_path / "m.npz")
    summ = tmp_path / "train.json"
    assert (
        main(
            [
                "--cluster",
                cluster_cfg,
                "svm",
                "train",
                store.path,
                model,
                "--budget",
                "40",
                "--gamma",
                "2",
                "--alpha",
                "1e-3",
                "--max-iter",
                "2",
                "--seed",
                "1",
                "--summary",
                str(summ),
            ]
        )
        == 0
    )
    s = _json(capsys)
    assert s == json.loads(summ.read_text(encoding="utf-8"))
    assert s["n_samples"] == 3000 and s["n_support_vectors"] <= 40 and s["t"] == 6000
    assert s["test_accuracy"] > 0.85
    clf = load_model(model)
    assert clf.budget == 40 and clf.random_state == 1
    assert main(["--cluster", cluster_cfg, "svm", "predict", model, store.path]) == 0
    p = _json(capsys)
    got = open_dataset(store.path).array("predictions")[:]
    np.testing.assert_array_equal(got, clf.predict(store.X.compute()))
    assert p["accuracy"] == pytest.approx(np.mean(got == store.y.compute()))
    # a second run replaces the array; the rest of the store is untouched
    assert (
        main(["--cluster", cluster_cfg, "svm", "predict", model, store.path, "--name", "pred2"])
        == 0
    )
    capsys.readouterr()
    ds = open_dataset(store.path)
    assert ds.n_samples == 3000
    np.testing.assert_array_equal(ds.array("pred2")[:], got)
    assert not [f for f in os.listdir(store.path) if f.startswith(".")]


def test_errors_leave_store_intact(tmp_path, store, cluster_cfg, capsys):
    model = str(tmp_path / "m.npz")
    assert main(["svm", "train", store.path, model, "--budget", "1"]) == 2
    assert "budget must be >= 2" in capsys.readouterr().err
    assert main(["svm", "train", store.path, model, "--kernel", "linear"]) == 2
    assert "maintenance='merge' cannot merge support vectors" in capsys.readouterr().err
    assert main(["svm", "train", str(tmp_path / "nope.zarr"), model]) == 2
    assert "no dataset store" in capsys.readouterr().err
    (tmp_path / "bad.npz").write_bytes(b"garbage")
    assert main(["svm", "predict", str(tmp_path / "bad.npz"), store.path]) == 2
    assert "not a dkernel model file" in capsys.readouterr().err
    assert (
        main(["--cluster", cluster_cfg, "svm", "train", store.path, model, "--budget", "10"]) == 0
    )
    capsys.readouterr()
    before = sorted(os.listdir(store.path))
    assert main(["--cluster", cluster_cfg, "svm", "predict", model, store.path, "--name", "y"]) == 2
    assert "--name 'y' is not allowed" in capsys.readouterr().err
    assert sorted(os.listdir(store.path)) == before
    other = write_arrays(
        tmp_path / "three.zarr",
        [(np.zeros((5, 3)), np.ones(5))],
        n=5,
        n_features=3,
        dtype=np.float32,
        chunk_rows=5,
        has_y=True,
        attrs={},
    )
    assert main(["svm", "predict", model, other.path]) == 2
    assert "has 3 features but the model expects 2" in capsys.readouterr().err


def test_demo_svm_step(tmp_path, cluster_cfg, capsys, demo_step):
    summary_path = tmp_path / "summary.json"
    argv = [
        "--cluster",
        cluster_cfg,
        "demo",
        "--rows",
        "10000",
        "--workdir",
        str(tmp_path / "w"),
        "--only",
        "1,4",
        "--json",
        str(summary_path),
    ]
    idx = demo_step("budgeted SVM: BSGD merge streamed from zarr")
    argv[argv.index("1,4")] = f"1,{idx}"
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "test accuracy on 20,000 fresh rows" in out
    svm = json.loads(summary_path.read_text(encoding="utf-8"))["svm"]
    assert svm["rows"] == 10000 and svm["n_support_vectors"] == 100
    assert svm["test_accuracy"] > 0.9


def test_train_with_checkpoint(tmp_path, store, cluster_cfg, capsys):
    from dkernel.data import save_checkpoint
    from dkernel.svm import BudgetedSVC

    model, ckpt = str(tmp_path / "m.npz"), str(tmp_path / "fit.ckpt.npz")
    args = ["svm", "train", store.path, model, "--budget", "40", "--gamma", "2"]
    args += ["--alpha", "1e-3", "--max-iter", "2", "--seed", "1"]
    missing = str(tmp_path / "no" / "c.npz")
    assert main([*args, "--checkpoint", missing]) == 2
    assert "for the checkpoint does not exist" in capsys.readouterr().err
    save_checkpoint(ckpt, {"position": [0, 1]}, params={"another": "fit"})
    assert main(["--cluster", cluster_cfg, *args, "--checkpoint", ckpt]) == 2
    assert "was saved by a fit with other parameters" in capsys.readouterr().err
    os.remove(ckpt)
    assert main(["--cluster", cluster_cfg, *args, "--checkpoint", ckpt]) == 0
    capsys.readouterr()
    assert not os.path.exists(ckpt)  # removed once the fit completed
    ref = BudgetedSVC(budget=40, gamma=2.0, alpha=1e-3, max_iter=2, random_state=1)
    ref.fit(store)
    np.testing.assert_array_equal(load_model(model).dual_coef_, ref.dual_coef_)


def test_train_standardize(tmp_path, store, cluster_cfg, capsys):
    model = str(tmp_path / "m.npz")
    args = ["--cluster", cluster_cfg, "svm", "train", store.path, model, "--budget", "40"]
    assert main([*args, "--max-iter", "1", "--standardize"]) == 0
    assert _json(capsys)["standardize"] is True
    clf = load_model(model)
    assert clf.standardize is True
    np.testing.assert_allclose(clf.feature_mean_, store.X.compute().mean(axis=0), rtol=1e-6)


def test_train_no_refit_keeps_the_sgd_coefficients(tmp_path, store, cluster_cfg, capsys):
    """--no-refit is refit=False: the model equals the API's SGD-only fit; without it the
    coefficients are the refit's (they differ)."""
    from dkernel.svm import BudgetedSVC

    args = ["--budget", "30", "--gamma", "2", "--max-iter", "1", "--seed", "0"]
    paths = {}
    for flag in ([], ["--no-refit"]):
        paths[bool(flag)] = str(tmp_path / f"m{len(flag)}.npz")
        argv = ["--cluster", cluster_cfg, "svm", "train", store.path, paths[bool(flag)]]
        assert main([*argv, *args, *flag]) == 0
        capsys.readouterr()
    sgd = load_model(paths[True])
    assert sgd.refit is False and load_model(paths[False]).refit is True
    ref = BudgetedSVC(budget=30, gamma=2.0, max_iter=1, random_state=0, refit=False)
    ref.fit(store.X.compute(), store.y.compute())
    np.testing.assert_allclose(sgd.dual_coef_, ref.dual_coef_)
    assert not np.allclose(load_model(paths[False]).dual_coef_, sgd.dual_coef_)


def test_train_refit_loss(tmp_path, store, cluster_cfg, capsys):
    """--refit weston_watkins is refit="weston_watkins" (saved with the model); it cannot be
    combined with --no-refit."""
    model = str(tmp_path / "ww.npz")
    argv = ["--cluster", cluster_cfg, "svm", "train", store.path, model]
    args = ["--budget", "30", "--gamma", "2", "--max-iter", "1", "--seed", "0"]
    assert main([*argv, *args, "--refit", "weston_watkins"]) == 0
    assert _json(capsys)["refit"] == "weston_watkins"
    assert load_model(model).refit == "weston_watkins"
    assert main([*argv, *args, "--refit", "ovr", "--no-refit"]) == 2
    assert "not allowed with argument --refit" in capsys.readouterr().err


def test_train_refit_rows_bounds_the_refit(tmp_path, store, cluster_cfg, capsys):
    """--refit-rows is refit_rows: the saved model carries it, and its coefficients are the
    API's fit with the same bound (the SGD's support vectors, a sampled refit)."""
    from dkernel.svm import BudgetedSVC

    model = str(tmp_path / "m.npz")
    argv = ["--cluster", cluster_cfg, "svm", "train", store.path, model, "--budget", "30"]
    args = ["--gamma", "2", "--max-iter", "1", "--seed", "0", "--refit-rows", "100"]
    assert main([*argv, *args]) == 0
    capsys.readouterr()
    got = load_model(model)
    assert got.refit_rows == 100
    ref = BudgetedSVC(budget=30, gamma=2.0, max_iter=1, random_state=0, refit_rows=100)
    ref.fit(store.X.compute(), store.y.compute())
    np.testing.assert_allclose(got.dual_coef_, ref.dual_coef_, rtol=1e-8, atol=1e-10)
    assert main([*argv, "--refit-rows", "0"]) == 2
    assert "refit_rows" in capsys.readouterr().err
