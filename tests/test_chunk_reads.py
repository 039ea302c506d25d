"""Each chunk of a zarr store is read once per pass over the data.

Every opening of a chunk file for reading is counted from outside (Python's audit events),
so every read the estimators make, through a store path, a ``Dataset`` or the ``zarr.Array``
dask opens, is seen; metadata reads (``zarr.json``) are not counted. The expected number
of reads per chunk is the number of passes each call makes, written next to each case.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections import Counter

import dask
import numpy as np
import pytest
import zarr

from dkernel.cluster import KernelKMeans, MiniBatchKernelKMeans
from dkernel.data import make_rings

#: Distributed fits here train in rounds from the first step (no stream prefix).
pytestmark = pytest.mark.usefixtures("rounds_only")

N, CHUNK = 2000, 250  # 8 row chunks of X
N_CHUNKS = N // CHUNK


@pytest.fixture
def store(tmp_path):
    path = os.path.join(tmp_path, "rings.zarr")
    make_rings(N, n_rings=2, n_features=4, random_state=0, store=path, chunk_rows=CHUNK)
    return path


@pytest.fixture
def reads(file_reads):
    """Counter of chunk reads per chunk key of X (2-D: ``c/<row chunk>/0``; y's are 1-D):
    the openings of X's chunk files for reading, seen from outside (Python's audit events),
    whether zarr reads a chunk or the data layer reads a plain-layout chunk itself."""

    def key(path: str) -> str | None:
        m = re.search(r"/X/(c/\d+/0)$", path)
        return m[1] if m else None

    return file_reads(key)


def _per_chunk(counts: Counter) -> list[int]:
    per = sorted(counts.values())
    assert len(counts) == N_CHUNKS, f"{len(counts)} of {N_CHUNKS} chunks read"
    return per


def _assert_reads(counts: Counter, passes: int) -> None:
    assert _per_chunk(counts) == [passes] * N_CHUNKS
    counts.clear()


def test_minibatch_kernel_kmeans(store, reads, scheduler):
    # fit: one read for the sample (k-means++ seeding and the median-heuristic gamma)
    # together with the first (here the only) group of batches, one labels pass
    m = MiniBatchKernelKMeans(2, batch_size=100, tau=50, max_iter=10, random_state=0)
    m.fit(store)
    _assert_reads(reads, 2)
    m.predict(store).compute()
    _assert_reads(reads, 1)
    m.transform(store).compute()
    _assert_reads(reads, 1)
    m.score(store)
    _assert_reads(reads, 1)


def test_minibatch_with_given_gamma_and_init(store, reads):
    # nothing to sample: the batches and the labels pass
    Z = np.asarray(zarr.open_array(os.path.join(store, "X"), mode="r")[[0, 1]])
    reads.clear()
    MiniBatchKernelKMeans(2, gamma=0.5, init=Z, batch_size=100, tau=50, max_iter=10).fit(store)
    _assert_reads(reads, 2)


def test_minibatch_untruncated_reads_once(store, reads):
    # tau=None holds X (under max_data_bytes): one read; sample, batches, labels from memory
    MiniBatchKernelKMeans(2, batch_size=100, tau=None, max_iter=5, random_state=0).fit(store)
    _assert_reads(reads, 1)


def test_minibatch_prefetch_groups(store, reads):
    # batches in 3 groups of 4 (the sample rides on the first), prefetched, none beyond
    # max_iter: 3 reads of each chunk, then one labels pass
    with dask.config.set({"dkernel.kmeans.prefetch-bytes": 4 * 100 * 4 * 4}):  # 4 batches
        m = MiniBatchKernelKMeans(2, batch_size=100, tau=50, max_iter=10, random_state=0)
        m.fit(store)
    _assert_reads(reads, 4)
    ref = MiniBatchKernelKMeans(2, batch_size=100, tau=50, max_iter=10, random_state=0)
    np.testing.assert_array_equal(ref.fit(store).labels_, m.labels_)  # grouping-independent


def test_kernel_kmeans(store, reads, scheduler):
    # fit: X read once (kept for the diagonal, seeding, Lloyd and the support); predict once
    m = KernelKMeans(2, max_iter=2, random_state=0).fit(store)
    _assert_reads(reads, 1)
    m.predict(store).compute()
    _assert_reads(reads, 1)


def test_budgeted_svc(store, reads):
    from dkernel.svm import BudgetedSVC

    # one epoch: one pass over X, and one more for the refit; predict: one pass
    m = BudgetedSVC(budget=50, max_iter=1, random_state=0).fit(store)
    _assert_reads(reads, 2)
    BudgetedSVC(budget=50, max_iter=1, refit=False, random_state=0).fit(store)
    _assert_reads(reads, 1)
    m.predict(store).compute()
    _assert_reads(reads, 1)


# --------------------------------------------------------- tasks per chunk of a pass
def _n_tasks(arr) -> int:
    """Tasks the scheduler would get for ``arr`` (after Dask's own graph optimisation)."""
    import dask

    (opt,) = dask.optimize(arr)
    return len(dict(opt.__dask_graph__()))


@pytest.mark.parametrize("method", ["predict", "transform", "fit_pass"])
@pytest.mark.parametrize("slots", [1, 3, N_CHUNKS])
def test_store_pass_is_one_task_per_group_of_chunks(store, reads, method, slots):
    """A row pass over a store reads its chunks in the pass's own tasks: adjacent chunks
    share a task, one per slot here (the local pool's ``num_workers``; the chunks are far
    below ``task-bytes``), no read task or alias task beside them, each chunk read once,
    and the same values as the in-memory pass whatever the grouping."""
    from dkernel.data import open_dataset

    model = MiniBatchKernelKMeans(2, max_iter=3, batch_size=64, random_state=0).fit(store)
    X = np.asarray(open_dataset(store).X.compute())
    with dask.config.set(num_workers=slots):
        if method == "fit_pass":  # fit's labels/inertia pass: (label, distance) per row
            lazy = model._assign_all(open_dataset(store).X, True)
            ref = model._assign_all(X, False)
        else:
            lazy = getattr(model, method)(store)
            ref = getattr(model, method)(X)
    assert _n_tasks(lazy) == slots
    per = -(-N_CHUNKS // slots)  # chunks per task: they differ by one at most
    assert set(lazy.chunks[0]) <= {per * CHUNK, (N_CHUNKS // slots) * CHUNK}
    reads.clear()
    got = np.asarray(lazy.compute())
    _assert_reads(reads, 1)
    np.testing.assert_array_equal(got, ref)


def test_task_bytes_caps_the_rows_of_a_task(store):
    """``dkernel.data.task-bytes`` bounds the rows one task reads: four chunks' worth lets
    two slots take one task each; two chunks' worth gives each slot several tasks, at
    least eight (here one a chunk)."""
    from dkernel.data import open_dataset, pass_groups, row_bytes

    model = MiniBatchKernelKMeans(2, max_iter=3, batch_size=64, random_state=0).fit(store)
    X = open_dataset(store).X
    chunk_bytes = CHUNK * row_bytes(X)
    for cap, tasks in ((4 * chunk_bytes, 2), (2 * chunk_bytes, N_CHUNKS)):
        with dask.config.set({"num_workers": 2, "dkernel.data.task-bytes": cap}):
            assert _n_tasks(model.predict(X)) == tasks
            assert len(pass_groups([CHUNK] * N_CHUNKS, row_bytes(X))) == tasks + 1


@pytest.mark.parametrize(
    ("n", "per", "slots", "counts"),
    [
        (62, 6, 14, [5] * 6 + [4] * 8),  # one task a slot: the busiest reads ceil(62/14)
        (62, 6, 1, [6] * 7 + [5] * 4),  # one slot: the cap's 11 tasks of at most 6 blocks
        (62, 20, 2, [4] * 14 + [3] * 2),  # above the cap: at least 8 a slot, 16
        (62, 6, 8, [1] * 62),  # 8 a slot would be 64: never more tasks than blocks
        (5, 100, 8, [1] * 5),
    ],
)
def test_pass_groups_fill_the_slots(n, per, slots, counts):
    """:func:`pass_groups`: one task a slot within the cap; else at least eight a slot,
    a multiple of the slots, never more than the blocks; block counts differ by one at
    most."""
    from dkernel.data import pass_groups

    with dask.config.set({"dkernel.data.task-bytes": per * 10}):
        cuts = pass_groups([10] * n, 1, slots)
    assert cuts[0] == 0 and cuts[-1] == n
    assert np.diff(cuts).tolist() == counts


def test_row_slice_of_a_store_is_a_row_source(store, reads):
    """A row slice of a store's X is a row source of those rows: a pass over it is one task
    per block, each block reads the chunks it overlaps once, and values equal NumPy's."""
    from dkernel.data import RowSource, open_dataset

    model = MiniBatchKernelKMeans(2, max_iter=3, batch_size=64, random_state=0).fit(store)
    X = open_dataset(store).X
    assert isinstance(X, RowSource)
    lo, hi = CHUNK // 2, N - CHUNK // 2
    part = X[lo:hi]
    assert isinstance(part, RowSource) and isinstance(X[lo:hi, :], RowSource)
    assert part.shape == (hi - lo, X.shape[1])
    assert part.chunks[0] == (CHUNK // 2,) + (CHUNK,) * (N_CHUNKS - 2) + (CHUNK // 2,)
    full = np.asarray(X.compute())
    for slots in (N_CHUNKS, 2):  # a task per block, and blocks grouped
        with dask.config.set(num_workers=slots):
            lazy = model.predict(part)
        assert _n_tasks(lazy) == slots
        reads.clear()
        got = np.asarray(lazy.compute())
        _assert_reads(reads, 1)
        np.testing.assert_array_equal(got, model.predict(full[lo:hi]))
    # a slice of a slice keeps the global rows
    np.testing.assert_array_equal(
        part[CHUNK : 2 * CHUNK].compute(), full[lo + CHUNK : lo + 2 * CHUNK]
    )


def test_other_operations_give_plain_arrays_whose_reads_stay_checked(store):
    """Column slices, fancy indexing and rechunks are dask's own: plain arrays, whose
    chunk reads still check the manifest."""
    from dkernel import DKernelError
    from dkernel.data import RowSource, open_dataset

    X = open_dataset(store).X
    full = np.asarray(X.compute())
    for other, ref in (
        (X[:, :2], full[:, :2]),
        (X[::2], full[::2]),
        (X[[3, 1]], full[[3, 1]]),
        (X.rechunk((500, -1)), full),
        (X + 1, full + 1),
    ):
        assert not isinstance(other, RowSource)
        np.testing.assert_array_equal(np.asarray(other.compute()), ref)
    chunk = os.path.join(store, "X", "c", "3", "0")
    with open(chunk, "r+b") as fh:  # same size, other bytes
        raw = bytearray(fh.read())
        raw[-1] ^= 0xFF
        fh.seek(0)
        fh.write(raw)
    with pytest.raises(DKernelError, match=r"chunk 3 .*corrupt"):
        X[:, :2].compute()


@pytest.mark.parametrize(("rows", "reads_per_chunk"), [(2 * CHUNK, [1]), (300, [1, 2])])
def test_blocks_of_regroups_the_reads(store, reads, rows, reads_per_chunk):
    """``blocks_of(rows)``: blocks that are unions of chunks read each chunk once; a chunk
    that straddles two blocks is read by both (documented)."""
    from dkernel.data import RowSource, open_dataset

    X = open_dataset(store).X
    grouped = X.blocks_of(rows)
    assert isinstance(grouped, RowSource)
    assert grouped.chunks[0] == tuple(np.diff([*range(0, N, rows), N]))
    full = X.compute()
    reads.clear()
    np.testing.assert_array_equal(grouped.compute(), full)
    assert len(reads) == N_CHUNKS and sorted(set(reads.values())) == reads_per_chunk


def test_take_rows_on_a_row_slice(store, reads):
    """take_rows on a slice of a store reads the touched chunks of the store, once each."""
    from dkernel.data import open_dataset, take_rows

    X = open_dataset(store).X
    full = np.asarray(X.compute())
    reads.clear()
    part = X[CHUNK + 10 :]
    got = take_rows(part, [0, CHUNK, 5])
    np.testing.assert_array_equal(got, full[CHUNK + 10 :][[0, CHUNK, 5]])
    assert sorted(reads) == ["c/1/0", "c/2/0"] and set(reads.values()) == {1}


@pytest.mark.parametrize(("slots", "tasks"), [(4, 4), (2, 2), (1, 1)])
def test_take_rows_reads_each_touched_chunk_once(store, reads, slots, tasks):
    """take_rows on a store reads each touched chunk once, in tasks of adjacent touched
    chunks (one per slot here), and only those chunks."""
    from dkernel.data import open_dataset, take_graph, take_rows

    X = open_dataset(store).X
    idx = np.array([3, N - 1, 3, CHUNK + 7, 5 * CHUNK + 1])
    uniq = np.unique(idx)
    with dask.config.set(num_workers=slots):
        assert _n_tasks(take_graph(X, uniq)) == tasks  # chunks 0, 1, 5 and 7
        got = take_rows(X, idx)
    assert sorted(reads) == ["c/0/0", "c/1/0", "c/5/0", "c/7/0"]
    assert set(reads.values()) == {1}
    np.testing.assert_array_equal(got, np.asarray(X.compute())[idx])


def test_unverified_view_has_its_own_keys(store):
    """With verify-reads off the view's tasks differ (no checksums), and so do its keys."""
    import dask

    from dkernel.data import open_dataset

    checked = open_dataset(store).X
    with dask.config.set({"dkernel.data.verify-reads": False}):
        unchecked = open_dataset(store).X
    assert checked.name != unchecked.name
    np.testing.assert_array_equal(checked.compute(), unchecked.compute())


def test_nan_in_a_store_pass_names_its_global_row(store):
    """The value check rides on the pass's own read: a NaN is named by its global row."""
    import dask

    from dkernel import DKernelError

    model = MiniBatchKernelKMeans(2, max_iter=3, batch_size=64, random_state=0).fit(store)
    row = 5 * CHUNK + 3
    zarr.open_array(os.path.join(store, "X"), mode="r+")[row, 1] = np.nan
    with pytest.raises(DKernelError, match="checksum"):  # verified reads: the edit is seen
        model.predict(store).compute()
    with dask.config.set({"dkernel.data.verify-reads": False}):
        lazy = model.predict(store)
    with pytest.raises(DKernelError, match=f"NaN at row {row}, column 1"):
        lazy.compute()


def test_store_pass_keys_are_deterministic(store):
    """The same pass over the same store has the same task keys (Dask can share results);
    with reads unverified the keys differ (the tasks differ)."""
    import dask

    model = MiniBatchKernelKMeans(2, max_iter=3, batch_size=64, random_state=0).fit(store)
    assert model.predict(store).name == model.predict(store).name
    with dask.config.set({"dkernel.data.verify-reads": False}):
        unverified = model.predict(store)
    assert unverified.name != model.predict(store).name


@pytest.mark.parametrize("distributed", [False, True])
def test_svm_ranges_read_shared_chunks_once(tmp_path, reads, scheduler, distributed):
    """The refit's parts and the distributed fit's shards are row ranges cut wherever n
    puts them (8 here, 250 rows each, over chunks of 300): loaded in one graph, a chunk that
    two ranges share is read once (with a client; without one the refit loads one part at
    a time and reads a shared chunk for each part)."""
    from dkernel.data import make_rings
    from dkernel.svm import BudgetedSVC

    path = os.path.join(tmp_path, "r.zarr")
    make_rings(N, n_rings=2, n_features=4, random_state=0, store=path, chunk_rows=300)
    reads.clear()
    kw = dict(distributed=True, n_rounds=1) if distributed else {}
    model = BudgetedSVC(budget=50, max_iter=1, random_state=0, **kw).fit(path)
    # sequential: the SGD stream and the refit; distributed: a sample of rows for gamma
    # (it touches every chunk here) and the shards, from which the refit's parts are cut
    # (X is not read a second time)
    passes = 2
    per_chunk = sorted(reads.values())
    assert len(reads) == 7
    if scheduler is not None:
        assert per_chunk == [passes] * 7
    else:  # the sequential refit reads the 6 chunks its part boundaries cut twice
        assert per_chunk.count(passes) >= 1 and max(per_chunk) <= passes + 1
    from dkernel.data import open_dataset

    ds = open_dataset(path)  # the same model as from memory, whatever the chunks
    ref = BudgetedSVC(budget=50, max_iter=1, random_state=0, **kw).fit(
        ds.X.compute(), ds.y.compute()
    )
    np.testing.assert_array_equal(model.dual_coef_, ref.dual_coef_)


def test_predict_and_score_follow_the_store_chunks(tmp_path, reads, scheduler):
    """Issue 37: a store written with chunk_rows=500 (12 chunks, not a power of two):
    predict and score read each chunk once, their row blocks being the store's chunks."""
    from dkernel.data import ingest, open_dataset
    from dkernel.svm import BudgetedSVC

    rng = np.random.default_rng(0)
    X = rng.standard_normal((6000, 4))
    y = (X[:, 0] * X[:, 1] > 0).astype(int)
    path = str(tmp_path / "s.zarr")
    ingest(X, path, y=y, chunk_rows=500)
    ds = open_dataset(path)
    assert ds.X.chunks[0] == (500,) * 12
    svc = BudgetedSVC(budget=30, max_iter=1, random_state=0).fit(ds.X, ds.y)
    km = MiniBatchKernelKMeans(2, batch_size=100, max_iter=3, random_state=0).fit(ds.X)
    reads.clear()
    for run in (
        lambda: svc.predict(ds.X).compute(),
        lambda: svc.score(ds.X, ds.y),
        lambda: km.predict(path).compute(),
        lambda: km.score(ds.X),
    ):
        run()
        assert len(reads) == 12 and sorted(reads.values()) == [1] * 12, dict(reads)
        reads.clear()


def test_resident_ranges_read_their_own_chunks_and_share_the_others(store, reads, scheduler):
    """Ranges longer than a chunk (3 of 600-700 rows over chunks of 250): the chunks only
    one range overlaps are read by that range's load task itself, the chunks two ranges
    share by one task that reads X's and y's of the same rows; every chunk is read once and
    every part holds its rows."""
    from distributed import get_task_stream

    from dkernel.data import ResidentRows, open_dataset

    ds = open_dataset(store)
    ranges = [(0, 700), (700, 1300), (1300, N)]
    reads.clear()

    def load(xr, yr, wr, start):
        return start, xr, yr

    with contextlib.ExitStack() as stack:
        ts = stack.enter_context(get_task_stream(scheduler)) if scheduler is not None else None
        res = ResidentRows.load((ds.X, ds.y, None), ranges, load, client=scheduler, name="own")
        parts = scheduler.gather(res.parts) if scheduler is not None else res.parts
    _assert_reads(reads, 1)
    X, y = ds.X.compute(), ds.y.compute()
    for (s, e), (start, xr, yr) in zip(ranges, parts):
        assert start == s
        np.testing.assert_array_equal(xr, X[s:e])
        np.testing.assert_array_equal(yr, y[s:e])
    if ts is not None:  # the loads, and one read of X and y for each shared chunk
        keys = sorted(r["key"] if isinstance(r["key"], str) else r["key"][0] for r in ts.data)
        # chunks 2 (rows 500-750) and 5 (1250-1500)
        assert keys == ["own-0", "own-1", "own-2", "own-read-0", "own-read-1"]


def test_resident_ranges_of_a_cut_store_share_one_read_per_chunk(tmp_path, reads, scheduler):
    """Two stores cut mid-chunk (rows 100 onward, chunks of 250): the ranges (450 rows each)
    share chunks, and each shared chunk is one task that reads the rows of it of all three
    stored arrays (X and y of one store, X of the other); every part holds its rows and
    every chunk is read once."""
    from distributed import get_task_stream

    from dkernel.data import ResidentRows, ingest, open_dataset

    rng = np.random.default_rng(1)
    X, y, Z = rng.standard_normal((N, 3)), rng.integers(0, 2, N), rng.random((N, 2))
    ingest(X, os.path.join(tmp_path, "a.zarr"), y=y, chunk_rows=CHUNK)
    ingest(Z, os.path.join(tmp_path, "b.zarr"), chunk_rows=CHUNK)
    a, b = (open_dataset(os.path.join(tmp_path, f)) for f in ("a.zarr", "b.zarr"))
    cut = 100
    ranges = [(s, min(s + 450, N - cut)) for s in range(0, N - cut, 450)]
    reads.clear()

    def load(xr, yr, zr, start):
        return start, xr, yr, zr

    with contextlib.ExitStack() as stack:
        ts = stack.enter_context(get_task_stream(scheduler)) if scheduler is not None else None
        res = ResidentRows.load(
            (a.X[cut:], a.y[cut:], b.X[cut:]), ranges, load, client=scheduler, name="cut"
        )
        parts = scheduler.gather(res.parts) if scheduler is not None else res.parts
    # the counter keys X's chunks by their index: each is read once in each store
    assert sorted(reads.values()) == [2] * N_CHUNKS, dict(reads)
    for (s, e), (start, xr, yr, zr) in zip(ranges, parts):
        assert start == s
        np.testing.assert_array_equal(xr, X[cut + s : cut + e])
        np.testing.assert_array_equal(yr, y[cut + s : cut + e])
        np.testing.assert_array_equal(zr, Z[cut + s : cut + e])
    if ts is not None:
        keys = sorted(r["key"] if isinstance(r["key"], str) else r["key"][0] for r in ts.data)
        # the range ends 450, 900, 1350, 1800 are 550, 1000, 1450, 1900 in the stores:
        # 1000 is a chunk boundary, the others fall inside chunks 2, 5 and 7, each read
        # once for the three arrays together
        assert keys == sorted([f"cut-{i}" for i in range(len(ranges))]
                              + [f"cut-read-{j}" for j in range(3)]), keys  # fmt: skip


def test_fit_labels_pass_is_the_same_whatever_the_grouping(store, scheduler):
    """The k-means fit's labels pass groups adjacent chunks into parts (one per worker
    thread, or per ``task-bytes``; on the workers: the labels' blocks), each chunk still
    assigned and summed on its own: labels and inertia are bit for bit the same for every
    grouping."""
    from dkernel.data import open_dataset, row_bytes

    X = open_dataset(store).X
    fits = []
    for cap in (N * row_bytes(X), CHUNK * row_bytes(X)):  # all in one part; a chunk a part
        with dask.config.set({"num_workers": 1, "dkernel.data.task-bytes": cap}):
            km = MiniBatchKernelKMeans(2, max_iter=3, batch_size=64, random_state=0).fit(X)
        fits.append((np.asarray(km.labels_), km.inertia_, km.labels_.numblocks[0]))
    (l1, i1, parts1), (l2, i2, parts2) = fits
    np.testing.assert_array_equal(l1, l2)
    assert i1 == i2
    if scheduler is not None:  # the parts stay on the workers as the labels' blocks
        assert parts2 == N_CHUNKS and parts1 < parts2


def _largest_task(graph, prefix: str) -> int:
    """Pickled bytes of the largest task of ``graph`` whose key starts with ``prefix``
    (what the scheduler sends a worker to run it)."""
    import pickle

    sizes = [
        len(pickle.dumps(task))
        for key, task in dict(graph).items()
        if (key[0] if isinstance(key, tuple) else key).startswith(prefix)
    ]
    assert sizes, f"no task named {prefix}"
    return max(sizes)


def test_a_task_carries_its_own_chunks_not_the_whole_store(tmp_path, local_cluster_client):
    """What each task of a pass is sent (the chunks' rows and checksums its reader holds)
    is the same for a store 10x longer: a task that carried the whole reader grew with the
    store (15,258 chunks at 10^9 rows: 0.25 MB in every task, gigabytes a pass)."""
    from dkernel.data import ResidentRows, open_dataset, take_graph

    small, large = (os.path.join(tmp_path, f"{n}.zarr") for n in (200, 2000))
    for path, n in ((small, 200), (large, 2000)):
        make_rings(n, n_rings=2, n_features=4, random_state=0, store=path, chunk_rows=4)
    model = MiniBatchKernelKMeans(2, max_iter=3, batch_size=64, random_state=0)
    model.fit(np.asarray(open_dataset(small).X))

    def sizes(path: str) -> dict[str, int]:
        X = open_dataset(path).X[:200]
        with dask.config.set({"dkernel.data.task-bytes": 1, "num_workers": 2}):
            pred = model.predict(X)  # one task per 4-row chunk
            take = take_graph(X, np.array([3, 150]))
        out = {
            "read": _largest_task(X.__dask_graph__(), X.name),
            "pass": _largest_task(pred.__dask_graph__(), "kkmeans-predict"),
            "take": _largest_task(take.__dask_graph__(), take.name),
        }
        res = ResidentRows.load(
            (X,), [(0, 100), (100, 200)], lambda xr, start: len(xr),
            client=local_cluster_client, name=f"carry-{len(X.reader.starts)}",
        )  # fmt: skip

        assert local_cluster_client.gather(res.parts) == [100, 100]

        def on_scheduler(dask_scheduler, name=res.name):
            from distributed.protocol.pickle import dumps

            return max(
                len(dumps(ts.run_spec))
                for ts in dask_scheduler.tasks.values()
                if str(ts.key).startswith(name)
            )

        out["load"] = local_cluster_client.run_on_scheduler(on_scheduler)
        return out

    few, many = sizes(small), sizes(large)
    assert set(few) == set(many) == {"read", "pass", "take", "load"}
    # 50 against 500 chunks in the store: the same task, but for longer names (a cut of
    # the longer store has a key of its own); a whole reader in each added ~4 KB
    for what in few:
        assert many[what] <= few[what] + 128, (what, few[what], many[what])
