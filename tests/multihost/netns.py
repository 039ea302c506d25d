"""Hosts that share no network address and no writable disk, made of Linux namespaces.

Each host is one network namespace with one address in 198.51.100.0/24 (TEST-NET-2, which
nothing here uses) on a veth link to a bridge that lives in a namespace of its own, so the
run adds nothing to the machine's own network: no interface, address or route outside the
namespaces it creates. No namespace has a default route, so nothing inside can reach any
other address. Each process also runs in its own mount namespace (``sandbox.sh``): every
mount read-only, a private tmpfs over /tmp, /var/tmp and /dev/shm.

Everything is named after the run (``dkt-<pid>-<role>``) and removed by those exact names
and by the PIDs the harness started, also when a step fails (``Network`` is a context
manager). Needs root, ``ip`` (iproute2) and ``unshare`` (util-linux).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import _s3server

SUBNET = "198.51.100"
SANDBOX = Path(__file__).with_name("sandbox.sh")

#: Variables that would send a client to a proxy outside the namespaces.
PROXY_VARS = ("http_proxy", "https_proxy", "all_proxy", "no_proxy")


def unavailable() -> str | None:
    """Why namespaces cannot be made here, or ``None`` when they can."""
    if os.geteuid() != 0:
        return "needs root (network and mount namespaces)"
    for tool in ("ip", "unshare"):
        if shutil.which(tool) is None:
            return f"needs `{tool}` on PATH"
    probe = f"dkt-{os.getpid()}-probe"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if made.returncode != 0:
        return f"`ip netns add` failed: {made.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True, check=False)
    return None


@dataclass(frozen=True)
class Host:
    role: str
    netns: str
    ip: str


def _ip(*args: str) -> None:
    done = subprocess.run(["ip", *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {done.stderr.strip()}")


@dataclass
class Network:
    """Namespaces ``dkt-<run>-<role>`` for each role, on one bridge.

    ``roles`` maps a role to the last byte of its address (2..254).
    """

    roles: Mapping[str, int]
    run_id: str = field(default_factory=lambda: str(os.getpid()))
    hosts: dict[str, Host] = field(default_factory=dict)
    _made: list[str] = field(default_factory=list)
    _procs: list[subprocess.Popen] = field(default_factory=list)

    @property
    def bridge_ns(self) -> str:
        return f"dkt-{self.run_id}-net"

    def _add_netns(self, name: str) -> None:
        _ip("netns", "add", name)
        self._made.append(name)  # recorded at once: a later failure still removes it
        _ip("-n", name, "link", "set", "lo", "up")

    def up(self) -> Network:
        self._add_netns(self.bridge_ns)
        _ip("-n", self.bridge_ns, "link", "add", "br0", "type", "bridge")
        _ip("-n", self.bridge_ns, "link", "set", "br0", "up")
        for role, octet in self.roles.items():
            host = Host(role, f"dkt-{self.run_id}-{role}", f"{SUBNET}.{octet}")
            self._add_netns(host.netns)
            # Both ends are made inside namespaces of this run: the machine's own network
            # namespace never holds one of them, so their short names cannot clash with it.
            port = f"v-{role}"[:15]
            _ip("-n", self.bridge_ns, "link", "add", port, "type", "veth",
                "peer", "name", "eth0", "netns", host.netns)  # fmt: skip
            _ip("-n", self.bridge_ns, "link", "set", port, "master", "br0", "up")
            _ip("-n", host.netns, "addr", "add", f"{host.ip}/24", "dev", "eth0")
            _ip("-n", host.netns, "link", "set", "eth0", "up")
            self.hosts[role] = host
        return self

    def __enter__(self) -> Network:
        try:
            return self.up()
        except BaseException:
            self.down()
            raise

    def __exit__(self, *exc: object) -> None:
        self.down()

    # ------------------------------------------------------------------ processes
    def argv(self, role: str, cmd: Sequence[str]) -> list[str]:
        """``cmd`` as run on host ``role``: its network namespace, its own mount namespace."""
        return ["ip", "netns", "exec", self.hosts[role].netns,
                "unshare", "--mount", "--propagation", "private", "--",
                "sh", str(SANDBOX), *cmd]  # fmt: skip

    @staticmethod
    def env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k.lower() not in PROXY_VARS}
        env.update(extra or {})
        return env

    def spawn(
        self, role: str, cmd: Sequence[str], *, env: Mapping[str, str] | None = None, **kw
    ) -> subprocess.Popen:
        """Start ``cmd`` on host ``role`` in a session of its own (its PID is its group)."""
        proc = subprocess.Popen(
            self.argv(role, cmd), env=self.env(env), start_new_session=True, **kw
        )
        self._procs.append(proc)
        return proc

    def run(
        self,
        role: str,
        cmd: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        timeout: float = 300,
        input: bytes | None = None,
    ) -> subprocess.CompletedProcess:
        """Run ``cmd`` on host ``role`` to the end; its output is captured."""
        proc = self.spawn(role, cmd, env=env, stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
        try:
            out, err = proc.communicate(input, timeout=timeout)
        except BaseException:
            self.kill(proc)
            raise
        return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)

    @staticmethod
    def kill(proc: subprocess.Popen, sig: int = signal.SIGKILL) -> None:
        """Signal the process group the harness made for ``proc``, and reap it."""
        _s3server.stop(proc, sig)

    def wait_tcp(self, role: str, addr: str, timeout: float = 60) -> None:
        """Return once ``addr`` (``host:port`` or a URL) accepts TCP from host ``role``."""
        probe = (
            "import socket, sys, time, urllib.parse\n"
            "u = urllib.parse.urlsplit(sys.argv[1] if '//' in sys.argv[1] else '//' + sys.argv[1])\n"
            "end = time.monotonic() + float(sys.argv[2])\n"
            "while True:\n"
            "    try:\n"
            "        socket.create_connection((u.hostname, u.port), timeout=1).close()\n"
            "        break\n"
            "    except OSError as e:\n"
            "        if time.monotonic() > end:\n"
            "            sys.exit(f'no answer from {sys.argv[1]}: {e}')\n"
            "        time.sleep(0.1)\n"
        )
        done = self.run(role, [sys.executable, "-c", probe, addr, str(timeout)],
                        timeout=timeout + 30)  # fmt: skip
        if done.returncode != 0:
            raise TimeoutError(done.stderr.decode(errors="replace").strip())

    def pids(self, netns: str) -> list[int]:
        """PIDs of the processes inside namespace ``netns`` (one this run made)."""
        done = subprocess.run(["ip", "netns", "pids", netns], capture_output=True, text=True)
        return [int(p) for p in done.stdout.split()]

    # ------------------------------------------------------------------ teardown
    def down(self) -> list[str]:
        """Stop every process and remove every namespace of this run; returns what it had
        to kill beyond the processes it started (empty when all went by PID)."""
        for proc in reversed(self._procs):
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + 10
        for proc in self._procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(max(0.1, deadline - time.monotonic()))
            self.kill(proc)
        self._procs.clear()
        strays = []
        for name in reversed(self._made):
            # A process left in a namespace of this run descends from one the harness
            # started (nothing else enters these namespaces): stop it by its PID.
            for pid in self.pids(name):
                strays.append(f"{name}:{pid}")
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            subprocess.run(["ip", "netns", "del", name], capture_output=True, check=False)
        self._made.clear()
        self.hosts.clear()
        return strays
