"""Does a distributed BudgetedSVC fit as well as the sequential one? Paired seeds.

    python benchmarks/bsgd_parity.py [--sets ijcnn1,a9a,letter,usps,pendigits,hard]
        [--seeds 5] [--data-dir ../shared/datasets] [--out benchmarks/results]
    python benchmarks/bsgd_parity.py --report

For each set and seed s, ``BudgetedSVC(random_state=s, ...)`` is fitted twice on the same
rows, ``distributed=False`` (the sequential stream) and ``distributed=True``, and both are
scored on the same test rows; the table gives each mean, the mean of the paired
differences (distributed - sequential) and its standard error over the seeds. A distributed
fit's model does not depend on the number of workers (shards and rounds are cut from n
alone; every task is a pure function of its inputs), so it is run here without a client:
the computation every cluster does, bit for bit (``tests/test_svm_distributed.py`` checks
that identity on clusters of 1 and 2 workers).

Sets:

- ``ijcnn1``, ``a9a``, ``letter`` (first 16000 / last 4000), ``usps``, ``pendigits``: the
  splits, standardisation and gammas of ``benchmarks/bsgd.py``, B = 500, defaults
  otherwise (5 epochs, the refit);
- ``hard``: 4 Gaussian blobs in 20 dimensions (centres uniform in [-10, 10]^20, unit
  spread), label 1 inside the 5-d sphere around its blob's centre (over the first 5
  coordinates, radius sqrt of chi2_5's median: half the rows inside), feature 0 scaled by
  1000; 160000 training rows written to a zarr store and read from it, 40000 fresh test
  rows; ``standardize=True``, defaults otherwise (gamma by the median heuristic, B = 500);
- ``hard400k``: the same with 400000 training rows: 5 epochs are 2 x 10^6 SGD steps, above
  the stream prefix (``dkernel.svm.prefix-steps``, 2^20): the first 2 epochs run as the
  stream, the last 3 as rounds over 8 shards;
- ``hard_rounds``: the 160000 rows with ``dkernel.svm.prefix-steps: 0`` (rounds from the
  first step: the distributed fit before the prefix existed).

Accuracy only; nothing is timed.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bsgd import GAMMA, load

HERE = os.path.dirname(os.path.abspath(__file__))
HARD_ROWS, HARD_TEST = 160_000, 40_000


def hard_case(n: int, seed: int):
    """The hard case's rows (see the module docstring); the centres are fixed."""
    from scipy.stats import chi2

    centres = np.random.default_rng(12345).uniform(-10, 10, size=(4, 20))
    rng = np.random.default_rng(seed)
    blob = rng.integers(0, 4, n)
    X = centres[blob] + rng.normal(size=(n, 20))
    r = np.linalg.norm(X[:, :5] - centres[blob, :5], axis=1)
    y = (r < np.sqrt(chi2.median(5))).astype(np.int64)
    X[:, 0] *= 1000.0
    return X, y


def _data(name: str, data_dir: str, tmp: str):
    if not name.startswith("hard"):
        X, y, Xt, yt = load(name, data_dir, quick=False)
        return X, y, Xt, yt, dict(gamma=GAMMA[name])
    from dkernel.data import ingest

    X, y = hard_case(400_000 if name == "hard400k" else HARD_ROWS, 0)
    Xt, yt = hard_case(HARD_TEST, 1)
    path = os.path.join(tmp, "hard.zarr")
    ingest(X, path, y=y, overwrite=True)
    return path, None, Xt, yt, dict(standardize=True)


def run_set(name: str, seeds: list[int], data_dir: str) -> dict:
    import dask

    from dkernel.svm import BudgetedSVC

    steps = {"hard_rounds": {"dkernel.svm.prefix-steps": 0}}.get(name, {})
    with tempfile.TemporaryDirectory() as tmp, dask.config.set(steps):
        X, y, Xt, yt, kw = _data(name, data_dir, tmp)
        rows = []
        for s in seeds:
            acc = {}
            for dist in (False, True):
                clf = BudgetedSVC(budget=500, distributed=dist, random_state=s, **kw)
                acc[dist] = 100.0 * clf.fit(X, y).score(Xt, yt)
            rows.append({"seed": s, "sequential": acc[False], "distributed": acc[True]})
            print(f"{name} seed {s}: sequential {acc[False]:.2f} distributed {acc[True]:.2f}",
                  flush=True)  # fmt: skip
    diff = np.array([r["distributed"] - r["sequential"] for r in rows])
    return {
        "seeds": rows,
        "sequential": float(np.mean([r["sequential"] for r in rows])),
        "distributed": float(np.mean([r["distributed"] for r in rows])),
        "diff": float(diff.mean()),
        "diff_se": float(diff.std(ddof=1) / np.sqrt(len(diff))) if len(diff) > 1 else None,
    }


def report(res: dict) -> str:
    lines = [
        "# distributed=True against the sequential fit, paired seeds (`bsgd_parity.py`)",
        "",
        "Commands (each set's own run):",
        "",
        *sorted(
            {
                f"- `{r.get('command', res.get('command', ''))}`"
                for r in res.get("sets", {}).values()
            }
        ),
        "",
        "| set | seeds | sequential % | distributed % | paired diff (se) | within 0.3? |",
        "|---|---|---|---|---|---|",
    ]
    for name, r in res.get("sets", {}).items():
        se = "-" if r["diff_se"] is None else f"{r['diff_se']:.2f}"
        ok = "yes" if abs(r["diff"]) <= 0.3 else "no"
        lines.append(
            f"| {name} | {len(r['seeds'])} | {r['sequential']:.2f} | {r['distributed']:.2f} | "
            f"{r['diff']:+.2f} ({se}) | {ok} |"
        )
    return "\n".join(lines) + "\n"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sets", default="ijcnn1,a9a,letter,usps,pendigits,hard")
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--data-dir", default="../shared/datasets")
    p.add_argument("--out", default=os.path.join(HERE, "results"))
    p.add_argument("--report", action="store_true")
    args = p.parse_args(argv)
    path = os.path.join(args.out, "bsgd_parity.json")
    res = json.load(open(path)) if os.path.exists(path) else {}
    if not args.report:
        command = "python benchmarks/bsgd_parity.py " + shlex.join(
            sys.argv[1:] if argv is None else argv
        )
        for name in args.sets.split(","):
            got = run_set(name, list(range(args.seeds)), args.data_dir)
            res.setdefault("sets", {})[name] = {**got, "command": command}
            with open(path, "w") as fh:
                json.dump(res, fh, indent=1)
    with open(os.path.join(args.out, "bsgd_parity.md"), "w") as fh:
        fh.write(report(res))


if __name__ == "__main__":
    main()
