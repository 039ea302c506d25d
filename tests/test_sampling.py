"""Seeded batch sampling: same rows for any input kind and chunking, one task per chunk."""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pytest
import zarr
from dask.callbacks import Callback

from dkernel import DKernelError
from dkernel.data import (
    chunk_bounds,
    draw_indices,
    group_by_chunk,
    ingest,
    sample_rows,
    take_graph,
    take_rows,
)

N, D = 1000, 3


@pytest.fixture
def X(rng):
    return rng.standard_normal((N, D))


def _zarr(tmp_path, X, chunk_rows=128):
    z = zarr.create_array(
        zarr.storage.LocalStore(str(tmp_path / "z")),
        shape=X.shape,
        dtype=X.dtype,
        chunks=(chunk_rows, X.shape[1]),
    )
    z[:] = X
    return z


class _CountTasks(Callback):
    """Counts the tasks the local schedulers run, by key prefix."""

    def __init__(self, prefix: str):
        super().__init__()
        self.prefix, self.keys = prefix, []

    def _pretask(self, key, dsk, state):
        name = key[0] if isinstance(key, tuple) else key
        if str(name).startswith(self.prefix):
            self.keys.append(key)


@pytest.mark.parametrize("replace", [True, False])
@pytest.mark.parametrize("chunks", [(1000, 3), (100, 3), (333, 3), (37, 2)])
def test_same_rows_for_numpy_zarr_and_dask(tmp_path, X, chunks, replace, scheduler):
    ref, idx = sample_rows(X, 200, random_state=7, replace=replace, return_indices=True)
    np.testing.assert_array_equal(ref, X[idx])
    assert idx.dtype == np.int64 and idx.min() >= 0 and idx.max() < N
    if not replace:
        assert len(np.unique(idx)) == 200
    got = sample_rows(da.from_array(X, chunks=chunks), 200, random_state=7, replace=replace)
    np.testing.assert_array_equal(got, ref)
    got = sample_rows(_zarr(tmp_path, X), 200, random_state=7, replace=replace)
    np.testing.assert_array_equal(got, ref)
    got = sample_rows(
        da.from_array(X, chunks=chunks).persist(), 200, random_state=7, replace=replace
    )
    np.testing.assert_array_equal(got, ref)


def test_same_rows_from_a_store_and_its_path(tmp_path, X, scheduler):
    ds = ingest(X, tmp_path / "s.zarr", y=np.arange(N) % 3, chunk_rows=64, dtype="float64")
    ref = sample_rows(X, 300, random_state=3)
    np.testing.assert_array_equal(sample_rows(ds.X, 300, random_state=3), ref)
    np.testing.assert_array_equal(sample_rows(ds, 300, random_state=3), ref)
    np.testing.assert_array_equal(sample_rows(str(tmp_path / "s.zarr"), 300, random_state=3), ref)
    np.testing.assert_array_equal(sample_rows(ds.array("X"), 300, random_state=3), ref)
    np.testing.assert_array_equal(
        sample_rows(ds.y, 300, random_state=3), sample_rows(ds.y.compute(), 300, random_state=3)
    )


def test_seeds(X):
    a = sample_rows(X, 50, random_state=1)
    assert not np.array_equal(a, sample_rows(X, 50, random_state=2))
    np.testing.assert_array_equal(a, sample_rows(X, 50, random_state=np.random.RandomState(1)))
    g1 = sample_rows(X, 50, random_state=np.random.default_rng(5))
    np.testing.assert_array_equal(g1, sample_rows(X, 50, random_state=np.random.default_rng(5)))
    rs = np.random.RandomState(0)  # a shared generator advances between batches
    assert not np.array_equal(sample_rows(X, 50, rs), sample_rows(X, 50, rs))


def test_take_rows_keeps_order_and_repeats(X, scheduler):
    idx = np.array([999, 0, 5, 5, 500, 0, 37])
    for chunks in [(1000, 3), (64, 3), (10, 1)]:
        got = take_rows(da.from_array(X, chunks=chunks), idx)
        np.testing.assert_array_equal(got, X[idx])
    np.testing.assert_array_equal(take_rows(X, idx.tolist()), X[idx])


def test_take_rows_one_dimensional_and_3d(rng, scheduler):
    y = np.arange(50) * 3
    np.testing.assert_array_equal(take_rows(da.from_array(y, chunks=7), [49, 3, 3]), y[[49, 3, 3]])
    T = rng.random((20, 2, 4))
    got = take_rows(da.from_array(T, chunks=(6, 1, 2)), [19, 0, 7])
    np.testing.assert_array_equal(got, T[[19, 0, 7]])


def test_empty_index_list(X, scheduler):
    got = take_rows(da.from_array(X, chunks=(100, 3)), [])
    assert got.shape == (0, D) and got.dtype == X.dtype
    assert take_rows(X, np.array([], dtype=int)).shape == (0, D)


@pytest.mark.parametrize(
    "bad, match",
    [
        ([0, N], f"row index {N} is outside"),
        ([-1, 3], "row index -1 is outside"),
        ([0.5, 1.0], "row indices must be integers"),
    ],
)
def test_out_of_range_indices(X, tmp_path, bad, match):
    for arr in (X, da.from_array(X, chunks=(100, 3)), _zarr(tmp_path, X)):
        with pytest.raises(DKernelError, match=match):
            take_rows(arr, bad)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"size": 0}, "size must be >= 1"),
        ({"size": 2.0}, "size must be"),
        ({"size": N + 1, "replace": False}, f"size={N + 1} exceeds the {N} rows"),
        ({"size": 3, "random_state": "seed"}, "random_state must be None, an int"),
    ],
)
def test_bad_draws(X, kwargs, match):
    with pytest.raises(DKernelError, match=match):
        sample_rows(X, **kwargs)


def test_bad_inputs():
    with pytest.raises(DKernelError, match="cannot sample from an empty array"):
        sample_rows(np.zeros((0, 2)), 3)
    with pytest.raises(DKernelError, match="X must be an array with rows"):
        sample_rows(3.0, 1)
    with pytest.raises(DKernelError, match="no dataset store"):
        sample_rows("/nonexistent/store.zarr", 1)


def test_draw_indices_without_replacement_covers_everything():
    idx = draw_indices(100, 100, random_state=0, replace=False)
    assert sorted(idx.tolist()) == list(range(100))


def test_chunk_bounds_and_grouping():
    X = da.zeros((10, 2), chunks=((3, 3, 4), 2))
    assert chunk_bounds(X).tolist() == [0, 3, 6, 10]
    groups = group_by_chunk(X, np.array([0, 2, 7, 9]))
    assert [c for c, _ in groups] == [0, 2]
    assert [loc.tolist() for _, loc in groups] == [[0, 2], [1, 3]]


def test_graph_has_one_task_per_touched_chunk(X):
    Xd = da.from_array(X, chunks=(100, 3))  # 10 chunks
    uniq = np.array([1, 2, 3, 150, 420, 421, 999])  # touches chunks 0, 1, 4, 9
    A = take_graph(Xd, uniq)
    graph = dict(A.__dask_graph__())
    assert len([k for k in graph if k[0] == A.name]) == 4
    # culled: of X's chunks only the 4 touched ones are in the graph
    assert sorted(k[1] for k in graph if k[0] == Xd.name) == [0, 1, 4, 9]
    assert A.chunks == ((3, 1, 2, 1), (3,))
    np.testing.assert_array_equal(A.compute(), X[uniq])
    # what runs: the 4 gathers and the 4 source chunks they read, nothing else of X
    with dask.config.set(scheduler="threads"), _CountTasks("take-rows-") as cb:
        take_rows(Xd, np.concatenate([uniq, uniq[::-1]]))
    assert len(cb.keys) == 4


def test_wide_arrays_are_gathered_whole_rows(X):
    Xd = da.from_array(X, chunks=(100, 1))  # columns split: rows are reassembled first
    np.testing.assert_array_equal(take_rows(Xd, [5, 950]), X[[5, 950]])


def test_persisted_chunks_on_a_cluster_one_task_each(X, local_cluster_client):
    from distributed import get_task_stream, wait

    client = local_cluster_client
    with client.as_current(), dask.config.set(scheduler=client):
        Xp = da.from_array(X, chunks=(100, 3)).persist()
        wait(Xp)
        idx = np.array([5, 6, 250, 999, 5])
        with get_task_stream(client) as ts:
            got = take_rows(Xp, idx, name="my-rows")
        np.testing.assert_array_equal(got, X[idx])
        names = [t["key"][0] if isinstance(t["key"], tuple) else t["key"] for t in ts.data]
        assert len(names) == 3 and all(str(k).startswith("my-rows-") for k in names)


def test_persisted_chunks_go_to_the_client_that_holds_them(X, local_cluster_client):
    """Rows of an array persisted on a client are taken there, even when Dask would now
    compute on another scheduler: its chunks live on that client's workers only."""
    from distributed import futures_of, get_task_stream, wait

    from dkernel.runtime import distributed_client

    client = local_cluster_client
    with client.as_current(), dask.config.set(scheduler=client):
        Xp = da.from_array(X, chunks=(100, 3)).persist()
        wait(Xp)
    idx = np.array([7, 420, 421, 990])
    with dask.config.set(scheduler="threads"):
        assert distributed_client() is None
        assert distributed_client(holding=futures_of(Xp)) is client
        with get_task_stream(client) as ts:
            got = take_rows(Xp, idx, name="held-rows")
    np.testing.assert_array_equal(got, X[idx])
    names = [t["key"][0] if isinstance(t["key"], tuple) else t["key"] for t in ts.data]
    assert len(names) == 3 and all(str(k).startswith("held-rows-") for k in names)


def test_no_dask_fancy_indexing_for_long_index_lists(X, scheduler):
    """A 5000-row batch from 100 chunks makes 100 tasks, not one per index."""
    Xd = da.from_array(X, chunks=(10, 3))
    idx = draw_indices(N, 5000, random_state=0)
    A = take_graph(Xd, np.unique(idx))
    assert len([k for k in dict(A.__dask_graph__()) if k[0] == A.name]) == 100
    np.testing.assert_array_equal(take_rows(Xd, idx), X[idx])


def test_draw_without_replacement_from_many_rows_takes_no_n_row_array():
    """A RandomState's ``choice(replace=False)`` permutes all n: 8 GB at 10^9 rows."""
    import tracemalloc

    tracemalloc.start()
    try:
        idx = draw_indices(10**9, 5000, 0, replace=False)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2**20, peak
    assert len(np.unique(idx)) == 5000 and idx.min() >= 0 and idx.max() < 10**9
    assert np.array_equal(idx, draw_indices(10**9, 5000, 0, replace=False))  # seeded
    assert not np.array_equal(np.sort(idx), np.sort(draw_indices(10**9, 5000, 1, replace=False)))
