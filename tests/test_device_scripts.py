"""benchmarks/device/: the scripts that run the scaling protocol on a bare 16-core machine
(DEVELOPERS.md) are valid shell, and the wheels they carry there are the locked versions."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEVICE = os.path.join(ROOT, "benchmarks", "device")
WHEELS = os.path.join(DEVICE, "wheels.sh")
SCALING = os.path.join(DEVICE, "scaling.sh")
LOCK = os.path.join(ROOT, "requirements", "constraints.txt")


@pytest.mark.parametrize("path", [WHEELS, SCALING])
def test_valid_bash(path):
    assert subprocess.run(["bash", "-n", path], timeout=60).returncode == 0
    assert os.stat(path).st_mode & stat.S_IXUSR


@pytest.mark.skipif(shutil.which("shellcheck") is None, reason="shellcheck not installed")
def test_shellcheck_clean():
    res = subprocess.run(
        ["shellcheck", WHEELS, SCALING], capture_output=True, text=True, timeout=120
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
