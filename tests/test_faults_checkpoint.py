"""dkernel.data checkpoints: atomic, tied to their parameters; a SIGKILLed loop resumes
to exactly the result of an uninterrupted one."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from dkernel import DKernelError
from dkernel.data import fingerprint, load_checkpoint, save_checkpoint

PARAMS = {"n_clusters": 3, "tol": 0.0, "random_state": 0, "kernel": "rbf"}


def test_roundtrip_arrays_and_values(tmp_path):
    path = tmp_path / "c.npz"
    rng = np.random.default_rng(5)
    state = {
        "centers": rng.standard_normal((3, 2)).astype(np.float32),
        "counts": np.arange(3),
        "n_iter": np.int64(12),
        "inertia": 1.5,
        "rng": rng.bit_generator.state,
        "history": (1.0, 0.5),
    }
    save_checkpoint(path, state, params=PARAMS)
    got = load_checkpoint(path, params=dict(reversed(PARAMS.items())))  # order is irrelevant
    assert got["centers"].dtype == np.float32
    np.testing.assert_array_equal(got["centers"], state["centers"])
    np.testing.assert_array_equal(got["counts"], [0, 1, 2])
    assert got["n_iter"] == 12 and got["inertia"] == 1.5 and got["history"] == [1.0, 0.5]
    again = np.random.default_rng()
    again.bit_generator.state = got["rng"]
    assert again.random() == rng.random()  # the generator resumes where it was
    assert os.listdir(tmp_path) == ["c.npz"]


def test_other_parameters_are_refused_or_ignored(tmp_path):
    path = tmp_path / "c.npz"
    save_checkpoint(path, {"x": np.ones(2)}, params=PARAMS)
    other = {**PARAMS, "n_clusters": 4}
    assert fingerprint(other) != fingerprint(PARAMS)
    with pytest.raises(DKernelError, match="saved by a fit with other parameters"):
        load_checkpoint(path, params=other)
    assert load_checkpoint(path, params=other, on_mismatch="ignore") is None
    assert load_checkpoint(tmp_path / "none.npz", params=PARAMS) is None


def test_bad_files_and_values(tmp_path):
    (tmp_path / "junk.npz").write_bytes(b"not a zip")
    with pytest.raises(DKernelError, match="cannot be read"):
        load_checkpoint(tmp_path / "junk.npz", params=PARAMS)
    np.savez(tmp_path / "plain.npz", x=np.ones(2))
    with pytest.raises(DKernelError, match="is not a dkernel checkpoint"):
        load_checkpoint(tmp_path / "plain.npz", params=PARAMS)
    with pytest.raises(DKernelError, match="NumPy arrays or JSON-like, got object"):
        save_checkpoint(tmp_path / "c.npz", {"x": object()}, params=PARAMS)
    with pytest.raises(DKernelError, match="does not exist"):
        save_checkpoint(tmp_path / "no" / "c.npz", {}, params=PARAMS)
    with pytest.raises(DKernelError, match="on_mismatch must be"):
        load_checkpoint(tmp_path / "c.npz", params=PARAMS, on_mismatch="warn")
    assert not (tmp_path / "c.npz").exists()


_LOOP = textwrap.dedent(
    """
    import os, signal, sys
    import numpy as np
    from dkernel.data import load_checkpoint, save_checkpoint

    path, die_at = sys.argv[1], int(sys.argv[2])
    params = {"steps": 40, "seed": 3}
    state = load_checkpoint(path, params=params)
    if state is None:
        rng = np.random.default_rng(params["seed"])
        state = {"step": 0, "w": np.zeros(4), "rng": rng.bit_generator.state}
    rng = np.random.default_rng()
    rng.bit_generator.state = state["rng"]
    w, step = state["w"], state["step"]
    while step < params["steps"]:
        w = 0.9 * w + rng.standard_normal(4)  # a stochastic fit: the rng must resume too
        step += 1
        if step % 5 == 0:
            save_checkpoint(path, {"step": step, "w": w, "rng": rng.bit_generator.state},
                            params=params)
        if step == die_at:
            os.kill(os.getpid(), signal.SIGKILL)
    print(repr(w.tolist()))
    """
)


def test_killed_loop_resumes_to_the_uninterrupted_result(tmp_path):
    def run(path, die_at):
        return subprocess.run(
            [sys.executable, "-c", _LOOP, str(path), str(die_at)],
            capture_output=True,
            text=True,
            timeout=120,
        )

    ref = run(tmp_path / "ref.npz", -1)
    assert ref.returncode == 0, ref.stderr
    killed = run(tmp_path / "c.npz", 23)  # dies 3 steps after the checkpoint of step 20
    assert killed.returncode == -signal.SIGKILL
    assert load_checkpoint(tmp_path / "c.npz", params={"steps": 40, "seed": 3})["step"] == 20
    resumed = run(tmp_path / "c.npz", -1)
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout == ref.stdout
