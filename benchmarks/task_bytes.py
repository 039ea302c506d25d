"""What each task of a pass over a store is sent, as the store grows in chunks.

Usage::

    python benchmarks/task_bytes.py [--chunks 62,1526,15625] [--store-dir bench-data]

A store of 10^9 rows in chunks of 2^16 rows has 15,258 chunks. Each task that reads a
store is pickled on its own when the scheduler sends it to a worker, so what one task
carries is paid once per task: a task that carried the whole store's manifest (every
chunk's first row and checksum) and its row bounds costs O(chunks) bytes, O(chunks^2) a
pass. Per store of ``C`` chunks (a checkerboard of ``64 C`` rows, chunks of 64 rows: the
chunk count is what matters here, not the rows), the pickled bytes of the largest task

- of the store's read (``Dataset.X``'s own tasks, one per chunk),
- of a pass over it (``MiniBatchKernelKMeans.predict``, one chunk a task),
- of a row gather (``take_graph``: two rows, at the two ends of the store),
- of a resident load (``ResidentRows.load``: two ranges of 64 rows, as the scheduler
  holds them, on an in-process cluster),

beside the pickled bytes of the whole manifest and bounds (what each of those tasks was
sent before the tasks carried only their own chunks: ``ChunkReader.covering``). Then, on
a ``LocalCluster`` of 2 worker processes, the wall time of ``X.sum()`` over the largest
store (one task per chunk) and of ``X.compute()`` (the whole array back: every task sent
to the workers at once), each on a fresh cluster, with the peak RSS of the largest worker
(sampled every 0.5 s), each given up after ``--timeout`` seconds; and the time to build
its graph here (open the store, cut rows from it, materialise the cut's graph).
``--baseline-src DIR``: the same passes again, in a process that imports dkernel from
``DIR`` (a checkout of an earlier commit), side by side in one run.

Writes ``results/task_bytes.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import shlex
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROWS_PER_CHUNK = 64


def _args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--chunks", default="62,1526,15625")
    p.add_argument("--store-dir", default="bench-data")
    p.add_argument("--data-dir", default="../shared/datasets", help="unused (generated data)")
    p.add_argument("--out", default=str(HERE / "results"))
    p.add_argument("--timeout", type=float, default=300.0, help="seconds a pass may take")
    p.add_argument("--baseline-src", help="a checkout whose dkernel runs the pass again")
    p.add_argument("--pass-only", metavar="STORE", help="the passes over STORE alone, as JSON")
    p.add_argument("--report", action="store_true", help="task_bytes.md from task_bytes.json")
    return p.parse_args(argv)


def _store(args, chunks: int) -> str:
    from dkernel.data import make_checkerboard

    path = os.path.join(args.store_dir, f"checkerboard-{chunks}-chunks.zarr")
    if not os.path.exists(path):
        make_checkerboard(
            chunks * ROWS_PER_CHUNK, random_state=0, store=path, chunk_rows=ROWS_PER_CHUNK,
            dtype=np.float32,
        )  # fmt: skip
    return path


def _largest(graph, prefix: str) -> int:
    return max(
        len(pickle.dumps(task))
        for key, task in dict(graph).items()
        if (key[0] if isinstance(key, tuple) else key).startswith(prefix)
    )


def _on_scheduler(dask_scheduler, name):
    from distributed.protocol.pickle import dumps

    return max(
        len(dumps(ts.run_spec))
        for ts in dask_scheduler.tasks.values()
        if str(ts.key).startswith(name)
    )


def _row_count(rows, start):
    return len(rows)


def _sizes(path: str, model, client) -> dict:
    import dask

    from dkernel.data import ResidentRows, open_dataset, take_graph

    X = open_dataset(path).X
    n = int(X.shape[0])
    with dask.config.set({"dkernel.data.task-bytes": 1, "num_workers": 2}):
        pred = model.predict(X)
        take = take_graph(X, np.array([0, n - 1]))
    name = f"task-bytes-load-{len(X.reader.starts)}"
    res = ResidentRows.load(
        (X,), [(0, ROWS_PER_CHUNK), (n - ROWS_PER_CHUNK, n)], _row_count, client=client,
        name=name,
    )  # fmt: skip
    client.gather(res.parts)
    return {
        "chunks": X.numblocks[0],
        "read": _largest(X.__dask_graph__(), X.name),
        "pass": _largest(pred.__dask_graph__(), "kkmeans-predict"),
        "take": _largest(take.__dask_graph__(), take.name),
        "load": client.run_on_scheduler(_on_scheduler, name=name),
        "whole_manifest": len(pickle.dumps((X.reader, X.bounds))),
    }


#: The passes timed over the largest store: a reduction (its tasks queue on the scheduler,
#: a few on each worker at a time) and the whole array brought back (every task sent to the
#: workers at once, as for any graph that ends in one task).
PASSES = {"X.sum()": lambda X: X.sum(), "X.compute()": lambda X: X}


def _build(path: str, reps: int = 3) -> dict:
    """Seconds (median of ``reps``) to open the store (its ``X`` built), to cut rows from
    it (a row source of its own) and to materialise the cut's graph, here."""
    import statistics

    from dkernel.data import open_dataset

    times: dict = {"open": [], "slice": [], "materialize": []}
    for _ in range(reps):
        t0 = time.perf_counter()
        X = open_dataset(path).X
        t1 = time.perf_counter()
        cut = X[1 : int(X.shape[0]) - 1]
        t2 = time.perf_counter()
        dict(cut.__dask_graph__())
        t3 = time.perf_counter()
        for k, v in zip(times, (t1 - t0, t2 - t1, t3 - t2)):
            times[k].append(v)
    return {k: statistics.median(v) for k, v in times.items()}


def _pass(path: str, timeout: float) -> dict:
    from distributed import Client, LocalCluster, wait
    from scaling import _PeakRSS

    from dkernel.data import open_dataset

    X = open_dataset(path).X
    out: dict = {"chunks": X.numblocks[0], "timeout": timeout, "build": _build(path)}
    for what, make in PASSES.items():
        with (
            LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None) as cl,
            Client(cl) as client,
        ):
            X[: 100 * ROWS_PER_CHUNK].sum().compute()  # the workers' first open of the store
            with _PeakRSS(client) as peak:
                t0 = time.perf_counter()
                result = client.compute(make(X))
                try:
                    wait(result, timeout=timeout)
                    wall: float | None = time.perf_counter() - t0
                except TimeoutError:
                    wall = None
            out[what] = {"wall": wall, "worker_peak_mb": peak.worker_peak / 2**20}
            print(what, out[what], file=sys.stderr, flush=True)
    return out


def _baseline(args, path: str) -> dict:
    """:func:`_pass` in a process that imports dkernel from ``--baseline-src``."""
    import subprocess

    env = dict(os.environ, PYTHONPATH=os.path.abspath(args.baseline_src))
    cmd = [sys.executable, __file__, "--timeout", str(args.timeout),
           "--pass-only", str(path)]  # fmt: skip
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
    res = json.loads(out.stdout.strip().splitlines()[-1])
    res["src"] = args.baseline_src
    res["commit"] = _commit(args.baseline_src)
    return res


def _commit(src: str) -> str | None:
    """The commit checked out at ``src`` (a git checkout), if any."""
    import subprocess

    got = subprocess.run(["git", "-C", src, "rev-parse", "--short", "HEAD"],
                         capture_output=True, text=True)  # fmt: skip
    return got.stdout.strip() or None


def _who(label: str, run: dict) -> str:
    if label != "baseline":
        return label
    return f"{run.get('commit') or 'baseline'} (`{run['src']}`)"


def _markdown(res: dict) -> str:
    lines = [
        "# What each task of a pass over a store is sent",
        "",
        "Generated by `benchmarks/task_bytes.py` (its docstring gives the method).",
        "",
        f"Command: `{res['command']}`",
        "",
        "Pickled bytes of the largest task of each kind, and of the whole manifest and bounds "
        "(what each of those tasks carried before they carried only their own chunks):",
        "",
        "| chunks | read | pass | take | load | whole manifest |",
        "|---|---|---|---|---|---|",
    ]
    for r in res["sizes"]:
        lines.append(
            f"| {r['chunks']:,} | {r['read']:,} | {r['pass']:,} | {r['take']:,} | "
            f"{r['load']:,} | {r['whole_manifest']:,} |"
        )
    p = res["pass"]
    lines += ["", f"Over the store of {p['chunks']:,} chunks on 2 worker processes, each pass on "
              "a fresh cluster (one task per 64-row chunk: the time is Dask's cost per task; "
              "the worker's peak RSS sampled every 0.5 s):", "",
              "| pass | dkernel | wall | largest worker at its peak |",
              "|---|---|---|---|"]  # fmt: skip
    for what in PASSES:
        for label, run in (("this commit", p), ("baseline", res.get("baseline"))):
            if run is None:
                continue
            r = run[what]
            wall = (
                f"{r['wall']:.1f} s" if r["wall"] is not None
                else f"no result in {run['timeout']:.0f} s"
            )  # fmt: skip
            lines.append(
                f"| `{what}` | {_who(label, run)} | {wall} | {r['worker_peak_mb']:,.0f} MB |"
            )
    lines += ["", "Building the graph here (median of 3): open the store (its `X`), cut rows "
              "`X[1:n - 1]` (a row source of its own), materialise the cut's graph:", "",
              "| dkernel | open | cut | materialise |", "|---|---|---|---|"]  # fmt: skip
    for label, run in (("this commit", p), ("baseline", res.get("baseline"))):
        if run is not None:
            b = run["build"]
            lines.append(
                f"| {_who(label, run)} | {b['open']:.3f} s | {b['slice']:.3f} s | "
                f"{b['materialize']:.3f} s |"
            )
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    args = _args(argv)
    sys.path.insert(0, str(HERE))
    out = Path(args.out)
    if args.report:
        res = json.loads((out / "task_bytes.json").read_text())
        (out / "task_bytes.md").write_text(_markdown(res))
        return
    if args.pass_only:  # the baseline's subprocess
        print(json.dumps(_pass(args.pass_only, args.timeout)))
        return
    from distributed import Client, LocalCluster

    from dkernel.cluster import MiniBatchKernelKMeans
    from dkernel.data import make_checkerboard

    os.makedirs(args.store_dir, exist_ok=True)
    counts = [int(c) for c in args.chunks.split(",")]
    paths = [_store(args, c) for c in counts]
    X0, _ = make_checkerboard(2000, random_state=0)
    model = MiniBatchKernelKMeans(2, max_iter=3, batch_size=64, random_state=0).fit(X0)
    with (
        LocalCluster(n_workers=1, processes=False, dashboard_address=None) as cl,
        Client(cl, set_as_default=False) as client,
    ):
        sizes = [_sizes(p, model, client) for p in paths]
    for r in sizes:
        print(r, flush=True)
    res = {
        "command": "python " + shlex.join(["benchmarks/task_bytes.py", *sys.argv[1:]]),
        "rows_per_chunk": ROWS_PER_CHUNK,
        "sizes": sizes,
        "pass": _pass(paths[-1], args.timeout),
    }
    if args.baseline_src:
        res["baseline"] = _baseline(args, paths[-1])
    (out / "task_bytes.json").write_text(json.dumps(res, indent=1))
    (out / "task_bytes.md").write_text(_markdown(res))
    print(_markdown(res))


if __name__ == "__main__":
    main()
