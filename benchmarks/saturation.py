"""The scheduler's ``worker-saturation`` on a pass of many small tasks.

    python benchmarks/saturation.py [--workers 2] [--rounds 2]

``benchmarks/replay.py --saturations 1.1,1.0`` shows that 1.0 (a one-thread worker is
handed its next task only when it is free) ends a pass of many large tasks sooner: with
distributed's 1.1 a worker may hold two while another waits. This measures what 1.0 costs
where tasks are small: ``da.random.random(4e7, chunks=1e4).sum()`` (4,000 tasks) and the
same with 1e6-row chunks (40 tasks), on dkernel's local cluster (``local_cluster``, one
thread a worker) under each value, alternated ``--rounds`` times, the best of 3 computes
each after a warm-up. Writes ``results/saturation.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
VALUES = (1.1, 1.0)


def _best(fn, reps: int = 3) -> float:
    fn()
    walls = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        walls.append(time.perf_counter() - t0)
    return min(walls)


def main(argv=None) -> None:
    import dask
    import dask.array as da
    from distributed import Client

    from dkernel.runtime import local_cluster

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--out", default=str(HERE / "results"))
    args = p.parse_args(argv)
    rows: list[dict] = []
    for r in range(args.rounds):
        for value in VALUES:
            with (
                dask.config.set({"distributed.scheduler.worker-saturation": value}),
                local_cluster(n_workers=args.workers) as cluster,
                Client(cluster),
            ):
                small = da.random.random(4 * 10**7, chunks=10**4).sum()
                large = da.random.random(4 * 10**7, chunks=10**6).sum()
                row = {"round": r, "saturation": value,
                       "tasks_4000": _best(small.compute), "tasks_40": _best(large.compute)}  # fmt: skip
            rows.append(row)
            print(row, flush=True)
    cmd = (
        "python benchmarks/saturation.py " + shlex.join(sys.argv[1:] if argv is None else argv)
    ).rstrip()
    res = {"command": cmd, "workers": args.workers, "runs": rows}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "saturation.json").write_text(json.dumps(res, indent=1))
    lines = ["# `worker-saturation` on passes of small tasks (`saturation.py`)", "",
             f"Command: `{cmd}` ({args.workers} worker processes, one thread each; best of 3"
             " computes after a warm-up).", "",
             "| round | saturation | 4,000 tasks (chunks of 1e4) | 40 tasks (chunks of 1e6) |",
             "|---|---|---|---|"]  # fmt: skip
    lines += [f"| {x['round']} | {x['saturation']} | {x['tasks_4000']:.2f} s | "
              f"{x['tasks_40']:.3f} s |" for x in rows]  # fmt: skip
    (out / "saturation.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
