"""Kernel k-means progress: ``verbose`` shows a bar (iterations, objective, compile note)."""

from __future__ import annotations

import pytest
from sklearn.datasets import load_digits

from dkernel.cluster import KernelKMeans, MiniBatchKernelKMeans
from dkernel.runtime import COMPILE_NOTE, forget_compiled


@pytest.fixture(scope="module")
def X():
    return load_digits().data[:300]


@pytest.fixture(autouse=True)
def _fresh_compile_notes():
    forget_compiled()
    yield
    forget_compiled()


def test_minibatch_fit_bar(X, capfd):
    km = MiniBatchKernelKMeans(4, gamma=0.002, batch_size=32, max_iter=12, random_state=0)
    km.set_params(verbose=1).fit(X)
    out, err = capfd.readouterr()
    assert out == ""  # the bar goes to stderr, no logging configured
    assert "MiniBatchKernelKMeans" in err and "12/12" in err and "100%" in err
    assert f"objective={km.history_[-1]:.4g}" in err
    assert COMPILE_NOTE in err and "compiled kernel k-means init" in err
    # a second fit in this process: no compile note, still a bar
    km.fit(X)
    err = capfd.readouterr().err
    assert "12/12" in err and COMPILE_NOTE not in err


def test_minibatch_partial_fit_bar(X, capfd):
    km = MiniBatchKernelKMeans(4, gamma=0.002, random_state=0, verbose=1)
    km.partial_fit(X[:100]).partial_fit(X[100:200])
    err = capfd.readouterr().err
    assert "MiniBatchKernelKMeans.partial_fit" in err and "iteration=2" in err


def test_full_batch_bar(X, capfd):
    km = KernelKMeans(4, gamma=0.002, max_iter=50, random_state=0, verbose=1).fit(X)
    err = capfd.readouterr().err
    assert "KernelKMeans" in err and "50/50" in err  # early stop: the bar still completes
    assert f"objective={km.history_[-1]:.4g}" in err


def test_silent_by_default(X, capfd):
    MiniBatchKernelKMeans(4, gamma=0.002, batch_size=32, max_iter=5, random_state=0).fit(X)
    KernelKMeans(4, gamma=0.002, max_iter=5, random_state=0).fit(X)
    assert capfd.readouterr() == ("", "")


def test_bar_in_a_notebook_kernel(X, monkeypatch, jupyter_kernel):
    """Inside Jupyter the bar is tqdm's notebook widget (when ipywidgets is there), else text."""
    import importlib.machinery
    import sys
    import types

    import tqdm.notebook

    made = []

    class FakeBar:
        def __init__(self, **kw):
            made.append(kw)
            self.n = 0

        def update(self, n):
            self.n += n

        def set_postfix_str(self, *a, **k):
            pass

        def set_description_str(self, *a, **k):
            pass

        def close(self):
            pass

    # a Jupyter kernel's shell and ipywidgets, as the bar's choice sees them; tqdm's
    # notebook bar replaced by one that records how it was made
    jupyter_kernel()
    widgets = types.ModuleType("ipywidgets")
    widgets.__spec__ = importlib.machinery.ModuleSpec("ipywidgets", None)
    monkeypatch.setitem(sys.modules, "ipywidgets", widgets)
    monkeypatch.setattr(tqdm.notebook, "tqdm", FakeBar)
    MiniBatchKernelKMeans(3, gamma=0.002, batch_size=32, max_iter=4, random_state=0, verbose=1).fit(
        X
    )
    assert made and made[0]["total"] == 4 and made[0]["desc"] == "MiniBatchKernelKMeans"
