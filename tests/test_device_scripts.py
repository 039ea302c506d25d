"""benchmarks/device/: the scripts that run the scaling protocol on a bare 16-core machine
(DEVELOPERS.md) are valid shell, and the wheels they carry there are the locked versions."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEVICE = os.path.join(ROOT, "benchmarks", "device")
WHEELS = os.path.join(DEVICE, "wheels.sh")
SCALING = os.path.join(DEVICE, "scaling.sh")
ENV = os.path.join(DEVICE, "env.sh")
LOCK = os.path.join(ROOT, "requirements", "constraints.txt")


@pytest.mark.parametrize("path", [WHEELS, SCALING, ENV])
def test_valid_bash(path):
    assert subprocess.run(["bash", "-n", path], timeout=60).returncode == 0
    if path != ENV:  # sourced, not run
        assert os.stat(path).st_mode & stat.S_IXUSR


@pytest.mark.skipif(shutil.which("shellcheck") is None, reason="shellcheck not installed")
def test_shellcheck_clean():
    res = subprocess.run(
        ["shellcheck", "-x", WHEELS, SCALING, ENV],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert res.returncode == 0, res.stdout


def _locked_for_312() -> dict[str, str]:
    """name -> version of each pin in the lock that holds under Python 3.12."""
    out = {}
    with open(LOCK, encoding="utf-8") as fh:
        for line in fh:
            if line.startswith((" ", "#")) or "==" not in line:
                continue
            spec, _, marker = line.strip().partition(" ; ")
            if marker and "< '3.12'" in marker:
                continue
            name, version = spec.split("==")
            out[name] = version
    return out


def test_wheels_are_the_locked_versions():
    """``wheels.sh --list`` (nothing fetched) names Dask, distributed and zarr with the
    versions the lock pins for Python >= 3.12 (zarr's differs from 3.11's), and nothing the
    lock does not pin."""
    res = subprocess.run(["bash", WHEELS, "--list"], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    specs = dict(line.split("==") for line in res.stdout.split())
    assert {"dask", "distributed", "zarr", "numcodecs"} <= set(specs)
    locked = _locked_for_312()
    assert {name: locked.get(name) for name in specs} == specs


def _source_env(cwd, python: str) -> subprocess.CompletedProcess:
    script = (
        f'set -e; . "{ENV}"; echo "PY=$PY"; echo "PYTHONPATH=$PYTHONPATH"; echo "STORES=$STORES"'
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHON"] = python
    return subprocess.run(
        ["bash", "-c", script], cwd=cwd, env=env, capture_output=True, text=True, timeout=60
    )


def test_env_without_dask_or_wheels_stops_and_says_so(tmp_path):
    """On a machine whose Python lacks Dask and a checkout without .whl/, sourcing env.sh
    stops the script (status 2) with one line saying what to run first."""
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\nexit 1\n", encoding="utf-8")  # no module imports
    fake.chmod(0o755)
    res = _source_env(tmp_path, str(fake))
    assert res.returncode == 2 and "PY=" not in res.stdout
    assert "no wheels" in res.stderr and "wheels.sh" in res.stderr


def test_env_with_dask_puts_the_checkout_first(tmp_path):
    """Where Dask and zarr import, nothing is installed: the checkout (the working
    directory) leads PYTHONPATH and the stores go under /tmp."""
    res = _source_env(tmp_path, sys.executable)
    assert res.returncode == 0, res.stderr
    lines = dict(line.split("=", 1) for line in res.stdout.splitlines())
    assert lines["PY"] == sys.executable
    assert lines["PYTHONPATH"] == str(tmp_path)
    assert lines["STORES"] == "/tmp/dkernel-bench-data"
