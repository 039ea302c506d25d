"""Shared fixtures: seeds, the two schedulers every Dask path is tested on."""

from __future__ import annotations

import os
import tempfile

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
