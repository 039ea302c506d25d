"""``make test-cluster``: dkernel across hosts that share no filesystem.

The client, the scheduler, two workers and an S3 server (moto) each run on a host of their
own: a network namespace with one address in 198.51.100.0/24 and a mount namespace where
everything but a private tmpfs is read-only (``tests/multihost/``). The store exists only on
the S3 server. Needs root; skipped unless ``DKERNEL_TEST_CLUSTER=1`` (set by the Makefile
target), so ``make test`` does not run it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import _s3server
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


@dataclass
class Hosts:
    net: netns.Network
    scheduler: str
    s3: _s3server.S3Server
    logs: Path
    workers: dict[str, subprocess.Popen]

    def client_env(self) -> dict[str, str]:
        return self.s3.env()

    def start_worker(self, role: str) -> subprocess.Popen:
        ip = self.net.hosts[role].ip
        cmd = [sys.executable, "-m", "dask", "worker", self.scheduler,
               "--host", ip, "--nworkers", "1", "--nthreads", "1", "--name", role,
               "--no-dashboard", "--death-timeout", "60"]  # fmt: skip
        with open(self.logs / f"{role}.log", "ab") as log:  # the child keeps its own fd
            proc = self.net.spawn(role, cmd, env=self.s3.env(), stdout=log, stderr=log)
        self.workers[role] = proc
        return proc

    def client(self, *args: str, timeout: float = 300) -> dict:
        """Run the workload on the client host; its JSON result."""
        done = self.net.run("client", [sys.executable, str(WORKLOAD), *args],
                            env=self.client_env(), timeout=timeout)  # fmt: skip
        if done.returncode != 0:
            raise AssertionError(
                f"client exited {done.returncode}\n{done.stderr.decode(errors='replace')}\n"
                + self.tails()
            )
        return json.loads(done.stdout.decode().strip().splitlines()[-1])

    def tails(self, n: int = 20) -> str:
        out = []
        for log in sorted(self.logs.glob("*.log")):
            lines = log.read_text(errors="replace").splitlines()[-n:]
            out.append(f"--- {log.name}\n" + "\n".join(lines))
        return "\n".join(out)


@pytest.fixture(scope="module")
def hosts(tmp_path_factory) -> Iterator[Hosts]:
    why = netns.unavailable()
    if why:
        pytest.skip(f"cross-host test: {why}")
    logs = tmp_path_factory.mktemp("multihost-logs")
    net = netns.Network(ROLES)
    s3proc = None
    try:
        net.up()
        s3_ip = net.hosts["s3"].ip
        s3proc, s3 = _s3server.start(
            s3_ip, S3_PORT, argv_prefix=net.argv("s3", []),
            ready=lambda url: net.wait_tcp("client", url),
        )  # fmt: skip
        sched_ip = net.hosts["sched"].ip
        with open(logs / "sched.log", "ab") as log:
            net.spawn("sched", [sys.executable, "-m", "dask", "scheduler", "--host", sched_ip,
                                "--port", str(SCHED_PORT), "--no-dashboard"],
                      stdout=log, stderr=log)  # fmt: skip
        scheduler = f"tcp://{sched_ip}:{SCHED_PORT}"
        net.wait_tcp("client", scheduler)
        h = Hosts(net, scheduler, s3, logs, {})
        for role in ("w1", "w2"):
            h.start_worker(role)
        yield h
    finally:
        if s3proc is not None:
            _s3server.stop(s3proc)
        names = [net.bridge_ns, *(h.netns for h in net.hosts.values())]
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
