"""Two studies of the distributed SVM fit on the scaling protocol's 10^7 checkerboard.

Usage::

    python benchmarks/svm_rounds_study.py --store-dir bench-data

1. **Replay of the rounds on more workers.** One fit on a warm 1-worker cluster, its task
   stream recorded; the rounds' shard tasks and the merge tree's tasks, with their measured
   durations, are laid out again on w simulated workers in two ways:

   - *placed*: shard k on worker ``k mod w`` (``range_workers``), a merge on its first
     child's worker, each worker running its tasks in order;
   - *stealing*: each free worker takes the next ready task (a merge as soon as both its
     children are done), as Dask's work stealing does when it moves a round task to an
     idle worker (the round tasks carry no worker restriction; a shard is ~2 MB);

   beside the even share ``P / w`` and :func:`dkernel.runtime.spread` (the waves model the
   phase accounting uses). This is what the tree's top levels and the shard sizes cost
   that neither ``P / w`` nor the waves see.

2. **SGD on a sample.** The issue suggests choosing the support by SGD on a sample of the
   rows, then the exact refit over all of them. Here each shard's SGD pass is cut to the
   first ``f`` of its rows in its visiting order (a patch of ``rounds._round_rows`` in
   this process and every worker: a study, not an option of the estimator), the refit
   unchanged, on the same warm cluster; per f the fit's wall, its phases, Amdahl's
   prediction at 14 workers and the accuracy over all rows (``score``), and the sequential
   stream of the same data in the same run (the peer).

Writes ``results/svm_rounds_study.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import sys
import time
from pathlib import Path

import scaling

HERE = Path(__file__).resolve().parent
AT = [1, 2, 8, 14]


def _args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--store-dir", default="bench-data")
    p.add_argument("--fractions", default="1,0.25,0.1")
    p.add_argument("--out", default=str(HERE / "results"))
    return p.parse_args(argv)


# ----------------------------------------------------------------- 1. replay
def _round_tasks(stream: list) -> tuple[dict[int, float], dict[tuple[int, int], float]]:
    """``({shard: seconds}, {(level, index): seconds})`` of the rounds and merge tree."""
    rounds, merges = {}, {}
    for rec in stream:
        spans = [s for s in rec["startstops"] if s["action"] == "compute"]
        if not spans:
            continue
        key = rec["key"][0] if isinstance(rec["key"], tuple) else rec["key"]
        secs = sum(s["stop"] - s["start"] for s in spans)
        if key.startswith("bsgd-round-"):
            index = rec["key"][1] if isinstance(rec["key"], tuple) else re.findall(r"\d+", key)[-1]
            rounds[int(index)] = secs
        elif key.startswith("bsgd-merge-"):
            level, index = (int(v) for v in key.split("-")[-2:])
            merges[(level, index)] = secs
    return rounds, merges


def _tree(n: int, merges: dict) -> list:
    """The fit's merge tree over n leaves (:func:`dkernel.runtime.tree_reduce`, fan-in 2 as
    ``BudgetedSVC``'s default ``split_every``): ``[(key, seconds, children)]`` by level."""
    from dkernel.runtime import tree_reduce

    nodes = []

    def record(children: list, node) -> tuple[int, int]:
        key = (node.level, node.idx)
        nodes.append((key, merges.get(key, 0.0), children))
        return key

    tree_reduce(None, [(0, k) for k in range(n)], record, split_every=2)
    return nodes


def replay_placed(rounds: dict, merges: dict, w: int) -> float:
    free = [0.0] * w
    done, where = {}, {}
    for k in sorted(rounds):
        free[k % w] += rounds[k]
        done[(0, k)], where[(0, k)] = free[k % w], k % w
    key = (0, 0)
    for key, secs, kids in _tree(len(rounds), merges):
        ready = max(done[c] for c in kids)
        wk = where[kids[0]]
        start = max(free[wk], ready) if secs else ready
        done[key], where[key] = start + secs, wk
        if secs:
            free[wk] = done[key]
    return done[key]


def replay_stealing(rounds: dict, merges: dict, w: int) -> float:
    todo = [((0, k), rounds[k], []) for k in sorted(rounds)] + _tree(len(rounds), merges)
    free = [0.0] * w
    done: dict = {}
    while todo:
        wk = min(range(w), key=free.__getitem__)
        ready = [
            (max((done[c] for c in kids), default=0.0), j)
            for j, (_, _, kids) in enumerate(todo)
            if all(c in done for c in kids)
        ]
        at, j = min(ready, key=lambda r: (max(r[0], free[wk]), r[1]))
        key, secs, _ = todo.pop(j)
        done[key] = max(at, free[wk]) + secs
        free[wk] = done[key]
    return max(done.values())


# ----------------------------------------------------------- 2. SGD on a sample
def _cut_rounds(f: float) -> None:
    """Each shard's round runs over the first ``f`` of its rows of that round."""
    import dkernel.svm.rounds as R

    whole = getattr(R, "_whole_round_rows", R._round_rows)
    R._whole_round_rows = whole

    def cut(nk: int, rnd: int, n_rounds: int) -> slice:
        s = whole(nk, rnd, n_rounds)
        return slice(s.start, s.start + round(f * (s.stop - s.start)))

    R._round_rows = cut


def main(argv=None):
    from distributed import get_task_stream

    from dkernel.runtime import amdahl, spread

    args = _args(argv)
    sargs = scaling._args(["--store-dir", args.store_dir, "--tasks", "svm"])
    board, wave = scaling._stores(sargs, n_svm=sargs.svm_rows, n_km=sargs.kmeans_rows)
    command = "python benchmarks/svm_rounds_study.py " + shlex.join(
        sys.argv[1:] if argv is None else argv
    )
    res: dict = {"command": command, "rows": sargs.svm_rows, "replay": {}, "sample": {}}
    res["stream"] = scaling._stream(board)["wall"]
    with scaling._warm_cluster(1, board, wave, sargs) as client:
        calls = dict(scaling._calls(board, wave, sargs))
        with get_task_stream(client) as ts:
            calls["svm_fit"]()
        rounds, merges = _round_tasks(ts.data)
        P = sum(rounds.values()) + sum(merges.values())
        res["replay"] = {
            "shards": len(rounds), "round_seconds": sum(rounds.values()),
            "merge_seconds": sum(merges.values()), "merges": len(merges),
            "longest_round": max(rounds.values()),
            "round_durations": [rounds[k] for k in sorted(rounds)],
            "merge_durations": [[*k, v] for k, v in sorted(merges.items())],
            "at": {w: {"even": P / w, "waves": spread(P, len(rounds), w),
                       "placed": replay_placed(rounds, merges, w),
                       "stealing": replay_stealing(rounds, merges, w)} for w in AT},
        }  # fmt: skip
        print(json.dumps(res["replay"]["at"], indent=1), flush=True)
        for f in [float(v) for v in args.fractions.split(",")]:
            _cut_rounds(f)
            client.run(_cut_rounds, f)
            wall, clf, _ = scaling._timed(client, calls["svm_fit"])
            t0 = time.perf_counter()
            acc = float(calls["svm_score"]())
            a = amdahl(clf.phase_stats_, 1, AT)
            res["sample"][str(f)] = {
                "wall": wall, "accuracy": acc, "score_wall": time.perf_counter() - t0,
                "phases": clf.phase_stats_,
                "predicted_wall": a["predicted_wall"],
                "serial": sum(p["serial_seconds"] for p in a["phases"].values()),
                "parallel": sum(p["parallel_seconds"] for p in a["phases"].values()),
            }  # fmt: skip
            print(f"f={f}: {wall:.2f} s, accuracy {acc:.5f}", flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "svm_rounds_study.json").write_text(json.dumps(res, indent=1, default=float))
    (out / "svm_rounds_study.md").write_text(report(res))
    print(f"wrote {out / 'svm_rounds_study.md'}")


def report(res: dict) -> str:
    rp = res["replay"]
    lines = ["# The distributed SVM fit's rounds on more workers, and SGD on a sample",
             "", "Generated by `benchmarks/svm_rounds_study.py` (its docstring gives the method).",
             "", f"Command: `{res['command']}` ({res['rows']:.0e} checkerboard rows, 2 cores).",
             "", "## 1. The rounds replayed on w workers", "",
             f"Measured on 1 worker: {rp['shards']} shard tasks, {rp['round_seconds']:.2f} s in"
             f" all (the longest {rp['longest_round']:.3f} s), and {rp['merges']} merges,"
             f" {rp['merge_seconds']:.2f} s in all.", "",
             "| workers | P / w s | waves (the accounting) s | replay, stealing s "
             "| replay, placed s |", "|---|---|---|---|---|"]  # fmt: skip
    for w, r in rp["at"].items():
        lines.append(f"| {w} | {r['even']:.3f} | {r['waves']:.3f} | {r['stealing']:.3f} "
                     f"| {r['placed']:.3f} |")  # fmt: skip
    lines += ["", "## 2. SGD on a sample of each shard's rows, the refit over all", "",
              f"Sequential stream in the same run (one core, no cluster): {res['stream']:.2f} s.",
              "", "| f | fit s (1 worker) | serial s | worker s | refit solve worker s "
              "| predicted at 14 s | x the stream at 14 | x 1 worker at 14 | accuracy |",
              "|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for f, r in res["sample"].items():
        pred = r["predicted_wall"]
        p14 = pred["14"] if "14" in pred else pred[14]
        p1 = pred["1"] if "1" in pred else pred[1]
        refit = (r["phases"].get("refit solve") or {}).get("worker_seconds") or 0.0
        lines.append(f"| {f} | {r['wall']:.2f} | {r['serial']:.2f} | {r['parallel']:.2f} "
                     f"| {refit:.2f} | {p14:.2f} | {res['stream'] / p14:.2f}x | {p1 / p14:.2f}x "
                     f"| {100 * r['accuracy']:.3f} % |")  # fmt: skip
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
