"""Accuracy of BudgetedSVC's refit losses on multi-class sets: one-vs-rest, Weston-Watkins,
Crammer-Singer.

    python benchmarks/bsgd_refit_cs.py [--quick] [--runs 3] [--data-dir ../shared/datasets]
                                       [--out benchmarks/results]

letter, usps and pendigits as in ``benchmarks/bsgd.py`` (its ``load`` and ``GAMMA``: the
same splits, standardised with training statistics), B = 500, other parameters default
(5 epochs, last-epoch average), and the paper's one pass (``max_iter=1, average=False``).
Per set, variant and seed (``--runs`` seeds from 0): the test accuracy of the SGD
coefficients (``refit=False``), of ``refit="ovr"``, ``"weston_watkins"`` and
``"crammer_singer"``, all on the same support vectors (the SGD passes do not depend on
``refit``), and each refit's Newton steps and passes over the rows (from the ``dkernel``
logger's DEBUG line), the solver's cost in units that do not depend on the machine.
Nothing is timed; a full run takes about 40 minutes on 2 cores (the Crammer-Singer solves
take most of it).

Writes ``bsgd_refit_cs.json`` and ``bsgd_refit_cs.md`` under ``--out``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bsgd import GAMMA, ROOT, load

from dkernel.svm import BudgetedSVC

DATASETS = ("letter", "usps", "pendigits")
VARIANTS = {"defaults": {}, "one pass": {"max_iter": 1, "average": False}}
LOSSES = ("ovr", "weston_watkins", "crammer_singer")
NAMES = {"ovr": "OvR", "weston_watkins": "WW", "crammer_singer": "CS"}


class _RefitCost(logging.Handler):
    """Keeps the (Newton steps, passes) of the refit's DEBUG summary line."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.last: tuple[int, int] | None = None

    def emit(self, record: logging.LogRecord) -> None:
        if record.name == "dkernel.svm._refit" and record.msg.startswith("refit:"):
            self.last = (int(record.args[0]), int(record.args[1]))


def run(data_dir: str, runs: int, quick: bool, losses=LOSSES) -> list[dict]:
    cost = _RefitCost()
    log = logging.getLogger("dkernel")
    log.addHandler(cost)
    log.setLevel(logging.DEBUG)
    rows = []
    for name in DATASETS:
        X, y, Xt, yt = load(name, data_dir, quick)
        for variant, kw in VARIANTS.items():
            for seed in range(runs):
                common = dict(budget=500, gamma=GAMMA[name], random_state=seed, **kw)
                row = {"dataset": name, "variant": variant, "seed": seed}
                sgd = BudgetedSVC(refit=False, **common).fit(X, y)
                row["sgd"] = 100 * float(np.mean(sgd.predict(Xt) == yt))
                for loss in losses:
                    cost.last = None
                    clf = BudgetedSVC(refit=loss, **common).fit(X, y)
                    assert np.array_equal(clf.support_vectors_, sgd.support_vectors_)
                    assert cost.last is not None
                    row[loss] = 100 * float(np.mean(clf.predict(Xt) == yt))
                    row[f"{loss}_steps"], row[f"{loss}_passes"] = cost.last
                print(json.dumps(row), flush=True)
                rows.append(row)
    log.removeHandler(cost)
    return rows


def report(rows: list[dict], command: str, losses=LOSSES) -> str:
    head = " | ".join(f"{NAMES.get(k, k)} refit | steps / passes" for k in losses)
    lines = [
        "# BudgetedSVC refit: one-vs-rest vs the joint multi-class losses (accuracy; no timings)",
        "",
        f"Command: `{command}`",
        "",
        "B = 500, `benchmarks/bsgd.py`'s splits and gammas. Accuracy % on the test split, "
        "mean (min-max) over seeds; Newton steps / passes over the rows of each refit "
        "(means; the passes count every gradient, Hessian-vector and line-search pass).",
        "",
        f"| set | variant | SGD only | {head} |",
        "|---|---|---|" + "---|---|" * len(losses),
    ]

    def acc(vals):
        v = np.array(vals)
        return f"{v.mean():.2f} ({v.min():.2f}-{v.max():.2f})"

    for name in DATASETS:
        for variant in VARIANTS:
            rs = [r for r in rows if r["dataset"] == name and r["variant"] == variant]
            if not rs:
                continue
            cells = [acc([r["sgd"] for r in rs])]
            for k in losses:
                steps = np.mean([r[f"{k}_steps"] for r in rs])
                passes = np.mean([r[f"{k}_passes"] for r in rs])
                cells += [acc([r[k] for r in rs]), f"{steps:.1f} / {passes:.1f}"]
            lines.append(f"| {name} | {variant} | " + " | ".join(cells) + " |")
    if losses[0] == "ovr" and len(losses) > 1:
        lines += ["", *verdict(rows, losses)]
    return "\n".join(lines) + "\n"


def verdict(rows: list[dict], losses=LOSSES) -> list[str]:
    """The rule ``refit=True``'s loss is chosen by: a joint loss only where it is more
    accurate than one-vs-rest (mean over seeds) on at least 2 of the sets, at no more than
    1.3x its passes, in each variant."""
    out = []
    for variant in VARIANTS:
        for loss in losses[1:]:
            wins, notes = 0, []
            for name in DATASETS:
                rs = [r for r in rows if r["dataset"] == name and r["variant"] == variant]
                if not rs:
                    continue
                gain = np.mean([r[loss] - r["ovr"] for r in rs])
                ratio = sum(r[f"{loss}_passes"] for r in rs) / sum(r["ovr_passes"] for r in rs)
                wins += bool(gain > 0 and ratio <= 1.3)
                notes.append(f"{name} {gain:+.2f} points at {ratio:.2f}x the passes")
            out.append(
                f"- {variant}, {NAMES[loss]} - OvR: {'; '.join(notes)}: {NAMES[loss]} wins on "
                f"{wins} of {len(notes)} sets{' (the default rule holds)' if wins >= 2 else ''}."
            )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="3000 training rows, 1 seed")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--data-dir", default=os.path.join(ROOT, "..", "shared", "datasets"))
    ap.add_argument("--out", default=os.path.join(ROOT, "benchmarks", "results"))
    args = ap.parse_args()
    runs = 1 if args.quick else args.runs
    rows = run(args.data_dir, runs, args.quick)
    command = "python benchmarks/bsgd_refit_cs.py" + (" --quick" if args.quick else "")
    if args.runs != 3 and not args.quick:
        command += f" --runs {args.runs}"
    suffix = "_quick" if args.quick else ""
    with open(os.path.join(args.out, f"bsgd_refit_cs{suffix}.json"), "w") as f:
        json.dump({"command": command, "rows": rows}, f, indent=1)
    text = report(rows, command)
    with open(os.path.join(args.out, f"bsgd_refit_cs{suffix}.md"), "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()
