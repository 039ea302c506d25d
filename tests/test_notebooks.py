"""The example notebooks run from top to bottom (nbclient) and reach sane numbers."""

from __future__ import annotations

import importlib.util
import json
import os
import sys

import nbformat
import pytest
from nbclient import NotebookClient

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(ROOT, "examples")
sys.path.insert(0, EXAMPLES)

import make_notebooks  # noqa: E402

pytestmark = pytest.mark.slow

#: A hang guard per notebook (pytest-timeout), not a speed check: each runs in 6-20 s with
#: numba's cache warm; a cold cache adds 20-40 s of compiling on a loaded machine.
LIMIT_S = 240


@pytest.fixture(scope="module")
def kernel_name(tmp_path_factory):
    """A kernelspec running this interpreter: a ``python3`` spec elsewhere on the machine
    (another Python without dkernel) cannot be picked up by mistake."""
    root = tmp_path_factory.mktemp("jupyter")
    spec = root / "kernels" / "dkernel-test"
    spec.mkdir(parents=True)
    spec.joinpath("kernel.json").write_text(
        json.dumps(
            {
                "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                "display_name": "dkernel tests",
                "language": "python",
                # ipykernel's debugger notes frozen modules on stderr otherwise
                "env": {"PYDEVD_DISABLE_FILE_VALIDATION": "1"},
            }
        ),
        encoding="utf-8",
    )
    old = os.environ.get("JUPYTER_PATH")
    os.environ["JUPYTER_PATH"] = os.pathsep.join(filter(None, [str(root), old]))
    yield "dkernel-test"
    if old is None:
        os.environ.pop("JUPYTER_PATH", None)
    else:
        os.environ["JUPYTER_PATH"] = old


def _run(name: str, workdir, kernel: str) -> tuple[nbformat.NotebookNode, dict]:
    nb = nbformat.read(os.path.join(EXAMPLES, name), as_version=4)
    client = NotebookClient(
        nb, timeout=120, kernel_name=kernel, resources={"metadata": {"path": str(workdir)}}
    )
    client.execute()
    last = nb.cells[-1]
    text = "".join(o.get("text", "") for o in last.outputs if o.output_type == "stream")
    summary = json.loads(text.strip().splitlines()[-1])
    return nb, summary


def _images(nb) -> int:
    return sum(
        "image/png" in o.get("data", {})
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.outputs
    )


def _progress_bar_text(nb) -> str:
    """What dkernel.runtime.progress showed: a widget (with ipywidgets) or text on stderr."""
    if importlib.util.find_spec("ipywidgets") is not None:
        state = nb.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
        bars = [v["state"] for v in state.values() if v["model_name"] == "FloatProgressModel"]
        assert bars and all(b["value"] == b["max"] for b in bars)  # finished widget bars
        return " ".join(
            str(v["state"].get("value", ""))
            for v in state.values()
            if v["model_name"] == "HTMLModel"
        )
    return "".join(
        o.get("text", "")
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.outputs
        if o.get("name") == "stderr"
    )


def _errors(nb) -> list[str]:
    return [
        o.get("ename", "")
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.outputs
        if o.output_type == "error"
    ]


def test_notebooks_match_their_generator():
    """The committed .ipynb files are the generator's output, with no outputs stored."""
    assert make_notebooks.main(["--check"]) == 0
    for name in make_notebooks.NOTEBOOKS:
        nb = nbformat.read(os.path.join(EXAMPLES, name), as_version=4)
        nbformat.validate(nb)
        assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code")


@pytest.mark.timeout(LIMIT_S)
def test_kernel_kmeans_notebook(tmp_path, kernel_name):
    nb, s = _run("kernel_kmeans_digits.ipynb", tmp_path, kernel_name)
    assert not _errors(nb)
    assert _images(nb) == 2  # the cluster means and the PCA scatter
    assert s["ari"] > 0.5 and s["mean_purity"] > 0.6 and s["gamma"] > 0


@pytest.mark.timeout(LIMIT_S)
def test_bsgd_notebook(tmp_path, kernel_name):
    nb, s = _run("bsgd_streaming_zarr.ipynb", tmp_path, kernel_name)
    assert not _errors(nb)
    assert _images(nb) == 2  # accuracy vs budget, decision regions
    acc = s["accuracy"]
    assert s["n_train"] == 20_000 and len(acc) == len(s["budgets"]) == 6
    assert acc[-1] > 0.9  # a checkerboard: majority class is 0.5
    assert max(acc[-3:]) > acc[0] + 0.1  # the budget buys accuracy
    assert "6/6" in _progress_bar_text(nb) and "accuracy=" in _progress_bar_text(nb)


@pytest.mark.timeout(LIMIT_S)
def test_coreset_notebook(tmp_path, kernel_name):
    nb, s = _run("coreset_vs_uniform.ipynb", tmp_path, kernel_name)
    assert not _errors(nb)
    assert _images(nb) == 2
    sens, unif = s["sensitivity"], s["uniform"]
    # the sensitivity sample beats the uniform one where samples are small
    assert sens[0] < unif[0] and sens[1] < unif[1]
    assert all(v >= -1e-6 for v in sens + unif)  # nothing beats the full optimum
    assert sens[-1] < 0.05
