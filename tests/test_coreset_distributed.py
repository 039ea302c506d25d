"""Distributed coresets: two-pass and merge-reduce on both schedulers (killed workers: test_faults)."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest

from dkernel import DKernelError
from dkernel.coreset import coreset_cost, distributed_coreset, svm_coreset


def _data(rng, n=6000, d=3):
    X = rng.normal(size=(n, d))
    y = np.where(X[:, 0] - 0.5 * X[:, 2] + 0.4 * rng.normal(size=n) > 0, 1, -1)
    return X, y


def _same(a, b):
    return (
        np.array_equal(a.X, b.X) and np.array_equal(a.y, b.y) and np.array_equal(a.weight, b.weight)
    )


@pytest.mark.parametrize("method", ["two-pass", "merge-reduce"])
def test_schedulers_agree(rng, scheduler, method):
    X, y = _data(rng)
    Xd = da.from_array(X, chunks=1500)
    c = distributed_coreset(Xd, y, 200, method=method, random_state=0)
    assert c.source_size == 6000 and len(c) <= 200 and c.info["method"] == method
    assert set(np.unique(c.y)) <= {-1, 1} and c.classes == (-1, 1)
    # the same graph on the other scheduler gives the same coreset
    import dask

    with dask.config.set(scheduler="sync"):
        ref = distributed_coreset(Xd, y, 200, method=method, random_state=0)
    assert _same(c, ref)
    # and it approximates the cost
    w, b = np.array([1.0, 0.1, -0.5]), 0.1
    assert c.cost(w, b) == pytest.approx(coreset_cost(X, y, w, b), rel=0.3)


def test_two_pass_matches_offline_distribution(rng):
    import dask

    X, y = _data(rng, n=4000)
    with dask.config.set(scheduler="sync"):
        c = distributed_coreset(
            da.from_array(X, chunks=1000), y, 300, method="two-pass", random_state=1
        )
    off = svm_coreset(X, y, 300, random_state=1)
    # same global opt; total sensitivities agree up to the per-block clustering
    assert c.info["opt"] == pytest.approx(off.info["opt"], rel=1e-2)
    assert c.total_sensitivity == pytest.approx(off.total_sensitivity, rel=0.5)
    # unbiased total weight (one resampling level)
    sums = []
    with dask.config.set(scheduler="sync"):
        Xd = da.from_array(X, chunks=1000)
        for s in range(5):
            sums.append(
                distributed_coreset(Xd, y, 300, method="two-pass", random_state=s).weight.sum()
            )
    assert abs(np.mean(sums) - 4000) < 4 * np.std(sums) / np.sqrt(5) + 1e-9


@pytest.mark.parametrize("split_every", [2, 3, 16])
def test_merge_reduce_tree(rng, split_every):
    import dask

    X, y = _data(rng, n=2400)
    with dask.config.set(scheduler="sync"):
        c = distributed_coreset(
            X, y, 60, method="merge-reduce", leaf_size=300, split_every=split_every, random_state=0
        )
    levels = int(np.ceil(np.log(8) / np.log(split_every)))
    assert c.info["n_leaves"] == 8 and c.info["tree_levels"] == levels
    assert len(c) <= 60 and c.source_size == 2400
    assert c.weight.sum() == pytest.approx(2400, rel=0.3)


def test_zarr_store_input(rng, tmp_path, scheduler):
    from dkernel.data import make_gauss

    ds = make_gauss(5000, random_state=0, store=str(tmp_path / "g.zarr"), chunk_rows=1250)
    c = distributed_coreset(ds.path, None, 150, method="merge-reduce", random_state=0)
    assert c.source_size == 5000 and c.classes == (-1, 1)
    assert c.X.dtype == np.float32


def test_bad_input(rng, tmp_path):
    X, y = _data(rng, n=1000)
    Xd = da.from_array(X, chunks=250)
    with pytest.raises(DKernelError, match="method must be one of"):
        distributed_coreset(Xd, y, 10, method="flat")
    with pytest.raises(DKernelError, match="leaf_size=50 is smaller than the coreset size"):
        distributed_coreset(Xd, y, 100, method="merge-reduce", leaf_size=50)
    with pytest.raises(DKernelError, match="m=1001 exceeds"):
        distributed_coreset(Xd, y, 1001)
    with pytest.raises(DKernelError, match="one class only"):
        distributed_coreset(Xd, np.ones(1000), 10)
    with pytest.raises(DKernelError, match="3 classes"):
        distributed_coreset(Xd, np.arange(1000) % 3, 10)
    with pytest.raises(DKernelError, match="split_every must be >= 2"):
        distributed_coreset(Xd, y, 10, method="merge-reduce", split_every=1)
    with pytest.raises(DKernelError, match="C must be > 0"):
        distributed_coreset(Xd, y, 10, C=0)
    with pytest.raises(DKernelError, match="y has 999 labels but X has 1000 rows"):
        distributed_coreset(Xd, y[:-1], 10)
    with pytest.raises(DKernelError, match="no dataset store"):
        distributed_coreset(str(tmp_path / "nothing.zarr"), None, 10)
    import scipy.sparse

    with pytest.raises(DKernelError, match="sparse input is not supported"):
        distributed_coreset(scipy.sparse.csr_matrix(X), y, 10)
    Xn = X.copy()
    Xn[612, 2] = np.nan
    import dask

    with (
        dask.config.set(scheduler="sync"),
        pytest.raises(DKernelError, match="X contains NaN at row 612, column 2"),
    ):
        distributed_coreset(da.from_array(Xn, chunks=250), y, 10, method="merge-reduce")


@pytest.mark.parametrize("method", ["two-pass", "merge-reduce"])
def test_same_coreset_whatever_the_chunks(rng, method):
    import dask

    X, y = _data(rng, n=6000)
    out = []
    with dask.config.set(scheduler="sync"):
        for chunks in (300, 750):  # 20 and 8 chunks; the leaves are fixed row ranges
            out.append(
                distributed_coreset(
                    da.from_array(X, chunks=chunks),
                    y,
                    150,
                    method=method,
                    leaf_size=1000,
                    random_state=3,
                )
            )
    assert out[0].info["n_blocks" if method == "two-pass" else "n_leaves"] == 6
    assert _same(out[0], out[1])


def test_two_pass_opt_is_a_certified_lower_bound(rng):
    import dask

    from dkernel.coreset import coarse_svm, with_bias

    X, y = _data(rng, n=8000)
    with dask.config.set(scheduler="sync"):
        c = distributed_coreset(da.from_array(X, chunks=2000), y, 200, random_state=0)
    best = coarse_svm(with_bias(X), y.astype(float), np.ones(8000), 1.0, tol=1e-6, max_iter=3000)
    assert 0.8 * best.upper < c.info["opt"] <= best.upper
    assert c.info["coarse_cost"] >= best.lower
