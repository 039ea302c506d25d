"""Benchmark: streaming CSV ingest against ``numpy.loadtxt`` (issue 14: within 3x).

``ingest`` streams: a cheap scan pass, then blocks of lines parsed by NumPy's C parser and
written chunk by chunk to a zarr store (checksums included); ``np.loadtxt`` only parses the
whole file into memory. Both read the same generated file; best of ``--repeats`` runs each,
interleaved.

Usage::

    python benchmarks/ingest.py [--rows 200000] [--cols 20] [--repeats 3] [--out benchmarks/results]

Results: ``benchmarks/results/ingest.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time

import numpy as np

from dkernel.data import ingest


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=200_000)
    p.add_argument("--cols", type=int, default=20)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results"))
    args = p.parse_args(argv)
    work = tempfile.mkdtemp(prefix="dkernel-ingest-bench-")
    try:
        rng = np.random.default_rng(0)
        n, d = args.rows, args.cols
        src = os.path.join(work, "data.csv")
        data = np.column_stack([rng.standard_normal((n, d)), rng.integers(0, 2, n)])
        np.savetxt(src, data, delimiter=",", fmt=["%.6f"] * d + ["%d"])
        size_mb = os.path.getsize(src) / 2**20
        t_np, t_ingest = [], []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            np.loadtxt(src, delimiter=",")
            t_np.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            ingest(src, os.path.join(work, "data.zarr"), overwrite=True)
            t_ingest.append(time.perf_counter() - t0)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    ratio = min(t_ingest) / min(t_np)
    cmd = "python benchmarks/ingest.py " + " ".join(argv if argv is not None else sys.argv[1:])
    result = {
        "command": cmd.strip(),
        "machine": {
            "platform": platform.machine(),
            "cores": os.cpu_count(),
            "load_average": os.getloadavg(),
        },
        "rows": n,
        "cols": d,
        "csv_mib": size_mb,
        "loadtxt_s": t_np,
        "ingest_s": t_ingest,
        "ratio_best": ratio,
    }
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "ingest.json"), "w", encoding="utf-8") as fh:
        json.dump(result, fh, indent=2)
    verdict = "met" if ratio <= 3 else "missed"
    md = f"""# CSV ingest vs numpy.loadtxt

Command: `{result["command"]}`
Machine: {platform.machine()}, {os.cpu_count()} cores, 1-minute load average
{os.getloadavg()[0]:.1f} at the end.

{n} x {d} features plus a label column, {size_mb:.1f} MiB of CSV; best of {args.repeats}
interleaved runs.

| method | best (s) | all runs (s) |
|---|---|---|
| `np.loadtxt(path, delimiter=",")` (parse only, into memory) | {min(t_np):.2f} | {", ".join(f"{t:.2f}" for t in t_np)} |
| `dkernel.data.ingest(path, store)` (scan, parse, write zarr) | {min(t_ingest):.2f} | {", ".join(f"{t:.2f}" for t in t_ingest)} |

Ratio ingest / loadtxt: **{ratio:.2f}x** ({verdict}, target <= 3x).
"""
    with open(os.path.join(args.out, "ingest.md"), "w", encoding="utf-8") as fh:
        fh.write(md)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
