"""Cluster config files: each option checked against what the cluster class and its workers
take, before anything starts; a memory limit no worker process can start under named (the CLI
in a subprocess)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from dkernel import DKernelError
from dkernel.runtime import load_cluster_config, make_cluster


def _config(tmp_path, options: str, kind: str = "local"):
    path = tmp_path / "c.yaml"
    path.write_text(f"cluster:\n  kind: {kind}\n  options: {options}\n")
    return str(path)


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ("{bogus: 1}", "unknown option 'bogus' (not taken by LocalCluster, Nanny, Worker)"),
        ("{n_worker: 1}", "did you mean 'n_workers'?"),
        ("{memory_limit: 1MiB}", "memory_limit '1MiB' is too small for a worker process"),
    ],
)
def test_bad_local_options_named_in_one_line(tmp_path, options, words):
    path = _config(tmp_path, options)
    with pytest.raises(DKernelError, match=f"cluster config {path!r}: .*") as err:
        load_cluster_config(path)
    assert words in str(err.value)
    with pytest.raises(DKernelError, match="unknown option|too small"):
        make_cluster(path)
    out = subprocess.run([sys.executable, "-m", "dkernel", "--cluster", path, "check", "x.zarr"],
                         capture_output=True, text=True, timeout=120, cwd=tmp_path)  # fmt: skip
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and words in out.stderr, out.stderr


def test_jobqueue_options_checked(tmp_path):
    pytest.importorskip("dask_jobqueue")
    with pytest.raises(DKernelError, match="unknown option 'bogus'"):
        load_cluster_config(_config(tmp_path, "{cores: 1, memory: 4GiB, bogus: 1}", "slurm"))
    load_cluster_config(
        _config(tmp_path, "{cores: 1, memory: 4GiB, walltime: '01:00:00'}", "slurm")
    )


def test_shipped_configs_pass():
    import pathlib

    paths = sorted(pathlib.Path(__file__).parent.parent.glob("cluster-configs/*.yaml"))
    assert paths, "no cluster-configs/*.yaml found"
    for path in paths:
        cfg = load_cluster_config(path)
        assert cfg["kind"] in ("local", "slurm", "pbs", "scheduler-file", "address"), path
