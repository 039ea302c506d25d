"""Coresets that save nothing warn; complex input is refused before any work."""

from __future__ import annotations

import logging
import warnings

import dask
import dask.array as da
import numpy as np
import pytest

from dkernel import DKernelError
from dkernel.coreset import VacuousCoresetWarning, distributed_coreset, svm_coreset


def _unscaled(n=400):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, 2)) * 1000 + 1e4  # large, uncentred features
    y = np.where(X[:, 0] - 1e4 + 500 * rng.normal(size=n) > 0, 1, -1)
    return X, y


def test_vacuous_total_sensitivity_warns_and_names_standardising():
    X, y = _unscaled()
    with pytest.warns(VacuousCoresetWarning, match="standardise X") as rec:
        S = svm_coreset(X, y, 50, random_state=0)
    assert S.total_sensitivity >= S.source_size
    assert issubclass(VacuousCoresetWarning, UserWarning)
    assert f"n = {len(X)} rows" in str(rec[0].message)
    Xs = (X - X.mean(0)) / X.std(0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        S2 = svm_coreset(Xs, y, 50, random_state=0)  # standardised: a real saving, silent
    assert S2.total_sensitivity < 0.5 * S2.source_size


def test_vacuous_two_pass_distributed_warns():
    X, y = _unscaled(1000)
    with dask.config.set(scheduler="sync"), pytest.warns(VacuousCoresetWarning):
        S = distributed_coreset(
            da.from_array(X, chunks=500), y, 50, C=10.0, leaf_size=500, random_state=0
        )
    assert S.total_sensitivity >= S.source_size


def test_complex_dask_input_refused_before_work():
    rng = np.random.default_rng(0)
    Xc = da.from_array(rng.normal(size=(200, 2)) + 1j, chunks=100)
    y = np.where(rng.normal(size=200) > 0, 1, -1)
    calls = []

    def compute_spy(*args, **kwargs):  # no graph may run before the error
        calls.append(args)
        raise AssertionError("computed")

    with pytest.raises(DKernelError, match="complex dtype complex128"):
        with dask.config.set(scheduler=compute_spy):
            distributed_coreset(Xc, y, 20, random_state=0)
    assert not calls
    with pytest.raises(DKernelError, match="complex dtype"):
        distributed_coreset(np.ones((50, 2), dtype=np.complex64), np.ones(50), 10)


def test_separable_two_pass_says_so_and_skips_the_block_solves(caplog):
    """Well-separated classes: the bound is vacuous for a reason standardising cannot fix.
    The build says so, runs one coarse solve (the sample's) instead of one per block, and
    draws a uniform sample (so its error is a uniform sample's)."""
    from sklearn.datasets import make_blobs

    X, y = make_blobs(8000, 50, centers=2, cluster_std=3.0, random_state=0)
    n, m = len(X), 300
    caplog.set_level(logging.DEBUG, logger="dkernel.coreset")

    def solves() -> int:  # coarse solves (each logged at DEBUG), in this process: sync
        return sum(r.getMessage().startswith("coarse SVM solve") for r in caplog.records)

    Xd, yd = da.from_array(X, chunks=1000), da.from_array(y, chunks=1000)
    with (
        dask.config.set(scheduler="sync"),
        pytest.warns(VacuousCoresetWarning, match="separable") as rec,
    ):
        S = distributed_coreset(Xd, yd, m, leaf_size=1000, random_state=0)
    assert "standardise" not in str(rec[0].message)
    assert S.info["separable"] and solves() == 1
    # uniform draws: each distinct row weighs n / m times its count, m draws in all
    counts = S.weight * m / n
    np.testing.assert_allclose(counts, np.round(counts), atol=1e-9)
    assert round(counts.sum()) == m
    # overlapping classes are not taken for separable (their bound may be vacuous too)
    X2, y2 = make_blobs(8000, 50, centers=2, cluster_std=20.0, random_state=0)
    before = solves()
    with dask.config.set(scheduler="sync"), warnings.catch_warnings():
        warnings.simplefilter("ignore", VacuousCoresetWarning)
        S2 = distributed_coreset(
            da.from_array(X2, chunks=1000), da.from_array(y2, chunks=1000), m, random_state=0
        )
    assert not S2.info["separable"] and solves() - before > 1  # the sample's and the blocks'
