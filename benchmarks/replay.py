"""Dask's own costs at 8 and 14 workers on a 2-core host: the scaling protocol's passes
replayed with every task's work replaced by a sleep of its measured length.

    python benchmarks/replay.py --store-dir bench-data [--workers 1,2,8,14] [--real-workers 1,2]
        [--repeat 3]
    python benchmarks/replay.py --report       # replay.md from replay.json
    python benchmarks/replay.py --kmeans-rows 40000000 --name replay_4e7   # a bigger store
        [--saturations 1.1,1.0]   # the scheduler's worker-saturation side by side

:mod:`scaling` predicts 8 and 14 workers from runs on 1 and 2 (the waves model of
:func:`dkernel.runtime.amdahl`): its serial seconds are what a phase's wall holds beyond
its worker time, and they hold the cost of dispatching each task, which on w workers is
paid w at a time, or not. Fourteen workers cannot compute at once on two cores, but they
can sleep at once. So each call runs, unchanged on the client, on w worker processes
whose task bodies are patched (``client.run``, in the workers only):

- every stored read (``ChunkReader.read`` and ``.rows``) sleeps for its rows at the
  measured read rate of its store and returns a read-only view of a real chunk of it,
  tiled (rows of the right shape and dtype, values from the store, no copy);
- the per-block work of a pass (``_read_checked_blocks``: predict, score) and the k-means
  fit's assignment of its loaded parts (``_assign_loaded``) sleep for their rows at the
  call's measured compute rate and return zeros of the real result's shape;
- the client runs as it does: the graphs, the k-means iterations, every round trip.

The rates come from this run, on 1 worker: the read rate of each store from one read of
its chunks here, in this process; a call's compute rate from its phase's worker seconds
(the real call on a warm 1-worker cluster) less its reads. The replay on 1 worker checks
the patch (its wall should be the real one); on 8 and 14 it measures what the waves model
predicts. The k-means fit's batch reads and its labels pass are replayed, its iterations
run for real on the client (on the store's rows: the batches are real chunks' rows).

Compared, per call: the real walls (on 1 worker, and on 2 where the replay can be checked
against a real run), the replay's on each w, its speed-up ``replay(1) / replay(w)``, and
the waves model's prediction from the real 1-worker phases. On two cores the replay's
Dask costs are if anything too high: the scheduler, the client and 14 workers' event loops
share the cores (on 16, each has its own). What a sleep cannot show: the memory bandwidth
and caches that 14 computing workers share.

Writes ``results/replay.{json,md}`` (``--name``: another stem).
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from pathlib import Path

import numpy as np
import scaling

HERE = Path(__file__).resolve().parent
CALLS = ("kmeans_fit", "kmeans_predict", "svm_score")
#: The phase of each call whose worker seconds set its compute rate (less its reads).
PHASE = {"kmeans_fit": "labels", "kmeans_predict": "predict", "svm_score": "score"}


def _args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workers", default="1,2,8,14", help="worker counts of the replay")
    p.add_argument("--real-workers", default="1,2", help="worker counts run for real too")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--svm-rows", type=int, default=10**7)
    p.add_argument("--kmeans-rows", type=int, default=4 * 10**6)
    p.add_argument("--store-dir", default="bench-data")
    p.add_argument("--out", default=str(HERE / "results"))
    p.add_argument("--name", default="replay", help="the results' file stem in --out")
    p.add_argument(
        "--saturations",
        default="",
        help="scheduler worker-saturation values to replay side by side on each w > 1 "
        "(e.g. 1.1,1.0: distributed's default against one task a worker at a time)",
    )
    p.add_argument("--report", action="store_true")
    return p.parse_args(argv)


# ------------------------------------------------------------- the worker patch
def _patch(templates: dict, rates: dict) -> None:
    """In a worker: reads and per-block work become sleeps (see the module docstring).
    ``templates``: ``{(store, name): a real chunk}``; ``rates``: ``{(store, name): read
    seconds per row}``, and ``"compute"``: seconds per row of the next call
    (:func:`_set_rate`). The rates live in the worker's ``dkernel.data._verify`` module.

    Nothing the patch does costs CPU in proportion to the rows (14 workers share two
    cores): a read returns a read-only view of its store's chunk tiled to the largest
    task's rows (no copy), and the shape of a block's result is found once per function
    (one row of it computed)."""
    import dkernel.cluster._common as common
    import dkernel.data._verify as verify
    from dkernel._defaults import setting

    verify._REPLAY_RATES = rates = dict(rates, compute=0.0)
    tiled = {}
    for key, chunk in templates.items():
        reps = -(-int(setting("data.task-bytes")) // max(1, chunk.nbytes)) + 1
        tiled[key] = np.tile(chunk, (reps,) + (1,) * (chunk.ndim - 1))
        tiled[key].flags.writeable = False
    shapes: dict = {}

    def rows_of(key, n: int) -> np.ndarray:
        big = tiled[key]
        if n <= len(big):
            return big[:n]
        return np.concatenate([big] * (n // len(big)) + [big[: n % len(big)]])

    def read(self, i: int) -> np.ndarray:
        k = i - self.first
        n = self.starts[k + 1] - self.starts[k]
        time.sleep(n * rates[(self.store, self.name)])
        return rows_of((self.store, self.name), n)

    def rows(self, lo: int, hi: int) -> np.ndarray:
        # the rows' own read time: the passes replayed read whole chunks (their ranges
        # fall on chunk bounds), so no partly read chunk is missed
        time.sleep((hi - lo) * rates[(self.store, self.name)])
        return rows_of((self.store, self.name), hi - lo)

    def blocks(spans: tuple, func, *args):
        name = (func.__module__, func.__qualname__)
        out = []
        for span in spans:
            Xb = span.read()
            if name not in shapes:
                one = np.asarray(func(np.array(Xb[:1]), *args))
                shapes[name] = (one.shape[1:], one.dtype)
            time.sleep(len(Xb) * rates["compute"])
            tail, dtype = shapes[name]
            out.append(np.zeros((len(Xb), *tail), dtype=dtype))
        return verify.join_rows(out)

    def assign(Xb, start: int, *, args, dtype, grid) -> np.ndarray:
        time.sleep(len(Xb) * rates["compute"])
        return np.zeros((len(Xb), 2))

    verify.ChunkReader.read = read
    verify.ChunkReader.rows = rows
    verify._read_checked_blocks = blocks
    common._assign_loaded = assign


def _set_rate(compute: float) -> None:
    """In a patched worker: the compute rate (seconds per row) of the next call."""
    import dkernel.data._verify as verify

    verify._REPLAY_RATES["compute"] = float(compute)


# ---------------------------------------------------------------- measurements
def _reads(*stores) -> tuple[dict, dict]:
    """``({(store, name): a real chunk}, {(store, name): seconds per row})``: one checked
    read of every chunk of each store's X and y here, in this process."""
    templates, rates = {}, {}
    for ds in stores:
        for arr in (ds.X, ds.y):
            reader = arr.reader
            t0 = time.perf_counter()
            for i in range(len(reader.starts) - 1):
                reader.read(i)
            key = (reader.store, reader.name)
            rates[key] = (time.perf_counter() - t0) / reader.starts[-1]
            templates[key] = reader.read(0)
    return templates, rates


def _compute_rates(real: dict, board, wave, rates: dict) -> dict:
    """Each call's compute seconds per row: its phase's worker seconds on the real
    1-worker run, less the reads of its rows (X, and y for score)."""
    out = {}
    for name, phase in PHASE.items():
        ds = board if name == "svm_score" else wave
        n = int(ds.X.shape[0])
        read = rates[(ds.X.reader.store, ds.X.reader.name)]
        if name == "svm_score":
            read += rates[(ds.y.reader.store, ds.y.reader.name)]
        worker = real[name]["phases"][phase]["worker_seconds"]
        out[name] = max(0.0, worker / n - read)
    return out


def _run(
    args, w: int, board, wave, state: dict, replay: tuple | None = None, saturation=None
) -> dict:
    """Every call of :data:`CALLS` on a fresh w-worker cluster: for real (and the SVM fit
    once before them: the model score uses), or with ``replay = (templates, rates,
    compute)`` the workers patched (:func:`_patch`) and each call at its compute rate;
    ``saturation``: the scheduler's ``worker-saturation`` (None: the config's)."""
    import dask

    sargs = scaling._args(["--tasks", "kmeans,svm"])
    prepare = None if replay is None else (lambda client: client.run(_patch, *replay[:2]))
    res = {}
    config = {} if saturation is None else {"distributed.scheduler.worker-saturation": saturation}
    with (
        dask.config.set(config),
        scaling._warm_cluster(w, board, wave, sargs, prepare=prepare) as client,
    ):
        calls = dict(scaling._calls(board, wave, sargs, state=state))
        for name in CALLS if replay is not None else ("svm_fit", *CALLS):
            if replay is not None:
                client.run(_set_rate, replay[2][name])
            runs = []
            for _ in range(1 if name == "svm_fit" else args.repeat):
                wall, result, outer = scaling._timed(client, calls[name])
                runs.append({"wall": wall, "phases": scaling._phases_of(name, result, outer)})
            res[name] = scaling._median_run(runs)
            kind = "real" if replay is None else "replay"
            print(f"{kind} w={w} {name}: {res[name]['wall']:.3f} s", flush=True)
    return res


def main(argv=None):
    args = _args(argv)
    out = Path(args.out)
    path, md = out / f"{args.name}.json", out / f"{args.name}.md"
    if args.report:
        md.write_text(report(json.loads(path.read_text())))
        return
    board, wave = scaling._stores(args, n_svm=args.svm_rows, n_km=args.kmeans_rows)
    templates, rates = _reads(board, wave)
    state: dict = {}
    real = {w: _run(args, w, board, wave, state) for w in _workers(args.real_workers)}
    compute = _compute_rates(real[1], board, wave, rates)
    patched = (templates, rates, compute)
    ws = _workers(args.workers)
    replay = {w: _run(args, w, board, wave, state, patched) for w in ws}
    # the saturations side by side: each w's clusters one after the other
    sats = [float(v) for v in args.saturations.split(",") if v]
    by_sat: dict = {str(v): {} for v in sats}
    for w in (w for w in ws if w > 1):
        for v in sats:
            by_sat[str(v)][str(w)] = _run(args, w, board, wave, state, patched, saturation=v)
    res = {
        "command": "python benchmarks/replay.py "
        + shlex.join(sys.argv[1:] if argv is None else argv),
        "read_seconds_per_row": {f"{k[0]}:{k[1]}": v for k, v in rates.items()},
        "compute_seconds_per_row": compute,
        "real": {str(w): r for w, r in real.items()},
        "replay": {str(w): r for w, r in replay.items()},
        "replay_by_saturation": by_sat,
    }
    out.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(res, indent=1, default=float))
    md.write_text(report(res))
    print(report(res))


def _workers(text: str) -> list[int]:
    return [int(v) for v in text.split(",")]


def report(res: dict) -> str:
    from dkernel.runtime import amdahl

    real = res["real"]["1"]
    ws = sorted(int(w) for w in res["replay"])
    others = sorted(int(w) for w in res["real"] if w != "1")
    lines = [
        "# Dask's own costs on more workers: the passes replayed with sleeps (`replay.py`)",
        "",
        "Generated by `benchmarks/replay.py` (its docstring gives the method).",
        "",
        f"Command: `{res['command']}`",
        "",
        "Each task's work is a sleep of its measured length (reads at each store's read "
        "rate, per-block work at the call's compute rate, both measured on 1 worker); the "
        "client, the graphs, the scheduler and every round trip are real. Speed-up on w "
        "workers: the replay's 1-worker wall over its w-worker wall (both pay the patch's "
        "own costs, a sleep's overshoot and a block's zeros); model: the waves "
        "model's prediction from the real 1-worker run's phases, as `scaling.py` makes it.",
        "",
        "| call | real, 1 worker | "
        + "".join(f"real, {w} | " for w in others)
        + " | ".join(f"replay, {w}" for w in ws)
        + " | "
        + " | ".join(f"speed-up at {w}: replay / model" for w in ws if w > 1)
        + " |",
        "|---" * (2 + len(others) + len(ws) + sum(w > 1 for w in ws)) + "|",
    ]
    for name in CALLS:
        t1 = real[name]["wall"]
        model = amdahl(real[name]["phases"], 1, ws)["predicted_wall"]
        walls = {w: res["replay"][str(w)][name]["wall"] for w in ws}
        base = walls.get(1, t1)
        cells = [f"{res['real'][str(w)][name]['wall']:.3f} s" for w in others]
        cells += [f"{walls[w]:.3f} s" for w in ws]
        ups = [f"{base / walls[w]:.2f}x / {t1 / model[w]:.2f}x" for w in ws if w > 1]
        lines.append(f"| {name} | {t1:.3f} s | " + " | ".join(cells + ups) + " |")
    by_sat = res.get("replay_by_saturation") or {}
    if by_sat:
        sats = list(by_sat)
        lines += [
            "",
            "The scheduler's `worker-saturation` side by side (each w's clusters one after "
            "the other; distributed's default is 1.1): the "
            "replay's wall and its speed-up over the 1-worker replay.",
            "",
            "| call | workers | " + " | ".join(f"saturation {v}" for v in sats) + " |",
            "|---|---|" + "---|" * len(sats),
        ]
        base = res["replay"].get("1")
        for name in CALLS:
            for w in by_sat[sats[0]]:
                cells = []
                for v in sats:
                    wall = by_sat[v][w][name]["wall"]
                    up = f" ({base[name]['wall'] / wall:.2f}x)" if base else ""
                    cells.append(f"{wall:.3f} s{up}")
                lines.append(f"| {name} | {w} | " + " | ".join(cells) + " |")
    lines += ["", "Compute seconds per row (of the real run, less its reads): "]
    lines += [f"- {k}: {v:.3e}" for k, v in res["compute_seconds_per_row"].items()]
    lines += ["", "Read seconds per row (one read of every chunk, in process): "]
    lines += [f"- {k}: {v:.3e}" for k, v in res["read_seconds_per_row"].items()]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
