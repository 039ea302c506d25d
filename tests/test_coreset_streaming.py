"""Streaming coresets: memory structure, agreement with the data, bad input."""

from __future__ import annotations

import numpy as np
import pytest

from dkernel import DKernelError
from dkernel.coreset import StreamingCoreset, coreset_cost


def _stream(rng, n, d=2):
    X = rng.normal(size=(n, d))
    y = np.where(X[:, 0] + 0.5 * rng.normal(size=n) > 0, 1, -1)
    return X, y


def test_buckets_are_logarithmic(rng):
    X, y = _stream(rng, 1600)
    sc = StreamingCoreset(m=40, leaf_size=100, random_state=0)
    for start in range(0, 1600, 170):
        sc.partial_fit(X[start : start + 170], y[start : start + 170])
        n = sc.n_samples_seen_
        leaves = n // 100
        assert sc.n_buckets_ <= np.floor(np.log2(max(leaves, 1))) + 1
        # the held buckets are the binary digits of the leaf count
        occupied = [i for i, b in enumerate(sc.buckets_) if b is not None]
        assert sum(2**i for i in occupied) == leaves
        assert all(len(b) <= 40 for b in sc.buckets_ if b is not None)
        assert sc._buffered == n - 100 * leaves < 100
    assert sc.n_samples_seen_ == 1600
    S = sc.coreset()
    assert S.source_size == 1600
    # held rows: at most m per level plus the buffer, O(leaf_size log n)
    assert len(S) <= 40 * (np.log2(16) + 1)
    assert S.weight.sum() == pytest.approx(1600, rel=0.25)
    w, b = np.array([1.0, 0.2]), 0.1
    assert S.cost(w, b) == pytest.approx(coreset_cost(X, y, w, b), rel=0.3)
    R = sc.coreset(50, random_state=0)
    assert len(R) <= 50 and R.source_size == 1600


def test_same_stream_same_coreset(rng):
    X, y = _stream(rng, 1000)
    out = []
    for batch in (130, 400):  # batch boundaries do not matter, only the rows
        sc = StreamingCoreset(m=30, leaf_size=200, random_state=5)
        for s in range(0, 1000, batch):
            sc.partial_fit(X[s : s + batch], y[s : s + batch])
        out.append(sc.coreset())
    assert np.array_equal(out[0].X, out[1].X) and np.array_equal(out[0].weight, out[1].weight)


def test_one_class_prefix_then_two(rng):
    X, y = _stream(rng, 1200)
    order = np.argsort(-y, kind="stable")  # all +1 first
    sc = StreamingCoreset(m=30, leaf_size=200, random_state=0)
    for s in range(0, 1200, 200):
        sc.partial_fit(X[order][s : s + 200], y[order][s : s + 200])
    S = sc.coreset()
    assert sorted(np.unique(S.y).tolist()) == [-1, 1]
    assert S.weight.sum() == pytest.approx(1200, rel=0.3)


def test_streaming_errors(rng):
    X, y = _stream(rng, 300)
    with pytest.raises(DKernelError, match="leaf_size=10 is smaller than the coreset size m=20"):
        StreamingCoreset(m=20, leaf_size=10).partial_fit(X, y)
    with pytest.raises(DKernelError, match="C must be > 0"):
        StreamingCoreset(m=20, leaf_size=100, C=-1).partial_fit(X, y)
    sc = StreamingCoreset(m=20, leaf_size=100)
    with pytest.raises(DKernelError, match="no rows seen yet"):
        sc.coreset()
    sc.partial_fit(X, y)
    with pytest.raises(DKernelError, match="X has 3 features, the stream has 2"):
        sc.partial_fit(np.ones((4, 3)), np.ones(4))
    with pytest.raises(DKernelError, match="more than two classes"):
        sc.partial_fit(X[:3], np.array([0, 5, 7]))
    Xn = X.copy()
    Xn[4, 0] = np.inf
    with pytest.raises(DKernelError, match="X contains inf at row 4"):
        sc.partial_fit(Xn, y)
