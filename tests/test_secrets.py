"""A secret passed any way is never shown: not on stdout or stderr (worker logs included),
not in exceptions, not in the files written. Real S3 server (moto) on 127.0.0.1, the CLI in
a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import uuid

import _s3server
import pytest

from dkernel.data import redact

MARKER = "Zq9Xv7mark3rWp2"


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    proc, server = _s3server.start()
    try:
        bucket = f"dk-{uuid.uuid4().hex[:12]}"
        _s3server.make_bucket(server, bucket)
        env = {**os.environ, **server.env()}
        code = f"import numpy as np; from dkernel.data import ingest; ingest(np.arange(800.).reshape(200, 4), 's3://{bucket}/g.zarr', y=np.arange(200) % 2, chunk_rows=50)"
        subprocess.run([sys.executable, "-c", code], env=env, check=True, timeout=120)
        yield server, bucket
    finally:
        _s3server.stop(proc)


def _env(server, **extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update({"AWS_ENDPOINT_URL": server.endpoint, "AWS_DEFAULT_REGION": "us-east-1",
                "AWS_EC2_METADATA_DISABLED": "true",
                "DASK_DKERNEL__CLUSTER__LOCAL__N_WORKERS": "1"})  # fmt: skip
    env.update(extra)
    return env


def _cli(runs, env, cwd):
    """``dkernel`` with each argument list of ``runs`` in turn, in one subprocess (one
    import); its stdout ends with the exit codes."""
    code = (
        "import json, sys\nfrom dkernel.cli.main import main\n"
        f"codes = [main(a) for a in {runs!r}]\nprint(json.dumps(codes))"
    )
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=cwd,
                         capture_output=True, text=True, timeout=300)  # fmt: skip
    return out, json.loads(out.stdout.strip().splitlines()[-1])


_API = textwrap.dedent("""
    import logging, sys
    logging.basicConfig(level=logging.INFO)
    from dkernel.data import ingest, open_dataset
    opts = {{"endpoint_url": "{ep}", "key": "testing-key", "secret": "{marker}",
            "client_kwargs": {{"region_name": "us-east-1"}}}}
    ds = open_dataset("s3://{bucket}/g.zarr", storage_options=opts)
    print(ds, ds.attrs)
    for store in ("s3://{bucket}/missing.zarr", "s3://nosuchbucket-x/g.zarr"):
        try:
            open_dataset(store, storage_options=opts)
        except Exception as exc:
            print(repr(exc), exc, file=sys.stderr)
    try:
        ingest(ds.X.compute(), "s3://nosuchbucket-x/h.zarr", storage_options=opts)
    except Exception as exc:
        print(repr(exc), file=sys.stderr)
""")


@pytest.mark.parametrize("way", ["storage-option", "storage_options", "url", "environment"])
def test_marker_secret_never_shown(s3, tmp_path, way):
    server, bucket = s3
    store, missing = f"s3://{bucket}/g.zarr", f"s3://{bucket}/missing.zarr"
    env, pre, runs = _env(server, AWS_ACCESS_KEY_ID="testing-key"), [], []
    if way == "storage-option":
        pre = ["--storage-option", f"endpoint_url={server.endpoint}",
               "--storage-option", "key=testing-key", "--storage-option", f"secret={MARKER}"]  # fmt: skip
        runs += [["--storage-option", MARKER, "info", store],
                 ["--storage-option", "client_kwargs=1",
                  "--storage-option", f"client_kwargs.aws_secret_access_key={MARKER}",
                  "info", store]]  # fmt: skip
    elif way == "url":
        store, missing = (
            u.replace("s3://", f"s3://testing-key:{MARKER}@") for u in (store, missing)
        )
        runs.append(["info", f"gs://k:{MARKER}@{bucket}/g.zarr"])
    elif way == "environment":
        env["AWS_SECRET_ACCESS_KEY"] = MARKER
    if way == "storage_options":
        code = _API.format(ep=server.endpoint, marker=MARKER, bucket=bucket)
        outs = [subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path,
                               capture_output=True, text=True, timeout=180)]  # fmt: skip
        assert "Dataset" in outs[0].stdout or "200" in outs[0].stdout, outs[0].stderr
    else:
        outs = []
        for bad in runs:  # a process of its own: nothing remembered from another run
            out, codes = _cli([bad], env, tmp_path)
            outs.append(out)
            assert codes == [2], out.stderr
        out, codes = _cli([[*pre, "info", missing], [*pre, "info", "s3://nosuchbucket-x/g.zarr"],
                           [*pre, "-v", "check", store]], env, tmp_path)  # fmt: skip
        outs.append(out)
        assert codes == [2, 2, 0], out.stderr
    for out in outs:
        assert MARKER not in out.stdout + out.stderr, out.stdout + out.stderr
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert MARKER.encode() not in path.read_bytes(), path


def test_redact_rule():
    assert redact("s3://AKIA:abc@bucket/x") == "s3://***@bucket/x"
    assert redact("aws_secret_access_key=abcdef, region=x") == "aws_secret_access_key=***, region=x"
    assert redact("--storage-option takes KEY=VALUE") == "--storage-option takes KEY=VALUE"
    assert redact("gamma=0.5 n_clusters=3") == "gamma=0.5 n_clusters=3"
