"""No call waits for ever, and a broken cluster is one named error.

A cluster with no worker (a bad ``n_workers``, SLURM/PBS configs without the batch system,
an external cluster that lost its only worker), a refused or killed scheduler, and cluster
options a ``LocalCluster`` would reject deep inside its start-up.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

import dask
import numpy as np
import pytest
import yaml
from dask.utils import parse_timedelta

import dkernel.cluster
from dkernel import DKernelError
from dkernel.cli.main import main
from dkernel.data import make_rings
from dkernel.runtime import get_client

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _close(client):
    cluster = client.cluster
    client.close()
    if cluster is not None:
        cluster.close()


def _yaml(tmp_path, cluster: dict) -> str:
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({"cluster": cluster}), encoding="utf-8")
    return str(path)


def _one_line(capsys) -> str:
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("dkernel:")]
    errors = [line for line in err if line.startswith("dkernel: error: ")]
    assert len(errors) == 1, err
    return errors[0]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def store(tmp_path):
    return make_rings(4000, random_state=0, store=str(tmp_path / "r.zarr"), chunk_rows=500).path


def test_no_workers_timeout_is_bounded_by_default():
    seconds = parse_timedelta(dask.config.get("dkernel.cluster.no-workers-timeout"), "s")
    assert 0 < seconds <= 60


@pytest.mark.parametrize(
    "options, match",
    [
        ({"n_workers": -1}, "n_workers must be an integer >= 1"),
        ({"n_workers": 0}, "n_workers must be an integer >= 1"),
        ({"n_workers": "two"}, "n_workers must be an integer >= 1"),
        ({"threads_per_worker": 0}, "threads_per_worker must be an integer >= 1"),
        ({"memory_limit": "lots"}, "memory_limit must be 'auto', a size"),
        ({"scheduler_port": "abc"}, "scheduler_port needs a port number"),
        ({"dashboard_address": "127.0.0.1:abc"}, "dashboard_address needs a port number"),
    ],
)
def test_bad_local_options_are_one_clear_line(tmp_path, capsys, options, match):
    cfg = {"kind": "local", "options": {"processes": False, **options}}
    with pytest.raises(DKernelError, match=match):
        get_client(cfg)
    path = _yaml(tmp_path, cfg)
    with pytest.raises(DKernelError, match=match):
        get_client(path)
    np.savez(tmp_path / "d.npz", X=np.ones((40, 2)), y=np.arange(40) % 2)
    argv = ["--cluster", path, "kmeans", str(tmp_path / "s.zarr"), "--n-clusters", "2"]
    assert main(["ingest", str(tmp_path / "d.npz"), str(tmp_path / "s.zarr")]) == 0
    capsys.readouterr()
    assert main(argv) == 2
    assert match.split(" ")[0] in _one_line(capsys)


@pytest.mark.parametrize("name, submit", [("slurm.yaml", "sbatch"), ("pbs.yaml", "qsub")])
def test_jobqueue_config_without_its_batch_system_is_refused(monkeypatch, tmp_path, name, submit):
    """The shipped configs on a machine without SLURM/PBS waited for workers for ever."""
    monkeypatch.setenv("PATH", str(tmp_path))  # no sbatch, no qsub
    with pytest.raises(DKernelError, match=f"submits its workers with {submit}"):
        get_client(os.path.join(ROOT, "cluster-configs", name))


@pytest.mark.timeout(60)
def test_refused_scheduler_address_fails_at_once():
    """Client would retry a refused connection for the whole connect timeout (30 s by
    default, here 10 minutes): the probe reports it without retrying."""
    address = f"tcp://127.0.0.1:{_free_port()}"
    with dask.config.set({"distributed.comm.timeouts.connect": "600s"}):
        with pytest.raises(DKernelError, match="connection refused"):
            get_client(address)


@pytest.mark.timeout(120)
def test_work_without_workers_fails_with_no_worker_error():
    from distributed import LocalCluster
    from distributed.scheduler import NoWorkerError

    cluster = LocalCluster(n_workers=0, processes=False, dashboard_address="127.0.0.1:0")
    try:
        with dask.config.set({"dkernel.cluster.no-workers-timeout": "1s"}):
            client = get_client(cluster.scheduler_address, new=True)
        try:
            with pytest.raises(NoWorkerError):
                client.submit(sum, [1, 2]).result()
        finally:
            client.close()
    finally:
        cluster.close()


def _spawn(*args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")},
    )


def _wait_workers(address: str, n: int) -> None:
    from distributed import Client

    with Client(address, set_as_default=False) as c:
        c.wait_for_workers(n, timeout=60)


@pytest.mark.timeout(180)
def test_cli_fit_whose_only_worker_is_killed_ends_in_one_line(store, capsys):
    """An external cluster whose only worker is SIGKILLed mid-fit: the command used to wait
    for ever; now it ends with one line once no worker ran for the timeout."""
    from distributed import LocalCluster

    cluster = LocalCluster(
        n_workers=0, processes=False, protocol="tcp://", dashboard_address="127.0.0.1:0"
    )
    worker = _spawn(
        "distributed.cli.dask_worker",
        cluster.scheduler_address,
        "--no-nanny",
        "--nthreads",
        "1",
        "--no-dashboard",
    )
    try:
        _wait_workers(cluster.scheduler_address, 1)
        scheduler = cluster.scheduler

        def kill_when_busy():
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                if any(ts.state == "processing" for ts in list(scheduler.tasks.values())):
                    break
                time.sleep(0.01)
            worker.kill()

        killer = threading.Thread(target=kill_when_busy, daemon=True)
        killer.start()
        argv = ["--cluster", cluster.scheduler_address, "kmeans", store, "--n-clusters", "2"]
        with dask.config.set({"dkernel.cluster.no-workers-timeout": "2s"}):
            rc = main(argv)
        killer.join()
        assert rc == 2
        captured = capsys.readouterr()
        errors = [ln for ln in captured.err.splitlines() if ln.startswith("dkernel: error")]
        assert errors == [
            "dkernel: error: no Dask worker ran for 2 s: the cluster has none, lost its last, "
            "or all are paused (memory); start workers, or raise "
            "dkernel.cluster.no-workers-timeout"
        ]
        assert "Traceback" not in captured.err and captured.out == ""
    finally:
        worker.kill()
        worker.wait()
        cluster.close()


@pytest.mark.timeout(180)
def test_cli_fit_whose_scheduler_is_killed_ends_in_one_line(store, tmp_path, capsys, monkeypatch):
    sf = str(tmp_path / "scheduler.json")
    scheduler = _spawn(
        "distributed.cli.dask_scheduler",
        "--host",
        "127.0.0.1",
        "--port",
        "0",
        "--no-dashboard",
        "--scheduler-file",
        sf,
    )
    worker = None
    try:
        deadline = time.monotonic() + 60
        while not os.path.exists(sf) and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.2)  # the file is written whole once it exists
        with open(sf, encoding="utf-8") as fh:
            address = json.load(fh)["address"]
        worker = _spawn("distributed.cli.dask_worker", address, "--no-nanny", "--nthreads", "1")
        _wait_workers(address, 1)
        fit = dkernel.cluster.MiniBatchKernelKMeans.fit

        def fit_after_the_scheduler_dies(self, *args, **kwargs):
            scheduler.send_signal(signal.SIGKILL)
            scheduler.wait()
            return fit(self, *args, **kwargs)

        monkeypatch.setattr(
            dkernel.cluster.MiniBatchKernelKMeans, "fit", fit_after_the_scheduler_dies
        )
        argv = ["--cluster", address, "kmeans", store, "--n-clusters", "2"]
        with dask.config.set({"distributed.comm.timeouts.connect": "3s"}):
            rc = main(argv)
        assert rc == 2
        captured = capsys.readouterr()
        assert "Traceback" not in captured.err and captured.out == ""
        errors = [ln for ln in captured.err.splitlines() if ln.startswith("dkernel: error")]
        assert len(errors) == 1 and "lost the connection to the Dask scheduler" in errors[0]
    finally:
        for proc in (worker, scheduler):
            if proc is not None:
                proc.kill()
                proc.wait()
