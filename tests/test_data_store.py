"""zarr stores: ingest of arrays and .npz, attributes, dtypes, atomic writes, bad input."""

from __future__ import annotations

import os

import dask.array as da
import numpy as np
import pytest

from dkernel import DKernelError
from dkernel.data import Dataset, StoreWriter, as_array_input, ingest, open_dataset, write_arrays


def _siblings(tmp_path) -> list[str]:
    """Everything in the folder, hidden temp folders included."""
    return sorted(os.listdir(tmp_path))


def _blocks(X, y, rows):
    for r in range(0, len(X), rows):
        yield X[r : r + rows], y[r : r + rows]


@pytest.fixture
def xy(rng):
    X = rng.standard_normal((103, 4))
    y = rng.integers(0, 3, size=103)
    return X, y


# --------------------------------------------------------------------------- arrays


@pytest.mark.parametrize("chunk_rows", [10, 103, 500])
def test_ingest_arrays_roundtrip(tmp_path, xy, chunk_rows, scheduler):
    X, y = xy
    ds = ingest(X, tmp_path / "s.zarr", y=y, chunk_rows=chunk_rows)
    assert isinstance(ds, Dataset)
    assert isinstance(ds.X, da.Array) and isinstance(ds.y, da.Array)
    np.testing.assert_array_equal(ds.X.compute(), X)
    np.testing.assert_array_equal(ds.y.compute(), y)
    # dask chunks by rows equal to the zarr chunks, columns in one chunk
    expect = tuple(min(chunk_rows, 103 - r) for r in range(0, 103, chunk_rows))
    assert ds.X.chunks == (expect, (4,))
    assert ds.y.chunks == (expect,)
    assert ds.array("X").chunks == (chunk_rows, 4)
    a = ds.attrs
    assert (a["n"], a["d"], a["classes"], a["source"]) == (103, 4, [0, 1, 2], "array")
    assert (a["dtype"], a["chunk_rows"], a["format"]) == ("float64", chunk_rows, 2)
    assert ds.n_samples == 103 and ds.n_features == 4
    assert "classes=[0, 1, 2]" in repr(ds)


def test_open_dataset_again(tmp_path, xy):
    X, y = xy
    ingest(X, tmp_path / "s.zarr", y=y, chunk_rows=32)
    ds = open_dataset(tmp_path / "s.zarr")
    assert ds.X.chunks[0] == (32, 32, 32, 7)
    np.testing.assert_array_equal(ds.X.compute(), X)
    assert open_dataset(ds) is ds
    assert as_array_input(ds) is ds.X
    assert as_array_input(str(tmp_path / "s.zarr")).shape == (103, 4)
    assert as_array_input(X) is X


def test_relative_paths_become_absolute(tmp_path, xy, monkeypatch):
    """Workers may run elsewhere: the dask graph must not hold a relative path."""
    monkeypatch.chdir(tmp_path)
    ingest(xy[0], "rel.zarr", chunk_rows=50)
    ds = open_dataset("rel.zarr")
    assert ds.path == str(tmp_path / "rel.zarr")
    monkeypatch.chdir("/")
    np.testing.assert_array_equal(ds.X.compute(), xy[0])
    np.testing.assert_array_equal(ds.array("X")[:3], xy[0][:3])


def test_no_labels(tmp_path, xy):
    ds = ingest(xy[0], tmp_path / "s.zarr")
    assert ds.y is None and ds.attrs["classes"] is None


@pytest.mark.parametrize(
    "src, dtype, expect",
    [
        ("float32", None, "float32"),
        ("float64", None, "float64"),
        ("float64", "float32", "float32"),
        ("float32", "float64", "float64"),
        ("int64", None, "float32"),
    ],
)
def test_dtype_kept_or_converted(tmp_path, xy, src, dtype, expect):
    X = (xy[0] * 10).astype(src)
    ds = ingest(X, tmp_path / "s.zarr", dtype=dtype)
    assert ds.X.dtype == np.dtype(expect) and ds.attrs["dtype"] == expect
    np.testing.assert_array_equal(ds.X.compute(), X.astype(expect))


def test_labels_dtypes(tmp_path, xy):
    X, _ = xy
    ds = ingest(X, tmp_path / "a.zarr", y=np.where(X[:, 0] > 0, 1.0, -1.0))
    assert ds.y.dtype == np.int64 and ds.attrs["classes"] == [-1, 1]
    target = X[:, 1] * 0.5
    ds = ingest(X, tmp_path / "b.zarr", y=target)
    assert ds.y.dtype == np.float64 and ds.attrs["classes"] is None  # regression target
    np.testing.assert_array_equal(ds.y.compute(), target)
    ds = ingest(X, tmp_path / "c.zarr", y=(X[:, 0] > 0).reshape(-1, 1))  # (n, 1) bools
    assert ds.attrs["classes"] == [0, 1]


def test_default_chunking_is_a_power_of_two_up_to_8_mib(tmp_path, rng):
    from dkernel.data import ALIGN_ROWS, default_chunk_rows

    X = rng.random((3000, 1000), dtype=np.float32)
    ds = ingest(X, tmp_path / "s.zarr")
    assert ds.attrs["chunk_rows"] == 2048  # 8 MiB would be 2097 rows
    assert default_chunk_rows(50) == 32768  # 41943 rows would be 8 MiB
    assert default_chunk_rows(2) == ALIGN_ROWS  # capped: divides the SGD stream's blocks
    assert default_chunk_rows(10**6) == 1024
    for d in (1, 3, 50, 784, 5000):
        assert ALIGN_ROWS % default_chunk_rows(d) == 0


def test_uncompressed(tmp_path, xy):
    ds = ingest(xy[0], tmp_path / "s.zarr", compressors=None, chunk_rows=50)
    assert ds.array("X").compressors == ()
    np.testing.assert_array_equal(ds.X.compute(), xy[0])


def test_overwritten_store_gets_new_task_keys(tmp_path, xy, scheduler):
    X, _y = xy
    first = ingest(X, tmp_path / "s.zarr", chunk_rows=20)
    again = open_dataset(tmp_path / "s.zarr")
    assert again.X.name == first.X.name  # same write: same keys
    second = ingest(X + 1.0, tmp_path / "s.zarr", chunk_rows=20, overwrite=True)
    assert second.X.name != first.X.name  # new contents: new keys (no stale results)
    np.testing.assert_array_equal(second.X.compute(), X + 1.0)


# --------------------------------------------------------------------------- .npz


def test_ingest_npz_with_test_split(tmp_path, rng):
    X, Xt = rng.standard_normal((60, 3)), rng.standard_normal((20, 3))
    y, yt = rng.integers(0, 2, 60) * 2 - 1, rng.integers(0, 2, 20) * 2 - 1
    np.savez(tmp_path / "d.npz", X=X, y=y, X_test=Xt, y_test=yt, other=np.zeros(2))
    ds = ingest(tmp_path / "d.npz", tmp_path / "d.zarr", chunk_rows=16, dtype="float32")
    assert ds.attrs["source"] == "d.npz" and ds.attrs["classes"] == [-1, 1]
    np.testing.assert_array_equal(ds.X.compute(), X.astype(np.float32))
    np.testing.assert_array_equal(ds.y.compute(), y)
    np.testing.assert_array_equal(ds.X_test.compute(), Xt.astype(np.float32))
    np.testing.assert_array_equal(ds.y_test.compute(), yt)
    assert ds.X_test.chunks[0] == (16, 4)


def test_ingest_npz_without_labels(tmp_path, rng):
    X = rng.standard_normal((10, 2))
    np.savez(tmp_path / "d.npz", X=X)
    ds = ingest(tmp_path / "d.npz", tmp_path / "d.zarr")
    assert ds.y is None and ds.X_test is None


@pytest.mark.parametrize(
    "arrays, match",
    [
        ({"Z": np.zeros((3, 2))}, r"has no array 'X' \(found \['Z'\]\)"),
        ({"X": np.zeros((3, 2)), "y": np.zeros(4)}, "y has 4 labels but X has 3 rows"),
        (
            {"X": np.zeros((3, 2)), "y": np.zeros(3), "X_test": np.zeros((2, 5))},
            "X_test has 5 columns but X has 2",
        ),
        (
            {
                "X": np.zeros((3, 2)),
                "y": np.zeros(3),
                "X_test": np.zeros((2, 2)),
                "y_test": np.zeros(3),
            },
            "y_test has 3 labels but X_test has 2 rows",
        ),
        ({"X": np.zeros((3, 2)), "y_test": np.zeros(3)}, "y_test given without X_test"),
        # names are coded (tests/test_data_labels.py); an empty one is no label
        ({"X": np.zeros((3, 2)), "y": np.array(["a", "", "c"])}, r"row 1 is missing \(''\)"),
        ({"X": np.array([[1.0, np.nan], [0.0, 0.0]])}, "X contains NaN at row 0, column 1"),
        (
            {"X": np.zeros((3, 2)), "X_test": np.array([[0.0, 0.0], [np.inf, 1.0]])},
            "X_test contains inf at row 1, column 0",
        ),
    ],
)
def test_bad_npz(tmp_path, arrays, match):
    np.savez(tmp_path / "d.npz", **arrays)
    with pytest.raises(DKernelError, match=match):
        ingest(tmp_path / "d.npz", tmp_path / "d.zarr")
    assert _siblings(tmp_path) == ["d.npz"]


def test_npz_object_array_and_garbage(tmp_path):
    np.savez(tmp_path / "o.npz", X=np.array([[1, "a"]], dtype=object))
    with pytest.raises(DKernelError, match="cannot read .* as .npz"):
        ingest(tmp_path / "o.npz", tmp_path / "o.zarr")
    (tmp_path / "g.npz").write_bytes(b"not a zip file")
    with pytest.raises(DKernelError, match="cannot read .* as .npz"):
        ingest(tmp_path / "g.npz", tmp_path / "g.zarr")
    assert _siblings(tmp_path) == ["g.npz", "o.npz"]


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "X, y, match",
    [
        (
            np.array([[0.0, 1.0], [2.0, np.inf], [0.0, 0.0]]),
            None,
            "X contains inf at row 1, column 1",
        ),
        (np.array([[0.0, 1.0], [np.nan, 3.0]]), None, "X contains NaN at row 1, column 0"),
        (np.zeros((3, 2)), np.array([0.0, np.nan, 1.0]), "y contains NaN at row 1"),
        (np.zeros((3, 2)), np.zeros(2), "y has 2 labels but X has 3 rows"),
        (np.zeros((3, 2)), np.array(["a", None, "a"]), r"row 1 is missing \(None\)"),
        (np.zeros((3, 2)), np.zeros((3, 2)), r"y must be 1-D, got shape \(3, 2\)"),
        (np.zeros(3), None, r"X must be a non-empty 2-D array, got shape \(3,\)"),
        (np.zeros((0, 3)), None, "non-empty"),
        (np.array([["a", "b"]]), None, "must be real and numeric"),
        (np.zeros((2, 2), dtype=complex), None, "must be real and numeric"),
    ],
)
def test_bad_arrays(tmp_path, X, y, match):
    with pytest.raises(DKernelError, match=match):
        ingest(X, tmp_path / "s.zarr", y=y)
    assert _siblings(tmp_path) == []


def test_overflow_on_conversion_is_reported(tmp_path):
    X = np.array([[1.0, 2.0], [3.0, 1e300]])
    with pytest.raises(DKernelError, match="X contains inf at row 1, column 1 after conversion"):
        ingest(X, tmp_path / "s.zarr", dtype="float32")
    assert _siblings(tmp_path) == []


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"dtype": "int32"}, "dtype must be float32 or float64"),
        ({"chunk_rows": 0}, "chunk_rows must be >= 1"),
        ({"chunk_rows": 2.5}, "chunk_rows must be"),
        ({"format": "parquet"}, "unknown format 'parquet'"),
    ],
)
def test_bad_options(tmp_path, kwargs, match):
    with pytest.raises(DKernelError, match=match):
        ingest(np.zeros((3, 2)), tmp_path / "s.zarr", **kwargs)
    assert _siblings(tmp_path) == []


def test_missing_file_and_unknown_extension(tmp_path):
    with pytest.raises(DKernelError, match="no such file"):
        ingest(tmp_path / "nope.npz", tmp_path / "s.zarr")
    (tmp_path / "d.parquet").write_text("x")
    with pytest.raises(DKernelError, match="cannot tell the format"):
        ingest(tmp_path / "d.parquet", tmp_path / "s.zarr")
    with pytest.raises(DKernelError, match="y= is only for array input"):
        ingest(tmp_path / "d.parquet", tmp_path / "s.zarr", y=[1])


def test_missing_parent_folder(tmp_path):
    with pytest.raises(DKernelError, match="does not exist"):
        ingest(np.zeros((3, 2)), tmp_path / "no" / "s.zarr")


def test_open_dataset_errors(tmp_path):
    with pytest.raises(DKernelError, match="no dataset store"):
        open_dataset(tmp_path / "missing.zarr")
    (tmp_path / "plain").mkdir()
    with pytest.raises(DKernelError, match="not a zarr dataset store"):
        open_dataset(tmp_path / "plain")


# --------------------------------------------------------------------------- atomicity


def test_existing_target_is_an_error_before_any_work(tmp_path, xy):
    ingest(xy[0], tmp_path / "s.zarr")
    consumed = []

    def blocks():
        consumed.append(1)
        yield xy[0], xy[1]

    with pytest.raises(DKernelError, match="already exists; pass overwrite=True"):
        ingest(xy[0], tmp_path / "s.zarr")
    with pytest.raises(DKernelError, match="already exists"):
        write_arrays(
            tmp_path / "s.zarr",
            blocks(),
            n=103,
            n_features=4,
            dtype=np.float64,
            chunk_rows=10,
            has_y=True,
            attrs={},
        )
    assert consumed == []
    assert _siblings(tmp_path) == ["s.zarr"]


class _Boom(RuntimeError):
    pass


@pytest.mark.parametrize("exc", [_Boom("disk on fire"), KeyboardInterrupt()])
def test_failure_mid_write_leaves_nothing(tmp_path, xy, exc):
    X, y = xy
    written = []

    def blocks():
        for i, b in enumerate(_blocks(X, y, 10)):
            if i == 4:  # after several whole chunks are on disk
                raise exc
            written.append(i)
            yield b

    with pytest.raises(type(exc)):
        write_arrays(
            tmp_path / "s.zarr",
            blocks(),
            n=103,
            n_features=4,
            dtype=np.float64,
            chunk_rows=10,
            has_y=True,
            attrs={},
        )
    assert written == [0, 1, 2, 3]
    assert _siblings(tmp_path) == []


def test_bad_value_late_in_data_leaves_nothing(tmp_path, xy):
    X, y = xy
    X = X.copy()
    X[97, 2] = np.nan
    with pytest.raises(DKernelError, match="X contains NaN at row 97, column 2"):
        write_arrays(
            tmp_path / "s.zarr",
            _blocks(X, y, 10),
            n=103,
            n_features=4,
            dtype=np.float64,
            chunk_rows=10,
            has_y=True,
            attrs={},
        )
    assert _siblings(tmp_path) == []


@pytest.mark.parametrize(
    "n, match", [(200, "wrote 103 rows, expected 200"), (50, "more rows than the 50 announced")]
)
def test_row_count_mismatch_leaves_nothing(tmp_path, xy, n, match):
    with pytest.raises(DKernelError, match=match):
        write_arrays(
            tmp_path / "s.zarr",
            _blocks(*xy, 10),
            n=n,
            n_features=4,
            dtype=np.float64,
            chunk_rows=10,
            has_y=True,
            attrs={},
        )
    assert _siblings(tmp_path) == []


def test_bad_blocks(tmp_path, xy):
    X, y = xy
    with pytest.raises(DKernelError, match=r"a block has shape \(10, 3\), expected \(\*, 4\)"):
        write_arrays(
            tmp_path / "s.zarr",
            [(X[:10, :3], y[:10])],
            n=10,
            n_features=4,
            dtype=np.float64,
            chunk_rows=10,
            has_y=True,
            attrs={},
        )
    with pytest.raises(DKernelError, match=r"a label block has shape \(9,\), expected \(10,\)"):
        write_arrays(
            tmp_path / "s.zarr",
            [(X[:10], y[:9])],
            n=10,
            n_features=4,
            dtype=np.float64,
            chunk_rows=10,
            has_y=True,
            attrs={},
        )
    assert _siblings(tmp_path) == []


def test_overwrite_replaces(tmp_path, xy):
    X, y = xy
    ingest(X, tmp_path / "s.zarr", y=y)
    ds = ingest(X[:50] * 2, tmp_path / "s.zarr", overwrite=True)
    assert ds.attrs["n"] == 50 and ds.y is None
    np.testing.assert_array_equal(open_dataset(tmp_path / "s.zarr").X.compute(), X[:50] * 2)
    assert _siblings(tmp_path) == ["s.zarr"]


@pytest.mark.parametrize("exc", [_Boom("disk on fire"), KeyboardInterrupt()])
def test_failed_overwrite_keeps_the_old_store(tmp_path, xy, exc):
    X, y = xy
    ingest(X, tmp_path / "s.zarr", y=y, chunk_rows=10)

    def blocks():
        yield X[:10] + 5, y[:10]
        raise exc

    with pytest.raises(type(exc)):
        write_arrays(
            tmp_path / "s.zarr",
            blocks(),
            n=103,
            n_features=4,
            dtype=np.float64,
            chunk_rows=10,
            has_y=True,
            attrs={},
            overwrite=True,
        )
    ds = open_dataset(tmp_path / "s.zarr")
    np.testing.assert_array_equal(ds.X.compute(), X)
    np.testing.assert_array_equal(ds.y.compute(), y)
    assert _siblings(tmp_path) == ["s.zarr"]


def test_writer_without_commit_leaves_nothing(tmp_path):
    with StoreWriter(tmp_path / "s.zarr") as w:
        w.add("X", n=2, tail_shape=(2,), dtype=np.float64, chunk_rows=2)
        w.append("X", np.zeros((2, 2)))
    assert _siblings(tmp_path) == []


# --------------------------------------------------------------------------- dask input


@pytest.mark.parametrize("chunk_rows", [None, 16])
def test_ingest_dask_array_streams_blocks(tmp_path, xy, chunk_rows, scheduler):
    X, y = xy
    Xd = da.from_array(X, chunks=(25, 2))  # columns split too: rows are reassembled
    ds = ingest(Xd, tmp_path / "s.zarr", y=da.from_array(y, chunks=40), chunk_rows=chunk_rows)
    np.testing.assert_array_equal(ds.X.compute(), X)
    np.testing.assert_array_equal(ds.y.compute(), y)
    assert ds.attrs["source"] == "dask array" and ds.attrs["classes"] == [0, 1, 2]
    assert ds.X.dtype == np.float64
    ds = ingest(Xd.astype(np.int32), tmp_path / "t.zarr", y=y.astype(float) * 0.5)
    assert ds.X.dtype == np.float32 and ds.y.dtype == np.float64
    np.testing.assert_array_equal(ds.y.compute(), y * 0.5)


def test_ingest_dask_bad_input(tmp_path, xy):
    X, y = xy
    bad = X.copy()
    bad[77, 3] = np.inf
    with pytest.raises(DKernelError, match="X contains inf at row 77, column 3"):
        ingest(da.from_array(bad, chunks=(20, 4)), tmp_path / "s.zarr")
    with pytest.raises(DKernelError, match=r"y must have shape \(103,\) to match X"):
        ingest(da.from_array(X, chunks=20), tmp_path / "s.zarr", y=y[:5])
    names = np.array(["a"] * 103, dtype=object)
    names[41] = 1.5
    with pytest.raises(DKernelError, match=r"label at row 41 is not text \(1.5\)"):
        ingest(da.from_array(X, chunks=20), tmp_path / "s.zarr", y=names)
    with pytest.raises(DKernelError, match=r"label at row 41 is not text \(1.5\)"):
        ingest(da.from_array(X, chunks=20), tmp_path / "s.zarr", y=da.from_array(names, 20))
    with pytest.raises(DKernelError, match="y contains NaN at row 3"):
        ingest(
            da.from_array(X, chunks=20),
            tmp_path / "s.zarr",
            y=da.from_array(np.where(np.arange(103) == 3, np.nan, 1.0), chunks=50),
        )
    with pytest.raises(DKernelError, match="non-empty 2-D array of known shape"):
        Xd = da.from_array(X, chunks=20)
        ingest(Xd[Xd[:, 0] > 0], tmp_path / "s.zarr")  # unknown chunk sizes
    assert _siblings(tmp_path) == []


# --------------------------------------------------------------------------- sparse, sizes


def test_ingest_sparse_matrix_block_by_block(tmp_path, rng):
    import scipy.sparse as sp

    X = sp.random(57, 6, density=0.2, format="csc", random_state=0, dtype=np.float64)
    y = rng.integers(0, 2, size=57)
    ds = ingest(X, tmp_path / "s.zarr", y=y, chunk_rows=10)
    np.testing.assert_array_equal(ds.X.compute(), X.toarray())
    np.testing.assert_array_equal(ds.y.compute(), y)
    bad = X.tocsr()
    bad.data[3] = np.nan
    row = int(np.searchsorted(bad.indptr, 3, side="right")) - 1
    with pytest.raises(DKernelError, match=f"X contains NaN or inf at row {row}"):
        ingest(bad, tmp_path / "n.zarr")
    with pytest.raises(DKernelError, match="y must be a dense 1-D array"):
        ingest(X, tmp_path / "m.zarr", y=sp.csr_matrix(y))
    assert sorted(os.listdir(tmp_path)) == ["s.zarr"]


def test_absurd_sizes_are_refused_before_allocating(tmp_path):
    from dkernel.data import draw_indices, sample_rows

    X = np.zeros((200, 2))
    with pytest.raises(DKernelError, match="refusing to allocate"):
        sample_rows(X, 10**12, random_state=0)
    with pytest.raises(DKernelError, match="drawing size=1000000000000 row indices"):
        draw_indices(200, 10**12)
    path = tmp_path / "wide.svm"
    path.write_text("1 100000000:1\n-1 1:2\n", encoding="utf-8")  # a LIBSVM index of 10^8
    with pytest.raises(DKernelError, match=r"one chunk of X \(.* x 100000000 columns\)"):
        ingest(path, tmp_path / "w.zarr")
    assert sorted(os.listdir(tmp_path)) == ["wide.svm"]


# ------------------------------------------------------------------- held-out split
def _held_out(ds):
    return (ds.X.compute(), ds.y.compute(), ds.X_test.compute(), ds.y_test.compute())


def test_ingest_test_size_splits_by_row_index_whatever_the_source(tmp_path, rng):
    """A seeded held-out split: the rows are partitioned (order kept on each side), about
    test_size of them held out, the same from an array, a dask array of any chunking and a
    CSV file, recorded in the store's ``split`` attribute."""
    n = 70000  # more than one draw block of the split
    X = rng.standard_normal((n, 3)).astype(np.float32)
    y = rng.integers(0, 2, size=n)
    a = ingest(X, tmp_path / "a.zarr", y=y, test_size=0.2, random_state=7)
    Xa, ya, Xta, yta = _held_out(a)
    assert len(Xa) + len(Xta) == n and abs(len(Xta) / n - 0.2) < 0.01
    both = np.concatenate([np.column_stack([Xa, ya]), np.column_stack([Xta, yta])])
    np.testing.assert_array_equal(
        np.sort(both, axis=0),
        np.sort(np.column_stack([X, y.astype(np.float32)]), axis=0),
    )
    assert a.attrs["split"] == {"test_size": 0.2, "seed": 7, "n_test": len(Xta)}
    b = ingest(da.from_array(X, chunks=(3333, 3)), tmp_path / "b.zarr", y=y, test_size=0.2,
               random_state=7)  # fmt: skip
    csv = tmp_path / "d.csv"
    np.savetxt(csv, np.column_stack([X, y]), delimiter=",", fmt="%.9g")
    c = ingest(csv, tmp_path / "c.zarr", test_size=0.2, random_state=7)
    for other in (b, c):
        for got, ref in zip(_held_out(other), (Xa, ya, Xta, yta)):
            np.testing.assert_array_equal(got, ref)
    d = ingest(X, tmp_path / "d.zarr", y=y, test_size=0.2, random_state=8)
    assert not np.array_equal(d.y_test.compute(), yta)  # another seed, another split
    fresh = ingest(X, tmp_path / "e.zarr", y=y, test_size=0.2)
    assert isinstance(fresh.attrs["split"]["seed"], int)  # recorded: the split can be redone


@pytest.mark.parametrize(
    ("test_size", "match"),
    [
        (0.0, r"test_size must be in \(0, 1\)"),
        (1.0, r"test_size must be in \(0, 1\)"),
        (1, "test_size must be a float"),
        ("0.2", "test_size must be a float"),
        (1e-9, "leaves no test rows"),
        (1 - 1e-9, "leaves no training rows"),
    ],
)
def test_ingest_test_size_refusals(tmp_path, xy, test_size, match):
    X, y = xy
    with pytest.raises(DKernelError, match=match):
        ingest(X, tmp_path / "s.zarr", y=y, test_size=test_size, random_state=0)
    assert not (tmp_path / "s.zarr").exists()


def test_ingest_test_size_refuses_a_source_with_its_own_test_set(tmp_path, rng):
    X = rng.standard_normal((50, 2))
    path = tmp_path / "d.npz"
    np.savez(path, X=X, X_test=X[:5])
    with pytest.raises(DKernelError, match="own X_test"):
        ingest(path, tmp_path / "s.zarr", test_size=0.2, random_state=0)


def test_ingest_verbose_shows_a_bar_of_the_rows(tmp_path, capfd):
    X = np.arange(3000.0).reshape(1000, 3)
    ds = ingest(X, tmp_path / "v.zarr", y=np.arange(1000) % 2, chunk_rows=300, verbose=1)
    err = capfd.readouterr().err
    assert ds.n_samples == 1000 and "ingest" in err and "1.00k/1.00k" in err
    ingest(X, tmp_path / "q.zarr", y=np.arange(1000) % 2)
    assert "ingest" not in capfd.readouterr().err  # quiet by default
