"""For store input, no array of n rows comes to the client: fit, predict, score, transform.

The client here is this test process and the workers are processes of their own, so what
the client receives is what arrives on this process's TCP connections: the kernel's count
per socket (``tcpi_bytes_received`` of ``TCP_INFO``), summed over every TCP socket the
process holds, compared with the size of one n-row array. Each call is warmed up first
(imports, numba's cache, connections), so the count is the call's own traffic: the
scheduler's messages and small results.
"""

from __future__ import annotations

import os
import socket
import struct
import sys

import dask.array as da
import numpy as np
import pytest

from dkernel.cluster import MiniBatchKernelKMeans
from dkernel.coreset import distributed_coreset
from dkernel.data import make_checkerboard
from dkernel.svm import BudgetedSVC

N = 1_000_000
#: Bytes the client may receive per call: a quarter of one n-row int64 array.
LIMIT = N * 8 // 4

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="counts bytes with Linux's TCP_INFO"
)


def _tcp_received() -> dict[str, int]:
    """Bytes received so far on each TCP socket of this process, by the socket's inode."""
    out = {}
    for name in os.listdir("/proc/self/fd"):
        try:
            inode = os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            continue
        if not inode.startswith("socket:"):
            continue
        try:
            sock = socket.socket(fileno=os.dup(int(name)))
        except OSError:
            continue
        try:
            if sock.family in (socket.AF_INET, socket.AF_INET6) and sock.type == socket.SOCK_STREAM:
                info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 256)
                if len(info) >= 136:  # struct tcp_info: tcpi_bytes_received at offset 128
                    out[inode] = struct.unpack_from("Q", info, 128)[0]
        finally:
            sock.close()
    return out


def _read_bytes() -> dict[str, int]:
    return _tcp_received()


@pytest.fixture(scope="module")
def cluster_client(tmp_path_factory):
    from distributed import Client, LocalCluster

    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        Client(cluster) as client,
    ):
        yield client


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("rows") / "board.zarr")
    make_checkerboard(N, n_cells=2, random_state=0, store=path, chunk_rows=1 << 17)
    return path


def _received(fn) -> tuple[int, object]:
    before = _read_bytes()
    out = fn()
    after = _read_bytes()
    return sum(v - before.get(k, 0) for k, v in after.items()), out


def test_fits_and_passes_bring_no_rows_here(cluster_client, store):
    from dkernel.data import open_dataset

    ds = open_dataset(store)
    X, y = ds.X, ds.y
    svm = dict(budget=20, gamma=2.0, max_iter=1, distributed=True, random_state=0)
    km = dict(n_clusters=2, gamma=1.0, max_iter=20, random_state=0)
    calls = {
        "svm.fit": lambda: BudgetedSVC(**svm).fit(store),
        "kmeans.fit": lambda: MiniBatchKernelKMeans(**km).fit(X),
        "coreset": lambda: distributed_coreset(X, y, 500, random_state=0),
    }
    for fn in calls.values():  # warm-up: imports and compilation, here and on the workers
        fn()
    got = {}
    for name, fn in calls.items():
        got[name] = _received(fn)
    clf, kmeans = got["svm.fit"][1], got["kmeans.fit"][1]
    passes = {
        "svm.score": lambda: clf.score(store),
        "svm.predict": lambda: da.unique(clf.predict(X)).compute(),
        "svm.decision_function": lambda: clf.decision_function(X).max().compute(),
        "kmeans.labels_": lambda: np.bincount(da.bincount(kmeans.labels_).compute()),
        "kmeans.predict": lambda: da.bincount(kmeans.predict(X)).compute(),
        "kmeans.transform": lambda: kmeans.transform(X).min(axis=0).compute(),
        "kmeans.score": lambda: kmeans.score(X),
    }
    for fn in passes.values():
        fn()
    for name, fn in passes.items():
        got[name] = _received(fn)
    received = {name: n for name, (n, _) in got.items()}
    print("bytes received by the client per call:", received)
    assert max(received.values()) < LIMIT, received
    # the results are real: a fitted model, labels on the cluster, an accuracy
    assert isinstance(kmeans.labels_, da.Array) and kmeans.labels_.shape == (N,)
    assert got["svm.score"][1] > 0.95 and len(got["coreset"][1]) <= 500
    assert int(da.bincount(kmeans.labels_).sum().compute()) == N


def test_numpy_input_keeps_numpy_output():
    X, y = make_checkerboard(3000, n_cells=2, random_state=0)
    km = MiniBatchKernelKMeans(2, gamma=1.0, max_iter=5, random_state=0).fit(X)
    assert isinstance(km.labels_, np.ndarray) and isinstance(km.predict(X), np.ndarray)
    clf = BudgetedSVC(budget=20, gamma=2.0, max_iter=1, random_state=0).fit(X, y)
    assert isinstance(clf.predict(X), np.ndarray)


def test_the_count_sees_rows_that_do_come_here(cluster_client, store):
    """The measure is able to fail: computing the labels here reads about n * 8 bytes."""
    from dkernel.data import open_dataset

    X = open_dataset(store).X
    km = MiniBatchKernelKMeans(2, gamma=1.0, max_iter=5, random_state=0).fit(X)
    np.asarray(km.labels_)  # warm-up of the gather itself
    n, labels = _received(lambda: np.asarray(km.labels_))
    assert labels.shape == (N,) and n > N * 8 * 0.9, n


def test_fits_allocate_no_rows_here(cluster_client, store):
    """Nor are n-row arrays made here: the client's peak of traced allocations (NumPy's
    included) during each fit stays under 3/4 of one n-row float64 array (unit weights for
    a store were once an ``np.ones(n)`` made here)."""
    import tracemalloc

    from dkernel.data import open_dataset

    ds = open_dataset(store)
    svm = dict(budget=20, gamma=2.0, max_iter=1, distributed=True, random_state=0)
    calls = {
        "svm.fit": lambda: BudgetedSVC(**svm).fit(store),
        "kmeans.fit": lambda: MiniBatchKernelKMeans(2, gamma=1.0, max_iter=20, random_state=0).fit(
            ds.X
        ),
        "coreset": lambda: distributed_coreset(ds.X, ds.y, 500, random_state=0),
    }
    peaks = {}
    for name, fn in calls.items():
        fn()  # warm-up
        tracemalloc.start()
        try:
            fn()
            peaks[name] = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    print("client peak traced bytes per call:", peaks)
    assert max(peaks.values()) < N * 6, peaks
