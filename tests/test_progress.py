"""Progress bars: shown when asked (no logging needed), silent otherwise, compile notes once."""

from __future__ import annotations

import importlib.util
import io
import subprocess
import sys

import dask
import pytest

from dkernel.runtime import (
    COMPILE_NOTE,
    compile_note,
    forget_compiled,
    in_notebook,
    progress,
    progress_enabled,
)


@pytest.fixture(autouse=True)
def _fresh_compile_notes():
    forget_compiled()
    yield
    forget_compiled()


def test_enabled_bar_prints_desc_count_and_postfix(capsys):
    with progress(4, "kernel k-means", enabled=True) as bar:
        for i in range(4):
            bar.update(1, objective=1.0 / (i + 1))
    err = capsys.readouterr().err
    assert "kernel k-means" in err
    assert "4/4" in err and "100%" in err
    assert "objective=0.25" in err
    assert bar.n == 4 and bar.postfix == {"objective": 0.25}


def test_disabled_bar_prints_nothing_but_counts(capfd):
    with progress(10, "quiet", enabled=False) as bar:
        bar.update(3, acc=0.5)
        bar.update(7)
        bar.note("not shown")
    out, err = capfd.readouterr()
    assert out == "" and err == ""
    assert bar.n == 10 and bar.postfix == {"acc": 0.5} and bar.notes == ["not shown"]


def test_default_follows_the_dask_config(capsys):
    assert progress_enabled() is False
    with progress(2, "off by default") as bar:
        bar.update(2)
    assert capsys.readouterr().err == ""
    with dask.config.set({"dkernel.progress": True}):
        assert progress_enabled() is True
        with progress(2, "on by config") as bar:
            bar.update(2)
    assert "on by config" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("verbose", "expected"), [(0, False), (1, True), (2, True), (True, True), (False, False)]
)
def test_progress_enabled_by_verbose(verbose, expected):
    assert progress_enabled(verbose) is expected


def test_unknown_total_counts_up_in_rows(capsys):
    with progress(None, "ingest", enabled=True, unit="rows", unit_scale=True) as bar:
        bar.update(1500)
        bar.update(1500)
    err = capsys.readouterr().err
    assert "ingest" in err and "3.00k" in err and "rows" in err


def test_compile_note_once_per_key_on_the_bar(capsys):
    with progress(2, "fit", enabled=True) as bar:
        with bar.compiling("bsgd-step"):
            bar.update(1)
        with bar.compiling("bsgd-step"):
            bar.update(1)
    err = capsys.readouterr().err
    assert err.count(COMPILE_NOTE) == 1
    assert "compiling numba kernels" in err and "bsgd-step" in err
    assert err.count("compiled bsgd-step in") == 1


def test_compile_note_without_a_bar_is_a_line_on_stderr():
    buf = io.StringIO()
    with compile_note("kernels-a", enabled=True, file=buf) as first:
        assert first is True
    with compile_note("kernels-a", enabled=True, file=buf) as first:
        assert first is False
    lines = buf.getvalue().splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("dkernel: compiling numba kernels") and lines[0].endswith("...")
    assert lines[1].startswith("dkernel: compiled kernels-a in ")


def test_compile_note_disabled_is_silent_but_remembers(capfd):
    with compile_note("kernels-b", enabled=False) as first:
        assert first
    with compile_note("kernels-b", enabled=True):
        pass
    assert capfd.readouterr().err == ""  # the first use is gone: no note later either


def test_prints_in_a_plain_terminal_process_without_logging():
    """A script that never configures logging still sees the bar (on stderr)."""
    code = (
        "from dkernel.runtime._progress import progress\n"
        "with progress(5, 'plain script', enabled=True) as bar:\n"
        "    bar.update(5, accuracy=0.97)\n"
    )
    res = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert res.stdout == ""
    assert "plain script" in res.stderr and "5/5" in res.stderr
    assert "accuracy=0.97" in res.stderr


def test_not_a_notebook_here():
    assert in_notebook() is False


def test_notebook_bar_when_in_jupyter_with_ipywidgets(monkeypatch, jupyter_kernel):
    from tqdm.notebook import tqdm as notebook_tqdm
    from tqdm.std import tqdm as std_tqdm

    from dkernel.runtime import bar_class

    assert bar_class() is std_tqdm  # plain Python
    jupyter_kernel()
    assert in_notebook()
    if importlib.util.find_spec("ipywidgets") is not None:
        assert bar_class() is notebook_tqdm
    monkeypatch.setitem(sys.modules, "ipywidgets", None)  # not installed
    assert bar_class() is std_tqdm  # no ipywidgets: text bar, no warning


# --- the labels pass and the dashboard's task names ---------------------------------------


@pytest.fixture
def rings(tmp_path):
    from dkernel.data import make_rings

    return make_rings(2000, random_state=0, store=str(tmp_path / "r.zarr"), chunk_rows=250)


def test_labels_pass_has_its_bar(rings, scheduler, capfd):
    """verbose=1 used to reach 100 % before the labels pass, most of a fit on a big store."""
    from dkernel.cluster import MiniBatchKernelKMeans

    km = MiniBatchKernelKMeans(2, gamma=1.0, batch_size=64, max_iter=5, random_state=0)
    km.set_params(verbose=1).fit(rings.X)
    err = capfd.readouterr().err
    # the rows done, however the chunks are grouped into tasks
    assert "MiniBatchKernelKMeans labels: 100%" in err and "2.00k/2.00k" in err
    # without verbose: no bar, the same labels
    quiet = MiniBatchKernelKMeans(2, gamma=1.0, batch_size=64, max_iter=5, random_state=0)
    quiet.fit(rings.X)
    assert "labels" not in capfd.readouterr().err
    assert (quiet.labels_ == km.labels_).all()


def _prefixes(client) -> set[str]:
    return set(client.run_on_scheduler(lambda dask_scheduler: list(dask_scheduler.task_prefixes)))


def test_dashboard_names_the_labels_and_predict_passes(rings, local_cluster_client):
    """The scheduler's task prefixes (what the dashboard shows) name the step."""
    from dkernel.cluster import MiniBatchKernelKMeans
    from dkernel.svm import BudgetedSVC

    client = local_cluster_client
    with client.as_current(), dask.config.set(scheduler=client):
        MiniBatchKernelKMeans(2, gamma=1.0, batch_size=64, max_iter=3, random_state=0).fit(rings.X)
        assert "kkmeans-labels" in _prefixes(client)
        clf = BudgetedSVC(budget=20, max_iter=1, distributed=False, random_state=0)
        clf.fit(rings.X[:500].compute(), rings.y[:500].compute())
        clf.predict(rings.X).compute()
        clf.decision_function(rings.X).compute()
        got = _prefixes(client)
    assert {"svm-predict", "svm-scores"} <= got
