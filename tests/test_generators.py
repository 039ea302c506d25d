"""Synthetic generators: shapes, labels, seeds, NumPy == store for any chunking, properties."""

from __future__ import annotations

import os

import numpy as np
import pytest

from dkernel import DKernelError
from dkernel.data import (
    GEN_BLOCK,
    make_checkerboard,
    make_gauss,
    make_pathological,
    make_rings,
    make_waveform,
)

GENERATORS = {
    "checkerboard": (make_checkerboard, 2, [-1, 1], {}),
    "gauss": (make_gauss, 2, [-1, 1], {}),
    "waveform": (make_waveform, 21, [0, 1, 2], {}),
    "pathological": (make_pathological, 2, [-1, 1], {}),
    "rings": (make_rings, 2, [0, 1, 2], {}),
    "rings-wide": (make_rings, 5, [0, 1, 2, 3], {"n_rings": 4, "n_features": 5}),
}


@pytest.mark.parametrize("name", list(GENERATORS))
def test_shapes_dtypes_labels(name):
    make, d, classes, kw = GENERATORS[name]
    X, y = make(500, random_state=0, **kw)
    assert X.shape == (500, d) and y.shape == (500,)
    assert X.dtype == np.float64 and np.issubdtype(y.dtype, np.integer)
    assert sorted(set(y.tolist())) == classes
    assert np.isfinite(X).all()
    X32, y32 = make(500, random_state=0, dtype="float32", **kw)
    assert X32.dtype == np.float32
    np.testing.assert_array_equal(X32, X.astype(np.float32))
    np.testing.assert_array_equal(y32, y)


@pytest.mark.parametrize("name", list(GENERATORS))
def test_seeds(name):
    make, _, _, kw = GENERATORS[name]
    a, ya = make(300, random_state=1, **kw)
    b, yb = make(300, random_state=1, **kw)
    c, _ = make(300, random_state=2, **kw)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(ya, yb)
    assert not np.array_equal(a, c)


@pytest.mark.parametrize("name", ["checkerboard", "waveform", "rings-wide"])
@pytest.mark.parametrize("chunk_rows", [1000, 4096, 30000])
def test_store_equals_numpy_for_any_chunking(tmp_path, name, chunk_rows, scheduler):
    make, d, classes, kw = GENERATORS[name]
    n = GEN_BLOCK + 3000  # crosses a generator block boundary
    X, y = make(n, random_state=5, **kw)
    ds = make(n, random_state=5, store=tmp_path / "g.zarr", chunk_rows=chunk_rows, **kw)
    assert ds.X.dtype == np.float32 and ds.X.chunks[0][0] == chunk_rows
    np.testing.assert_array_equal(ds.X.compute(), X.astype(np.float32))
    np.testing.assert_array_equal(ds.y.compute(), y)
    assert ds.attrs["classes"] == classes and ds.attrs["n"] == n and ds.attrs["d"] == d
    assert ds.attrs["source"].startswith(make.__name__) and "seed=5" in ds.attrs["source"]


def test_store_float64_and_overwrite(tmp_path):
    X, _y = make_gauss(1000, random_state=0)
    make_gauss(10, random_state=3, store=tmp_path / "g.zarr")
    with pytest.raises(DKernelError, match="already exists"):
        make_gauss(1000, random_state=0, store=tmp_path / "g.zarr")
    ds = make_gauss(
        1000,
        random_state=0,
        store=tmp_path / "g.zarr",
        dtype="float64",
        overwrite=True,
        chunk_rows=300,
    )
    np.testing.assert_array_equal(ds.X.compute(), X)
    assert sorted(os.listdir(tmp_path)) == ["g.zarr"]


def test_random_state_kinds():
    a = make_checkerboard(50, random_state=np.random.RandomState(0))[0]
    b = make_checkerboard(50, random_state=np.random.RandomState(0))[0]
    np.testing.assert_array_equal(a, b)
    c = make_checkerboard(50, random_state=np.random.default_rng(0))[0]
    d = make_checkerboard(50, random_state=np.random.default_rng(0))[0]
    np.testing.assert_array_equal(c, d)
    e, f = make_checkerboard(50)[0], make_checkerboard(50)[0]
    assert not np.array_equal(e, f)


def test_checkerboard_rule():
    X, y = make_checkerboard(5000, random_state=0)
    assert X.min() >= 0 and X.max() < 4
    cell = np.floor(X).astype(int)
    np.testing.assert_array_equal(y, np.where(cell.sum(axis=1) % 2 == 0, 1, -1))
    assert len(np.unique(cell[:, 0] * 4 + cell[:, 1])) == 16  # every cell is used
    X, y = make_checkerboard(2000, n_cells=2, random_state=0)
    assert X.max() < 2 and ((X[:, 0] < 1) & (X[:, 1] < 1) & (y == -1)).sum() == 0


def test_gauss_class_moments():
    X, y = make_gauss(20000, random_state=0)
    pos, neg = X[y == 1], X[y == -1]
    assert abs(len(pos) / len(X) - 0.5) < 0.02
    np.testing.assert_allclose(pos.mean(axis=0), [0, 0], atol=0.05)
    np.testing.assert_allclose(neg.mean(axis=0), [2, 0], atol=0.1)
    np.testing.assert_allclose(np.cov(pos.T), np.eye(2), atol=0.06)
    np.testing.assert_allclose(np.cov(neg.T), 4 * np.eye(2), atol=0.25)


def test_waveform_class_means():
    X, y = make_waveform(20000, random_state=0)
    i = np.arange(1, 22)
    h1 = np.maximum(6 - np.abs(i - 11), 0)
    h2, h3 = np.maximum(6 - np.abs(i - 15), 0), np.maximum(6 - np.abs(i - 7), 0)
    # u ~ U(0, 1) mixes two base waves: the class mean is their average
    for c, (a, b) in enumerate([(h1, h2), (h1, h3), (h2, h3)]):
        np.testing.assert_allclose(X[y == c].mean(axis=0), (a + b) / 2, atol=0.1)
        assert abs((y == c).mean() - 1 / 3) < 0.02
    # the noise is N(0, 1) on the ends, where every base wave is zero
    assert abs(X[:, 0].std() - 1.0) < 0.03 and abs(X[:, 20].std() - 1.0) < 0.03


def test_pathological_special_points():
    X, y = make_pathological(1000, separation=10.0, spread=0.5, random_state=0)
    np.testing.assert_array_equal(X[:2], [[0.0, 0.05], [0.0, -0.05]])
    assert y[0] == 1 and y[1] == -1
    rest, yr = X[2:], y[2:]
    assert (np.sign(rest[:, 0]) == yr).all()  # far clusters of opposite labels
    np.testing.assert_allclose(rest[yr == 1].mean(axis=0), [10, 0], atol=0.1)
    np.testing.assert_allclose(rest[yr == -1].mean(axis=0), [-10, 0], atol=0.1)
    # the special points are only at the start, also in a store's later chunks
    X2 = make_pathological(GEN_BLOCK + 10, random_state=0)[0]
    assert np.abs(X2[GEN_BLOCK : GEN_BLOCK + 2, 0]).min() > 5
    X1, y1 = make_pathological(1, random_state=0)
    assert X1.tolist() == [[0.0, 0.05]] and y1.tolist() == [1]


def test_rings_radii_by_label():
    X, y = make_rings(6000, n_rings=3, noise=0.05, random_state=0)
    r = np.hypot(X[:, 0], X[:, 1])
    for k in range(3):
        assert abs(np.median(r[y == k]) - (k + 1)) < 0.01
        assert np.abs(r[y == k] - (k + 1)).max() < 0.3
    Xw, _ = make_rings(2000, n_features=4, noise=0.1, random_state=0)
    assert abs(Xw[:, 2:].std() - 0.1) < 0.01


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: make_gauss(0), "n_samples must be >= 1"),
        (lambda: make_gauss(10.5), "n_samples must be"),
        (lambda: make_gauss(10, random_state=-1), "random_state must be >= 0"),
        (lambda: make_gauss(10, random_state="a"), "random_state must be None, an int"),
        (lambda: make_gauss(10, dtype="int32"), "dtype must be float32 or float64"),
        (lambda: make_gauss(10, dtype="bogus"), "dtype must be float32 or float64"),
        (lambda: make_checkerboard(10, n_cells=0), "n_cells must be >= 1"),
        (lambda: make_pathological(10, separation=0), "separation must be > 0"),
        (lambda: make_pathological(10, spread=-1), "spread must be >= 0"),
        (lambda: make_rings(10, n_rings=0), "n_rings must be >= 1"),
        (lambda: make_rings(10, noise=-0.1), "noise must be >= 0"),
        (lambda: make_rings(10, n_features=1), "n_features must be >= 2"),
    ],
)
def test_bad_parameters(call, match):
    with pytest.raises(DKernelError, match=match):
        call()


def test_bad_store_parameters_write_nothing(tmp_path):
    with pytest.raises(DKernelError, match="chunk_rows must be >= 1"):
        make_gauss(100, store=tmp_path / "g.zarr", chunk_rows=-5)
    assert os.listdir(tmp_path) == []


def test_docstrings_are_rendered():
    for make, *_ in GENERATORS.values():
        assert "random_state : int" in make.__doc__ and "{store" not in make.__doc__


def test_rings_inner_radius_and_spacing():
    X, y = make_rings(600, n_rings=3, inner_radius=0.5, spacing=2.0, noise=0.0, random_state=0)
    r = np.hypot(X[:, 0], X[:, 1])
    np.testing.assert_allclose(r, 0.5 + 2.0 * y, atol=1e-12)
    with pytest.raises(DKernelError, match="spacing"):
        make_rings(10, spacing=0.0)
