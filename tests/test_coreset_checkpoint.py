"""StreamingCoreset checkpoints: a run killed half-way resumes to the uninterrupted coreset."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from dkernel import DKernelError
from dkernel.coreset import StreamingCoreset

N, BLOCK, LEAF, M = 1300, 130, 100, 30
PARAMS = {"m": M, "leaf_size": LEAF, "random_state": 3}


def _data():
    rng = np.random.default_rng(11)
    X = rng.normal(size=(N, 3))
    y = np.where(X[:, 0] + 0.5 * rng.normal(size=N) > 0, 1, -1)  # int labels
    return X, y


def _same(a, b):
    assert np.array_equal(a.X, b.X) and np.array_equal(a.y, b.y)
    assert np.array_equal(a.weight, b.weight) and np.array_equal(a.sensitivity, b.sensitivity)
    assert a.total_sensitivity == b.total_sensitivity and a.source_size == b.source_size


def _feed(sc, X, y, start=0):
    for s in range(start, N, BLOCK):
        sc.partial_fit(X[s : s + BLOCK], y[s : s + BLOCK])
    return sc


_KILLED = textwrap.dedent(
    """
    import os, signal, sys
    import numpy as np
    from dkernel.coreset import StreamingCoreset
    rng = np.random.default_rng(11)
    X = rng.normal(size=(1300, 3))
    y = np.where(X[:, 0] + 0.5 * rng.normal(size=1300) > 0, 1, -1)
    sc = StreamingCoreset(m=30, leaf_size=100, random_state=3,
                          checkpoint=sys.argv[1], checkpoint_every=2)
    for i, s in enumerate(range(0, 1300, 130)):
        if i == 5:  # half-way: 650 rows, 6 leaves built, the last write after leaf 5 (row 520)
            os.kill(os.getpid(), signal.SIGKILL)
        sc.partial_fit(X[s : s + 130], y[s : s + 130])
    """
)


def test_sigkilled_stream_resumes_to_the_same_coreset(tmp_path):
    X, y = _data()
    path = tmp_path / "stream.ckpt.npz"
    proc = subprocess.run(
        [sys.executable, "-c", _KILLED, str(path)], capture_output=True, timeout=60
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()[-2000:]
    assert path.exists()
    assert not [f for f in os.listdir(tmp_path) if f != path.name]  # no temp debris
    sc = StreamingCoreset(**PARAMS, checkpoint=path, checkpoint_every=2)
    # leaves 1-2 and 3-5 were written (every 2 leaves); leaf 6 was lost with the process
    assert sc.n_seen_ == 520
    assert sc.n_buckets_ == 2 and sc._buffered == 20
    start = sc.n_seen_
    sc.partial_fit(X[start : start + 110], y[start : start + 110])  # back on block bounds
    resumed = _feed(sc, X, y, start=start + 110).coreset()
    full = _feed(StreamingCoreset(**PARAMS), X, y).coreset()
    _same(resumed, full)
    assert resumed.y.dtype == y.dtype and sc.classes_.dtype == y.dtype
    _same(
        sc.coreset(40, random_state=0),
        _feed(StreamingCoreset(**PARAMS), X, y).coreset(40, random_state=0),
    )


def test_checkpoint_written_each_leaf_and_mismatch_refused(tmp_path):
    X, y = _data()
    path = tmp_path / "c.npz"
    sc = StreamingCoreset(**PARAMS, checkpoint=path)
    sc.partial_fit(X[:60], y[:60])
    assert not path.exists()  # no leaf yet
    sc.partial_fit(X[60:250], y[60:250])
    assert path.exists()
    again = StreamingCoreset(**PARAMS, checkpoint=path)
    assert again.n_seen_ == 250 and again.n_buckets_ == 1
    _same(again.coreset(), sc.coreset())
    with pytest.raises(DKernelError, match="other parameters"):
        StreamingCoreset(m=M, leaf_size=LEAF, random_state=4, checkpoint=path).partial_fit(
            X[:10], y[:10]
        )
    with pytest.raises(DKernelError, match="other parameters"):
        _ = StreamingCoreset(m=M + 1, leaf_size=LEAF, random_state=3, checkpoint=path).n_seen_
    with pytest.raises(DKernelError, match="checkpoint_every"):
        StreamingCoreset(**PARAMS, checkpoint=path, checkpoint_every=0).partial_fit(X, y)
    # no checkpoint: n_seen_ counts rows, 0 before any
    plain = StreamingCoreset(**PARAMS)
    assert plain.n_seen_ == 0
    assert plain.partial_fit(X[:7], y[:7]).n_seen_ == 7


def test_one_class_stream_is_refused_and_int_labels_kept():
    X, _ = _data()
    sc = StreamingCoreset(m=M, leaf_size=LEAF, random_state=0).partial_fit(
        X[:250], np.ones(250, int)
    )
    assert sc.classes_.dtype.kind == "i"
    with pytest.raises(DKernelError, match=r"one class only \(1\)"):
        sc.coreset()
    with pytest.raises(DKernelError, match="one class only"):
        sc.coreset(20)
    # the other class announced up front: a (one-sided) coreset, labels keep their dtype
    sc2 = StreamingCoreset(m=M, leaf_size=LEAF, random_state=0)
    sc2.partial_fit(X[:250], np.ones(250, int), classes=[-1, 1])
    S = sc2.coreset()
    assert S.y.dtype.kind == "i" and set(S.y.tolist()) == {1}
