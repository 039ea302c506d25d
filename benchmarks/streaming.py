"""Benchmark: ``BudgetedSVC.partial_fit`` over a store's chunks in file order against
``fit`` on the same rows (issue 36, part 3). Accuracy only: the times are printed but the
results are written for the accuracy (it runs on a shared machine).

Data: ijcnn1 (``--data-dir``, default ``../shared/datasets``), ingested to two zarr stores
under ``--work`` (``bench-data/streaming``): the default chunking (one chunk of 49990 rows)
and 4096-row chunks. Every model is ``BudgetedSVC(budget=300, random_state=0)``; ``fit``
with its defaults, then ``partial_fit`` once per chunk in file order (the caller's order)

- with no refit (``partial_fit`` before issue 36);
- with ``alpha=1/(4 n)`` (``fit``'s), no refit;
- ``refit=True`` on the last call (the refit of ``fit`` over the reservoir sample of the
  streamed rows);
- the same with ``alpha=1/(4 n)``;
- three passes over the chunks, ``refit=True`` on the last call.

Usage::

    python benchmarks/streaming.py            # about two minutes on 2 cores

Results: ``benchmarks/results/streaming.{json,md}``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
B = 300

# (label, estimator parameters, passes over the chunks, refit on the last call)
N_IJCNN1 = 49990
STREAMS = [
    ("no refit (as before issue 36)", {}, 1, False),
    ("alpha=1/(4n), no refit", {"alpha": 1 / (4 * N_IJCNN1)}, 1, False),
    ("refit=True on the last call", {}, 1, True),
    ("alpha=1/(4n), refit=True on the last call", {"alpha": 1 / (4 * N_IJCNN1)}, 1, True),
    ("3 passes, refit=True on the last call", {}, 3, True),
]


def _stream(store: str, params: dict, passes: int, refit: bool, Xt, yt) -> dict:
    from dkernel.data import open_dataset
    from dkernel.svm import BudgetedSVC

    ds = open_dataset(store)
    bounds = np.cumsum((0,) + ds.X.chunks[0])
    clf = BudgetedSVC(budget=B, random_state=0, **params)
    t0 = time.perf_counter()
    for p in range(passes):
        for a, b in itertools.pairwise(bounds):
            last = p == passes - 1 and b == bounds[-1]
            clf.partial_fit(ds.X[a:b], ds.y[a:b], classes=[-1, 1], refit=refit and last)
    seconds = time.perf_counter() - t0
    return {"accuracy": float(clf.score(Xt, yt)), "seconds": seconds, "calls": len(bounds) - 1}


def main() -> None:
    from dkernel.data import ingest
    from dkernel.svm import BudgetedSVC

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", default=os.path.join(HERE, "..", "..", "shared", "datasets"))
    ap.add_argument("--work", default="bench-data/streaming")
    args = ap.parse_args()
    src = os.path.join(args.data_dir, "ijcnn1.npz")
    d = np.load(src)
    Xt, yt = d["X_test"], d["y_test"]
    os.makedirs(args.work, exist_ok=True)
    t0 = time.perf_counter()
    fit = BudgetedSVC(budget=B, random_state=0).fit(d["X"], d["y"])
    fit_row = {"accuracy": float(fit.score(Xt, yt)), "seconds": time.perf_counter() - t0}
    print("fit", fit_row, flush=True)
    rows = []
    for chunk_rows in (None, 4096):
        store = os.path.join(args.work, f"ijcnn1-{chunk_rows or 'default'}.zarr")
        if not os.path.exists(store):
            ingest(src, store, chunk_rows=chunk_rows)
        for label, params, passes, refit in STREAMS:
            r = _stream(store, params, passes, refit, Xt, yt)
            r.update(chunks=chunk_rows or "default", stream=label, params=params)
            r["gap_points"] = 100 * (fit_row["accuracy"] - r["accuracy"])
            print(r, flush=True)
            rows.append(r)
    out = {"data": "ijcnn1", "budget": B, "fit": fit_row, "streams": rows,
           "command": "python benchmarks/streaming.py", "date": time.strftime("%Y-%m-%d")}  # fmt: skip
    res = os.path.join(HERE, "results")
    with open(os.path.join(res, "streaming.json"), "w") as f:
        json.dump(out, f, indent=1)
    with open(os.path.join(res, "streaming.md"), "w") as f:
        f.write(_markdown(out))


def _markdown(out: dict) -> str:
    lines = [
        "# Streaming `partial_fit` against `fit` (`benchmarks/streaming.py`)",
        "",
        f"ijcnn1 (49990 training rows, 91701 test rows), B = {out['budget']}, "
        "`random_state=0`. `fit` with its defaults: test accuracy "
        f"**{100 * out['fit']['accuracy']:.2f} %**. Each stream calls `partial_fit` once per "
        "chunk of the store, in file order (`classes=[-1, 1]`).",
        "",
        "| store chunks | calls | stream | test accuracy | points below `fit` |",
        "|---|---|---|---|---|",
    ]
    for r in out["streams"]:
        lines.append(
            f"| {r['chunks']} | {r['calls']} | {r['stream']} | {100 * r['accuracy']:.2f} % "
            f"| {r['gap_points']:.2f} |"
        )
    lines += [
        "",
        "ijcnn1's rows are grouped in the file (the first positive is row 252), so one SGD",
        "pass in the file's order follows the last rows it saw (`fit` visits them in a seeded",
        "random order). The refit (the exact coefficients over the support vectors the stream",
        "chose, solved over a uniform reservoir sample of the streamed rows) closes the gap",
        "in the file's order. Accuracy only: the machine was shared",
        f"with other jobs, so times are not reported. Run on {out['date']}: `{out['command']}`.",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
