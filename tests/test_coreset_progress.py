"""Coreset builds show a progress bar when asked (verbose), and print nothing by default."""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pytest

from dkernel import DKernelError
from dkernel.coreset import StreamingCoreset, distributed_coreset, svm_coreset
from dkernel.runtime import Progress


def _data(n=1200):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, 2))
    return X, np.where(X[:, 0] + 0.3 * rng.normal(size=n) > 0, 1, -1)


def test_coreset_bars_on_verbose_silent_by_default(capfd, monkeypatch):
    X, y = _data()
    steps = []
    update = Progress.update

    def record(self, n=1, **values):  # the text bar redraws at most every 0.1 s
        steps.append((n, values.get("step")))
        update(self, n, **values)

    monkeypatch.setattr(Progress, "update", record)
    Xd = da.from_array(X, chunks=300)
    with dask.config.set(scheduler="sync"):
        quiet = distributed_coreset(Xd, y, 40, leaf_size=300, random_state=0)
        svm_coreset(X, y, 40, random_state=0)
        StreamingCoreset(m=30, leaf_size=200, random_state=0).partial_fit(X, y)
        assert capfd.readouterr() == ("", "")

        loud = distributed_coreset(Xd, y, 40, leaf_size=300, random_state=0, verbose=1)
        err = capfd.readouterr().err
        assert "distributed_coreset (two-pass)" in err and "4/4" in err and "step=draw" in err
        assert np.array_equal(quiet.X, loud.X)  # the bar changes nothing

        distributed_coreset(
            Xd, y, 40, method="merge-reduce", leaf_size=300, random_state=0, verbose=1
        )
        err = capfd.readouterr().err
        assert "distributed_coreset (merge-reduce)" in err and "5/5" in err  # 4 leaves + tree
        assert steps[-5:] == [(1, "leaves")] * 4 + [(1, "tree")]  # leaves counted as done

    svm_coreset(X, y, 40, random_state=0, verbose=1)
    assert "svm_coreset" in capfd.readouterr().err

    sc = StreamingCoreset(m=30, leaf_size=200, random_state=0, verbose=1)
    sc.partial_fit(X[:150], y[:150])  # no leaf: no bar
    assert capfd.readouterr().err == ""
    sc.partial_fit(X[150:], y[150:])  # 1200 rows: all 6 leaves are built now
    err = capfd.readouterr().err
    assert "StreamingCoreset leaves" in err and "6/6" in err and "rows=1200" in err
    with pytest.raises(DKernelError, match="verbose"):
        svm_coreset(X, y, 40, verbose=-1)
