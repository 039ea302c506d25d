"""get_client honours DASK_SCHEDULER_ADDRESS; every worker gets dkernel's thread settings."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import dask
import pytest
from distributed import Client, LocalCluster

from dkernel.runtime import ThreadSettings, apply_thread_settings, default_address, get_client


@pytest.fixture
def tcp_cluster():
    cluster = LocalCluster(
        n_workers=1,
        threads_per_worker=1,
        processes=False,
        protocol="tcp://",
        host="127.0.0.1",
        dashboard_address=":0",
    )
    yield cluster
    cluster.close()


def _env_numba():
    import numba

    return os.environ.get("NUMBA_NUM_THREADS"), int(numba.config.NUMBA_NUM_THREADS)


@pytest.mark.parametrize(
    ("env", "config", "expected"),
    [
        (None, None, None),
        ("tcp://10.1.2.3:8786", None, "tcp://10.1.2.3:8786"),
        ("node7:8786", None, "tcp://node7:8786"),  # dask accepts it without a scheme
        (None, "tls://h:1", "tls://h:1"),
        ("tcp://env:1", "tcp://config:1", "tcp://env:1"),
    ],
)
def test_default_address(monkeypatch, env, config, expected):
    monkeypatch.delenv("DASK_SCHEDULER_ADDRESS", raising=False)
    if env:
        monkeypatch.setenv("DASK_SCHEDULER_ADDRESS", env)
    with dask.config.set({"scheduler-address": config}):
        assert default_address() == expected


def test_get_client_connects_to_dask_scheduler_address(monkeypatch, tcp_cluster):
    monkeypatch.setenv("DASK_SCHEDULER_ADDRESS", tcp_cluster.scheduler_address)
    client = get_client()  # no config: the running scheduler, not a new LocalCluster
    try:
        assert client.scheduler.address == tcp_cluster.scheduler_address
        assert client.cluster is None  # nothing started
        assert client.submit(sum, [1, 2]).result() == 3
    finally:
        client.close()


def test_get_client_connects_to_scheduler_address_config(monkeypatch, tcp_cluster):
    monkeypatch.delenv("DASK_SCHEDULER_ADDRESS", raising=False)
    with dask.config.set({"scheduler-address": tcp_cluster.scheduler_address}):
        client = get_client()
    try:
        assert client.scheduler.address == tcp_cluster.scheduler_address
    finally:
        client.close()


def test_in_process_workers_are_left_alone(monkeypatch, tcp_cluster):
    """A worker in the client's own process keeps the user's settings."""
    monkeypatch.setenv("NUMBA_NUM_THREADS", "1")
    monkeypatch.delenv("DASK_SCHEDULER_ADDRESS", raising=False)
    with Client(tcp_cluster, set_as_default=False) as client:
        before = _env_numba()
        client.register_plugin(ThreadSettings(numba_threads=3))
        assert client.submit(_env_numba, pure=False).result() == before
        assert (
            "dkernel-thread-settings"
            in client.run(lambda dask_worker: list(dask_worker.plugins)).popitem()[1]
        )


def test_hand_started_workers_get_numba_num_threads(tmp_path):
    """`dask worker` processes with numba's default thread count get 1 once get_client connects.

    The worker is started by hand without NUMBA_NUM_THREADS and with numba already imported
    (a preload), as on an HPC node where the batch script forgot the variable.
    """

    def probe():  # defined here: pickled by value for the worker processes
        import os

        import numba

        return os.environ.get("NUMBA_NUM_THREADS"), int(numba.config.NUMBA_NUM_THREADS)

    env = {k: v for k, v in os.environ.items() if k != "NUMBA_NUM_THREADS"}
    sched_file = str(tmp_path / "scheduler.json")
    preload = tmp_path / "import_numba.py"
    preload.write_text("import numba  # noqa: F401\n", encoding="utf-8")
    py = sys.executable
    procs = [
        subprocess.Popen(
            [py, "-m", "dask", "scheduler", "--scheduler-file", sched_file, "--port", "0"]
            + ["--host", "127.0.0.1", "--dashboard-address", ":0"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    ]
    try:
        for _ in range(600):
            if os.path.exists(sched_file) and os.path.getsize(sched_file) > 0:
                break
            assert procs[0].poll() is None, "the scheduler died"
            time.sleep(0.1)
        procs.append(
            subprocess.Popen(
                [py, "-m", "dask", "worker", "--scheduler-file", sched_file, "--nthreads", "1"]
                + ["--host", "127.0.0.1", "--no-dashboard", "--preload", str(preload)],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )
        cfg = tmp_path / "c.yaml"
        cfg.write_text(
            f"cluster:\n  kind: scheduler-file\n  scheduler_file: {sched_file}\n", encoding="utf-8"
        )
        with Client(scheduler_file=sched_file, timeout="60s") as probe_client:
            probe_client.wait_for_workers(1, timeout=120)
            (before,) = probe_client.run(probe).values()
        assert before[0] is None  # numba runs its default (one thread per CPU)
        client = get_client(str(cfg))
        try:
            (after,) = client.run(probe).values()
            assert after == ("1", 1)
            # numba's pool starts with the new size when the first parallel kernel runs
            (threads,) = client.run(lambda: __import__("numba").get_num_threads()).values()
            assert threads == 1
        finally:
            client.shutdown()
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()


def test_apply_thread_settings_keeps_blas_vars_already_set(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "4")
    monkeypatch.delenv("MKL_NUM_THREADS", raising=False)
    monkeypatch.setenv("NUMBA_NUM_THREADS", os.environ.get("NUMBA_NUM_THREADS", "1"))
    import numba
    from numba.np.ufunc import parallel

    old, old_pool = numba.config.NUMBA_NUM_THREADS, parallel.NUM_THREADS
    try:
        out = apply_thread_settings(int(old))
        assert out["OMP_NUM_THREADS"] == 4 and out["MKL_NUM_THREADS"] == 1
        assert os.environ["NUMBA_NUM_THREADS"] == str(old)
    finally:
        numba.config.NUMBA_NUM_THREADS, parallel.NUM_THREADS = old, old_pool
