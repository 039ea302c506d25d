"""Atomic, self-cleaning writes: stale debris removed, SIGTERM cleans up, a crash mid-swap
recovered by the next reader, and write_array's own atomic array swap."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time

import dask.array as da
import numpy as np
import pytest

from dkernel import DKernelError
from dkernel.data import HOST_TAG, MANIFEST_KEY, ingest, open_dataset, write_array


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _debris(target, kind: str, pid: int | None, rand: str = "0123abcd") -> str:
    parent, base = os.path.split(os.fspath(target))
    mid = f"{HOST_TAG}-{pid}-" if pid is not None else ""
    return os.path.join(parent, f".{base}.{kind}-{mid}{rand}")


def _hidden(folder) -> list[str]:
    return sorted(n for n in os.listdir(folder) if n.startswith("."))


def test_stale_temp_folders_are_removed_by_the_next_write(tmp_path):
    target = tmp_path / "s.zarr"
    dead = _debris(target, "tmp", _dead_pid())
    live = _debris(target, "tmp", os.getpid(), "feedbeef")
    old_legacy = _debris(target, "tmp", None, "aaaabbbb")  # name of earlier versions
    new_legacy = _debris(target, "tmp", None, "ccccdddd")
    for d in (dead, live, old_legacy, new_legacy):
        os.makedirs(d)
    two_days_ago = time.time() - 2 * 86400
    os.utime(old_legacy, (two_days_ago, two_days_ago))
    ingest(np.ones((4, 2)), target)
    assert _hidden(tmp_path) == sorted(os.path.basename(p) for p in (live, new_legacy))


def test_sigterm_during_ingest_cleans_up(tmp_path):
    target = str(tmp_path / "s.zarr")
    script = textwrap.dedent(
        """
        import sys, time
        import numpy as np
        from dkernel.data import write_arrays

        def blocks():
            yield np.zeros((10, 2)), None
            print("ready", flush=True)
            time.sleep(60)
            yield np.zeros((10, 2)), None

        try:
            write_arrays(sys.argv[1], blocks(), n=20, n_features=2, dtype="f4",
                         chunk_rows=10, has_y=False, attrs={})
        except KeyboardInterrupt:
            sys.exit(130)
        """
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", script, target], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout.readline().strip() == "ready"
        assert _hidden(tmp_path)  # the temporary store exists while writing
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 130
    finally:
        proc.kill()
        proc.stdout.close()
    assert os.listdir(tmp_path) == []


_CRASH = textwrap.dedent(
    """
    import os, signal, sys
    import numpy as np
    from dkernel.data import ingest

    target, kill_at = os.path.abspath(sys.argv[1]), int(sys.argv[2])
    real, seen = os.rename, []

    def rename(src, dst):  # die before the kill_at-th rename beside the target
        if os.path.dirname(os.path.abspath(dst)) == os.path.dirname(target):
            seen.append(dst)
            if len(seen) == kill_at:
                os.kill(os.getpid(), signal.SIGKILL)
        real(src, dst)

    os.rename = rename
    ingest(np.ones((6, 2)), target, chunk_rows=3, overwrite=True)
    """
)


@pytest.mark.parametrize(
    "kill_at, expect",
    [
        (1, 0.0),  # before tmp -> new: the write never committed, the old store stays
        (2, 1.0),  # new complete, old not yet moved: rolled forward
        (3, 1.0),  # old moved aside, new not yet in place (no store): rolled forward
    ],
)
def test_overwrite_killed_mid_swap_is_recovered_by_open(tmp_path, kill_at, expect):
    target = str(tmp_path / "s.zarr")
    ingest(np.zeros((6, 2)), target, chunk_rows=3)
    res = subprocess.run([sys.executable, "-c", _CRASH, target, str(kill_at)], timeout=120)
    assert res.returncode == -signal.SIGKILL
    assert _hidden(tmp_path)  # the crash left debris
    ds = open_dataset(target)
    np.testing.assert_array_equal(ds.X.compute(), np.full((6, 2), expect))
    assert os.listdir(tmp_path) == ["s.zarr"]


def test_lone_replaced_store_is_rolled_back(tmp_path):
    """Earlier versions swapped with two renames; a crash between them left only .old-*."""
    target = tmp_path / "s.zarr"
    ingest(np.full((4, 2), 7.0), target)
    os.rename(target, _debris(target, "old", None))
    ds = open_dataset(target)
    assert (ds.X.compute() == 7.0).all() and os.listdir(tmp_path) == ["s.zarr"]


def test_debris_of_a_running_writer_is_left_alone(tmp_path):
    target = tmp_path / "s.zarr"
    ingest(np.ones((4, 2)), target)
    os.rename(target, _debris(target, "old", os.getpid()))
    with pytest.raises(DKernelError, match="no dataset store"):
        open_dataset(target)
    assert len(_hidden(tmp_path)) == 1


# ----------------------------------------------------------------------------- write_array


@pytest.fixture
def store(tmp_path, rng):
    return ingest(rng.standard_normal((30, 2)), tmp_path / "s.zarr", chunk_rows=8)


def test_write_array_numpy_and_dask(store, scheduler):
    got = write_array(store, "labels", np.arange(30) % 4, attrs={"algorithm": "test"})
    np.testing.assert_array_equal(got.compute(), np.arange(30) % 4)
    arr = store.array("labels")
    assert arr.chunks == (8,) and arr.attrs["algorithm"] == "test"
    assert arr.attrs[MANIFEST_KEY]["n_chunks"] == 4
    assert open_dataset(store.path).attrs["arrays"]["labels"]["dtype"] == "int64"
    scores = da.from_array(np.linspace(0, 1, 60).reshape(30, 2), chunks=(7, 2))
    got = write_array(store.path, "scores", scores, chunk_rows=10)
    assert got.chunks == ((10, 10, 10), (2,))
    np.testing.assert_array_equal(got.compute(), scores.compute())
    assert _hidden(store.path) == []


def test_write_array_refusals(store):
    write_array(store, "labels", np.zeros(30, dtype=np.int64))
    with pytest.raises(DKernelError, match="already has an array 'labels'; pass overwrite"):
        write_array(store, "labels", np.ones(30))
    for name in ("X", "y", "zarr.json", ".hidden", "a/b", ""):
        with pytest.raises(DKernelError, match="is not allowed"):
            write_array(store, name, np.ones(30))
    with pytest.raises(DKernelError, match="must be numeric"):
        write_array(store, "names", np.array(["a"] * 30))
    with pytest.raises(DKernelError, match="at least one row"):
        write_array(store, "empty", np.ones(0))
    with pytest.raises(DKernelError, match="no dataset store"):
        write_array(store.path + "-none", "labels", np.ones(3))


def test_failed_swap_keeps_the_old_array(store, monkeypatch):
    write_array(store, "labels", np.zeros(30, dtype=np.int64))

    def boom(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(os, "rename", boom)
    with pytest.raises(OSError, match="disk full"):
        write_array(store, "labels", np.ones(30, dtype=np.int64), overwrite=True)
    monkeypatch.undo()
    np.testing.assert_array_equal(open_dataset(store.path).read("labels").compute(), 0)
    assert _hidden(store.path) == []


def test_failed_dask_write_removes_the_partial_array(store):
    def boom(b, block_info=None):
        if block_info[0]["chunk-location"][0] == 2:
            raise RuntimeError("disk on fire")
        return b

    pred = da.zeros(30, chunks=8, dtype=np.int64).map_blocks(boom, dtype=np.int64)
    with pytest.raises(RuntimeError, match="disk on fire"):
        write_array(store, "predictions", pred)
    assert not [f for f in os.listdir(store.path) if "predictions" in f]
    assert open_dataset(store.path).n_samples == 30


def test_interrupted_array_swap_is_completed_by_open(store):
    write_array(store, "labels", np.full(30, 5))
    final = os.path.join(store.path, "labels")
    shutil.move(final, _debris(final, "new", _dead_pid()))
    got = open_dataset(store.path).read("labels")
    assert (got.compute() == 5).all() and _hidden(store.path) == []


def test_sigterm_handler_is_restored(tmp_path):
    before = signal.getsignal(signal.SIGTERM)
    ingest(np.ones((4, 2)), tmp_path / "s.zarr")
    write_array(open_dataset(tmp_path / "s.zarr"), "labels", np.ones(4))
    with pytest.raises(DKernelError):
        ingest(np.ones((4, 2)), tmp_path / "s.zarr")  # exists
    assert signal.getsignal(signal.SIGTERM) is before


def test_overwrite_replaces_only_stores(tmp_path):
    """``overwrite`` must never delete a folder that is not a dataset store."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "thesis.tex").write_text("years of work", encoding="utf-8")
    (tmp_path / "notes.txt").write_text("x", encoding="utf-8")
    for target in (docs, tmp_path / "notes.txt"):
        with pytest.raises(DKernelError, match="refusing to replace .* not a dkernel dataset"):
            ingest(np.ones((4, 2)), target, overwrite=True)
    assert (docs / "thesis.tex").read_text(encoding="utf-8") == "years of work"
    (tmp_path / "empty").mkdir()
    assert ingest(np.ones((4, 2)), tmp_path / "empty", overwrite=True).n_samples == 4
    assert sorted(os.listdir(tmp_path)) == ["docs", "empty", "notes.txt"]


def test_a_write_under_way_at_the_failure_ends_before_the_clean_up(store, audit):
    """A block's write is under way when another block raises: the failed write_array
    waits for that write to end before it removes its temporary folder, so the late chunk
    does not bring the folder back. The write of chunk 0 is held (1 s) as it makes its
    chunk's folder, seen from outside through Python's audit events."""
    import threading
    import time

    import dask

    started, done = threading.Event(), threading.Event()

    def hold_chunk_0(event, args):
        path = os.fsdecode(args[0]) if event in ("os.mkdir", "os.rename") else ""
        if "predictions" not in path:
            return
        if event == "os.mkdir" and path.endswith(f"{os.sep}c") and not started.is_set():
            started.set()
            time.sleep(1.0)  # the failure and its clean-up happen meanwhile
        elif event == "os.rename" and os.fsdecode(args[1]).endswith(f"{os.sep}c{os.sep}0"):
            done.set()  # chunk 0's file about to be put in place

    def boom(b, block_info=None):
        if block_info[0]["chunk-location"][0] == 2:
            assert started.wait(10)
            raise RuntimeError("disk on fire")
        if block_info[0]["chunk-location"][0] != 0:
            started.wait(10)  # chunk 0 is the one held
        return b

    audit(hold_chunk_0)
    pred = da.zeros(30, chunks=8, dtype=np.int64).map_blocks(boom, dtype=np.int64)
    with dask.config.set(scheduler="threads", num_workers=4):
        with pytest.raises(RuntimeError, match="disk on fire"):
            write_array(store, "predictions", pred)
    assert done.wait(10)
    time.sleep(0.2)  # the rename itself
    assert not [f for f in os.listdir(store.path) if "predictions" in f]
    assert open_dataset(store.path).n_samples == 30
