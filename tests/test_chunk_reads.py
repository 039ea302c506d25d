"""Each chunk of a zarr store is read once per pass over the data.

``zarr.storage.LocalStore.get`` is wrapped by a counter of the chunk keys it serves, so
every read the estimators make, through a store path, a ``Dataset`` or the ``zarr.Array``
dask opens, is seen; metadata reads (``zarr.json``) are not counted. The expected number
of reads per chunk is the number of passes each call makes, written next to each case.
"""

from __future__ import annotations

import os
import re
from collections import Counter

import numpy as np
import pytest
import zarr

from dkernel.cluster import KernelKMeans, MiniBatchKernelKMeans
from dkernel.data import _verify, make_rings

N, CHUNK = 2000, 250  # 8 row chunks of X
N_CHUNKS = N // CHUNK


@pytest.fixture
def store(tmp_path):
    path = os.path.join(tmp_path, "rings.zarr")
    make_rings(N, n_rings=2, n_features=4, random_state=0, store=path, chunk_rows=CHUNK)
    return path


@pytest.fixture
def reads(monkeypatch):
    """Counter of chunk reads per chunk key of X (2-D: ``c/<row chunk>/0``; y's are 1-D):
    zarr's ``LocalStore.get`` calls, and the direct reads of plain-layout chunks
    (``dkernel.data._verify._read_plain``, which open the chunk file themselves)."""
    counts: Counter = Counter()
    original = zarr.storage.LocalStore.get

    async def counting_get(self, key, prototype=None, byte_range=None):
        if re.search(r"(^|/)c/\d+/0$", key):
            counts[key] += 1
        return await original(self, key, prototype, byte_range)

    read_plain = _verify._read_plain

    def counting_read_plain(arr, folder, index, start, stop):
        if arr.ndim == 2:
            counts[f"c/{index}/0"] += 1
        return read_plain(arr, folder, index, start, stop)

    monkeypatch.setattr(zarr.storage.LocalStore, "get", counting_get)
    monkeypatch.setattr(_verify, "_read_plain", counting_read_plain)
    return counts


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


def test_minibatch_prefetch_groups(store, reads, monkeypatch):
    # batches in 3 groups of 4 (the sample rides on the first), prefetched, none beyond
    # max_iter: 3 reads of each chunk, then one labels pass
    from dkernel.cluster import _minibatch

    monkeypatch.setattr(_minibatch, "_PREFETCH_BYTES", 4 * 100 * 4 * 4)  # 4 batches
    m = MiniBatchKernelKMeans(2, batch_size=100, tau=50, max_iter=10, random_state=0)
    m.fit(store)
    _assert_reads(reads, 4)
    monkeypatch.setattr(_minibatch, "_PREFETCH_BYTES", 64 << 20)
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

    # one epoch: one pass over X; predict: one pass
    m = BudgetedSVC(budget=50, max_iter=1, random_state=0).fit(store)
    _assert_reads(reads, 1)
    m.predict(store).compute()
    _assert_reads(reads, 1)
