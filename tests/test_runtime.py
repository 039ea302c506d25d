"""Runtime: cluster-config files, jobqueue job scripts, clients, NUMBA_NUM_THREADS, timing."""

from __future__ import annotations

import glob
import logging
import os
import time

import dask
import pytest
import yaml

from dkernel import DKernelError
from dkernel.runtime import (
    CLUSTER_KINDS,
    PauseGuard,
    check_cluster_config,
    get_client,
    load_cluster_config,
    make_cluster,
    timer,
)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIGS = sorted(glob.glob(os.path.join(ROOT, "cluster-configs", "*.yaml")))


def _close(client):
    cluster = client.cluster
    client.close()
    if cluster is not None:
        cluster.close()


def _yaml(tmp_path, doc, name="c.yaml"):
    path = tmp_path / name
    path.write_text(doc if isinstance(doc, str) else yaml.safe_dump(doc), encoding="utf-8")
    return str(path)


def test_every_config_file_loads():
    names = {os.path.basename(p) for p in CONFIGS}
    assert {"local.yaml", "slurm.yaml", "pbs.yaml", "scheduler-file.yaml"} <= names
    for path in CONFIGS:
        cfg = load_cluster_config(path)
        assert cfg["kind"] in CLUSTER_KINDS
        with open(path, encoding="utf-8") as fh:
            assert fh.readline().startswith("#")  # commented for a first-time user


@pytest.mark.parametrize(
    "name, lines",
    [
        (
            "slurm.yaml",
            [
                "#SBATCH -p normal",
                "#SBATCH --cpus-per-task=16",
                "#SBATCH --mem=60G",
                "#SBATCH -t 01:00:00",
                "--nworkers 4",
                "--nthreads 4",
            ],
        ),
        (
            "pbs.yaml",
            [
                "#PBS -q workq",
                "#PBS -l select=1:ncpus=16:mem=64GB",
                "#PBS -l walltime=01:00:00",
                "--nworkers 4",
                "--nthreads 4",
            ],
        ),
    ],
)
def test_jobqueue_cluster_job_script(tmp_path, monkeypatch, name, lines):
    """The object is built (no job is submitted) and its script carries the file's values."""
    monkeypatch.chdir(tmp_path)  # dask-jobqueue creates log_directory in the working dir
    path = os.path.join(ROOT, "cluster-configs", name)
    cluster = make_cluster(path)
    try:
        script = cluster.job_script()
        assert len(cluster.workers) == 0  # nothing submitted
    finally:
        cluster.close()
    assert "export NUMBA_NUM_THREADS=1" in script
    for line in lines:
        assert line in script, (line, script)
    # --mem is dask-jobqueue's rendering of "memory: 64GB" (64e9 bytes = 60 GiB)
    assert load_cluster_config(path)["options"]["memory"] == "64GB"


def test_jobqueue_prologue_is_kept_and_not_doubled(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = load_cluster_config(os.path.join(ROOT, "cluster-configs", "slurm.yaml"))
    cfg = {
        **cfg,
        "options": {
            **cfg["options"],
            "log_directory": None,
            "job_script_prologue": ["module load python", "export NUMBA_NUM_THREADS=2"],
        },
    }
    cluster = make_cluster(cfg)
    try:
        script = cluster.job_script()
    finally:
        cluster.close()
    assert "module load python" in script and script.count("NUMBA_NUM_THREADS") == 1
    with dask.config.set({"dkernel.numba-threads-per-worker": 3}):
        cfg["options"]["job_script_prologue"] = []
        cluster = make_cluster(cfg)
        try:
            assert "export NUMBA_NUM_THREADS=3" in cluster.job_script()
        finally:
            cluster.close()


def test_unknown_jobqueue_option(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = {"kind": "slurm", "options": {"cores": 2, "memory": "1GB", "bogus": 1}}
    with pytest.raises(DKernelError, match=r"unknown option 'bogus' \(not taken by SLURMCluster"):
        make_cluster(cfg)


def test_local_yaml_builds_a_local_cluster(tmp_path):
    cfg = load_cluster_config(os.path.join(ROOT, "cluster-configs", "local.yaml"))
    assert cfg["options"]["processes"] is True and cfg["options"]["n_workers"] == 2
    # the same mapping, with threads instead of processes and no fixed port, stays fast
    cfg = {
        **cfg,
        "options": {
            **cfg["options"],
            "processes": False,
            "n_workers": 1,
            "dashboard_address": ":0",
        },
    }
    cluster = make_cluster(cfg)
    try:
        assert len(cluster.workers) == 1
        assert cluster.scheduler_info["workers"]
    finally:
        cluster.close()
    client = get_client(cfg)
    try:
        assert client.submit(sum, [1, 2]).result() == 3
        assert client.dashboard_link.startswith("http")
    finally:
        _close(client)
    client = get_client(_yaml(tmp_path, {"cluster": cfg, "ignored": 1}))
    try:
        assert len(client.scheduler_info()["workers"]) == 1
    finally:
        _close(client)


def test_scheduler_file_and_address_configs_have_no_cluster_object(tmp_path):
    assert make_cluster({"kind": "scheduler-file", "scheduler_file": "x.json"}) is None
    assert make_cluster({"kind": "address", "address": "tcp://h:1"}) is None


def test_embedded_default_in_process(caplog):
    with caplog.at_level(logging.INFO, logger="dkernel.runtime._client"):
        client = get_client(None, processes=False, n_workers=1)
    try:
        assert client.dashboard_link.startswith("http")
        assert client.dashboard_link in caplog.text
        assert len(client.scheduler_info()["workers"]) == 1
        assert client.submit(lambda x: x + 1, 1).result() == 2
    finally:
        _close(client)


def test_defaults_come_from_the_dask_config():
    assert dask.config.get("dkernel.cluster.local.threads-per-worker") == 1
    assert dask.config.get("dkernel.numba-threads-per-worker") == 1
    with dask.config.set(
        {"dkernel.cluster.local.n-workers": 1, "dkernel.cluster.local.processes": False}
    ):
        client = get_client()
        try:
            assert len(client.scheduler_info()["workers"]) == 1
        finally:
            _close(client)


def test_connect_by_address_and_scheduler_file(tmp_path):
    from distributed import Client, LocalCluster

    cluster = LocalCluster(
        n_workers=1,
        threads_per_worker=1,
        processes=False,
        protocol="tcp://",
        dashboard_address=":0",
    )
    try:
        assert cluster.scheduler_address.startswith("tcp://")
        client = get_client(cluster.scheduler_address)
        try:
            assert client.submit(sum, [2, 3]).result() == 5
            sf = str(tmp_path / "scheduler.json")
            client.write_scheduler_file(sf)
        finally:
            client.close()
        path = _yaml(tmp_path, {"cluster": {"kind": "scheduler-file", "scheduler_file": sf}})
        client = get_client(path)
        try:
            assert client.scheduler.address == cluster.scheduler_address
            assert client.submit(sum, [3, 4]).result() == 7
        finally:
            client.close()
        path = _yaml(
            tmp_path,
            {"cluster": {"kind": "address", "address": cluster.scheduler_address}},
            "a.yaml",
        )
        with Client(cluster, set_as_default=False):
            client = get_client(path)
            try:
                assert client.submit(sum, [1]).result() == 1
            finally:
                client.close()
    finally:
        cluster.close()


def test_unreachable_address():
    with dask.config.set({"distributed.comm.timeouts.connect": "1s"}):
        with pytest.raises(DKernelError, match="cannot connect to the scheduler at tcp://"):
            get_client("tcp://127.0.0.1:1")


@pytest.mark.parametrize(
    "doc, match",
    [
        ("cluster: [unclosed", "is not valid YAML"),
        ("just a string", "needs a top-level 'cluster:' mapping"),
        ("cluster:\n  kind: kubernetes\n", "kind must be one of local, slurm, pbs"),
        ("cluster:\n  options: {}\n", "kind must be one of .* got None"),
        ("cluster:\n  kind: local\n  options: [1, 2]\n", "'options' must be a mapping"),
        ("cluster:\n  kind: scheduler-file\n", "needs 'scheduler_file: <path>'"),
        ("cluster:\n  kind: address\n", "needs 'address: tcp://host:port'"),
    ],
)
def test_bad_config_files(tmp_path, doc, match):
    path = _yaml(tmp_path, doc)
    with pytest.raises(DKernelError, match=match):
        load_cluster_config(path)
    with pytest.raises(DKernelError, match=match):
        get_client(path)


def test_missing_files(tmp_path):
    with pytest.raises(DKernelError, match="does not exist"):
        get_client(str(tmp_path / "nope.yaml"))
    with pytest.raises(DKernelError, match="needs a scheme"):
        get_client("localhost:8786")
    path = _yaml(
        tmp_path,
        {"cluster": {"kind": "scheduler-file", "scheduler_file": str(tmp_path / "gone.json")}},
    )
    with pytest.raises(DKernelError, match="scheduler file .*gone.json' does not exist"):
        get_client(path)
    with pytest.raises(DKernelError, match="kind must be one of"):
        check_cluster_config({"kind": "yarn"})


def test_unknown_local_option():
    with pytest.raises(
        DKernelError, match=r"unknown option 'no_such_option' \(not taken by LocalCluster"
    ):
        make_cluster(
            {"kind": "local", "options": {"processes": False, "n_workers": 1, "no_such_option": 1}}
        )


def test_timer_logs_and_reports(caplog):
    log = logging.getLogger("dkernel.test")
    with caplog.at_level(logging.DEBUG, logger="dkernel.test"):
        with timer("phase", log) as t:
            pass
    assert t["seconds"] >= 0 and "phase: " in caplog.text
    with pytest.raises(KeyError), timer("failing", log) as t:
        raise KeyError("x")
    assert "seconds" in t


def _bound_hosts(http_server) -> set[str]:
    """Hosts the tornado server's listening sockets are bound to."""
    return {sock.getsockname()[0] for sock in http_server._sockets.values()}


def test_embedded_cluster_listens_on_loopback_only(monkeypatch):
    """Scheduler, workers and dashboard on 127.0.0.1; spawned worker processes get
    NUMBA_NUM_THREADS from the nanny, not by inheritance."""
    monkeypatch.delenv("NUMBA_NUM_THREADS", raising=False)
    assert dask.config.get("dkernel.cluster.local.host") == "127.0.0.1"
    client = get_client(None, n_workers=1, processes=True)
    try:
        scheduler = client.cluster.scheduler
        assert scheduler.address.startswith("tcp://127.0.0.1:")
        assert all(w.startswith("tcp://127.0.0.1:") for w in client.scheduler_info()["workers"])
        assert _bound_hosts(scheduler.http_server) == {"127.0.0.1"}
        assert client.dashboard_link.startswith("http://127.0.0.1:")
        got = client.run(lambda: os.environ.get("NUMBA_NUM_THREADS"))
        assert list(got.values()) == ["1"]
    finally:
        _close(client)


def test_listeners_are_configurable():
    with dask.config.set({"dkernel.cluster.local.dashboard-address": "0.0.0.0:0"}):
        client = get_client(None, processes=False, n_workers=1)
    try:
        assert _bound_hosts(client.cluster.scheduler.http_server) == {"0.0.0.0"}
    finally:
        _close(client)


@pytest.mark.timeout(60)  # the bug was a hang: the error must come, and come soon
def test_worker_memory_below_its_resting_use_is_refused_before_work():
    """A worker past its pause threshold at rest would pause for ever (the 250MB hang)."""
    with pytest.raises(DKernelError, match=r"at rest, above the .* it would pause for ever"):
        get_client(None, processes=False, n_workers=1, memory_limit="40MB")


def test_pause_guard_unpauses_a_worker_with_nothing_to_spill(tmp_path):
    """An in-process worker whose limit is below the process's memory pauses at once and
    never resumes (nothing to spill); the guard turns pausing off and the work finishes."""
    from distributed import Client, LocalCluster

    from dkernel.cluster import MiniBatchKernelKMeans
    from dkernel.data import make_rings

    ds = make_rings(2000, random_state=0, store=str(tmp_path / "r.zarr"), chunk_rows=500)

    cluster = LocalCluster(
        n_workers=1,
        threads_per_worker=1,
        processes=False,
        memory_limit="40MB",
        dashboard_address="127.0.0.1:0",
    )
    client = Client(cluster, set_as_default=False)
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            (info,) = client.scheduler_info()["workers"].values()
            if info["status"] == "paused":
                break
            time.sleep(0.05)
        assert info["status"] == "paused"
        fut = client.submit(sum, [1, 2])
        with pytest.raises(TimeoutError):  # the hang
            fut.result(timeout=0.5)
        client.register_plugin(PauseGuard(timeout=0.3, interval=0.1))
        assert fut.result(timeout=10) == 3
        with dask.config.set(scheduler=client):  # a fit under the tiny limit finishes
            km = MiniBatchKernelKMeans(2, batch_size=64, max_iter=3, random_state=0).fit(ds.X)
        assert km.labels_.shape == (2000,)
    finally:
        client.close()
        cluster.close()


def test_get_client_is_idempotent(caplog):
    """Re-running a notebook cell that calls get_client() starts no second cluster."""
    from distributed import Client

    with dask.config.set(
        {"dkernel.cluster.local.n-workers": 1, "dkernel.cluster.local.processes": False}
    ):
        first = get_client()
        try:
            with caplog.at_level(logging.INFO, logger="dkernel.runtime._client"):
                again = get_client()
            assert again is first and again.cluster is first.cluster
            assert "using the current Dask client" in caplog.text
            # not current any more (another default client), asked with the same arguments:
            # the one made before
            with Client(first.cluster, set_as_default=True) as other:
                assert Client.current() is other
                caplog.clear()
                with caplog.at_level(logging.INFO, logger="dkernel.runtime._client"):
                    assert get_client() is other  # the current one
            fresh = get_client(new=True)
            try:
                assert fresh is not first and fresh.cluster is not first.cluster
            finally:
                _close(fresh)
        finally:
            _close(first)
        # closed: the next call makes a new one
        third = get_client()
        try:
            assert third is not first and third.status == "running"
        finally:
            _close(third)


def test_same_options_give_the_client_made_before(caplog):
    first = get_client(None, processes=False, n_workers=1)
    try:
        with caplog.at_level(logging.INFO, logger="dkernel.runtime._client"):
            assert get_client(None, processes=False, n_workers=1) is first
        assert "the client get_client made before" in caplog.text
        other = get_client(None, processes=False, n_workers=1, threads_per_worker=2)
        try:
            assert other is not first
        finally:
            _close(other)
    finally:
        _close(first)


def test_embedded_default_logs_no_wildcard_origin_warning(caplog, monkeypatch):
    # bokeh's logger is quiet until set (the CLI sets it to WARNING, as here)
    monkeypatch.setattr(logging.getLogger("bokeh"), "level", logging.WARNING)
    with caplog.at_level(logging.WARNING):
        client = get_client(None, processes=False, n_workers=1, new=True)
    try:
        assert "Host wildcard" not in caplog.text
    finally:
        _close(client)


def test_groups_page_layout_errors_are_dropped_and_nothing_else():
    """The dashboard's Groups page raises KeyError from ``TaskGroupGraph.update_layout`` on
    ordinary work (an upstream defect, docs/upstream/groups-page-keyerror.md): the embedded
    cluster drops those log records, and keeps every other record of that logger."""
    import sys

    from distributed.dashboard.components.scheduler import TaskGroupGraph

    from dkernel.runtime import GroupsLayoutFilter, local_cluster

    cluster = local_cluster(processes=False, n_workers=1)
    try:
        log = logging.getLogger("distributed.dashboard.components.scheduler")
        quiet = [f for f in log.filters if isinstance(f, GroupsLayoutFilter)]
        assert len(quiet) == 1

        def record(exc_info):
            return logging.LogRecord(log.name, logging.ERROR, __file__, 1, "x", (), exc_info)

        class _Groups:  # the upstream failure, raised from a method of that name
            def update_layout(self):
                raise KeyError("array-1234")

        try:
            _Groups().update_layout()
        except KeyError:
            assert not quiet[0].filter(record(sys.exc_info()))
        try:
            {}["other"]
        except KeyError:
            assert quiet[0].filter(record(sys.exc_info()))  # a KeyError elsewhere is kept
        try:
            raise ValueError("update_layout")
        except ValueError:
            assert quiet[0].filter(record(sys.exc_info()))
        assert quiet[0].filter(record(None))
        assert TaskGroupGraph.update_layout.__name__ == "update_layout"  # what it matches
    finally:
        cluster.close()


def test_shipped_config_has_no_repeated_key():
    """A YAML mapping that names a key twice keeps only the last: the first block's settings
    vanish (two ``svm:`` blocks once dropped ``dkernel.svm.prefix-steps`` silently)."""
    import pathlib

    import yaml

    import dkernel.runtime

    class Strict(yaml.SafeLoader):
        pass

    def mapping(loader, node, deep=False):
        keys = [loader.construct_object(k, deep=deep) for k, _ in node.value]
        repeated = {k for k in keys if keys.count(k) > 1}
        assert not repeated, f"repeated keys {repeated} at line {node.start_mark.line + 1}"
        return yaml.SafeLoader.construct_mapping(loader, node, deep=deep)

    Strict.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, mapping)
    path = pathlib.Path(dkernel.runtime.__file__).parent / "dkernel.yaml"
    yaml.load(path.read_text(), Loader=Strict)
    assert dask.config.get("dkernel.svm.prefix-steps") == 1 << 20
    assert dask.config.get("dkernel.svm.auto-min-rows") == 1 << 24


def test_worker_addresses_survive_the_clients_periodic_refresh(local_cluster_client, monkeypatch):
    """The client's periodic scheduler-info refresh caches no per-worker entries. When it
    ran between ``scheduler_info()``'s fetch and its read of the cache, a job's refit placed
    its parts on no worker (ZeroDivisionError). Here the refresh runs after every blocking
    call, the worst interleaving: placement still sees every worker."""
    from dkernel.data import range_workers
    from dkernel.runtime import worker_addresses

    client = local_cluster_client
    sync = client.sync

    def sync_then_refresh(func, *args, **kwargs):
        out = sync(func, *args, **kwargs)
        sync(client._update_scheduler_info)  # the periodic callback, just after
        return out

    monkeypatch.setattr(client, "sync", sync_then_refresh)
    assert not client.scheduler_info().get("workers")  # the cache the old placement read
    addrs = worker_addresses(client)
    assert len(addrs) == 2
    assert range_workers(client, 3) == [*addrs, addrs[0]]


def test_resident_loads_land_on_their_workers_and_cut_the_rows(local_cluster_client):
    """``ResidentRows.load`` over a dask array whose chunks the ranges cut across: every
    part holds exactly its rows (from the chunks it overlaps, a chunk two ranges share read
    once) and lives on the worker placement gave it; without a client the parts are the
    same values."""
    import dask.array as da
    import numpy as np

    from dkernel.data import ResidentRows

    client = local_cluster_client
    Xn = np.arange(70 * 3, dtype=np.float64).reshape(70, 3)
    yn = np.arange(70)
    X, y = da.from_array(Xn, chunks=(16, 3)), da.from_array(yn, chunks=9)
    ranges = [(0, 23), (23, 50), (50, 51), (51, 70)]

    def load(xr, yr, wr, start):
        return start, xr, yr, wr

    res = ResidentRows.load((X, y, None), ranges, load, client=client, name="test-rows")
    parts = client.gather(res.parts)
    for (s, e), (start, xr, yr, wr) in zip(ranges, parts):
        assert start == s and wr is None
        np.testing.assert_array_equal(xr, Xn[s:e])
        np.testing.assert_array_equal(yr, yn[s:e])
    where = client.who_has(res.parts)
    assert [list(where[f.key]) for f in res.parts] == [[w] for w in res.workers]
    assert len(set(res.workers)) == 2
    here = ResidentRows.load((X, y, None), ranges, load, client=None)
    for a, b in zip(here.parts, parts):
        np.testing.assert_array_equal(a[1], b[1])
        np.testing.assert_array_equal(a[2], b[2])


def _part_and_square(part, k, scale, *, shift):
    import numpy as np

    return part * scale + shift, np.full((2, 2), float(part.sum()) ** 2)


def test_collect_parts_runs_one_task_per_worker_and_sums_pairs_there(local_cluster_client):
    """``collect_parts``: every part's value in part order from one task per worker;
    ``summed``: the second member of each pair added on its worker, one total per worker."""
    import numpy as np

    from dkernel.data import collect_parts, range_workers

    client = local_cluster_client
    owners = range_workers(client, 5)
    arrays = [np.arange(3.0) + 10 * k for k in range(5)]
    parts = [client.scatter(a, workers=[w]) for a, w in zip(arrays, owners)]
    each = [(k + 1.0,) for k in range(5)]
    values, totals = collect_parts(
        client, parts, owners, _part_and_square, each, name="test-collect", stack=True,
        summed=True, shift=0.5,
    )  # fmt: skip
    for k, v in enumerate(values):
        np.testing.assert_array_equal(v, arrays[k] * (k + 1.0) + 0.5)
    assert len(totals) == len(set(owners)) == 2
    for w, total in zip(dict.fromkeys(owners), totals):  # the owners in order of appearance
        mine = [float(a.sum()) ** 2 for a, o in zip(arrays, owners) if o == w]
        np.testing.assert_array_equal(total, np.full((2, 2), sum(mine)))
    plain = collect_parts(client, parts, owners, _part_and_square, each, name="test-plain", shift=0)
    assert [v[0].tolist() for v in plain] == [
        (a * (k + 1.0)).tolist() for k, a in enumerate(arrays)
    ]
