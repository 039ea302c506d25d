"""How training scales with workers: measured walls, phase accounting, Amdahl's prediction.

    python benchmarks/scaling.py --workers 1,2,4,8,14 [--svm-rows 10000000]
        [--kmeans-rows 4000000] [--store-dir bench-data] [--out benchmarks/results]
    python benchmarks/scaling.py --big --workers 2 [--big-rows 100000000]   # the 10^8 run
    python benchmarks/scaling.py --report       # scaling.md from scaling.json

The protocol (issue 34), the same data, parameters and warm-up at every worker count:

- a fresh ``LocalCluster(n_workers=w, threads_per_worker=1)`` per w (processes), then one
  warm-up of every call on the first 2^17 rows of each store (numba compiles in every
  worker on its first call: no compilation is timed);
- kernel k-means: ``MiniBatchKernelKMeans(n_clusters=3, random_state=0)`` (defaults) on a
  ``make_waveform`` store (``--kmeans-rows`` x 21, float32): ``fit``, then ``predict`` over
  the store (its labels stay on the cluster; only the k cluster counts come back);
- BudgetedSVC: ``BudgetedSVC(budget=500, gamma=2.0, max_iter=1, distributed=True,
  random_state=0)`` (one pass + the exact refit) on a ``make_checkerboard`` store
  (``--svm-rows``): ``fit``, then ``score`` over the same store;
- ``distributed_coreset(store, m=2000, random_state=0)`` on the checkerboard store;
- the SVM and the coreset are given the store (its ``Dataset``), as a user passes it: the
  classes recorded at ingest spare a pass over y;
- once, without a cluster: ``BudgetedSVC(distributed=False)`` (the sequential stream) on
  the checkerboard store, one core, the peer the distributed fit must beat.

``--repeat N`` times every call N times on its cluster (and the stream N times) and keeps
the run of median wall, with all the walls: this host's speed drifts by 20-40 % within
an hour, and one run per call moved a prediction by up to 1.4x.

Each call runs under :func:`dkernel.runtime.accounting`; per phase the JSON keeps the wall,
the client's CPU, the summed worker task time, the blocking round trips and the bytes to
and from the client. :func:`dkernel.runtime.amdahl` splits each phase into serial seconds
(its wall beyond its worker time spread over the workers it could use) and parallel seconds
(the worker time, in ``width`` equal granules: shards, parts or chunks, of which the busiest
of w workers runs ``ceil(width / w)``) and predicts the wall at 1, 2, 4, 8, 14, 64 and 100
workers from the run at each measured w (``--report`` derives it again from the committed
measurements).

``--big``: the 10^8-row run on this machine's workers: the same calls on ``--big-rows``
rows (k-means on a 20-feature float32 store, the checkerboard for BudgetedSVC and the
coreset), with the floor (one read of each store: a sum over its chunks on the same
workers), each call's wall as a multiple of it, the peak RSS of the client and of the
largest worker (sampled every 0.5 s), and the accuracy / inertia.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import sys
import threading
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
PREDICT_AT = [1, 2, 4, 8, 14, 64, 100]
WARM_ROWS = 1 << 17


def _args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workers", default="1,2", help="worker counts, e.g. 1,2,4,8,14")
    p.add_argument("--svm-rows", type=int, default=10**7)
    p.add_argument("--kmeans-rows", type=int, default=4 * 10**6)
    p.add_argument("--coreset-m", type=int, default=2000)
    p.add_argument("--store-dir", default="bench-data")
    p.add_argument("--data-dir", default="../shared/datasets", help="unused (no shared set)")
    p.add_argument("--out", default=str(HERE / "results"))
    p.add_argument("--skip-stream", action="store_true")
    p.add_argument("--tasks", default="kmeans,svm,coreset")
    p.add_argument("--big", action="store_true", help="the 10^8-row run")
    p.add_argument("--big-rows", type=int, default=10**8)
    p.add_argument("--report", action="store_true")
    p.add_argument(
        "--run-name", default=None,
        help="the run's key in scaling.json (default '<cores>cores'; a run of that key is "
        "replaced)",
    )  # fmt: skip
    p.add_argument(
        "--repeat", type=int, default=1,
        help="time every call (and the stream) this many times on its cluster; the run of "
        "median wall is kept, with all the walls",
    )  # fmt: skip
    return p.parse_args(argv)


# ----------------------------------------------------------------------------- data
def _stores(args, *, n_svm: int, n_km: int, km_features: int | None = None):
    """The checkerboard and waveform stores (written once, reused)."""
    from dkernel.data import make_checkerboard, make_waveform, open_dataset

    os.makedirs(args.store_dir, exist_ok=True)
    board = os.path.join(args.store_dir, f"checkerboard-{n_svm}.zarr")
    if not os.path.exists(board):
        make_checkerboard(n_svm, random_state=0, store=board, dtype=np.float32)
    if km_features is None:
        wave = os.path.join(args.store_dir, f"waveform-{n_km}.zarr")
        if not os.path.exists(wave):
            make_waveform(n_km, random_state=0, store=wave, dtype=np.float32)
    else:
        wave = os.path.join(args.store_dir, f"blobs{km_features}-{n_km}.zarr")
        if not os.path.exists(wave):
            _blob_store(wave, n_km, km_features)
    return open_dataset(board), open_dataset(wave)


def _blob_store(path: str, n: int, d: int, block: int = 1 << 20) -> None:
    """Three Gaussian blobs in d dimensions, float32, written block by block (never all in
    memory): the 10^8 x 20 k-means store."""
    from dkernel.data import write_arrays

    centres = np.random.default_rng(1).uniform(-5, 5, size=(3, d))

    def blocks():
        for i, a in enumerate(range(0, n, block)):
            rng = np.random.default_rng([0, i])
            m = min(block, n - a)
            y = rng.integers(0, 3, m)
            yield (centres[y] + rng.normal(size=(m, d))).astype(np.float32), y

    write_arrays(path, blocks(), n=n, n_features=d, dtype=np.float32, chunk_rows=None,
                 has_y=True, attrs={"generator": "three blobs", "classes": [0, 1, 2]})  # fmt: skip


# ---------------------------------------------------------------------------- calls
def _timed(client, fn):
    """``fn()`` under an accounting: (wall, result, phases)."""
    from dkernel.runtime import accounting

    with accounting(client) as acc:
        t0 = time.perf_counter()
        out = fn()
        wall = time.perf_counter() - t0
    return wall, out, acc.report()


def _calls(board, wave, args, *, rows: int | None = None, state: dict | None = None):
    """The protocol's calls, each a (name, function) over the stores (cut to ``rows``);
    the fitted models are kept in ``state`` (``"km"``, ``"svm"``; a new dict by default)."""
    import dask.array as da

    from dkernel.cluster import MiniBatchKernelKMeans
    from dkernel.coreset import distributed_coreset
    from dkernel.runtime import phase
    from dkernel.svm import BudgetedSVC

    def cut(ds, k):
        return (ds.X, ds.y) if k is None else (ds.X[:k], ds.y[:k])

    Xb, yb = cut(board, rows)
    # the whole store as a user passes it (its recorded classes: no pass over y to find
    # them); the warm-up's cut rows as arrays
    data_b = (board,) if rows is None else (Xb, yb)
    Xw, _ = cut(wave, rows)
    state = {} if state is None else state

    def km_fit():
        state["km"] = MiniBatchKernelKMeans(n_clusters=3, random_state=0).fit(Xw)
        return state["km"]

    def km_predict():
        with phase("predict", width=Xw.numblocks[0]):
            labels = state["km"].predict(Xw)
            return np.asarray(da.bincount(labels, minlength=3).compute())

    def svm_fit():
        clf = BudgetedSVC(budget=500, gamma=2.0, max_iter=1, distributed=True, random_state=0)
        state["svm"] = clf.fit(*data_b)
        return clf

    def svm_score():
        with phase("score", width=Xb.numblocks[0]):
            return state["svm"].score(*data_b)

    def coreset():
        return distributed_coreset(*data_b, m=args.coreset_m, random_state=0)

    table = {
        "kmeans": [("kmeans_fit", km_fit), ("kmeans_predict", km_predict)],
        "svm": [("svm_fit", svm_fit), ("svm_score", svm_score)],
        "coreset": [("coreset", coreset)],
    }
    return [c for task in args.tasks.split(",") for c in table[task]]


def _phases_of(name: str, result, outer: dict) -> dict:
    """The call's own accounting (the estimator's or the coreset's), else the outer one."""
    own = getattr(result, "phase_stats_", None)
    if own is None and hasattr(result, "info"):
        own = result.info.get("phases")
    return own if own else outer


@contextlib.contextmanager
def _warm_cluster(w: int, board, wave, args, prepare=None):
    """A fresh cluster of w worker processes (one thread each), every call warmed up once
    on the first ``WARM_ROWS`` rows (numba compiles in every worker on its first call);
    ``prepare(client)`` first, when given."""
    from distributed import Client, LocalCluster

    with (
        LocalCluster(
            n_workers=w, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cl,
        Client(cl) as client,
    ):
        if prepare is not None:
            prepare(client)
        for _, fn in _calls(board, wave, args, rows=WARM_ROWS):
            fn()
        yield client


def _run_workers(args, w: int, board, wave) -> dict:
    """Every call on a fresh cluster of w workers, after one warm-up of each."""
    out = {}
    with _warm_cluster(w, board, wave, args) as client:
        for name, fn in _calls(board, wave, args):
            runs = []
            for _ in range(args.repeat):
                wall, result, outer = _timed(client, fn)
                quality = _quality(name, result)
                runs.append({"wall": wall, "phases": _phases_of(name, result, outer), **quality})
            out[name] = _median_run(runs)
            print(f"w={w} {name}: {out[name]['wall']:.2f} s {quality}", flush=True)
    return out


def _quality(name: str, result) -> dict:
    if name == "svm_score":
        return {"accuracy": float(result)}
    if name == "kmeans_fit":
        return {"inertia": float(result.inertia_)}
    if name == "kmeans_predict":
        return {"cluster_sizes": [int(v) for v in result]}
    if name == "coreset":
        return {"size": len(result)}
    return {}


def _stream(board, repeat: int = 1) -> dict:
    """The sequential stream on one core, no cluster (the peer of the distributed fit)."""
    import dask

    from dkernel.svm import BudgetedSVC

    kw = dict(budget=500, gamma=2.0, max_iter=1, distributed=False, random_state=0)
    runs = []
    with dask.config.set(scheduler="sync"):
        BudgetedSVC(**kw).fit(board.X[:WARM_ROWS], board.y[:WARM_ROWS])
        for _ in range(repeat):
            t0 = time.perf_counter()
            clf = BudgetedSVC(**kw).fit(board)
            runs.append({"wall": time.perf_counter() - t0, "phases": clf.phase_stats_})
    row = _median_run(runs)
    print(f"stream: {row['wall']:.2f} s", flush=True)
    return row


def _median_run(runs: list[dict]) -> dict:
    """The run of median wall (the lower middle of an even count), with every run's wall."""
    row = dict(sorted(runs, key=lambda r: r["wall"])[(len(runs) - 1) // 2])
    if len(runs) > 1:
        row["walls"] = [r["wall"] for r in runs]
    return row


# ------------------------------------------------------------------------------ big
class _PeakRSS:
    """The peak RSS of this process and of the largest worker, sampled every 0.5 s."""

    def __init__(self, client):
        import psutil

        self.client, self.proc, self.psutil = client, psutil.Process(), psutil
        self.pids = list(client.run(os.getpid).values())
        self.client_peak = self.worker_peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self):
        while not self._stop.is_set():
            self.client_peak = max(self.client_peak, self.proc.memory_info().rss)
            for pid in self.pids:
                try:
                    rss = self.psutil.Process(pid).memory_info().rss
                except self.psutil.Error:
                    continue
                self.worker_peak = max(self.worker_peak, rss)
            self._stop.wait(0.5)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def _floor(client, ds) -> float:
    """One read of the store on the workers: every chunk read, decoded and summed."""
    t0 = time.perf_counter()
    ds.X.sum(axis=0).compute()
    return time.perf_counter() - t0


def _run_big(args, w: int) -> dict:
    n = args.big_rows
    board, blobs = _stores(args, n_svm=n, n_km=n, km_features=20)
    out: dict = {"rows": n, "workers": w}
    with _warm_cluster(w, board, blobs, args) as client:
        out["floor"] = {"checkerboard": _floor(client, board), "blobs20": _floor(client, blobs)}
        print(f"floor: {out['floor']}", flush=True)
        for name, fn in _calls(board, blobs, args):
            with _PeakRSS(client) as rss:
                wall, result, outer = _timed(client, fn)
            store = "blobs20" if name.startswith("kmeans") else "checkerboard"
            out[name] = {
                "wall": wall,
                "floor_multiple": wall / out["floor"][store],
                "client_peak_rss_mb": rss.client_peak / 2**20,
                "worker_peak_rss_mb": rss.worker_peak / 2**20,
                "phases": _phases_of(name, result, outer),
                **_quality(name, result),
            }
            print(
                f"big {name}: {wall:.1f} s ({out[name]['floor_multiple']:.1f}x floor)", flush=True
            )
    return out


# --------------------------------------------------------------------------- report
def _load(path: Path) -> dict:
    return json.loads(path.read_text()) if path.exists() else {}


def main(argv=None):
    args = _args(argv)
    out_dir = Path(args.out)
    path = out_dir / "scaling.json"
    res = _load(path)
    if args.report:
        _save(res, out_dir)
        return
    command = "python benchmarks/scaling.py " + shlex.join(sys.argv[1:] if argv is None else argv)
    machine = {"cores": os.cpu_count(), "python": sys.version.split()[0]}
    workers = [int(v) for v in args.workers.split(",")]
    # saved after every worker count: a run cut short keeps the counts done
    if args.big:
        for w in workers:
            res.setdefault("big", {})[str(w)] = {**_run_big(args, w), "command": command,
                                                 "machine": machine}  # fmt: skip
            _save(res, out_dir)
        return
    board, wave = _stores(args, n_svm=args.svm_rows, n_km=args.kmeans_rows)
    run = {"command": command, "machine": machine, "svm_rows": args.svm_rows,
           "kmeans_rows": args.kmeans_rows, "workers": {}}  # fmt: skip
    res.setdefault("runs", {})[args.run_name or f"{os.cpu_count()}cores"] = run
    if not args.skip_stream and "svm" in args.tasks:
        run["stream"] = _stream(board, args.repeat)
    for w in workers:
        run["workers"][str(w)] = _run_workers(args, w, board, wave)
        _save(res, out_dir)


def _save(res: dict, out_dir: Path) -> None:
    """scaling.json (the measurements and what follows from them) and scaling.md."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "scaling.json"
    path.write_text(json.dumps(_derive(res), indent=1, default=float))
    (out_dir / "scaling.md").write_text(report(res))
    print(f"wrote {path} and scaling.md", flush=True)


def _derive(res: dict) -> dict:
    """Each measured row's prediction (``amdahl``), derived from its phases by
    :func:`dkernel.runtime.amdahl` as it is now: the measurements stay as they were taken,
    what follows from them is redone (``--report`` re-derives a committed run)."""
    from dkernel.runtime import amdahl

    for run in res.get("runs", {}).values():
        for w, rows in run["workers"].items():
            for row in rows.values():
                row["amdahl"] = amdahl(row["phases"], int(w), PREDICT_AT)
    return res


def _fmt(v, digits=2):
    return "-" if v is None else f"{v:.{digits}f}"


def _run_tables(key: str, run: dict) -> list[str]:
    lines = [f"## {key}: measured", "", f"Command: `{run['command']}`", ""]
    ws = sorted(run["workers"], key=int)
    names = list(run["workers"][ws[0]])
    lines += ["| workers | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
    base = run["workers"][ws[0]]
    for w in ws:
        cells = []
        for nm in names:
            r = run["workers"][w][nm]
            spread = f"; {min(r['walls']):.2f}-{max(r['walls']):.2f}" if "walls" in r else ""
            cells.append(f"{r['wall']:.2f} s ({base[nm]['wall'] / r['wall']:.2f}x{spread})")
        lines.append(f"| {w} | " + " | ".join(cells) + " |")
    if "walls" in base[names[0]]:
        lines += ["", f"Each wall is the median of {len(base[names[0]]['walls'])} runs on the "
                  "same cluster, the phases are that run's; after the speed-up, the range of "
                  "the runs' walls."]  # fmt: skip
    if "stream" in run:
        best = min(run["workers"][w]["svm_fit"]["wall"] for w in ws) if "svm_fit" in names else None
        walls = run["stream"].get("walls")
        lines += ["", f"Sequential stream (one core, no cluster): {run['stream']['wall']:.2f} s"
                  + (f" ({min(walls):.2f}-{max(walls):.2f})" if walls else "")
                  + (f"; the fastest distributed fit is {run['stream']['wall'] / best:.2f}x faster."
                     if best else "")]  # fmt: skip
    lines += ["", f"## {key}: Amdahl's prediction (speed-up over 1 worker)", ""]
    lines += ["| call | from w | " + " | ".join(f"{p}" for p in PREDICT_AT) + " |",
              "|---|---" + "|---" * len(PREDICT_AT) + "|"]  # fmt: skip
    for nm in names:
        for w in ws:
            pred = run["workers"][w][nm]["amdahl"]["predicted_wall"]
            one = pred[str(1)] if str(1) in pred else pred[1]
            cells = [
                f"{one / (pred[str(p)] if str(p) in pred else pred[p]):.2f}x" for p in PREDICT_AT
            ]
            lines.append(f"| {nm} | {w} | " + " | ".join(cells) + " |")
    lines += ["", f"## {key}: phases (from the largest measured w)", ""]
    w = ws[-1]
    lines += [
        "| call | phase | wall s | client CPU s | worker s | round trips | MB to client "
        "| MB from client | width | serial s | serial share |",
        "|---" * 11 + "|",
    ]
    for nm in names:
        r = run["workers"][w][nm]
        for ph, st in r["phases"].items():
            a = r["amdahl"]["phases"][ph]
            lines.append(
                f"| {nm} | {ph} | {st['wall']:.3f} | {st['client_cpu']:.3f} | "
                f"{_fmt(st['worker_seconds'], 3)} | {st['round_trips']} | "
                f"{st['bytes_to_client'] / 2**20:.2f} | {st['bytes_from_client'] / 2**20:.2f} | "
                f"{st['width'] or '-'} | {a['serial_seconds']:.3f} | {a['serial_fraction']:.3f} |"
            )
    return lines


#: The on-paper run: rows, workers, and what the library derives from n (the shard rule of
#: ``BudgetedSVC``, the stores' default chunk rows).
PAPER_ROWS, PAPER_WORKERS, PAPER_CHUNK_ROWS = 10**9, 100, 1 << 16


def _km_batches() -> tuple[int, int]:
    """The k-means fit's batches at its defaults: ``(max_iter, batch_size)``."""
    from dkernel.cluster import MiniBatchKernelKMeans

    p = MiniBatchKernelKMeans().get_params()
    return int(p["max_iter"]), int(p["batch_size"])


def _touched(chunks: int, rows: int) -> float:
    """The chunks (of equal size) that ``rows`` uniform draws fall in, on average."""
    return chunks * -float(np.expm1(-rows / chunks))


def _paper(run: dict) -> list[str]:
    """10^9 rows on 100 workers from object storage, extrapolated from the measured run at
    1 worker: each phase's worker seconds scale with n (all work here is per row but the
    refit's, whose sample is fixed at 256 rows per SV, and the k-means batches' read, which
    scales with the chunks they touch), its serial seconds stay, and its
    width becomes what n gives (shards: one per 2^17 rows, at most 256; chunks: n / 2^16)."""
    from dkernel.data import pass_groups
    from dkernel.runtime import spread

    one = run["workers"].get("1")
    if one is None:
        return []
    scale = PAPER_ROWS / run["svm_rows"]
    km_scale = PAPER_ROWS / run["kmeans_rows"]
    chunks = PAPER_ROWS // PAPER_CHUNK_ROWS
    shards = 256
    lines = [f"## On paper: 10^9 rows on {PAPER_WORKERS} workers from object storage", "",
             "Extrapolated from the 1-worker run above (see `_paper` in the script): per phase,"
             " worker seconds x (10^9 / measured rows) except the refit (a fixed sample), the"
             " k-means iterations (a fixed number of batches) and the k-means fit's setup (x the"
             " chunks its batches touch), serial seconds as measured,"
             f" width from n ({shards} shards; {chunks:,} chunks of 2^16 rows). A round of"
             f" tasks over {shards} shards on {PAPER_WORKERS} workers takes"
             f" {-(-shards // PAPER_WORKERS)} waves.", "",
             "| call | phase | serial s | parallel s at 10^9 | width | predicted s |",
             "|---|---|---|---|---|---|"]  # fmt: skip
    fixed = {"refit parts", "refit solve", "iterations", "init", "setup", "compile",
             "sample solve"}  # fmt: skip
    n_batches, batch_size = _km_batches()
    drawn = n_batches * batch_size
    touched = _touched(chunks, drawn)  # the chunks the k-means batches fall in at 10^9
    totals = {}
    for name, r in one.items():
        factor = km_scale if name.startswith("kmeans") else scale
        total = 0.0
        for ph, a in r["amdahl"]["phases"].items():
            P = a["parallel_seconds"] * (1.0 if ph in fixed else factor)
            width = shards if name == "svm_fit" and ph in ("rounds", "shards") else chunks
            if ph in fixed:
                width = a["width"] or 1
            if (name, ph) == ("kmeans_fit", "setup") and a["width"]:
                # the batches' rows are read in one pass over the chunks they fall in
                P = a["parallel_seconds"] * touched / _touched(a["width"], drawn)
                width = round(touched)
            t = a["serial_seconds"] + spread(P, width, PAPER_WORKERS)
            total += t
            lines.append(f"| {name} | {ph} | {a['serial_seconds']:.2f} | {P:.0f} | {width:,} "
                         f"| {t:.1f} |")  # fmt: skip
        totals[name] = total
    lines += ["", "| call | predicted wall at 10^9 on 100 workers |", "|---|---|"]
    lines += [f"| {k} | {v:.0f} s |" for k, v in totals.items()]
    per_round = shards * 2 * 16 * 1024
    # the labels pass's tasks (dkernel.data.pass_groups) over 10^9 x 20 float32 rows
    km_tasks = len(pass_groups([PAPER_CHUNK_ROWS] * chunks, 20 * 4, PAPER_WORKERS)) - 1
    lines += [
        "",
        "Communication (from the algorithm, not measured): the SVM fit reads each stored chunk"
        f" once ({chunks:,} chunks of X and as many of y: {2 * chunks:,} GETs, spread over"
        f" the fit's read), then moves models only: each epoch's round (n_rounds=1) sends the model"
        f" (~16 KB at B = 500, d = 2) to {shards} shard tasks and back up a merge tree of"
        f" depth {shards.bit_length() - 1} (~{per_round / 2**20:.0f} MB between workers per"
        " round, nothing to the client); its blocking round trips do not grow with n or the"
        " workers (setup, compile, one wait for the rounds, 11 to 25 refit passes of one task"
        " per worker each: 11 on 10^7 rows, 25 on 10^8). Each refit pass brings every"
        " worker's Gram sums to the client as upper triangles (4 width (width + 1) bytes"
        " per point, two points a trial: 0.3 MB per worker per trial at the 10^7 fit's"
        " width of 201, so 30 MB a pass on 100 workers), beside each part's gradient sums."
        f" k-means: its labels pass reads each chunk once ({chunks:,} GETs; adjacent chunks"
        f" share a task within 64 MiB of rows: {km_tasks:,} tasks on 100 workers) and sends"
        " one number per chunk to the client; its"
        f" mini-batches' {drawn:,} rows (the defaults' {n_batches} batches of {batch_size})"
        " are gathered in"
        " one pass over the chunks they fall in (every batch in one group of"
        " `kmeans.prefetch-bytes`, 64 MiB of rows), which at 10^9 rows are"
        f" {touched:,.0f} of the {chunks:,} chunks: the setup reads nearly"
        " the whole store once (its worker seconds above scale with the chunks touched; a"
        " pre-shuffled store read in row ranges would read only the batches' share). The"
        " coreset's three passes run on blocks kept on the workers (read once)."
        " Every task is sent only its own chunks' row offsets and checksums (a few hundred"
        " bytes a chunk read), not the store's manifest: a task that carried the whole"
        f" manifest of {chunks:,} chunks pickled to about 0.25 MB (measured on a store of"
        " 15,625 chunks), gigabytes a pass.",
    ]
    return lines


def report(res: dict) -> str:
    lines = ["# Scaling with workers (`benchmarks/scaling.py`)", "",
             "Generated from `scaling.json`; the module docstring gives the protocol.", ""]  # fmt: skip
    for key, run in res.get("runs", {}).items():
        lines += _run_tables(key, run) + [""] + _paper(run) + [""]
    for w, big in res.get("big", {}).items():
        lines += [f"## {big['rows']:.0e} rows on {w} workers", "", f"Command: `{big['command']}`",
                  "", f"Floor (one read): {big['floor']}", "",
                  "| call | wall s | x floor | client peak MB | worker peak MB | quality |",
                  "|---|---|---|---|---|---|"]  # fmt: skip
        for nm, r in big.items():
            if not isinstance(r, dict) or "wall" not in r:
                continue
            q = {k: r[k] for k in ("accuracy", "inertia", "size", "cluster_sizes") if k in r}
            lines.append(f"| {nm} | {r['wall']:.1f} | {r['floor_multiple']:.1f} | "
                         f"{r['client_peak_rss_mb']:.0f} | {r['worker_peak_rss_mb']:.0f} | {q} |")  # fmt: skip
        lines.append("")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
