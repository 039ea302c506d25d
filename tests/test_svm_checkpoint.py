"""BudgetedSVC: checkpoint and resume (killed fits), progress bars, compile notes."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from dkernel import DKernelError
from dkernel.data import load_checkpoint, make_checkerboard
from dkernel.runtime import forget_compiled
from dkernel.svm import BudgetedSVC
from dkernel.svm._io import Checkpoint

#: Distributed fits here train in rounds from the first step (no stream prefix).
pytestmark = pytest.mark.usefixtures("rounds_only")

#: 3000 rows in blocks of 250: 12 blocks per epoch, 24 in a fit; 4 shards x 3 rounds x 2.
PARAMS = dict(budget=30, gamma=2.0, alpha=1e-3, max_iter=2, random_state=0, n_shards=4, n_rounds=3)
BLOCK_ROWS = 250

CHILD = """
import os, signal, sys
from dkernel.data import make_checkerboard
from dkernel.svm import BudgetedSVC, _io
import dask

dask.config.set({{"dkernel.svm.prefix-steps": 0}})  # the rounds from the first step
dask.config.set({{"dkernel.svm.block-rows": {block_rows}}})
X, y = make_checkerboard(3000, n_cells=2, random_state=0)
save = _io.Checkpoint.save
count = [0]

def save_then_die(self, *args, **kwargs):
    save(self, *args, **kwargs)
    count[0] += 1
    if count[0] == {kill_after}:
        os.kill(os.getpid(), signal.SIGKILL)

_io.Checkpoint.save = save_then_die
BudgetedSVC(**{params}, distributed={distributed}, checkpoint=sys.argv[1]).fit(X, y)
"""


@pytest.fixture
def board(dkernel_config):
    dkernel_config({"svm.block-rows": BLOCK_ROWS})
    return make_checkerboard(3000, n_cells=2, random_state=0)


@pytest.fixture
def count_steps(caplog):
    """``count_steps()``: rows passed through the numba loop so far (sequential epochs, the
    stream prefix and shard rounds alike), as the fit's DEBUG log reports them."""
    caplog.set_level(logging.DEBUG, logger="dkernel.svm")

    def rows() -> int:
        said = [r.getMessage() for r in caplog.records]
        return sum(
            int(m.split(": ")[-1].split()[0]) for m in said if "rows through the SGD loop" in m
        )

    return rows


def _same(a, b):
    np.testing.assert_array_equal(a.support_vectors_, b.support_vectors_)
    np.testing.assert_array_equal(a.dual_coef_, b.dual_coef_)
    np.testing.assert_array_equal(a.intercept_, b.intercept_)
    assert (a.t_, a.n_maintenance_) == (b.t_, b.n_maintenance_)
    assert a.weight_degradation_ == b.weight_degradation_


@pytest.mark.parametrize("distributed", [False, True])
def test_sigkilled_fit_resumes_to_the_uninterrupted_model(
    tmp_path, board, count_steps, distributed
):
    X, y = board
    path = str(tmp_path / "fit.ckpt.npz")
    # sequential: killed after 14 of 24 blocks (in the second epoch); distributed: after 4 of
    # 6 rounds
    kill_after = 4 if distributed else 14
    code = CHILD.format(
        block_rows=BLOCK_ROWS, kill_after=kill_after, params=PARAMS, distributed=distributed
    )
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), path], capture_output=True, timeout=120
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()[-2000:]
    assert os.path.exists(path)
    assert not [f for f in os.listdir(tmp_path) if f.startswith(".")]  # no torn temp file

    resumed = BudgetedSVC(**PARAMS, distributed=distributed, checkpoint=path).fit(X, y)
    resumed_rows = count_steps()
    assert not os.path.exists(path)  # a completed fit removes its checkpoint
    full = BudgetedSVC(**PARAMS, distributed=distributed).fit(X, y)
    full_rows = count_steps() - resumed_rows
    _same(resumed, full)
    assert full_rows == 6000
    # only the rest of the work was done again
    expected = 6000 - (4000 if distributed else 14 * BLOCK_ROWS)
    assert resumed_rows == expected


def _interrupted(path, X, y, *, after, **kw):
    """A fit stopped (by an exception) right after its ``after``-th checkpoint."""
    real = Checkpoint.save
    count = [0]

    def save(self, *args, **kwargs):
        real(self, *args, **kwargs)
        count[0] += 1
        if count[0] == after:
            raise KeyboardInterrupt

    Checkpoint.save = save
    try:
        with pytest.raises(KeyboardInterrupt):
            BudgetedSVC(**{**PARAMS, **kw}, checkpoint=path).fit(X, y)
    finally:
        Checkpoint.save = real


class _FixedSeed(np.random.RandomState):
    def __init__(self, value):
        super().__init__(0)
        self.value = value

    def randint(self, *args, **kwargs):
        return self.value


def test_checkpoint_every_and_random_seed_reused(tmp_path, board):
    X, y = board
    path = str(tmp_path / "c.npz")
    _interrupted(path, X, y, after=2, checkpoint_every=5, random_state=None, distributed=False)
    est = BudgetedSVC(**{**PARAMS, "random_state": None}, distributed=False, checkpoint=path)
    saved = Checkpoint.of(est, n=3000, d=2, classes=np.unique(y), distributed=False)
    state = saved.load()
    assert state["position"] == [0, 10]  # every 5 blocks
    # random_state=None: the resumed fit continues with the seed the checkpoint saved
    resumed = est.fit(X, y)
    again = BudgetedSVC(**{**PARAMS, "random_state": None}, distributed=False)
    again.set_params(random_state=_FixedSeed(state["seed"]))  # the killed fit's seed
    _same(resumed, again.fit(X, y))


def test_checkpoint_of_other_parameters_is_refused(tmp_path, board):
    X, y = board
    path = str(tmp_path / "c.npz")
    _interrupted(path, X, y, after=3, distributed=False)
    with pytest.raises(DKernelError, match="other parameters"):
        BudgetedSVC(**{**PARAMS, "budget": 31}, distributed=False, checkpoint=path).fit(X, y)
    with pytest.raises(DKernelError, match="other parameters"):  # other data shape
        BudgetedSVC(**PARAMS, distributed=False, checkpoint=path).fit(X[:2000], y[:2000])
    with pytest.raises(DKernelError, match="other parameters"):  # other mode
        BudgetedSVC(**PARAMS, distributed=True, checkpoint=path).fit(X, y)
    assert load_checkpoint(path, params={}, on_mismatch="ignore") is None
    # verbose and the interval do not change the model: accepted
    BudgetedSVC(**PARAMS, distributed=False, checkpoint=path, checkpoint_every=3).fit(X, y)


def test_bad_checkpoint_parameters(tmp_path, board):
    X, y = board
    with pytest.raises(DKernelError, match="checkpoint_every"):
        BudgetedSVC(checkpoint=str(tmp_path / "c.npz"), checkpoint_every=0).fit(X, y)
    with pytest.raises(DKernelError, match="checkpoint must be a path"):
        BudgetedSVC(checkpoint=3).fit(X, y)
    with pytest.raises(DKernelError, match="does not exist"):
        BudgetedSVC(**PARAMS, checkpoint=str(tmp_path / "no" / "c.npz")).fit(X, y)


@pytest.mark.parametrize("distributed", [False, True])
def test_verbose_shows_a_progress_bar_and_compile_note(board, capfd, distributed):
    X, y = board
    forget_compiled()
    BudgetedSVC(**PARAMS, distributed=distributed, verbose=1).fit(X, y)
    err = capfd.readouterr().err
    if distributed:
        assert "BudgetedSVC rounds" in err and "6/6" in err
    else:
        assert "BudgetedSVC" in err and "6.00k/6.00k" in err and "margin_viol=" in err
    assert "compiling numba kernels" in err and "compiled bsgd in" in err
    BudgetedSVC(**PARAMS, distributed=distributed).fit(X, y)
    assert capfd.readouterr().err == ""  # quiet by default


def test_partial_fit_progress(board, capfd):
    X, y = board
    clf = BudgetedSVC(budget=20, gamma=2.0, verbose=1)
    clf.partial_fit(X[:1000], y[:1000], classes=[-1, 1])
    err = capfd.readouterr().err
    assert "BudgetedSVC partial_fit" in err and "1.00k/1.00k" in err and "SVs=20" in err


def test_distributed_resume_on_a_client(tmp_path, board, local_cluster_client):
    """Rounds on the workers (dask input, shards in worker memory): stopped after the
    third round's checkpoint, resumed to the uninterrupted model."""
    import dask.array as da

    X, y = board
    Xd, yd = da.from_array(X, chunks=500), da.from_array(y, chunks=500)
    kw = dict(distributed=True, standardize=True)
    path = str(tmp_path / "c.npz")
    with local_cluster_client.as_current():
        _interrupted(path, Xd, yd, after=3, **kw)
        assert Checkpoint.of(
            BudgetedSVC(**PARAMS, **kw, checkpoint=path),
            n=3000,
            d=2,
            classes=np.unique(y),
            distributed=True,
        ).load()["position"] == [1, 0]
        resumed = BudgetedSVC(**PARAMS, **kw, checkpoint=path).fit(Xd, yd)
        full = BudgetedSVC(**PARAMS, **kw).fit(Xd, yd)
    assert resumed.distributed_ and full.distributed_
    _same(resumed, full)


def _stop_in_refit(path, X, y, *, after_step, **kw):
    """A fit stopped (by an exception) right after the refit saved its Newton step
    ``after_step``."""
    real = Checkpoint.save

    def save(self, position, seed, arrays):
        real(self, position, seed, arrays)
        if arrays.get("stage") == "refit" and arrays["refit_steps"] == after_step:
            raise KeyboardInterrupt

    Checkpoint.save = save
    try:
        with pytest.raises(KeyboardInterrupt):
            BudgetedSVC(**kw, checkpoint=path).fit(X, y)
    finally:
        Checkpoint.save = real


def _three_classes(X):
    """Three labels on the board's rows (diagonal stripes)."""
    return (np.floor(X[:, 0] * 1.5) + np.floor(X[:, 1] * 1.5)).astype(int) % 3


def _refit_cost(caplog) -> tuple[int, int]:
    """(Newton steps, passes) of the last refit, from its DEBUG summary line."""
    rec = [r for r in caplog.records if r.getMessage().startswith("refit:")][-1]
    return int(rec.args[0]), int(rec.args[1])


@pytest.mark.parametrize(
    "distributed, refit, labels",
    [(False, True, "two"), (False, "weston_watkins", "three"), (True, "crammer_singer", "three")],
)
def test_fit_stopped_in_the_refit_resumes_there(
    tmp_path, board, count_steps, caplog, distributed, refit, labels
):
    """Stopped right after the refit's second Newton step was saved: the resumed fit skips
    the SGD passes, finishes the solve from that step, and gives the uninterrupted model."""
    X, y = board
    if labels == "three":
        y = _three_classes(X)
    kw = dict(PARAMS, distributed=distributed, refit=refit)
    path = str(tmp_path / "c.npz")
    _stop_in_refit(path, X, y, after_step=2, **kw)
    est = BudgetedSVC(**kw, checkpoint=path)
    saved = Checkpoint.of(est, n=3000, d=2, classes=np.unique(y), distributed=distributed).load()
    assert saved["stage"] == "refit" and saved["refit_steps"] == 2
    assert saved["position"] == [PARAMS["max_iter"], 0]  # after the SGD passes

    caplog.set_level(logging.DEBUG, logger="dkernel.svm._refit")
    rows = count_steps()
    resumed = est.fit(X, y)
    assert count_steps() == rows  # the SGD passes were not run again
    steps, passes = _refit_cost(caplog)
    assert not os.path.exists(path)
    full = BudgetedSVC(**kw).fit(X, y)
    full_steps, full_passes = _refit_cost(caplog)
    assert steps == full_steps > 2 and passes < full_passes
    _same(resumed, full)


@pytest.mark.parametrize("refit", ["weston_watkins", True])
def test_refit_on_the_workers_resumes_there(tmp_path, board, local_cluster_client, refit):
    """Dask input under a client (the refit's parts in the workers' memory): stopped after
    the refit's second Newton step, resumed to the uninterrupted model; by CG (Weston-
    Watkins) and on the formed Hessians (one-vs-rest: the Gram sums recomputed at the
    resumed step are the bits the uninterrupted solve's trial pass gave)."""
    import dask.array as da

    X, _ = board
    y = _three_classes(X)
    Xd, yd = da.from_array(X, chunks=500), da.from_array(y, chunks=500)
    kw = dict(PARAMS, distributed=True, refit=refit)
    path = str(tmp_path / "c.npz")
    with local_cluster_client.as_current():
        _stop_in_refit(path, Xd, yd, after_step=2, **kw)
        resumed = BudgetedSVC(**kw, checkpoint=path).fit(Xd, yd)
        full = BudgetedSVC(**kw).fit(Xd, yd)
    assert not os.path.exists(path)
    _same(resumed, full)
