"""Progress that covers the whole call: every phase has a bar, a compile note counts only
compilation, and postfixes say what they count (read from the bars' stderr)."""

from __future__ import annotations

import logging
import re

import dask
import dask.array as da
import numpy as np
import pytest

from dkernel.cluster import MiniBatchKernelKMeans
from dkernel.runtime import COMPILE_NOTE, forget_compiled
from dkernel.svm import BudgetedSVC

#: Distributed fits here train in rounds from the first step (no stream prefix).
pytestmark = pytest.mark.usefixtures("rounds_only")


@pytest.fixture(autouse=True)
def _fresh_compile_notes():
    forget_compiled()
    yield
    forget_compiled()


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(3000, 4))
    y = np.where(X[:, 0] + 0.3 * rng.normal(size=3000) > 0, 1, -1)
    return da.from_array(X, chunks=750), da.from_array(y, chunks=750)


@pytest.mark.parametrize("on_cluster", [False, True])
def test_distributed_bsgd_phases(data, on_cluster, request, caplog, capfd):
    """The compile note ends before the first round; the rounds bar shows the epoch and the
    support vectors (not the Pegasos clock); the refit has its own bar."""
    Xd, yd = data
    before_rounds = []

    class Spy(logging.Handler):  # the stderr so far when the rounds begin (logged)
        def emit(self, record):
            if record.getMessage() == "phase rounds begins":
                before_rounds.append(capfd.readouterr().err)

    caplog.set_level(logging.DEBUG, logger="dkernel.runtime")
    spy = Spy()
    logging.getLogger("dkernel.runtime").addHandler(spy)
    request.addfinalizer(lambda: logging.getLogger("dkernel.runtime").removeHandler(spy))
    clf = BudgetedSVC(budget=40, max_iter=2, n_rounds=2, distributed=True, random_state=0)
    clf.set_params(verbose=1)
    if on_cluster:
        client = request.getfixturevalue("local_cluster_client")
        with client.as_current(), dask.config.set(scheduler=client):
            clf.fit(Xd, yd)
    else:
        with dask.config.set(scheduler="sync"):
            clf.fit(Xd, yd)
    err = before_rounds[0] + capfd.readouterr().err
    # the note opened and closed before any round ran: it timed the compilation alone
    assert COMPILE_NOTE in before_rounds[0] and "compiled bsgd in" in before_rounds[0]
    assert "0/4" in before_rounds[0] and "1/4" not in before_rounds[0]
    assert "4/4" in err and "epoch=2/2" in err and f"SVs={len(clf.support_vectors_)}" in err
    assert not re.search(r"\bt=\d", err)
    lines = [ln for ln in re.split(r"[\r\n]", err) if ln.startswith("BudgetedSVC refit:")]
    last = re.search(r"refit: (\d+) Newton steps.*gradient=([0-9.e-]+) of start", lines[-1])
    assert last is not None
    assert float(last[2]) <= 1e-3 or int(last[1]) == 50  # the stop rule, or max_iter


def test_minibatch_early_stop_ends_the_bar_full(capfd):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 3))
    km = MiniBatchKernelKMeans(
        3, batch_size=64, max_iter=500, max_no_improvement=2, random_state=0, verbose=1
    ).fit(X)
    assert km.n_iter_ < 500
    err = capfd.readouterr().err
    assert f"stopped after {km.n_iter_} of 500" in err
    assert "no new best smoothed batch objective in 2 iterations" in err
    assert f"{km.n_iter_}/{km.n_iter_}" in err and "100%" in err


def test_minibatch_labels_pass_bar_names_the_estimator(data, capfd):
    Xd, _ = data
    with dask.config.set(scheduler="sync"):
        MiniBatchKernelKMeans(2, batch_size=64, max_iter=3, random_state=0, verbose=1).fit(Xd)
    err = capfd.readouterr().err
    assert "MiniBatchKernelKMeans labels: 100%" in err and "3.00k/3.00k" in err  # rows


def test_minibatch_labels_pass_over_rows_in_memory_has_its_bar(capfd, dkernel_config):
    dkernel_config({"kmeans.label-slab-rows": 1000})  # several slabs on small data
    rng = np.random.default_rng(0)
    X = rng.normal(size=(3500, 3))
    km = MiniBatchKernelKMeans(3, batch_size=64, max_iter=5, random_state=0, verbose=1).fit(X)
    err = capfd.readouterr().err
    assert "MiniBatchKernelKMeans labels" in err and "3.50k/3.50k" in err
    # the same labels and objective as one pass without a bar
    quiet = MiniBatchKernelKMeans(3, batch_size=64, max_iter=5, random_state=0).fit(X)
    assert "labels" not in capfd.readouterr().err
    np.testing.assert_array_equal(quiet.labels_, km.labels_)
    assert quiet.inertia_ == pytest.approx(km.inertia_, rel=1e-12)
