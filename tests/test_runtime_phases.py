"""Phase accounting (dkernel.runtime.accounting, phase, amdahl) and the fits that report it."""

from __future__ import annotations

import time

import dask.array as da
import numpy as np
import pytest

from dkernel.cluster import MiniBatchKernelKMeans
from dkernel.coreset import distributed_coreset
from dkernel.data import make_checkerboard
from dkernel.runtime import accounting, amdahl, phase, spread
from dkernel.svm import BudgetedSVC


def test_phases_count_their_own_time_only():
    """A nested phase pauses the outer one: every second is counted once."""
    with accounting() as acc:
        with phase("outer"):
            time.sleep(0.05)
            with phase("inner", width=4):
                time.sleep(0.1)
            time.sleep(0.05)
        with phase("outer"):  # entered again: added to the same row
            time.sleep(0.05)
    rep = acc.report()
    assert list(rep) == ["outer", "inner"]
    assert 0.14 < rep["outer"]["wall"] < 0.3 and 0.09 < rep["inner"]["wall"] < 0.2
    assert rep["inner"]["width"] == 4 and rep["outer"]["width"] is None
    assert rep["outer"]["worker_seconds"] is None  # no client: no worker time to count


def test_phase_without_accounting_is_a_no_op():
    with phase("alone") as row:
        assert row is None


def test_amdahl_splits_serial_and_parallel_time():
    phases = {
        # 8 s of task time on 2 workers in 5 s of wall: 1 s serial
        "wide": {"wall": 5.0, "worker_seconds": 8.0, "width": None},
        # at most 4 tasks at once
        "capped": {"wall": 2.0, "worker_seconds": 4.0, "width": 4},
        "client": {"wall": 1.0, "worker_seconds": None, "width": None},
    }
    out = amdahl(phases, 2, [1, 2, 8])
    wide = out["phases"]["wide"]
    assert wide["serial_seconds"] == pytest.approx(1.0)
    assert wide["predicted_wall"][8] == pytest.approx(1.0 + 8.0 / 8)
    assert wide["serial_fraction"] == pytest.approx(1.0 / 9.0)
    capped = out["phases"]["capped"]
    assert capped["serial_seconds"] == pytest.approx(0.0)
    assert capped["predicted_wall"][8] == pytest.approx(4.0 / 4)  # no more than 4 at once
    assert out["phases"]["client"]["predicted_wall"][8] == pytest.approx(1.0)
    assert out["predicted_wall"][1] == pytest.approx(1.0 + 8.0 + 4.0 + 1.0)


def test_amdahl_spreads_granules_in_waves():
    """76 equal shards on 14 workers: the busiest runs 6 of them, so the parallel part takes
    6 / 76 of the worker time, not 1 / 14; a count that divides the width, or exceeds it,
    is the even share."""
    assert spread(76.0, 76, 14) == pytest.approx(6.0)
    assert spread(76.0, 76, 19) == pytest.approx(4.0)
    assert spread(76.0, 76, 100) == pytest.approx(1.0)
    assert spread(76.0, None, 14) == pytest.approx(76.0 / 14)
    # measured on 1 worker: 1 s serial, 76 s in 76 shards
    out = amdahl({"rounds": {"wall": 77.0, "worker_seconds": 76.0, "width": 76}}, 1, [14, 64])
    rounds = out["phases"]["rounds"]
    assert rounds["serial_seconds"] == pytest.approx(1.0)
    assert rounds["predicted_wall"][14] == pytest.approx(1.0 + 6.0)
    assert rounds["predicted_wall"][64] == pytest.approx(1.0 + 2.0)  # two waves
    # measured on 2 workers (38 shards each): the same split
    two = amdahl({"rounds": {"wall": 39.0, "worker_seconds": 76.0, "width": 76}}, 2, [14])
    assert two["phases"]["rounds"]["serial_seconds"] == pytest.approx(1.0)


def test_fits_report_their_phases_on_a_cluster(local_cluster_client):
    """Under a client: per phase the worker task time, the round trips and the bytes; the
    phases' walls add up to no more than the call's."""
    X, y = make_checkerboard(20000, n_cells=2, random_state=0)
    Xd, yd = da.from_array(X, chunks=(5000, 2)), da.from_array(y, chunks=5000)
    with local_cluster_client.as_current():
        t0 = time.perf_counter()
        clf = BudgetedSVC(budget=30, gamma=2.0, max_iter=1, distributed=True, random_state=0)
        clf.fit(Xd, yd)
        wall = time.perf_counter() - t0
        km = MiniBatchKernelKMeans(2, gamma=1.0, max_iter=5, random_state=0).fit(Xd)
        core = distributed_coreset(Xd, yd, 200, random_state=0)
    stats = clf.phase_stats_
    assert {"setup", "shards", "refit parts", "refit solve"} <= set(stats)
    assert sum(row["wall"] for row in stats.values()) <= wall
    solve = stats["refit solve"]
    assert solve["round_trips"] >= 2 and solve["worker_seconds"] > 0 and solve["tasks"] > 0
    assert solve["bytes_to_client"] > 0 and solve["width"] == 8  # one part per shard
    assert clf.summary()["timings"] == clf.timings_
    assert set(km.timings_) == {"setup", "init", "iterations", "labels"}
    assert km.phase_stats_["labels"]["worker_seconds"] > 0
    # the granules of the work are the 4 chunks, however the pass groups them into tasks
    assert km.phase_stats_["labels"]["width"] == 4
    assert km.phase_stats_["setup"]["width"] == 4  # the batches' read
    assert {"blocks", "sample solve", "certificate", "draw"} <= set(core.info["phases"])
    assert core.info["phases"]["certificate"]["worker_seconds"] > 0


def test_accounting_leaves_the_client_as_it_was(local_cluster_client):
    client = local_cluster_client
    assert "sync" not in client.__dict__
    with accounting(client) as acc, phase("work"):
        assert client.submit(np.add, 1, 2).result() == 3
    assert "sync" not in client.__dict__ and "_send_to_scheduler" not in client.__dict__
    row = acc.report()["work"]
    assert row["round_trips"] == 1 and row["bytes_from_client"] > 0 and row["tasks"] == 1
