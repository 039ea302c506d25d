"""Stores dkernel did not write, or that were changed outside it: read where they are valid,
named where they are not."""

from __future__ import annotations

import numpy as np
import pytest
import zarr

from dkernel import DKernelError
from dkernel.data import ingest, open_dataset, write_array


def _plain_store(path, X, y=None, *, chunk_rows, zarr_format=3):
    """A dataset group written by zarr with its own defaults (no manifest, no attributes)."""
    g = zarr.open_group(str(path), mode="w", zarr_format=zarr_format)
    g.create_array("X", data=X, chunks=(chunk_rows, X.shape[1]))
    if y is not None:
        g.create_array("y", data=y, chunks=(chunk_rows,))
    return str(path)


def test_plain_zarr_store_reads_its_absent_zero_chunks_as_zeros(tmp_path):
    X = np.arange(40.0).reshape(20, 2)
    X[5:10] = 0.0  # chunk 1 holds only the fill value: zarr does not write it
    path = _plain_store(tmp_path / "plain.zarr", X, chunk_rows=5)
    arr = zarr.open_array(str(tmp_path / "plain.zarr" / "X"), mode="r")
    assert arr.nchunks_initialized == 3  # the all-zero chunk is absent, rightly
    ds = open_dataset(path)
    np.testing.assert_array_equal(ds.X.compute(), X)


def test_a_lost_chunk_of_a_dkernel_store_is_still_an_error(tmp_path):
    import os

    X = np.arange(40.0).reshape(20, 2)
    X[5:10] = 0.0
    ds = ingest(X, tmp_path / "d.zarr", chunk_rows=5)
    key = ds.array("X").metadata.encode_chunk_key((1, 0))
    os.remove(os.path.join(ds.path, "X", key))
    with pytest.raises(DKernelError, match="missing chunk 1"):
        open_dataset(ds.path)


def test_zarr_2_store_is_named(tmp_path):
    path = _plain_store(tmp_path / "v2.zarr", np.ones((6, 2)), chunk_rows=3, zarr_format=2)
    with pytest.raises(DKernelError, match="is a zarr 2 store; dkernel reads zarr 3 stores"):
        open_dataset(path)


def test_labels_shorter_than_X_are_named(tmp_path):
    path = _plain_store(tmp_path / "short.zarr", np.ones((10, 2)), np.ones(8), chunk_rows=5)
    with pytest.raises(DKernelError, match="array 'y' has 8 rows but 'X' has 10"):
        open_dataset(path)


def test_store_of_a_newer_format_is_refused(tmp_path):
    ds = ingest(np.ones((6, 2)), tmp_path / "new.zarr")
    g = zarr.open_group(ds.path, mode="r+")
    g.attrs["format"] = 99
    with pytest.raises(DKernelError, match="has format 99; this dkernel reads formats up to"):
        open_dataset(ds.path)


def test_write_array_of_other_length_is_refused(tmp_path):
    ds = ingest(np.ones((4000, 2)), tmp_path / "s.zarr")
    with pytest.raises(DKernelError, match="labels has 10 rows but the store's X has 4000"):
        write_array(ds, "labels", np.zeros(10))
