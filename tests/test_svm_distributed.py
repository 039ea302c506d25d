"""BudgetedSVC on the workers: rounds over fixed shards, the merge tree, determinism, and the
sequential algorithm kept bit for bit."""

from __future__ import annotations

import os
import subprocess
import sys

import _bsgd
import dask
import dask.array as da
import numpy as np
import pytest
from sklearn.datasets import load_digits

from dkernel import DKernelError
from dkernel.data import make_checkerboard, write_arrays
from dkernel.svm import BudgetedSVC
from dkernel.svm import _budget as nb
from dkernel.svm.rounds import combine, plan_shards
from dkernel.svm.state import Partial, empty_partial

#: Distributed fits here train in rounds from the first step (no stream prefix).
pytestmark = pytest.mark.usefixtures("rounds_only")


def _board(n, seed=0):
    X, y = make_checkerboard(n, n_cells=2, random_state=seed)
    return X - 1.0, y


def _same(a, b):
    np.testing.assert_array_equal(a.support_vectors_, b.support_vectors_)
    np.testing.assert_array_equal(a.dual_coef_, b.dual_coef_)
    assert a.t_ == b.t_ and a.n_maintenance_ == b.n_maintenance_


_FIT_PRINTING_BITS = """
import numpy as np
from dkernel.data import make_checkerboard
from dkernel.svm import BudgetedSVC

X, y = make_checkerboard(700, n_cells=2, random_state=0)
for maintenance in ("merge", "remove"):
    clf = BudgetedSVC(budget=25, maintenance=maintenance, gamma=2.0, alpha=1e-3, max_iter=1,
                      average=False, refit=False, random_state=3).fit(X - 1.0, y)
    print(clf.n_maintenance_, clf.dual_coef_.tobytes().hex(), clf.support_vectors_.tobytes().hex())
"""


def test_sgd_passes_do_not_depend_on_the_blas_kernel(tmp_path):
    """The same model, to the bit, whichever kernel OpenBLAS picks (the processor's own or
    one named by OPENBLAS_CORETYPE): the loops sum squared norms and dot products in their
    own order (removal breaks ties between equal SVs on those last bits)."""

    def bits(env_update):
        env = {k: v for k, v in os.environ.items() if not k.startswith("OPENBLAS_")}
        env.update(env_update)
        out = subprocess.run(
            [sys.executable, "-c", _FIT_PRINTING_BITS],
            env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert out.returncode == 0, out.stderr
        return out.stdout

    own = bits({})
    for coretype in ("Haswell", "Prescott"):
        assert bits({"OPENBLAS_CORETYPE": coretype}) == own, coretype


def test_plan_shards_balances_rows_whatever_the_chunks():
    p = plan_shards(450, 2)
    assert (p.starts, p.stops) == ([0, 225], [225, 450])
    assert plan_shards(300, 16).stops[-1] == 300 and len(plan_shards(300, 16).starts) == 16
    assert plan_shards(3, 4).stops == [1, 2, 3]  # at most one per row


def test_combine_weights_sums_duplicates_and_keeps_the_budget(rng):
    cfg = _bsgd.fit_config(BudgetedSVC(budget=4, gamma=0.5, alpha=1e-2), 1e-2, 100)
    shared = rng.normal(size=(2, 2))

    def part(extra, a, n):
        SV = np.vstack([shared, extra])
        A = np.full((len(SV), 1), a)
        return Partial(SV, A, np.zeros(1), 2 * A, np.zeros(1), 2.0, 10.0, n, 1, 0.5, 0.25)

    p1 = part(rng.normal(size=(1, 2)), 1.0, 30)
    p2 = part(rng.normal(size=(1, 2)), 3.0, 10)
    out = combine([p1, p2, empty_partial(2, 1)], None, cfg=cfg)
    # weights 3/4 and 1/4; the shared SVs summed into one each: 0.75 * 1 + 0.25 * 3
    assert out.SV.shape == (4, 2) and out.n == 40
    got = {tuple(r): a for r, a in zip(out.SV, out.A[:, 0])}
    for r in shared:
        assert got[tuple(r)] == pytest.approx(1.5)
    assert got[tuple(p1.SV[2])] == pytest.approx(0.75)
    np.testing.assert_allclose(out.Abar, 2 * out.A)
    assert out.W == pytest.approx(2.0) and out.t == pytest.approx(10.0)
    assert out.n_maint == 2
    # over budget: merged down to B, the degradation counted
    small = combine([p1, p2], None, cfg=cfg._replace(budget=2))
    assert small.SV.shape == (2, 2) and small.n_maint == 2 + 2 and small.degr > 0.5


def _fit_kw(**kw):
    return (
        dict(
            budget=40, gamma=2.0, alpha=1e-4, max_iter=2, n_rounds=3, split_every=2, random_state=0
        )
        | kw
    )


def test_same_model_here_on_a_client_and_from_a_store(tmp_path, local_cluster_client):
    X, y = _board(6000)
    Xd, yd = da.from_array(X, chunks=(1000, 2)), da.from_array(y, chunks=1000)
    here = BudgetedSVC(distributed=True, n_shards=4, **_fit_kw()).fit(Xd, yd)
    assert here.distributed_ and here.t_ == 12000
    ds = write_arrays(
        tmp_path / "b.zarr",
        [(X, y)],
        n=6000,
        n_features=2,
        dtype=np.float64,
        chunk_rows=1000,
        has_y=True,
        attrs={},
    )
    client = local_cluster_client
    with client.as_current():
        on_workers = BudgetedSVC(distributed=True, n_shards=4, **_fit_kw()).fit(Xd, yd)
        from_store = BudgetedSVC(distributed=True, n_shards=4, **_fit_kw()).fit(str(ds.path))
        D = on_workers.decision_function(ds.path)  # blockwise on the workers, lazy
        assert D.npartitions == 2  # adjacent chunks share a task: one per worker thread
        np.testing.assert_allclose(D.compute(), here.decision_function(X), rtol=1e-12)
    assert on_workers.distributed_
    _same(here, on_workers)
    _same(here, from_store)
    # 2 or 4 shards are different models
    other = BudgetedSVC(distributed=True, n_shards=2, **_fit_kw()).fit(Xd, yd)
    assert not np.array_equal(other.dual_coef_, here.dual_coef_)


def test_auto_trains_on_the_workers_from_enough_rows_and_reads_none_here(local_cluster_client):
    X, y = _board(3000)
    Xd, yd = da.from_array(X, chunks=(1000, 2)), da.from_array(y, chunks=1000)
    with local_cluster_client.as_current():
        small = BudgetedSVC(n_shards=3, **_fit_kw()).fit(Xd, yd)  # 3000 < 2^24 rows
        assert not small.distributed_
        assert not BudgetedSVC(**_fit_kw()).fit(X, y).distributed_  # NumPy input
        with dask.config.set({"dkernel.svm.auto-min-rows": 3000}):
            clf = BudgetedSVC(n_shards=3, **_fit_kw()).fit(Xd, yd)
    assert clf.distributed_ and clf.score(X, y) > 0.85
    # the rows were read into the shards on the workers; the client streamed none
    assert "shards" in clf.phase_stats_ and "stream" not in clf.phase_stats_
    assert "stream" in small.phase_stats_ and "shards" not in small.phase_stats_


def test_distributed_accuracy_close_to_sequential_and_partial_fit_continues(tmp_path):
    X, y = _board(16000)
    Xt, yt = _board(4000, seed=1)
    kw = dict(budget=50, gamma=2.0, max_iter=1, random_state=0)
    seq = BudgetedSVC(distributed=False, **kw).fit(X, y)
    dist = BudgetedSVC(distributed=True, n_shards=8, n_rounds=4, **kw).fit(
        da.from_array(X, chunks=(2000, 2)), da.from_array(y, chunks=2000)
    )
    assert dist.n_maintenance_ > 0 and dist.support_vectors_.shape[0] <= 50
    assert dist.score(Xt, yt) >= seq.score(Xt, yt) - 0.02
    assert dist.score(Xt, yt) > 0.9
    # the merged state keeps learning, and survives a save/load round trip
    dist.save(tmp_path / "m.npz")
    back = BudgetedSVC.load(tmp_path / "m.npz")
    a = dist.partial_fit(Xt[:500], yt[:500]).decision_function(Xt)
    b = back.partial_fit(Xt[:500], yt[:500]).decision_function(Xt)
    np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)


def test_averaging_beats_the_last_iterate_on_digits():
    """The defaults (5 epochs, last-epoch average) against the paper's one pass; and the
    average against the last iterate of the same 5 epochs (seeds 0-2)."""
    X, y = load_digits(return_X_y=True)
    sd = X.std(axis=0)
    X = (X - X.mean(axis=0)) / np.where(sd > 0, sd, 1.0)

    def acc(**kw):
        return np.mean(
            [
                BudgetedSVC(budget=50, gamma=1 / 64, random_state=s, **kw)
                .fit(X[:1200], y[:1200])
                .score(X[1200:], y[1200:])
                for s in range(3)
            ]
        )

    default = acc()
    assert default >= acc(max_iter=1, average=False, alpha=1e-3, refit=False) + 0.01
    assert default >= acc(average=False) - 0.005
    assert _bsgd.fit_config(BudgetedSVC(gamma=1.0), 1e-3, 10).avg_mode == nb.AVG_LINEAR


def test_distributed_weights_and_bad_values_are_checked_on_the_shards():
    X, y = _board(2000)
    w = np.zeros(2000)
    w[::2] = 1.0
    Xd, yd = da.from_array(X, chunks=(500, 2)), da.from_array(y, chunks=500)
    clf = BudgetedSVC(distributed=True, **_fit_kw(max_iter=1)).fit(Xd, yd, sample_weight=w)
    assert {tuple(r) for r in clf.support_vectors_} - {tuple(r) for r in X} != set()  # merged
    # zero-weight rows never enter: with a budget above the violations no merge happens
    big = BudgetedSVC(distributed=True, **_fit_kw(max_iter=1, budget=2000, alpha=1e-2))
    big.fit(Xd, yd, sample_weight=w)
    assert {tuple(r) for r in big.support_vectors_} <= {tuple(r) for r in X[::2]}
    Xbad = X.copy()
    Xbad[1234, 1] = np.nan
    with pytest.raises(DKernelError, match="NaN at row 1234, column 1"):
        BudgetedSVC(distributed=True, **_fit_kw()).fit(da.from_array(Xbad, chunks=(500, 2)), yd)


# ------------------------------------------------------------------ the stream prefix
def test_a_small_distributed_fit_is_the_sequential_fit():
    """Below ``dkernel.svm.prefix-steps`` SGD steps the distributed fit runs the sequential
    stream (one task on one worker): the same support and coefficients."""
    import dask

    X, y = _board(3000)
    kw = dict(budget=40, gamma=2.0, max_iter=2, refit=False, random_state=0)
    seq = BudgetedSVC(distributed=False, **kw).fit(X, y)
    with dask.config.set({"dkernel.svm.prefix-steps": 6000}):
        dist = BudgetedSVC(distributed=True, **kw).fit(X, y)
    np.testing.assert_array_equal(dist.support_vectors_, seq.support_vectors_)
    np.testing.assert_allclose(dist.dual_coef_, seq.dual_coef_, rtol=1e-12, atol=1e-15)
    assert dist.distributed_ and dist.n_maintenance_ == seq.n_maintenance_


def test_prefix_then_rounds_is_one_model_with_or_without_a_client(local_cluster_client):
    """Two stream epochs, then one epoch of rounds: the same model on a cluster as here, and
    another model than the rounds alone or the stream alone."""
    import dask

    X, y = _board(4000)
    Xd, yd = da.from_array(X, chunks=(1000, 2)), da.from_array(y, chunks=1000)
    kw = _fit_kw(max_iter=3, refit=False)
    with dask.config.set({"dkernel.svm.prefix-steps": 8000}):
        here = BudgetedSVC(distributed=True, n_shards=4, **kw).fit(Xd, yd)
        with local_cluster_client.as_current():
            there = BudgetedSVC(distributed=True, n_shards=4, **kw).fit(Xd, yd)
        assert "prefix" in there.phase_stats_ and "rounds" in there.phase_stats_
    _same(here, there)
    rounds = BudgetedSVC(distributed=True, n_shards=4, **kw).fit(Xd, yd)  # prefix-steps 0
    stream = BudgetedSVC(distributed=False, **kw).fit(X, y)
    for other in (rounds, stream):
        assert not np.array_equal(other.support_vectors_, here.support_vectors_)
    assert here.score(X, y) > 0.85
