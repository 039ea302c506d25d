"""Stores that prove they are whole: manifests, missing and corrupt chunks in every reader."""

from __future__ import annotations

import os

import dask
import numpy as np
import pytest
import zarr

from dkernel import DKernelError
from dkernel.cli.main import main
from dkernel.data import (
    MANIFEST_KEY,
    checksum,
    ingest,
    open_dataset,
    sample_rows,
    take_rows,
    write_array,
)


@pytest.fixture
def store(tmp_path, rng):
    X = rng.standard_normal((50, 3))
    y = np.where(X[:, 0] > 0, 1, -1)
    return ingest(X, tmp_path / "s.zarr", y=y, chunk_rows=16), X, y


def _chunk_file(ds, name: str, index: int) -> str:
    arr = ds.array(name)
    return os.path.join(
        ds.path, name, arr.metadata.encode_chunk_key((index,) + (0,) * (arr.ndim - 1))
    )


def test_every_array_carries_a_manifest_of_its_chunks(store):
    ds, X, y = store
    assert ds.attrs["format"] == 2
    for name, data in (("X", X), ("y", y)):
        man = ds.array(name).attrs[MANIFEST_KEY]
        assert man["n_chunks"] == 4 and man["chunk_rows"] == 16
        want = [checksum(data[r : r + 16].astype(ds.array(name).dtype)) for r in range(0, 50, 16)]
        assert man["crc32"] == want


def test_all_zero_chunks_are_written_and_read(tmp_path):
    ds = ingest(np.zeros((20, 2)), tmp_path / "z.zarr", chunk_rows=8)
    assert sorted(os.listdir(os.path.join(ds.path, "X", "c"))) == ["0", "1", "2"]
    assert not ds.X.compute().any()


@pytest.mark.parametrize("name", ["X", "y"])
def test_missing_chunk_is_an_error_at_open(store, name, capsys):
    ds, _, _ = store
    os.remove(_chunk_file(ds, name, 2))
    match = rf"store '.*s\.zarr': array '{name}' is missing chunk 2"
    with pytest.raises(DKernelError, match=match):
        open_dataset(ds.path)
    with pytest.raises(DKernelError, match=match):
        sample_rows(ds.path, 5, random_state=0)
    assert main(["info", ds.path]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"array '{name}' is missing chunk 2" in err[0]


def test_chunk_lost_after_open_is_an_error_when_read(store, scheduler):
    ds, X, _ = store
    os.remove(_chunk_file(ds, "X", 1))
    np.testing.assert_array_equal(ds.X[:16].compute(), X[:16])  # chunk 0 still reads
    with pytest.raises(DKernelError, match=r"array 'X', chunk 1 \(rows 16-31\) is missing"):
        ds.X.compute()
    with pytest.raises(DKernelError, match="chunk 1"):
        take_rows(ds.X, [20])


def test_corrupt_compressed_chunk_names_store_array_and_chunk(store, scheduler):
    ds, _, _ = store
    path = _chunk_file(ds, "y", 3)
    raw = bytearray(open(path, "rb").read())
    raw[len(raw) // 2] ^= 0xFF
    open(path, "wb").write(bytes(raw))
    with pytest.raises(DKernelError, match=r"array 'y', chunk 3 \(rows 48-49\) is corrupt") as e:
        open_dataset(ds.path).y.compute()
    assert ds.path in str(e.value)


def test_corrupt_uncompressed_chunk_fails_its_checksum(tmp_path, rng, capsys):
    X = rng.standard_normal((40, 2))
    ds = ingest(X, tmp_path / "u.zarr", chunk_rows=10, compressors=None)
    path = _chunk_file(ds, "X", 2)
    raw = bytearray(open(path, "rb").read())
    raw[5] ^= 0x01  # one flipped bit: still decodes, to a wrong number
    open(path, "wb").write(bytes(raw))
    with pytest.raises(DKernelError, match="chunk 2 .* checksum differs from the manifest"):
        open_dataset(ds.path).X.compute()
    with dask.config.set({"dkernel.data.verify-reads": False}):  # the opt-out
        got = open_dataset(ds.path).X.compute()
    assert (got[:20] == X[:20]).all() and not (got[20:30] == X[20:30]).all()


def test_fit_on_a_damaged_store_is_an_error(store):
    from dkernel.cluster import MiniBatchKernelKMeans

    ds, _, _ = store
    path = _chunk_file(ds, "X", 0)
    raw = bytearray(open(path, "rb").read())
    raw[-2] ^= 0xFF
    open(path, "wb").write(bytes(raw))
    with dask.config.set(scheduler="sync"), pytest.raises(DKernelError, match="chunk 0"):
        MiniBatchKernelKMeans(2, batch_size=8, max_iter=2, random_state=0).fit(ds.path)


def test_array_replaced_outside_dkernel_is_an_error(store):
    ds, _, _ = store
    zarr.create_array(os.path.join(ds.path, "y"), shape=(50,), dtype="i8", overwrite=True)
    with pytest.raises(DKernelError, match="array 'y' has no checksum manifest"):
        open_dataset(ds.path)


def test_manifest_that_does_not_match_the_array_is_an_error(store):
    ds, _, _ = store
    arr = zarr.open_array(os.path.join(ds.path, "X"), mode="r+")
    man = dict(arr.attrs[MANIFEST_KEY])
    man["n_chunks"] = 3
    arr.attrs[MANIFEST_KEY] = man
    with pytest.raises(DKernelError, match="does not match its manifest"):
        open_dataset(ds.path)


def test_format_1_store_is_read_without_verification(tmp_path):
    g = zarr.open_group(str(tmp_path / "old.zarr"), mode="w")
    a = g.create_array("X", shape=(6, 2), chunks=(4, 2), dtype="f8")
    a[:] = np.arange(12.0).reshape(6, 2)
    g.attrs.update({"format": 1, "n": 6, "d": 2})
    ds = open_dataset(tmp_path / "old.zarr")
    np.testing.assert_array_equal(ds.X.compute(), np.arange(12.0).reshape(6, 2))


def test_write_array_is_verified_like_the_data(store):
    ds, _, _ = store
    write_array(ds, "labels", np.arange(50) % 3, chunk_rows=20)
    os.remove(_chunk_file(ds, "labels", 1))
    open_dataset(ds.path)  # X and y are whole
    with pytest.raises(DKernelError, match="array 'labels' is missing chunk 1"):
        open_dataset(ds.path).read("labels")


def test_cli_fit_on_a_corrupt_store_is_one_line(tmp_path, cli_cluster, capsys):
    """The error is raised in a worker's read task and still reaches the CLI as one line."""
    X = np.random.default_rng(0).standard_normal((400, 2))
    ds = ingest(X, tmp_path / "c.zarr", chunk_rows=100)
    path = _chunk_file(ds, "X", 3)
    raw = bytearray(open(path, "rb").read())
    raw[len(raw) // 2] ^= 0xFF
    open(path, "wb").write(bytes(raw))
    argv = ["--cluster", cli_cluster, "kmeans", ds.path, "--n-clusters", "2", "--gamma", "1"]
    assert main([*argv, "--max-iter", "2", "--batch-size", "50"]) == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("dkernel: error")]
    assert len(err) == 1 and "array 'X', chunk 3 (rows 300-399) is corrupt" in err[0]
    assert "labels" not in os.listdir(ds.path)


# --- the direct read of plain-layout chunks (no zarr event loop per chunk) ---------------


@pytest.mark.parametrize("compressors", ["default", None])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_plain_chunks_read_directly_equal_zarrs_read(tmp_path, rng, compressors, dtype):
    from dkernel.data import open_for_read, read_plain

    X = rng.standard_normal((45, 3)).astype(dtype)  # chunks of 16, 16 and 13 rows
    ds = ingest(X, tmp_path / "p.zarr", chunk_rows=16, compressors=compressors, dtype=dtype)
    folder = os.path.join(ds.path, "X")
    where = ds.location.child("X")
    arr, plain = open_for_read(where, "test-" + str(compressors) + str(dtype))
    assert plain  # the layout dkernel writes is read without zarr
    for i, (start, stop) in enumerate([(0, 16), (16, 32), (32, 45)]):
        got = read_plain(arr, where, i, start, stop)
        assert got.dtype == dtype and got.flags.writeable
        np.testing.assert_array_equal(got, zarr.open_array(folder, mode="r")[start:stop])
    np.testing.assert_array_equal(open_dataset(ds.path).X.compute(), X)


def test_other_layouts_are_read_through_zarr(tmp_path, rng):
    from zarr.codecs import GzipCodec

    from dkernel.data import plain_layout

    X = rng.standard_normal((40, 2))
    ds = ingest(X, tmp_path / "g.zarr", chunk_rows=16, compressors=[GzipCodec()])
    assert not plain_layout(ds.array("X"))
    np.testing.assert_array_equal(open_dataset(ds.path).X.compute(), X)
    np.testing.assert_array_equal(take_rows(ds.X, [39, 0, 17]), X[[39, 0, 17]])


def test_zstd_frame_of_another_size_is_corrupt_not_garbage(store):
    from numcodecs import Zstd

    ds, _, _ = store
    path = _chunk_file(ds, "X", 1)
    # a valid zstd frame, but of fewer bytes than the chunk: decoding it into the chunk's
    # buffer would leave rows of garbage behind
    open(path, "wb").write(Zstd().encode(np.zeros(10, dtype=ds.X.dtype)))
    with pytest.raises(DKernelError, match=r"chunk 1 \(rows 16-31\) is corrupt .*zstd frame"):
        open_dataset(ds.path).X.compute()
    with dask.config.set({"dkernel.data.verify-reads": False}):  # no checksum: still caught
        with pytest.raises(DKernelError, match="chunk 1 .* is corrupt"):
            open_dataset(ds.path).X.compute()
