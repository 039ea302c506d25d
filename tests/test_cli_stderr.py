"""What the CLI prints on stderr, in a subprocess with its own LocalCluster of worker
processes: a failed ``check`` is one ``dkernel: error:`` line (no worker's "Compute Failed"
report), and a successful command on an S3 store (a real S3 server, moto, on 127.0.0.1)
prints the dashboard line and nothing else (the workers' storage sessions are closed)."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid

import _s3server
import numpy as np

from dkernel.data import ingest


def _env(**extra):
    return {**os.environ, "DASK_DKERNEL__CLUSTER__LOCAL__N_WORKERS": "2", **extra}


def _cli(*args, env):
    return subprocess.run([sys.executable, "-m", "dkernel", *args], env=env,
                          capture_output=True, text=True, timeout=300)  # fmt: skip


def test_check_of_a_corrupt_chunk_is_one_error_line(tmp_path):
    X = np.random.default_rng(0).standard_normal((6000, 4))
    ds = ingest(X, tmp_path / "g.zarr", chunk_rows=500)
    chunk = tmp_path / "g.zarr" / "X" / "c" / "5" / "0"
    raw = bytearray(chunk.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    chunk.write_bytes(bytes(raw))
    out = _cli("check", ds.path, env=_env())
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 2, out.stderr
    assert [ln for ln in lines if not ln.startswith("dkernel: dashboard:")] == [
        f"dkernel: error: store {ds.path!r}: array 'X', chunk 5 (rows 2500-2999) is corrupt "
        "(its checksum differs from the manifest)"
    ], out.stderr


def test_success_on_s3_prints_only_the_dashboard_line(tmp_path):
    proc, server = _s3server.start()
    try:
        bucket = f"dk-{uuid.uuid4().hex[:12]}"
        _s3server.make_bucket(server, bucket)
        env = _env(**server.env())
        code = (
            "import numpy as np; from dkernel.data import ingest; ingest(np.random.default_rng"
            f"(0).standard_normal((4000, 4)), 's3://{bucket}/g.zarr', chunk_rows=500)"
        )
        subprocess.run([sys.executable, "-c", code], env=env, check=True, timeout=120)
        out = _cli("check", f"s3://{bucket}/g.zarr", env=env)
    finally:
        _s3server.stop(proc)
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 0, out.stderr
    assert len(lines) == 1 and lines[0].startswith("dkernel: dashboard:"), out.stderr
