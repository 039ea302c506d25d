"""What one Dask task costs the scheduler on this host: the serial floor under every call.

Usage::

    python benchmarks/task_overhead.py

The scaling protocol's serial seconds (``benchmarks/scaling.py``) are what a call's wall
time exceeds its spread worker time by. Most of it is Dask's own cost per task. This
study measures that cost with no dkernel code at all, on the cluster ``scaling.py`` uses
(a fresh ``LocalCluster(n_workers=w, threads_per_worker=1, processes=True)`` per w):
``--tasks`` tasks that each *sleep* ``--sleep-ms`` (no CPU, so more workers than cores
still run them side by side) and one task that sums them, as a pass of one task per
chunk does (one small result each). Per w, after one warm-up, the median wall time of
``--reps`` computes, less ``ceil(tasks / w)`` sleeps (the waves), divided by the tasks:
the excess per task; and the CPU time this process spent per task meanwhile, less what
it spends at rest in as long (the nannies' and scheduler's periodic checks). The
scheduler of a ``LocalCluster`` runs in the client's process, on one event-loop thread
with the client's side of the comms (the workers are other processes; the tasks sleep),
so that CPU time per task, ``s``, is work done one task after another whatever the number
of workers: a serial cost per task.

Then, for each call of the committed scaling run (``results/scaling.json``), its tasks at
one worker times ``s`` are a floor under its serial seconds, and the speed-up at the
issue's worker count for it (``TARGETS``) that floor allows on this host,
``S+P / (tasks s + spread(P, width, w))`` summed over its phases (the waves model of
:func:`dkernel.runtime.amdahl`), beside the one its measured serial seconds give. A pass
that groups chunks (``dkernel.data.pass_groups``) runs more tasks on more workers than at
one: the floor at one worker is a lower bound.

Writes ``results/task_overhead.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import math
import shlex
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
#: The issue's targets per call: (workers, speed-up over one worker).
TARGETS = {
    "kmeans_fit": (8, 6.0),
    "kmeans_predict": (14, 11.0),
    "svm_fit": (14, 9.0),
    "svm_score": (14, 11.0),
    "coreset": (14, 11.0),
}
IDLE = 3.0  # seconds of rest over which the cluster's background CPU is measured


def _args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--workers", default="1,2,4")
    p.add_argument("--tasks", type=int, default=248)
    p.add_argument("--sleep-ms", type=float, default=5.0)
    p.add_argument("--reps", type=int, default=7)
    p.add_argument("--scaling", default=str(HERE / "results" / "scaling.json"))
    p.add_argument("--out", default=str(HERE / "results"))
    return p.parse_args(argv)


def _nap(block, seconds):
    time.sleep(seconds)
    return block


def _measure(w: int, tasks: int, sleep: float, reps: int) -> dict:
    """Walls of ``reps`` computes of ``tasks`` sleeping tasks and their sum on w workers."""
    import dask.array as da
    from distributed import Client, LocalCluster

    with (
        LocalCluster(
            n_workers=w, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cl,
        Client(cl) as client,
    ):
        X = da.ones((tasks, 1), chunks=(1, 1))
        total = X.map_blocks(_nap, sleep, dtype=float).sum(split_every=tasks)
        client.compute(total).result()  # warm-up: workers import, the graph path is hot
        c0 = time.process_time()
        time.sleep(IDLE)
        idle = (time.process_time() - c0) / IDLE  # the cluster's own CPU per second at rest
        walls, cpus = [], []
        for _ in range(reps):
            t0, c0 = time.perf_counter(), time.process_time()
            client.compute(total).result()
            walls.append(time.perf_counter() - t0)
            cpus.append(time.process_time() - c0 - idle * walls[-1])
    wall = statistics.median(walls)
    excess = wall - math.ceil(tasks / w) * sleep
    return {
        "walls": walls,
        "median": wall,
        "excess_ms_per_task": 1e3 * excess / (tasks + 1),
        "client_cpu_ms_per_task": 1e3 * statistics.median(cpus) / (tasks + 1),
        "idle_cpu_per_s": idle,
    }


def _floors(scaling_json: str, s_ms: float) -> dict:
    """Per call of the committed scaling run: tasks at one worker, the serial floor they
    imply, the measured serial seconds and the speed-ups at 14 the floor and they allow."""
    from dkernel.runtime import amdahl

    res = json.loads(Path(scaling_json).read_text())
    run = res["runs"]["2cores"]["workers"]["1"]
    out = {}
    for name, row in run.items():
        phases = row["phases"]
        at, target = TARGETS[name]
        pred = amdahl(phases, 1, [1, at])
        tasks = sum(int(p.get("tasks") or 0) for p in phases.values())
        floor = tasks * s_ms / 1e3
        serial = sum(r["serial_seconds"] for r in pred["phases"].values())
        par = pred["predicted_wall"][at] - serial  # the phases' waves at ``at`` workers
        one = pred["predicted_wall"][1]
        out[name] = {
            "wall_1": row["wall"],
            "tasks_1": tasks,
            "at": at,
            "target": target,
            "serial_floor_s": floor,
            "serial_measured_s": serial,
            "parallel_at_s": par,
            "best_at": one / (floor + par),
            "amdahl_at": one / pred["predicted_wall"][at],
            # the cost per task at which the floor alone would still allow the target
            "s_allowed_ms": 1e3 * (one / target - par) / tasks,
        }
    return out


def _markdown(res: dict) -> str:
    lines = ["# What a task costs the scheduler (`benchmarks/task_overhead.py`)", "",
             f"Command: `{res['command']}`", "",
             f"{res['tasks']} tasks sleeping {res['sleep_ms']} ms each and one sum, "
             "a fresh LocalCluster per w (processes, one thread each), median of "
             f"{res['reps']} after a warm-up.", "",
             "| workers | median wall s | sleeps (waves) s | excess ms per task "
             "| client process CPU ms per task |",
             "|---|---|---|---|---|"]  # fmt: skip
    for w, row in sorted(res["measured"].items(), key=lambda kv: int(kv[0])):
        waves = math.ceil(res["tasks"] / int(w)) * res["sleep_ms"] / 1e3
        lines.append(
            f"| {w} | {row['median']:.3f} | {waves:.3f} | {row['excess_ms_per_task']:.2f} "
            f"| {row['client_cpu_ms_per_task']:.2f} |"
        )
    lines += ["", f"**s = {res['serial_ms_per_task']:.2f} ms** per task: the median over the "
              "worker counts of the client process's CPU time per task (the scheduler's "
              "event loop, one thread: work no worker count shortens).", "",
              "## The floor it puts under the scaling run's calls", "",
              "From the committed `results/scaling.json` (its 1-worker run): the tasks a "
              "call runs, `tasks x s` as a floor under its serial seconds, the speed-up at "
              "the issue's worker count (waves model) that floor allows beside the one the "
              "measured serial seconds give, and the cost per task at which the floor "
              "alone would still allow the target.", "",
              "| call | wall at 1 s | tasks | serial floor s | serial measured s "
              "| at w | parallel at w s | best at w | Amdahl at w | target | s allowed ms |",
              "|---|---|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for name, f in res["floors"].items():
        lines.append(
            f"| {name} | {f['wall_1']:.2f} | {f['tasks_1']} | {f['serial_floor_s']:.3f} | "
            f"{f['serial_measured_s']:.3f} | {f['at']} | {f['parallel_at_s']:.3f} | "
            f"{f['best_at']:.2f}x | {f['amdahl_at']:.2f}x | {f['target']:g}x | "
            f"{f['s_allowed_ms']:.2f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv=None):
    args = _args(argv)
    sleep = args.sleep_ms / 1e3
    measured = {}
    for w in (int(x) for x in args.workers.split(",")):
        measured[w] = _measure(w, args.tasks, sleep, args.reps)
        row = measured[w]
        print(f"w={w}: {row['median']:.3f} s, excess {row['excess_ms_per_task']:.2f} ms/task, "
              f"client CPU {row['client_cpu_ms_per_task']:.2f} ms/task", flush=True)  # fmt: skip
    s = statistics.median(row["client_cpu_ms_per_task"] for row in measured.values())
    res = {
        "command": "python " + shlex.join(["benchmarks/task_overhead.py", *sys.argv[1:]]),
        "tasks": args.tasks,
        "sleep_ms": args.sleep_ms,
        "reps": args.reps,
        "measured": {str(w): row for w, row in measured.items()},
        "serial_ms_per_task": s,
        "floors": _floors(args.scaling, s),
    }
    out = Path(args.out)
    (out / "task_overhead.json").write_text(json.dumps(res, indent=1))
    (out / "task_overhead.md").write_text(_markdown(res))
    print(_markdown(res))


if __name__ == "__main__":
    main()
