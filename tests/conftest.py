"""Shared fixtures: seeds, the two schedulers every Dask path is tested on."""

from __future__ import annotations

import os
import sys
import tempfile
import threading
from collections import Counter

# dask-jobqueue writes jobqueue.yaml into the Dask config folder on import: keep it in a
# temporary folder, never the user's ~/.config/dask.
os.environ.setdefault("DASK_CONFIG", tempfile.mkdtemp(prefix="dkernel-dask-config-"))
os.environ.setdefault("NUMBA_NUM_THREADS", "1")

import dask
import numpy as np
import pytest


@pytest.fixture
def seed() -> int:
    return 0


@pytest.fixture
def rng(seed) -> np.random.Generator:
    return np.random.default_rng(seed)


@pytest.fixture
def dkernel_config():
    """Set ``dkernel.*`` settings (runtime/dkernel.yaml) for the rest of a test, through
    Dask's config as a user would: ``dkernel_config({"kernels.tile-bytes": 1})``."""
    import contextlib

    with contextlib.ExitStack() as stack:

        def set_values(values: dict) -> None:
            stack.enter_context(dask.config.set({f"dkernel.{k}": v for k, v in values.items()}))

        yield set_values


#: The listeners of Python's audit events (PEP 578) while a test uses the ``audit`` fixture.
_AUDIT_LISTENERS: list = []
_AUDIT_LOCK = threading.Lock()
_AUDIT_HOOKED: list = []  # the hook, once added


def _audit_hook(event: str, args: tuple) -> None:
    if _AUDIT_LISTENERS:  # the common case costs one test
        for listener in tuple(_AUDIT_LISTENERS):
            listener(event, args)


@pytest.fixture
def audit():
    """Watch the process from outside for the rest of a test: ``audit(fn)`` calls
    ``fn(event, args)`` for every Python audit event (``open``, ``os.rename``,
    ``os.mkdir``...; ``sys.addaudithook``), in the thread that raises it: the file reads
    and writes of a pass, whichever code makes them. The hook is added once per process
    (audit hooks cannot be removed); outside such a test it has no listener."""
    with _AUDIT_LOCK:
        if not _AUDIT_HOOKED:
            sys.addaudithook(_audit_hook)
            _AUDIT_HOOKED.append(_audit_hook)
    added: list = []

    def listen(fn) -> None:
        added.append(fn)
        _AUDIT_LISTENERS.append(fn)

    yield listen
    for fn in added:
        _AUDIT_LISTENERS.remove(fn)


@pytest.fixture
def file_reads(audit):
    """``file_reads(key)``: a Counter of the files this process opens for reading for the
    rest of the test, by any thread (zarr's reads and dkernel's direct chunk reads alike),
    counted under ``key(path)`` (files whose key is None are not counted)."""

    def watch(key) -> Counter:
        counts: Counter = Counter()
        lock = threading.Lock()

        def on_open(event: str, args: tuple) -> None:
            if event != "open" or isinstance(args[0], int):
                return
            path, mode, flags = args
            if mode is None:  # os.open: the flags tell
                writes = flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT)
            else:
                writes = any(c in mode for c in "wax+")
            name = None if writes else key(os.path.abspath(os.fsdecode(os.fspath(path))))
            if name is not None:
                with lock:
                    counts[name] += 1

        audit(on_open)
        return counts

    return watch


@pytest.fixture(scope="session")
def local_cluster_client():
    """One in-process LocalCluster (2 workers x 1 thread) for the whole session."""
    from distributed import Client, LocalCluster

    cluster = LocalCluster(
        n_workers=2, threads_per_worker=1, processes=False, dashboard_address="127.0.0.1:0"
    )
    client = Client(cluster, set_as_default=False)
    yield client
    client.close()
    cluster.close()


@pytest.fixture(scope="session")
def cli_cluster(local_cluster_client) -> str:
    """``--cluster`` value of the shared in-process cluster: CLI tests connect to it instead
    of starting a cluster each (a command's client closes; the cluster stays)."""
    return local_cluster_client.scheduler.address


@pytest.fixture
def no_cluster(monkeypatch):
    """CLI tests: any attempt to start or connect a cluster fails the test."""
    import dkernel.runtime

    def refuse(*args, **kwargs):
        raise AssertionError("a cluster was started before the arguments were checked")

    monkeypatch.setattr(dkernel.runtime, "get_client", refuse)


@pytest.fixture
def rounds_only():
    """A distributed BudgetedSVC trains in rounds from its first step (no stream prefix:
    ``dkernel.svm.prefix-steps: 0``), so that tests on small data exercise the rounds."""
    with dask.config.set({"dkernel.svm.prefix-steps": 0}):
        yield


@pytest.fixture
def jupyter_kernel(monkeypatch):
    """``jupyter_kernel()``: from then on, for the rest of the test, the process looks like
    a Jupyter kernel to the progress bar's choice (IPython's ``get_ipython()`` returns a
    shell whose config names ``IPKernelApp``)."""
    import types

    def enter() -> None:
        kernel = types.SimpleNamespace(config={"IPKernelApp": {}})  # a Jupyter kernel's shell
        ipython = types.SimpleNamespace(get_ipython=lambda: kernel)
        monkeypatch.setitem(sys.modules, "IPython", ipython)

    return enter


@pytest.fixture(params=["threads", "distributed"])
def scheduler(request):
    """Run the test body under the threaded scheduler, then under a LocalCluster client.

    Yields the client (or ``None`` for the threaded scheduler).
    """
    if request.param == "threads":
        with dask.config.set(scheduler="threads"):
            yield None
    else:
        client = request.getfixturevalue("local_cluster_client")
        with client.as_current(), dask.config.set(scheduler=client):
            yield client


@pytest.fixture
def demo_step(capsys):
    """``demo_step(title)``: the number ``dkernel demo --only`` takes for the step of that
    title, read from the command's own help (as a user finds it)."""
    import re

    from dkernel.cli import main

    def number(title: str) -> int:
        try:
            assert main(["demo", "--help"]) == 0
        except SystemExit as done:  # argparse's exit, where main lets it through
            assert done.code == 0
        text = " ".join(capsys.readouterr().out.split())
        found = re.search(r"(\d+) " + re.escape(title), text)
        assert found, f"no demo step {title!r} in: {text}"
        return int(found.group(1))

    return number
