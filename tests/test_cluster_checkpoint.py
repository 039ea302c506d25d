"""MiniBatchKernelKMeans checkpoints: a fit SIGKILLed half-way resumes to the same model."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import zarr
from sklearn.datasets import load_digits

from dkernel import DKernelError
from dkernel.cli.main import main
from dkernel.cluster import MiniBatchKernelKMeans
from dkernel.data import make_rings, open_dataset

PARAMS = dict(n_clusters=5, batch_size=64, tau=50, max_iter=30, random_state=0)


@pytest.fixture(scope="module")
def X():
    return load_digits().data[:600].astype(np.float32)


@pytest.fixture
def count_steps():
    """Lists the iterations that really run (a resumed fit must skip the saved ones):
    pass ``callback=count_steps`` to ``fit``, which calls it once per iteration with
    ``(n_iter, objective)``; the list keeps each ``n_iter``."""
    return _Steps()


class _Steps(list):
    """A list that is also a ``fit`` callback: each call appends its ``n_iter``."""

    def __call__(self, n_iter, objective):
        self.append(n_iter)


def _same_model(a, b):
    assert np.array_equal(np.asarray(a.labels_), np.asarray(b.labels_))  # dask for dask input
    assert np.array_equal(a.center_support_, b.center_support_)
    assert np.array_equal(a.center_coef_, b.center_coef_)
    assert np.array_equal(a.center_norms_, b.center_norms_)
    assert a.history_ == b.history_
    assert a.inertia_ == b.inertia_
    assert a.n_iter_ == b.n_iter_
    assert a.gamma_ == b.gamma_
    assert a.kernel_evals_ == b.kernel_evals_


_KILLED_FIT = """
import os, signal, sys
import numpy as np
from dkernel.cluster import MiniBatchKernelKMeans

X = np.load(sys.argv[1])

def die(n_iter, objective):
    if n_iter == int(sys.argv[3]):
        os.kill(os.getpid(), signal.SIGKILL)  # the driver dies mid-fit, no cleanup

model = MiniBatchKernelKMeans(**{params}, checkpoint=sys.argv[2], checkpoint_every=10)
model.fit(X, callback=die)
"""


def test_sigkilled_fit_resumes_bit_identical(X, tmp_path, count_steps):
    data, ckpt = str(tmp_path / "X.npy"), str(tmp_path / "fit.ckpt.npz")
    np.save(data, X)
    script = textwrap.dedent(_KILLED_FIT).replace("{params}", repr(PARAMS))
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {**os.environ, "PYTHONPATH": root}
    proc = subprocess.run(
        [sys.executable, "-c", script, data, ckpt, "25"], env=env, capture_output=True
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()[-2000:]
    assert os.path.exists(ckpt)  # the state after iteration 20

    resumed = MiniBatchKernelKMeans(**PARAMS, checkpoint=ckpt).fit(X, callback=count_steps)
    assert count_steps == list(range(21, PARAMS["max_iter"] + 1))  # it skips the saved ones
    assert not os.path.exists(ckpt)  # a finished fit removes its checkpoint
    count_steps.clear()
    _same_model(resumed, MiniBatchKernelKMeans(**PARAMS).fit(X, callback=count_steps))
    assert count_steps == list(range(1, PARAMS["max_iter"] + 1))


def _interrupted(X, ckpt, at, fit_kw=None, **kw):
    """A checkpointed fit stopped by an exception after iteration ``at`` (in process)."""

    def stop(n_iter, objective):
        if n_iter == at:
            raise KeyboardInterrupt

    model = MiniBatchKernelKMeans(**{**PARAMS, **kw}, checkpoint=ckpt)
    with pytest.raises(KeyboardInterrupt):
        model.fit(X, **(fit_kw or {}), callback=stop)


@pytest.mark.parametrize("kind", ["float64-weights", "dask-tol", "reassignment"])
def test_resume_variants(X, tmp_path, kind):
    """Weights, float64 (no centring), dask input with prefetch and tol, and re-seeding
    (its draws from the saved generator) all resume exactly."""
    import dask.array as da

    ckpt = str(tmp_path / "c.npz")
    kw: dict = dict(checkpoint_every=7)
    fit_kw: dict = {}
    data = X
    if kind == "float64-weights":
        data = X.astype(np.float64)
        fit_kw["sample_weight"] = np.random.default_rng(0).uniform(0.5, 2, len(X))
        kw["learning_rate"] = "sklearn"
    elif kind == "dask-tol":
        data = da.from_array(X, chunks=100)
        kw["tol"] = 1e-12
    else:
        kw["reassignment_ratio"] = 0.5
    _interrupted(data, ckpt, 16, fit_kw, **kw)
    assert os.path.exists(ckpt)
    a = MiniBatchKernelKMeans(**PARAMS, **kw, checkpoint=ckpt).fit(data, **fit_kw)
    b = MiniBatchKernelKMeans(**PARAMS, **kw).fit(data, **fit_kw)
    _same_model(a, b)


def test_resume_stops_where_an_uninterrupted_fit_stops(X, tmp_path, count_steps):
    """The early stop replays the saved batch objectives: a fit resumed after the
    checkpoint stops at the same iteration as one never interrupted."""
    ckpt = str(tmp_path / "c.npz")
    kw = dict(max_iter=300, max_no_improvement=4, checkpoint_every=5)
    plain = MiniBatchKernelKMeans(**{**PARAMS, **kw}).fit(X)
    assert 10 < plain.n_iter_ < 300
    _interrupted(X, ckpt, plain.n_iter_ - 2, **kw)
    resumed = MiniBatchKernelKMeans(**{**PARAMS, **kw}, checkpoint=ckpt)
    resumed.fit(X, callback=count_steps)
    assert count_steps[0] > 1 and count_steps[-1] == plain.n_iter_  # from the checkpoint on
    _same_model(resumed, plain)


def test_checkpoint_of_other_parameters_is_refused(X, tmp_path):
    ckpt = str(tmp_path / "c.npz")
    _interrupted(X, ckpt, 15)
    with pytest.raises(DKernelError, match="other parameters"):
        MiniBatchKernelKMeans(**{**PARAMS, "random_state": 1}, checkpoint=ckpt).fit(X)
    with pytest.raises(DKernelError, match="other parameters"):  # other data shape
        MiniBatchKernelKMeans(**PARAMS, checkpoint=ckpt).fit(X[:500])
    # verbose and checkpoint_every do not change the fit: they may differ
    m = MiniBatchKernelKMeans(**PARAMS, checkpoint=ckpt, checkpoint_every=3).fit(X)
    assert m.n_iter_ == PARAMS["max_iter"] and not os.path.exists(ckpt)


def test_checkpoint_bad_options(X, tmp_path):
    with pytest.raises(DKernelError, match="truncated fit"):
        MiniBatchKernelKMeans(**{**PARAMS, "tau": None}, checkpoint=str(tmp_path / "c")).fit(X)
    with pytest.raises(DKernelError, match="checkpoint_every"):
        MiniBatchKernelKMeans(**PARAMS, checkpoint=str(tmp_path / "c"), checkpoint_every=0).fit(X)
    with pytest.raises(DKernelError, match="does not exist"):
        MiniBatchKernelKMeans(**PARAMS, checkpoint=str(tmp_path / "no" / "c.npz")).fit(X)


def test_cli_kmeans_checkpoint_resumes(tmp_path, cli_cluster, capsys):
    store = str(tmp_path / "rings.zarr")
    make_rings(800, random_state=0, store=store, chunk_rows=400)
    ckpt = str(tmp_path / "km.ckpt.npz")
    common = ["--n-clusters", "3", "--batch-size", "64", "--tau", "30", "--max-iter", "12"]
    common += ["--gamma", "5"]
    _interrupted(
        open_dataset(store).X.compute(),
        ckpt,
        8,
        n_clusters=3,
        batch_size=64,
        tau=30,
        max_iter=12,
        gamma=5.0,
        checkpoint_every=5,
    )
    assert os.path.exists(ckpt)
    # the CLI's model is the one above (same parameters and data): it resumes, then removes
    argv = ["--cluster", cli_cluster, "kmeans", store, *common, "--checkpoint", ckpt]
    assert main([*argv, "--checkpoint-every", "5", "--labels-name", "a"]) == 0
    assert not os.path.exists(ckpt)
    assert main(["--cluster", cli_cluster, "kmeans", store, *common, "--labels-name", "b"]) == 0
    a, b = (zarr.open_array(os.path.join(store, name), mode="r")[:] for name in "ab")
    assert np.array_equal(a, b)
    capsys.readouterr()
    assert main(["kmeans", store, *common, "--full-batch", "--checkpoint", ckpt]) != 0
    assert "--full-batch" in capsys.readouterr().err
