"""Fault injection: a worker SIGKILLed mid-fit changes nothing.

Each algorithm runs twice on a process ``LocalCluster``, the second time with one worker
killed (SIGKILL) while it processes a task; the scheduler recomputes what was lost from the
store and the result must be identical, bit for bit. One cluster serves the whole module
(the nanny restarts a killed worker).
"""

from __future__ import annotations

import os
import signal
import threading
import time

import numpy as np
import pytest

from dkernel.data import make_gauss, make_rings

#: Distributed fits here train in rounds from the first step (no stream prefix).
pytestmark = pytest.mark.usefixtures("rounds_only")


class _ProcessCluster:
    """A 2-worker process LocalCluster shared by the module, rebuilt if a killed worker
    did not come back (a nanny may give up restarting it on a loaded machine)."""

    def __init__(self):
        self.cluster = self.client = None

    def get(self):
        from distributed import Client, LocalCluster

        if self.client is not None:
            try:
                self.client.wait_for_workers(2, timeout=20)
                return self.client
            except Exception:  # WorkerStartTimeoutError, or a closed cluster
                self.close()
        self.cluster = LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            dashboard_address="127.0.0.1:0",
            env={"NUMBA_NUM_THREADS": "1"},
        )
        # the default client, not ``dask.config.set(scheduler=client)``: a nanny restarting
        # a killed worker pickles the Dask config, and a Client in it cannot be pickled
        self.client = Client(self.cluster, set_as_default=True)
        self.client.run(__import__, "dkernel.cluster")  # warm the workers
        return self.client

    def close(self):
        if self.client is not None:
            self.client.close()
            self.cluster.close()
        self.cluster = self.client = None


@pytest.fixture(scope="module")
def clusters():
    holder = _ProcessCluster()
    yield holder
    holder.close()


@pytest.fixture
def process_client(clusters):
    return clusters.get()


def _kill_when_busy(client, pids, killed):
    """Kill (SIGKILL) the first worker seen processing a task; pids fetched beforehand."""
    deadline = time.time() + 60
    while time.time() < deadline:
        busy = [w for w, tasks in client.processing().items() if tasks and w in pids]
        if busy:
            os.kill(pids[busy[0]], signal.SIGKILL)
            killed.append(pids[busy[0]])
            return
        time.sleep(0.01)


def _with_a_worker_killed(client, run):
    """``run()`` while a thread SIGKILLs a busy worker; asserts one was killed."""
    pids = client.run(os.getpid)
    killed: list[int] = []
    th = threading.Thread(target=_kill_when_busy, args=(client, pids, killed), daemon=True)
    th.start()
    try:
        out = run()
    finally:
        th.join(timeout=70)
    assert killed, "no worker was killed during the run"
    return out


def test_minibatch_kernel_kmeans(process_client, tmp_path):
    from dkernel.cluster import MiniBatchKernelKMeans

    ds = make_rings(20000, random_state=0, store=str(tmp_path / "r.zarr"), chunk_rows=2500)

    def fit():
        return MiniBatchKernelKMeans(
            3, gamma=2.0, batch_size=256, tau=50, max_iter=30, random_state=0
        ).fit(ds.path)

    ref = fit()
    again = _with_a_worker_killed(process_client, fit)
    np.testing.assert_array_equal(again.labels_, ref.labels_)
    assert again.inertia_ == ref.inertia_


@pytest.mark.parametrize("distributed", ["auto", True])  # sequential stream; shard rounds
def test_budgeted_svc(process_client, tmp_path, distributed):
    from dkernel.svm import BudgetedSVC

    ds = make_gauss(10000, random_state=0, store=str(tmp_path / "g.zarr"), chunk_rows=1000)
    X_eval = np.random.default_rng(1).standard_normal((200, 2))

    def fit():
        return BudgetedSVC(
            budget=30, gamma=1.0, max_iter=1, random_state=0, distributed=distributed, n_shards=4
        ).fit(ds.path)

    ref = fit()
    again = _with_a_worker_killed(process_client, fit)
    np.testing.assert_array_equal(again.decision_function(X_eval), ref.decision_function(X_eval))
    assert again.distributed_ == ref.distributed_ == (distributed is True)


@pytest.mark.parametrize("method", ["merge-reduce", "two-pass"])
def test_distributed_coreset(process_client, tmp_path, method):
    from dkernel.coreset import distributed_coreset

    ds = make_gauss(20000, random_state=0, store=str(tmp_path / "g.zarr"), chunk_rows=2500)

    def build():
        return distributed_coreset(ds.path, None, 300, method=method, random_state=7)

    ref = build()
    again = _with_a_worker_killed(process_client, build)
    for name in ("X", "y", "weight"):
        np.testing.assert_array_equal(getattr(again, name), getattr(ref, name))
