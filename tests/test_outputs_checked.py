"""Every output is checked before the work, locally and on object storage (a real S3 server,
moto, on 127.0.0.1; the CLI in this process): a trailing '/' is a folder and refused, a
missing bucket or a dead endpoint is named at once."""

from __future__ import annotations

import os
import time
import uuid

import _s3server
import dask.config
import numpy as np
import pytest

from dkernel import DKernelError
from dkernel.cluster import MiniBatchKernelKMeans
from dkernel.data import check_output


@pytest.fixture(scope="module")
def s3():
    proc, server = _s3server.start()
    saved = {k: os.environ.get(k) for k in server.env()}
    os.environ.update(server.env())
    try:
        bucket = f"dk-{uuid.uuid4().hex[:12]}"
        _s3server.make_bucket(server, bucket)
        yield server, bucket
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        _s3server.stop(proc)


@pytest.fixture(scope="module")
def model():
    X = np.random.default_rng(0).standard_normal((300, 3))
    return MiniBatchKernelKMeans(2, batch_size=64, max_iter=3, random_state=0).fit(X)


def test_trailing_slash_is_a_folder(s3, tmp_path, model):
    _, bucket = s3
    for path in (f"s3://{bucket}/models/", str(tmp_path / "lm") + "/"):
        with pytest.raises(DKernelError, match="ends with '/' and so names a folder"):
            model.save(path)
    assert not (tmp_path / "lm").exists()
    assert not any(p.name == "models" for p in tmp_path.iterdir())
    from dkernel.data import file_size

    assert file_size(f"s3://{bucket}/models") is None
    model.save(f"s3://{bucket}/models/km.npz")  # inside the folder, named
    assert file_size(f"s3://{bucket}/models/km.npz") > 0
    with pytest.raises(DKernelError, match="is a folder"):  # objects lie below it
        model.save(f"s3://{bucket}/models")


def test_remote_output_named_before_work(s3, model):
    t0 = time.monotonic()
    with pytest.raises(DKernelError, match="no bucket 'nosuchbucket-x'"):
        check_output("s3://nosuchbucket-x/m.npz", "model file")
    with pytest.raises(DKernelError, match="no bucket"):
        MiniBatchKernelKMeans(2, checkpoint="s3://nosuchbucket-x/c.npz").fit(np.ones((50, 2)))
    with pytest.raises(DKernelError, match="s3://nosuchbucket-x/m.npz"):
        model.save("s3://nosuchbucket-x/m.npz")
    assert time.monotonic() - t0 < 10


def test_dead_endpoint_named_within_bound():
    port = _s3server.free_port()
    opts = {"endpoint_url": f"http://127.0.0.1:{port}", "key": "k", "secret": "s"}
    t0 = time.monotonic()
    with dask.config.set({"dkernel.storage.timeout": 1, "dkernel.storage.retries": 1}):
        with pytest.raises(
            DKernelError, match="model file 's3://b/m.npz': cannot connect to the storage endpoint"
        ):
            check_output("s3://b/m.npz", "model file", storage_options=opts)
    assert time.monotonic() - t0 < 5


def test_cli_checks_outputs_before_training(s3, tmp_path, no_cluster, capsys):
    """Each refused output is one error line and exit status 2, before a cluster starts
    (``no_cluster``: starting one fails the test). The S3 server's endpoint and keys are
    in the environment (the ``s3`` fixture), as a user's shell has them."""
    _, bucket = s3
    from dkernel.cli.main import main
    from dkernel.data import ingest

    X = np.random.default_rng(0).standard_normal((2000, 4)).astype(np.float32)
    store = ingest(X, tmp_path / "g.zarr", y=(X[:, 0] > 0).astype(int)).path
    for args, words in [
        (["svm", "train", store, "s3://nosuchbucket-x/m.npz"], "no bucket 'nosuchbucket-x'"),
        (["svm", "train", store, f"s3://{bucket}/m/"], "ends with '/'"),
        (["svm", "train", store, str(tmp_path) + "/lm/"], "ends with '/'"),
        (
            [
                "svm",
                "train",
                store,
                str(tmp_path / "m.npz"),
                "--checkpoint",
                "s3://nosuchbucket-x/c.npz",
            ],
            "no bucket",
        ),
    ]:
        assert main(args) == 2
        lines = capsys.readouterr().err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("dkernel: error: "), lines
        assert words in lines[0], lines


def test_store_prefix_probed(s3):
    from dkernel.data import check_prefix_writable, ingest, open_dataset

    _, bucket = s3
    url = f"s3://{bucket}/p.zarr"
    ingest(np.ones((10, 2)), url)
    check_prefix_writable(url)  # the probe is written and deleted: the store is unchanged
    assert open_dataset(url).n_samples == 10
    from dkernel.data import as_location

    loc = as_location(url)
    assert not [n for n in loc.fs.ls(loc.path, refresh=True) if "probe" in n]
    with pytest.raises(DKernelError, match="no bucket 'nosuchbucket-x'"):
        check_prefix_writable("s3://nosuchbucket-x/p.zarr")
