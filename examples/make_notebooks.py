"""Write the example notebooks of this folder from the cells below (outputs stripped).

    python examples/make_notebooks.py          # rewrite the .ipynb files
    python examples/make_notebooks.py --check  # exit 1 if a notebook differs from its cells

Edit the cells here, not the .ipynb files: the test suite (tests/test_notebooks.py) runs the
notebooks and checks that they match this script. Each notebook runs in well under a minute
on data it makes itself (scikit-learn's bundled digits, dkernel's generators).
"""

from __future__ import annotations

import argparse
import os
import sys

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

HERE = os.path.dirname(os.path.abspath(__file__))

KMEANS = [
    (
        "md",
        """# Kernel k-means on handwritten digits

Mini-batch kernel k-means (`dkernel.cluster.MiniBatchKernelKMeans`) on scikit-learn's bundled
8x8 digits (1,797 images, 64 pixels: a small stand-in for Fashion-MNIST that needs no
download). Kernel k-means finds clusters that are not convex in pixel space; the mini-batch
version keeps only `tau` support points per center, so it scales to stores larger than memory.

The clusters are found without the labels; the labels only score them afterwards (adjusted
Rand index, ARI).""",
    ),
    (
        "code",
        """import json

import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_digits
from sklearn.decomposition import PCA
from sklearn.metrics import adjusted_rand_score

from dkernel.cluster import MiniBatchKernelKMeans, select_gamma

X, digit = load_digits(return_X_y=True)
X = X / 16.0  # pixels in [0, 1]
X.shape""",
    ),
    (
        "md",
        """## A kernel width without labels

`select_gamma` fits a few short runs per candidate width (multiples of the median-heuristic
gamma) and keeps the one whose clustering is most stable: no labels involved.""",
    ),
    (
        "code",
        """gamma = select_gamma(X, 10, random_state=0)
print(f"selected gamma = {gamma:.4g}")""",
    ),
    (
        "code",
        """km = MiniBatchKernelKMeans(n_clusters=10, gamma=gamma, batch_size=512, max_iter=60,
                           random_state=0)
km.fit(X)
ari = adjusted_rand_score(digit, km.labels_)
print(f"{km.n_iter_} iterations, ARI against the true digits: {ari:.3f}")""",
    ),
    (
        "md",
        """## What each cluster looks like

A kernel k-means center lives in the kernel's feature space, not in pixel space; the mean
image of a cluster's members is the readable stand-in. Each title gives the most common
true digit in the cluster and its share.""",
    ),
    (
        "code",
        """fig, axes = plt.subplots(2, 5, figsize=(9, 4))
purity = []
for c, ax in enumerate(axes.ravel()):
    members = km.labels_ == c
    counts = np.bincount(digit[members], minlength=10)
    purity.append(counts.max() / max(1, members.sum()))
    ax.imshow(X[members].mean(axis=0).reshape(8, 8), cmap="gray_r")
    ax.set_title(f"{counts.argmax()} ({purity[-1]:.0%}, n={members.sum()})", fontsize=9)
    ax.axis("off")
fig.suptitle("Mean image of each kernel k-means cluster")
plt.tight_layout()
plt.show()""",
    ),
    (
        "code",
        """xy = PCA(n_components=2, random_state=0).fit_transform(X)
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4), sharex=True, sharey=True)
ax1.scatter(*xy.T, c=km.labels_, cmap="tab10", s=6)
ax1.set_title("kernel k-means clusters")
ax2.scatter(*xy.T, c=digit, cmap="tab10", s=6)
ax2.set_title("true digits")
for ax in (ax1, ax2):
    ax.set_xlabel("PC 1")
ax1.set_ylabel("PC 2")
plt.show()""",
    ),
    (
        "code",
        """summary = {"gamma": float(gamma), "ari": float(ari), "n_iter": int(km.n_iter_),
           "mean_purity": float(np.mean(purity))}
print(json.dumps(summary))""",
    ),
]

BSGD = [
    (
        "md",
        """# Budgeted SGD kernel SVM, streamed from a zarr store

`dkernel.svm.BudgetedSVC` learns a kernel SVM in one pass over the data while it keeps at
most `budget` support vectors (merging two when the budget is full). It reads the training
set chunk by chunk from a zarr store, so the data never has to fit in memory.

Here: a checkerboard (a problem no linear model solves) written to CSV, ingested into a zarr
store with `dkernel.data.ingest`, then one model per budget, scored on held-out points.""",
    ),
    (
        "code",
        """import json
import os
import tempfile
import time

import matplotlib.pyplot as plt
import numpy as np

from dkernel.data import ingest, make_checkerboard
from dkernel.runtime import get_client, progress
from dkernel.svm import BudgetedSVC

workdir = tempfile.mkdtemp(prefix="dkernel-bsgd-")
X, y = make_checkerboard(20_000, random_state=0)
X_test, y_test = make_checkerboard(5_000, random_state=1)
csv = os.path.join(workdir, "checkerboard.csv")
np.savetxt(csv, np.column_stack([X, y]), delimiter=",", fmt=["%.6f", "%.6f", "%d"])
print(f"{os.path.getsize(csv) / 1e6:.1f} MB of CSV in {workdir}")""",
    ),
    (
        "md",
        """## CSV to zarr

`ingest` streams the file in blocks (NumPy's C parser) into a zarr 3 store; the model then
reads the store one chunk at a time. From a shell this is `dkernel ingest checkerboard.csv
checkerboard.zarr`.""",
    ),
    (
        "code",
        """ds = ingest(csv, os.path.join(workdir, "checkerboard.zarr"), chunk_rows=10_000)
ds""",
    ),
    (
        "md",
        """## A Dask client and its dashboard

`get_client()` starts the embedded cluster (here two worker threads in this process). Open
the dashboard link it shows to watch the tasks while the models train.""",
    ),
    (
        "code",
        """client = get_client(n_workers=2, processes=False)
print(client.dashboard_link)""",
    ),
    (
        "md",
        """## Accuracy against the budget

A larger budget buys a more detailed decision boundary at a higher cost per step. The bar
below is `dkernel.runtime.progress`, the same one the CLI shows.""",
    ),
    (
        "code",
        """budgets = [5, 10, 25, 50, 100, 200]
accuracy, seconds = [], []
with progress(len(budgets), "budgets", enabled=True) as bar:
    for budget in budgets:
        clf = BudgetedSVC(budget=budget, gamma=8.0, max_iter=1, random_state=0)
        t0 = time.perf_counter()
        clf.fit(ds)
        seconds.append(time.perf_counter() - t0)
        accuracy.append(clf.score(X_test, y_test))
        bar.update(1, budget=budget, accuracy=accuracy[-1])
for b, a, s in zip(budgets, accuracy, seconds):
    print(f"budget {b:4d}: accuracy {a:.3f}, fit {s:.2f} s")""",
    ),
    (
        "code",
        """fig, ax = plt.subplots(figsize=(5, 3.5))
ax.plot(budgets, accuracy, "o-")
ax.axhline(max(np.mean(y_test == 1), np.mean(y_test != 1)), ls=":", c="gray",
           label="majority class")
ax.set_xscale("log")
ax.set_xlabel("budget (support vectors kept)")
ax.set_ylabel("held-out accuracy")
ax.set_title("BudgetedSVC on a 4x4 checkerboard")
ax.legend()
plt.show()""",
    ),
    (
        "code",
        """# the decision regions of the largest budget, and its support vectors
g = np.linspace(0, 4, 150)
gx, gy = np.meshgrid(g, g)
Z = clf.predict(np.column_stack([gx.ravel(), gy.ravel()])).reshape(gx.shape)
fig, ax = plt.subplots(figsize=(4.5, 4.5))
ax.contourf(gx, gy, Z, alpha=0.3, cmap="coolwarm")
ax.scatter(*clf.support_vectors_.T, c="k", s=8, label=f"{len(clf.support_vectors_)} SVs")
ax.legend(loc="upper right")
ax.set_title(f"budget {budgets[-1]}")
plt.show()""",
    ),
    (
        "code",
        """client.close()
client.cluster.close()
summary = {"budgets": budgets, "accuracy": [float(a) for a in accuracy],
           "n_train": int(ds.n_samples)}
print(json.dumps(summary))""",
    ),
]

CORESET = [
    (
        "md",
        """# SVM coresets against uniform sampling

A coreset is a small weighted subset whose SVM cost approximates the full set's cost for
every model. `dkernel.coreset.svm_coreset` samples by *sensitivity* (how much a point can
matter), `uniform_coreset` is the baseline. A model trained on the coreset is judged by its
cost on the **full** data relative to the full optimum: F(P, w_S) / F(P, w*) - 1.

The data has a small, far group of positives that a uniform sample of a few dozen points
easily misses; the sensitivity sample keeps it.""",
    ),
    (
        "code",
        """import json
import warnings

import matplotlib.pyplot as plt
import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.svm import LinearSVC

from dkernel.coreset import coreset_cost, svm_coreset, uniform_coreset

warnings.filterwarnings("ignore", category=ConvergenceWarning)
rng = np.random.default_rng(0)
n = 20_000
X_main = rng.normal(size=(n - 200, 2))
y_main = np.where(X_main[:, 0] + 0.5 * rng.normal(size=n - 200) > 0, 1, -1)
X_far = rng.normal(size=(200, 2)) * 0.3 + [-6.0, 6.0]
X = np.vstack([X_main, X_far])
y = np.r_[y_main, np.ones(200, dtype=int)]
C = 100.0 / n  # hinge weight of F(P, w) = ||w||^2 / 2 + C sum hinge""",
    ),
    (
        "code",
        """def svm():
    return LinearSVC(C=C, loss="hinge", dual=True, max_iter=20_000, random_state=0)


full = svm().fit(X, y)
opt = coreset_cost(X, y, full.coef_, full.intercept_, C=C)
print(f"full-data optimum F(P, w*) = {opt:.3f}")""",
    ),
    (
        "code",
        """sizes = [50, 100, 400]
seeds = range(3)
err = {"sensitivity": [], "uniform": []}
for m in sizes:
    for name, build in (("sensitivity", svm_coreset), ("uniform", uniform_coreset)):
        e = []
        for s in seeds:
            S = build(X, y, m, C=C, random_state=s)
            clf = S.fit(svm())  # a weighted fit: the weights count replicated rows
            e.append(coreset_cost(X, y, clf.coef_, clf.intercept_, C=C) / opt - 1)
        err[name].append(np.median(e))
    print(f"m={m:4d}", *(f"{k} {v[-1]:.4f}" for k, v in err.items()))""",
    ),
    (
        "code",
        """fig, ax = plt.subplots(figsize=(5, 3.5))
for name, marker in (("sensitivity", "o-"), ("uniform", "s--")):
    ax.plot(sizes, err[name], marker, label=name)
ax.set_xscale("log")
ax.set_yscale("log")
ax.set_xlabel("coreset size m")
ax.set_ylabel("F(P, w_S) / F(P, w*) - 1 (median of 3)")
ax.set_title("Coreset vs uniform sample")
ax.legend()
plt.show()""",
    ),
    (
        "code",
        """# one coreset of each kind, point size = weight
S_sens = svm_coreset(X, y, 100, C=C, random_state=0)
S_unif = uniform_coreset(X, y, 100, C=C, random_state=0)
fig, axes = plt.subplots(1, 2, figsize=(9, 4), sharex=True, sharey=True)
for ax, S, title in ((axes[0], S_sens, "sensitivity"), (axes[1], S_unif, "uniform")):
    ax.scatter(*X[::20].T, c="lightgray", s=3)
    ax.scatter(*S.X.T, c=S.y, cmap="coolwarm", s=300 * S.weight / S.weight.max())
    ax.set_title(f"{title}: {len(S)} points, {int(np.sum(S.X[:, 0] < -4))} from the far group")
plt.show()""",
    ),
    (
        "code",
        """summary = {"sizes": sizes, "sensitivity": [float(v) for v in err["sensitivity"]],
           "uniform": [float(v) for v in err["uniform"]],
           "total_sensitivity": float(S_sens.total_sensitivity), "n": n}
print(json.dumps(summary))""",
    ),
]

#: file name -> cells (kind, source)
NOTEBOOKS = {
    "kernel_kmeans_digits.ipynb": KMEANS,
    "bsgd_streaming_zarr.ipynb": BSGD,
    "coreset_vs_uniform.ipynb": CORESET,
}


def build(cells) -> nbformat.NotebookNode:
    nb = new_notebook(
        cells=[
            new_markdown_cell(src) if kind == "md" else new_code_cell(src) for kind, src in cells
        ],
        metadata={
            "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
            "language_info": {"name": "python"},
        },
    )
    for i, cell in enumerate(nb.cells):  # stable ids: rewriting gives the same file
        cell["id"] = f"cell-{i}"
    return nb


def render(cells) -> str:
    return nbformat.writes(build(cells)) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only check the files")
    args = parser.parse_args(argv)
    stale = []
    for name, cells in NOTEBOOKS.items():
        path = os.path.join(HERE, name)
        text = render(cells)
        old = open(path, encoding="utf-8").read() if os.path.exists(path) else None
        if old != text:
            stale.append(name)
            if not args.check:
                with open(path, "w", encoding="utf-8") as fh:
                    fh.write(text)
    if args.check and stale:
        print("out of date (run python examples/make_notebooks.py):", *stale, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
