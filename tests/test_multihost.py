"""``make test-cluster``: dkernel across hosts that share no filesystem.

The client, the scheduler, two workers and an S3 server (moto) each run on a host of their
own: a network namespace with one address in 198.51.100.0/24 and a mount namespace where
everything but a private tmpfs is read-only (``tests/multihost/``). The store exists only on
the S3 server. Needs root; skipped unless ``DKERNEL_TEST_CLUSTER=1`` (set by the Makefile
target), so ``make test`` does not run it.
"""

from __future__ import annotations

import base64
import io
import json
import os
import select
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import _s3server
import numpy as np
import pytest
from multihost import netns

pytestmark = pytest.mark.skipif(
    os.environ.get("DKERNEL_TEST_CLUSTER") != "1",
    reason="cross-host test: run with `make test-cluster` (DKERNEL_TEST_CLUSTER=1, root)",
)

WORKLOAD = Path(__file__).parent / "multihost" / "workload.py"
ROLES = {"s3": 10, "sched": 11, "w1": 21, "w2": 22, "client": 30}
SCHED_PORT = 8786
S3_PORT = 9000
BUCKET = "dkt-bucket"
ROOT = f"s3://{BUCKET}/run"


@dataclass
class Hosts:
    net: netns.Network
    scheduler: str
    s3: _s3server.S3Server
    logs: Path
    workers: dict[str, subprocess.Popen]
    numba_seed: Path

    def client_env(self) -> dict[str, str]:
        return {**self.s3.env(), "DKT_NUMBA_SEED": str(self.numba_seed)}

    def start_worker(self, role: str) -> subprocess.Popen:
        ip = self.net.hosts[role].ip
        cmd = [sys.executable, "-m", "dask", "worker", self.scheduler,
               "--host", ip, "--nworkers", "1", "--nthreads", "1", "--name", role,
               "--no-dashboard", "--death-timeout", "60"]  # fmt: skip
        with open(self.logs / f"{role}.log", "ab") as log:  # the child keeps its own fd
            proc = self.net.spawn(role, cmd, env=self.client_env(), stdout=log, stderr=log)
        self.workers[role] = proc
        return proc

    def client(self, *args: str, timeout: float = 300) -> dict:
        """Run the workload on the client host; its JSON result."""
        done = self.net.run("client", [sys.executable, str(WORKLOAD), *args],
                            env=self.client_env(), timeout=timeout)  # fmt: skip
        if done.returncode != 0:
            err = done.stderr.decode(errors="replace")
            last = ([ln for ln in err.splitlines() if ln.strip()] or [""])[-1]
            raise AssertionError(f"client exited {done.returncode}: {last}\n{err}\n{self.tails()}")
        return json.loads(done.stdout.decode().strip().splitlines()[-1])

    def tails(self, n: int = 20) -> str:
        out = []
        for log in sorted(self.logs.glob("*.log")):
            lines = log.read_text(errors="replace").splitlines()[-n:]
            out.append(f"--- {log.name}\n" + "\n".join(lines))
        return "\n".join(out)


@pytest.fixture(scope="module")
def hosts(tmp_path_factory, one_host) -> Iterator[Hosts]:
    logs = tmp_path_factory.mktemp("multihost-logs")
    net = netns.Network(ROLES)
    s3proc = None
    try:
        net.up()
        s3_ip = net.hosts["s3"].ip
        s3proc, s3 = _s3server.start(
            s3_ip, S3_PORT, argv_prefix=net.argv("s3", []), log=str(logs / "s3.log"),
            ready=lambda url: net.wait_tcp("client", url),
        )  # fmt: skip
        sched_ip = net.hosts["sched"].ip
        with open(logs / "sched.log", "ab") as log:
            net.spawn("sched", [sys.executable, "-m", "dask", "scheduler", "--host", sched_ip,
                                "--port", str(SCHED_PORT), "--no-dashboard"],
                      stdout=log, stderr=log)  # fmt: skip
        scheduler = f"tcp://{sched_ip}:{SCHED_PORT}"
        net.wait_tcp("client", scheduler)
        h = Hosts(net, scheduler, s3, logs, {}, one_host.numba_seed)
        for role in ("w1", "w2"):
            h.start_worker(role)
        yield h
    finally:
        if s3proc is not None:
            _s3server.stop(s3proc)
        names = [net.bridge_ns, *(host.netns for host in net.hosts.values())]
        strays = net.down()
        left = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        assert not [n for n in names if n in left.split()], left
        assert not strays, f"processes left in the namespaces: {strays}"


def test_plumbing(hosts):
    """Workers on their own addresses, no shared files, each reads the bucket itself."""
    r = hosts.client("plumbing", "--scheduler", hosts.scheduler, "--bucket", BUCKET)
    ips = {hosts.net.hosts[w].ip for w in ("w1", "w2")}
    assert {w.split("//")[1].rsplit(":", 1)[0] for w in r["workers"]} == ips
    assert r["client_addr"].startswith(f"tcp://{hosts.net.hosts['client'].ip}:")
    assert r["client_outside_unreachable"]
    assert r["sum"] == sum(range(100_000))
    for view in r["views"].values():
        assert not view["sees_client_marker"]
        assert not view["code_dir_writable"]
        assert view["outside_unreachable"]
    assert r["reads_equal"] == dict.fromkeys(r["workers"], True)


# ---------------------------------------------------------------------- dkernel across hosts
#: Summary entries that name places or measure time: they differ between runs by design.
UNCOMPARED = {"store", "out_store", "model", "time_s", "train_seconds", "predict_seconds",
              "seconds", "timings", "phases"}  # fmt: skip


def _decode(result: dict) -> tuple[dict, dict]:
    with np.load(io.BytesIO(base64.b64decode(result["npz"]))) as z:
        arrays = {k: z[k] for k in z.files}
    summaries = {
        step: {k: v for k, v in s.items() if k not in UNCOMPARED} if isinstance(s, dict) else s
        for step, s in result["summaries"].items()
    }
    return summaries, arrays


@dataclass
class OneHost:
    results: dict[str, tuple[dict, dict]]
    failed: dict[str, str]
    numba_seed: Path

    def __call__(self, route: str) -> tuple[dict, dict]:
        if route in self.failed:
            pytest.fail(f"the {route} run on one host failed:\n{self.failed[route]}")
        return self.results[route]


@pytest.fixture(scope="module")
def one_host(tmp_path_factory) -> OneHost:
    """The same workload on one host first: a LocalCluster started here, local folders.

    Its numba cache becomes every host's starting cache (``sandbox.sh``).
    """
    why = netns.unavailable()
    if why:
        pytest.skip(f"cross-host test: {why}")
    from distributed import LocalCluster

    root, work = tmp_path_factory.mktemp("ref-stores"), tmp_path_factory.mktemp("ref-work")
    seed = tmp_path_factory.mktemp("numba-seed")
    env = {"NUMBA_CACHE_DIR": str(seed)}
    out = OneHost({}, {}, seed)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=None, env=env) as cluster:  # fmt: skip
        for route in ("cli", "api"):
            done = subprocess.run(
                [sys.executable, str(WORKLOAD), route, "--scheduler", cluster.scheduler_address,
                 "--root", str(root), "--work", str(work)],
                capture_output=True, text=True, timeout=600, env={**os.environ, **env},
            )  # fmt: skip
            if done.returncode != 0:
                out.failed[route] = done.stderr
            else:
                result = json.loads(done.stdout.strip().splitlines()[-1])
                out.results[route] = _decode(result)
                (seed.parent / f"one-host-{route}-seconds.json").write_text(
                    json.dumps(result["seconds"])
                )
    return out


@pytest.fixture(scope="module")
def on_hosts(hosts) -> Callable[[str], tuple[dict, dict]]:
    """The workload on the client host, every store and model on the S3 server."""
    results: dict[str, tuple[dict, dict]] = {}
    failed: dict[str, str] = {}

    def run(route: str) -> tuple[dict, dict]:
        if route in failed:  # reported in full by the test that ran it first
            pytest.fail(f"the {route} run on the hosts failed: {failed[route]}")
        if route not in results:
            try:
                out = hosts.client(route, "--scheduler", hosts.scheduler, "--root", ROOT)
            except AssertionError as e:
                failed[route] = str(e).splitlines()[0]
                raise
            results[route] = _decode(out)
            (hosts.logs / f"{route}-seconds.json").write_text(json.dumps(out["seconds"]))
        return results[route]

    return run


@pytest.mark.parametrize("route", ["cli", "api"])
def test_steps_match_one_host(route, one_host, on_hosts):
    """ingest, kmeans (labels into the store), svm train, svm predict into the store and a
    coreset give on the hosts exactly what they give on one host."""
    (ref_sum, ref), (got_sum, got) = one_host(route), on_hosts(route)
    assert sorted(got) == sorted(ref)
    assert {"labels", "predictions", "core_weight", "svm_support_vectors"} <= set(ref)
    for k in sorted(ref):
        np.testing.assert_array_equal(got[k], ref[k], err_msg=k)
    assert got_sum == ref_sum


def test_worker_killed_mid_fit(hosts, one_host, on_hosts):
    """SIGKILL one worker's host processes while k-means fits: the survivor finishes with the
    same labels as the one-host run."""
    api_labels = on_hosts("api")[1]["labels"]  # the API run wrote the store this fit reads
    log = hosts.logs / "client-kill.log"
    with open(log, "ab") as err:
        proc = hosts.net.spawn(
            "client", [sys.executable, str(WORKLOAD), "kill", "--scheduler", hosts.scheduler,
                       "--root", ROOT, "--kill", "w2"],
            env=hosts.client_env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err,
        )  # fmt: skip
    try:
        ready, _, _ = select.select([proc.stdout], [], [], 120)
        line = proc.stdout.readline().decode() if ready else ""
        assert line.startswith("KILL "), f"no kill request: {line!r}\n{log.read_text()}"
        assert f"//{hosts.net.hosts['w2'].ip}:" in line
        victim = hosts.workers["w2"]
        hosts.net.kill(victim)  # its process group: the nanny and the worker process
        assert victim.returncode == -signal.SIGKILL
        proc.stdin.write(b"killed\n")
        proc.stdin.flush()
        out, _ = proc.communicate(timeout=300)
    finally:
        hosts.net.kill(proc)
    assert proc.returncode == 0, log.read_text() + hosts.tails()
    summaries, arrays = _decode(json.loads(out.decode().strip().splitlines()[-1]))
    assert summaries["fit_alive_at_kill"], "the fit ended before the worker was killed"
    assert summaries["workers_after"] == 1
    np.testing.assert_array_equal(arrays["kill_labels"], one_host("api")[1]["labels"])
    np.testing.assert_array_equal(arrays["kill_labels"], api_labels)
