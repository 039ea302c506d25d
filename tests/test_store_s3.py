"""Stores on object storage, against a real S3 API server (moto's server mode) on 127.0.0.1.

The clients are the real ones (s3fs/aiobotocore through zarr's FsspecStore), configured by
the standard ``AWS_*`` variables or by ``storage_options``; the server is a separate process
speaking HTTP, and its access log counts the requests.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid

import _s3server
import numpy as np
import pytest

import dkernel
from dkernel.data import ingest, open_dataset, write_array


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    """A moto S3 server for this module, with the ``AWS_*`` variables pointing at it."""
    log = str(tmp_path_factory.mktemp("s3") / "access.log")
    proc, server = _s3server.start(log=log)
    saved = {k: os.environ.get(k) for k in server.env()}
    os.environ.update(server.env())
    try:
        yield server, log
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        _s3server.stop(proc)


@pytest.fixture
def bucket(s3):
    name = f"dk-{uuid.uuid4().hex[:12]}"
    _s3server.make_bucket(s3[0], name)
    return name


def _data(n=3000, d=6, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)).astype(np.float32)
    y = (X[:, 0] * X[:, 1] > 0).astype(np.int64)
    return X, y


def test_roundtrip_equals_local(tmp_path, bucket):
    X, y = _data()
    url = f"s3://{bucket}/data.zarr"
    ds = ingest(X, url, y=y, chunk_rows=700)
    local = ingest(X, tmp_path / "data.zarr", y=y, chunk_rows=700)
    assert ds.path == url and ds.X.chunks == local.X.chunks
    again = open_dataset(url)
    np.testing.assert_array_equal(again.X.compute(), X)
    np.testing.assert_array_equal(again.y.compute(), y)
    assert again.attrs["classes"] == local.attrs["classes"] == [0, 1]
    assert again.attrs["n"] == 3000 and again.attrs["chunk_rows"] == 700


def test_storage_options_instead_of_environment(s3, bucket, monkeypatch):
    server, _ = s3
    X, y = _data(200)
    url = f"s3://{bucket}/opts.zarr"
    ingest(X, url, y=y)
    for k in ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(k)
    ds = open_dataset(url, storage_options=server.storage_options())
    np.testing.assert_array_equal(ds.X.compute(scheduler="threads"), X)


def test_open_and_pass_request_counts(s3, bucket):
    """Opening reads the head and one metadata object per array; a pass one GET per chunk."""
    _, log = s3
    X, _ = _data(5000)
    url = f"s3://{bucket}/count.zarr"
    ingest(X, url, chunk_rows=250)  # 20 chunks
    before = _s3server.count_requests(log, needle=bucket)
    ds = open_dataset(url)
    opened = _s3server.count_requests(log, needle=bucket)
    assert opened - before == 2  # dkernel.json + X's zarr.json
    ds.X.sum().compute(scheduler="sync")
    first = _s3server.count_requests(log, needle=bucket)
    chunk_gets = _s3server.count_requests(log, needle=f"{bucket}/count.zarr/X.v-")
    assert first - opened == 20 + 1  # each chunk once, the array's metadata once per process
    ds.X.sum().compute(scheduler="sync")
    second = _s3server.count_requests(log, needle=bucket)
    assert second - first == 20
    assert _s3server.count_requests(log, needle=f"{bucket}/count.zarr/X.v-") - chunk_gets == 20
    assert _s3server.count_requests(log, method="HEAD", needle=f"{bucket}/count.zarr/X.v-") == 0


def test_each_pass_of_the_algorithms_is_one_get_per_chunk(s3, bucket, local_cluster_client):
    """On S3: the SGD stream (two epochs), a pass over a row slice, and the coreset's leaves
    GET each chunk they cover once per pass (chunks of 500 rows divide the stream's blocks
    and the 1000-row leaves)."""
    from dkernel.coreset import distributed_coreset
    from dkernel.svm import BudgetedSVC

    _, log = s3
    X, y = _data(4000)
    url = f"s3://{bucket}/passes.zarr"
    ingest(X, url, y=y, chunk_rows=500)  # 8 chunks

    def gets(array):
        return _s3server.count_requests(log, needle=f"{bucket}/passes.zarr/{array}.v-", also="/c/")

    with local_cluster_client.as_current():
        x0, y0 = gets("X"), gets("y")
        clf = BudgetedSVC(budget=40, gamma=0.5, max_iter=2, refit=False, random_state=0)
        clf.fit(url)
        assert (gets("X") - x0, gets("y") - y0) == (2 * 8, 2 * 8)
        ds = open_dataset(url)
        x0 = gets("X")
        clf.predict(ds.X[1200:2600]).compute()  # chunks 2-5
        assert gets("X") - x0 == 4
        x0, y0 = gets("X"), gets("y")
        distributed_coreset(ds, None, 200, leaf_size=1000, random_state=0)
        assert (gets("X") - x0, gets("y") - y0) == (8, 8)


def _dead_publish(bucket, name, monkeypatch):
    """A store overwritten by a writer that died after its head's PUT, before deleting the
    prefixes it replaced: ``(url, data, the replaced prefixes, a listing function)``."""
    X, y = _data(300)
    url = f"s3://{bucket}/{name}"
    replaced = set(ingest(X, url, y=y, chunk_rows=100).arrays.values())
    fs = open_dataset(url).location.fs  # the store's client (one per process and options)
    monkeypatch.setattr(fs, "rm", lambda *a, **k: None)  # dies before deleting
    ingest(X + 1, url, y=y, chunk_rows=100, overwrite=True)
    monkeypatch.undo()

    def names():
        return {p.rsplit("/", 1)[-1] for p in fs.ls(f"{bucket}/{name}", refresh=True)}

    assert replaced <= names()  # left behind, unreferenced
    return url, (X, y), replaced, names


def test_prefixes_a_dead_publish_left_are_removed_whoever_wrote_them(bucket, monkeypatch):
    """A writer dies after its head's PUT, before deleting the prefixes it replaced: those
    prefixes are of this (live) process, which would mark them as a write in progress, but
    the head names them retired, so the next writer deletes them."""
    url, (X, y), _, names = _dead_publish(bucket, "p.zarr", monkeypatch)
    again = ingest(X + 2, url, y=y, chunk_rows=100, overwrite=True)
    assert names() == {"dkernel.json", *again.arrays.values()}
    np.testing.assert_array_equal(open_dataset(url).X.compute(), X + 2)


def test_write_array_removes_the_prefixes_a_dead_publish_retired(bucket, monkeypatch):
    """The next writer may be ``write_array``: it reads the head's retired prefixes too."""
    url, (_, y), replaced, names = _dead_publish(bucket, "r.zarr", monkeypatch)
    write_array(url, "labels", y)
    assert not replaced & names()
    np.testing.assert_array_equal(open_dataset(url).read("labels").compute(), y)


def test_write_array_and_overwrite_publish_whole(bucket):
    X, y = _data(1000)
    url = f"s3://{bucket}/w.zarr"
    ingest(X, url, y=y, chunk_rows=300)
    write_array(url, "labels", y * 3)
    np.testing.assert_array_equal(open_dataset(url).read("labels").compute(), y * 3)
    with pytest.raises(dkernel.DKernelError, match="already has an array 'labels'"):
        write_array(url, "labels", y)
    write_array(url, "labels", y + 1, overwrite=True)
    np.testing.assert_array_equal(open_dataset(url).read("labels").compute(), y + 1)
    with pytest.raises(dkernel.DKernelError, match="already exists"):
        ingest(X, url, y=y)
    ingest(2 * X, url, y=y, overwrite=True)
    ds = open_dataset(url)
    np.testing.assert_array_equal(ds.X.compute(), 2 * X)
    with pytest.raises(dkernel.DKernelError, match="no array 'labels'"):
        ds.read("labels")
    # nothing of the replaced writes is left: the head and one prefix per array
    fs = ds.location.fs
    names = sorted(p.rsplit("/", 1)[-1] for p in fs.ls(f"{bucket}/w.zarr", refresh=True))
    assert names[0] == "X" + names[0][1:] and len(names) == 3 and "dkernel.json" in names


def test_refuses_a_prefix_that_is_not_a_store(s3, bucket):
    import s3fs

    client = s3fs.S3FileSystem(**s3[0].storage_options())
    client.pipe(f"{bucket}/other/readme.txt", b"not a store")
    X, y = _data(100)
    with pytest.raises(dkernel.DKernelError, match="holds other objects"):
        ingest(X, f"s3://{bucket}/other", y=y, overwrite=True)
    with pytest.raises(dkernel.DKernelError, match="no dataset store at 's3://"):
        open_dataset(f"s3://{bucket}/missing.zarr")


_WRITER = textwrap.dedent(
    """
    import sys, numpy as np
    from dkernel.data import ingest
    X = np.full((40000, 16), float(sys.argv[2]), dtype=np.float32)
    print("start", flush=True)
    ingest(X, sys.argv[1], y=np.arange(40000) % 2, chunk_rows=1000, overwrite=True,
           compressors=None)
    print("done", flush=True)
    """
)


def test_kill_9_during_overwrite_leaves_the_previous_store(bucket, tmp_path):
    """SIGKILL an overwriting writer at several moments: the store opens and reads as the old
    one (or, once published, as the complete new one); dead writes are cleaned later."""
    url = f"s3://{bucket}/k.zarr"
    old = np.full((40000, 16), 1.0, dtype=np.float32)
    ingest(old, url, y=np.arange(40000) % 2, chunk_rows=1000, compressors=None)
    script = tmp_path / "writer.py"
    script.write_text(_WRITER)
    outcomes = set()
    for delay in (0.5, 1.0, 1.5, 2.5):
        proc = subprocess.Popen(
            [sys.executable, str(script), url, "2.0"], stdout=subprocess.PIPE, text=True
        )
        assert proc.stdout.readline().strip() == "start"
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
        ds = open_dataset(url)
        X = ds.X.compute(scheduler="sync")
        value = float(X[0, 0])
        assert value in (1.0, 2.0)
        np.testing.assert_array_equal(X, np.full_like(old, value))  # never a mix
        outcomes.add(value)
        if value == 2.0:  # published: put the old one back for the next try
            ingest(old, url, y=np.arange(40000) % 2, chunk_rows=1000, overwrite=True)
    assert 1.0 in outcomes  # at least one kill landed before the publish
    # a request the last writer had in flight may still land on the server after its death:
    # wait until the listing holds still, then the next writer removes every dead write
    fs = open_dataset(url).location.fs
    listed, deadline = None, time.monotonic() + 20
    while time.monotonic() < deadline:
        now = sorted(fs.find(f"{bucket}/k.zarr", refresh=True))
        if now == listed:
            break
        listed = now
        time.sleep(1.0)
    ingest(old, url, y=np.arange(40000) % 2, chunk_rows=1000, overwrite=True)
    left = sorted(p.rsplit("/", 1)[-1] for p in fs.ls(f"{bucket}/k.zarr", refresh=True))
    assert len(left) == 3 and "dkernel.json" in left, left


def test_estimators_on_s3_equal_local(tmp_path, bucket, local_cluster_client):
    """Kernel k-means, BudgetedSVC and the two-pass coreset: same results from S3 as from a
    local store, for the same seed, on a cluster."""
    from dkernel.cluster import MiniBatchKernelKMeans
    from dkernel.coreset import distributed_coreset
    from dkernel.svm import BudgetedSVC

    X, y = _data(4000)
    url = f"s3://{bucket}/est.zarr"
    remote = ingest(X, url, y=y, chunk_rows=500)
    local = ingest(X, tmp_path / "est.zarr", y=y, chunk_rows=500)
    client = local_cluster_client
    with client.as_current():
        results = []
        for ds in (local, remote):
            km = MiniBatchKernelKMeans(3, batch_size=256, max_iter=20, random_state=0)
            km.fit(ds.path)
            clf = BudgetedSVC(budget=40, max_iter=1, random_state=0).fit(ds.path)
            core = distributed_coreset(ds.path, None, 200, random_state=0)
            results.append(
                (
                    km.predict(ds.path).compute(),
                    km.inertia_,
                    clf.decision_function(ds.X).compute(),
                    clf.score(ds.X, ds.y),
                    core.X,
                    core.weight,
                )
            )
    for a, b in zip(*results):
        np.testing.assert_array_equal(a, b)


def test_memory_url_round_trip():
    X, y = _data(500)
    url = f"memory://dk-{uuid.uuid4().hex[:8]}/m.zarr"
    ds = ingest(X, url, y=y, chunk_rows=128)
    np.testing.assert_array_equal(open_dataset(url).X.compute(scheduler="sync"), X)
    assert ds.path == url


@pytest.mark.parametrize(
    "url, match",
    [
        ("ftp://host/x.zarr", "unsupported store URL"),
        ("s3://bucket-only", "names no key"),
        ("", "must not be empty"),
    ],
)
def test_bad_urls_are_named(url, match):
    with pytest.raises(dkernel.DKernelError, match=match):
        open_dataset(url)


# ----------------------------------------------------------------------------- faults


def _timed_error(func):
    t0 = time.monotonic()
    with pytest.raises(dkernel.DKernelError) as info:
        func()
    return time.monotonic() - t0, str(info.value)


@pytest.fixture
def fast_failing():
    import dask

    with dask.config.set({"dkernel.storage.timeout": 1, "dkernel.storage.retries": 2}):
        yield


def test_fault_no_such_bucket(s3):
    X, y = _data(100)
    _, msg = _timed_error(lambda: ingest(X, "s3://dk-no-such-bucket/a.zarr", y=y))
    assert "no bucket 'dk-no-such-bucket'" in msg and "s3://dk-no-such-bucket/a.zarr" in msg
    _, msg = _timed_error(lambda: open_dataset("s3://dk-no-such-bucket/a.zarr"))
    assert "no dataset store at 's3://dk-no-such-bucket/a.zarr'" in msg


def test_fault_wrong_credentials_named_without_the_secret(tmp_path, fast_failing):
    proc, server = _s3server.start(check_credentials=True)
    try:
        key, secret = _s3server.make_user(server)
        good = {"endpoint_url": server.endpoint, "key": key, "secret": secret}
        _s3server_bucket = f"dk-{uuid.uuid4().hex[:8]}"
        import s3fs

        s3fs.S3FileSystem(**good, skip_instance_cache=True).mkdir(_s3server_bucket)
        url = f"s3://{_s3server_bucket}/a.zarr"
        X, y = _data(200)
        ingest(X, url, y=y, storage_options=good)
        bad = {**good, "secret": "not-the-secret-0123456789"}
        took, msg = _timed_error(lambda: open_dataset(url, storage_options=bad))
        assert url in msg and "access denied" in msg
        assert "not-the-secret" not in msg and secret not in msg
        took, msg = _timed_error(lambda: ingest(X, url + "2", y=y, storage_options=bad))
        assert "access denied" in msg and "not-the-secret" not in msg
        assert took < 30
    finally:
        _s3server.stop(proc)


def test_fault_endpoint_down(fast_failing):
    port = _s3server.free_port()  # nothing listens there
    opts = {"endpoint_url": f"http://127.0.0.1:{port}"}
    took, msg = _timed_error(lambda: open_dataset("s3://dk-any/a.zarr", storage_options=opts))
    assert "s3://dk-any/a.zarr" in msg and "cannot connect" in msg
    assert took < 30


@pytest.mark.parametrize("status, delay", [(503, 0.0), (500, 0.0), (200, 3.0)])
def test_fault_5xx_or_slow_responses_end_in_a_named_error(status, delay, fast_failing):
    bad = _s3server.BadServer(status, delay)
    try:
        opts = {"endpoint_url": bad.endpoint}
        took, msg = _timed_error(lambda: open_dataset("s3://dk-any/a.zarr", storage_options=opts))
        assert "s3://dk-any/a.zarr" in msg
        assert took < 30
    finally:
        bad.close()


def test_fault_server_killed_mid_read(tmp_path, fast_failing):
    """The server dies between chunk reads: the next read is a named error, never zeros."""
    proc, server = _s3server.start()
    try:
        opts = server.storage_options()
        bucket = f"dk-{uuid.uuid4().hex[:8]}"
        _s3server.make_bucket(server, bucket)
        X, y = _data(2000)
        ds = ingest(X, f"s3://{bucket}/a.zarr", y=y, chunk_rows=200, storage_options=opts)
        np.testing.assert_array_equal(ds.X.blocks[0].compute(scheduler="sync"), X[:200])
        _s3server.stop(proc)
        took, msg = _timed_error(lambda: ds.X.blocks[5].compute(scheduler="sync"))
        assert "chunk 5 (rows 1000-1199) cannot be read" in msg and f"s3://{bucket}" in msg
        assert took < 30
    finally:
        _s3server.stop(proc)


# ------------------------------------------------------------------------------- CLI


def test_cli_on_s3_with_storage_options(s3, bucket, tmp_path, monkeypatch, capsys, cli_cluster):
    """Every store and model path of the CLI as an s3:// URL, the endpoint and credentials
    given as --storage-option (no AWS_* variables): the same results as on local paths."""
    from dkernel.cli.main import main

    server, _ = s3
    X, y = _data(3000)
    src = tmp_path / "d.csv"
    np.savetxt(src, np.column_stack([X, y]), delimiter=",", fmt=["%.6f"] * X.shape[1] + ["%d"])
    opts = []
    for k, v in server.storage_options().items():
        if isinstance(v, dict):
            opts += [f"--storage-option={k}.{kk}={vv}" for kk, vv in v.items()]
        else:
            opts += [f"--storage-option={k}={v}"]
    for k in ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(k)

    def run(*args):
        assert main([*opts, *args]) == 0, capsys.readouterr().err
        return json.loads(capsys.readouterr().out)

    outs = {}
    for where in (f"s3://{bucket}/cli", str(tmp_path / "cli")):
        if not where.startswith("s3"):
            os.makedirs(where)
        store = f"{where}/d.zarr"
        info = run("ingest", str(src), store, "--chunk-rows", "1000")
        assert info["n_samples"] == 3000
        km = run("kmeans", store, "--n-clusters", "2", "--seed", "0", "--cluster", cli_cluster)
        svm = run(
            "svm",
            "train",
            store,
            f"{where}/m.npz",
            "--budget",
            "30",
            "--seed",
            "0",
            "--cluster",
            cli_cluster,
        )
        pred = run("svm", "predict", f"{where}/m.npz", store, "--cluster", cli_cluster)
        core = run(
            "coreset",
            store,
            f"{where}/c.zarr",
            "--size",
            "100",
            "--seed",
            "0",
            "--cluster",
            cli_cluster,
        )
        checked = run("check", store, "--cluster", cli_cluster)
        assert checked
        ds = open_dataset(store, storage_options=server.storage_options())
        outs[where[:2]] = (
            ds.read("labels").compute(),
            ds.read(pred["array"]).compute(),
            open_dataset(f"{where}/c.zarr", storage_options=server.storage_options()).X.compute(),
            km.get("inertia"),
            svm.get("n_support"),
            core.get("size"),
        )
    for a, b in zip(outs["s3"], outs[str(tmp_path)[:2]]):
        np.testing.assert_array_equal(a, b)


def test_cli_help_names_the_url_forms(capsys):
    from dkernel.cli.main import main

    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "s3://" in out and "--storage-option" in out


def test_example_runs_against_the_server(s3, bucket):
    """examples/object_storage.py, as a user runs it, against this module's S3 server."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = subprocess.run(
        [sys.executable, os.path.join(root, "examples", "object_storage.py"), f"s3://{bucket}/ex"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **s3[0].env()},
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert f"'store': 's3://{bucket}/ex/checkerboard.zarr'" in out.stdout
    ds = open_dataset(f"s3://{bucket}/ex/checkerboard.zarr")
    assert ds.n_samples == 20_000 and ds.X.numblocks[0] == 5


def test_models_and_checkpoints_on_s3(bucket, tmp_path):
    """A model file and fit checkpoints by URL: the same bytes' worth as on a local disk."""
    from dkernel.cluster import MiniBatchKernelKMeans
    from dkernel.data import load_checkpoint, save_checkpoint
    from dkernel.svm import BudgetedSVC, load_model

    X, y = _data(1500)
    clf = BudgetedSVC(budget=30, max_iter=1, random_state=0).fit(X, y)
    url = f"s3://{bucket}/models/m.npz"
    clf.save(url)
    again = load_model(url)
    np.testing.assert_array_equal(again.decision_function(X), clf.decision_function(X))
    with pytest.raises(dkernel.DKernelError, match="no model file at 's3://"):
        load_model(f"s3://{bucket}/models/none.npz")

    params = {"a": 1}
    save_checkpoint(f"s3://{bucket}/ck/state.npz", {"w": np.arange(4.0), "t": 7}, params=params)
    state = load_checkpoint(f"s3://{bucket}/ck/state.npz", params=params)
    assert state["t"] == 7 and state["w"].tolist() == [0.0, 1.0, 2.0, 3.0]
    assert load_checkpoint(f"s3://{bucket}/ck/none.npz", params=params) is None

    from dkernel.data import file_size

    ck = f"s3://{bucket}/ck/km.npz"
    params = dict(n_clusters=3, max_iter=15, checkpoint_every=5, random_state=0)

    def stop(n_iter, objective):
        if n_iter == 12:
            raise RuntimeError("stopped at 12")

    with pytest.raises(RuntimeError, match="stopped at 12"):
        MiniBatchKernelKMeans(**params, checkpoint=ck).fit(X, callback=stop)
    assert file_size(ck) > 0  # the stopped fit left its checkpoint in the bucket
    km = MiniBatchKernelKMeans(**params, checkpoint=ck).fit(X)  # resumed from it
    local = MiniBatchKernelKMeans(**params, checkpoint=str(tmp_path / "km.npz")).fit(X)
    np.testing.assert_array_equal(km.labels_, local.labels_)
    np.testing.assert_array_equal(km.history_, local.history_)
    # a whole fit's checkpoint is spent: removed from the bucket as from a disk
    assert file_size(ck) is None
    assert not (tmp_path / "km.npz").exists()
    svm = f"s3://{bucket}/ck/svm.npz"
    BudgetedSVC(budget=30, max_iter=2, checkpoint=svm, random_state=0).fit(X, y)
    assert file_size(svm) is None


def test_error_descriptions_read_the_kind_not_the_port_digits():
    from botocore.exceptions import EndpointConnectionError, ReadTimeoutError

    from dkernel.data import describe_error

    url = "http://127.0.0.1:40350/bucket/key"  # a port holding 403 and 50
    assert "did not answer in time" in describe_error(ReadTimeoutError(endpoint_url=url))
    assert "cannot connect" in describe_error(EndpointConnectionError(endpoint_url=url))
    assert "access denied" in describe_error(PermissionError("SignatureDoesNotMatch"))
    assert "no such bucket" in describe_error(FileNotFoundError("NoSuchBucket"))
