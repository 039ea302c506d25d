"""Benchmark: BudgetedSVC(probability=True) against the uncalibrated model and scikit-learn's
CalibratedClassifierCV (issue 25, part 6). Quality only (no timing): test accuracy, log loss,
the share of test rows where the probabilities' argmax agrees with ``predict``.

Data (generated or bundled, nothing to download): a 2-cell-period checkerboard (``--n``
training rows, as many test rows, seeds 0/1) and scikit-learn's digits (a 3:1 split, seed 0).
Models: ``BudgetedSVC(budget=B, random_state=0)`` with ``probability`` False / True, and
``CalibratedClassifierCV(BudgetedSVC(...), cv=3)`` (sigmoid).

Usage::

    python benchmarks/svm_proba.py            # about a minute on 2 cores
    python benchmarks/svm_proba.py --quick    # smoke run

Results: ``benchmarks/results/svm_proba.{json,md}`` (not with ``--quick``).
"""

from __future__ import annotations

import argparse
import json
import os

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def _cases(n: int):
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    from dkernel.data import make_checkerboard

    X, y = make_checkerboard(n, random_state=0)
    Xt, yt = make_checkerboard(n, random_state=1)
    yield "checkerboard", 50, X, y, Xt, yt
    X, y = load_digits(return_X_y=True)
    Xa, Xb, ya, yb = train_test_split(X / 16.0, y, random_state=0)
    yield "digits", 100, Xa, ya, Xb, yb


def _row(name, model, X, y, Xt, yt):
    from sklearn.metrics import log_loss

    model.fit(X, y)
    row = {"data": name, "model": model, "accuracy": float(model.score(Xt, yt))}
    if hasattr(model, "predict_proba"):
        P = model.predict_proba(Xt)
        row["log_loss"] = float(log_loss(yt, P, labels=model.classes_))
        row["argmax_agrees"] = float(np.mean(model.classes_[P.argmax(1)] == model.predict(Xt)))
    return row


def main() -> None:
    from sklearn.calibration import CalibratedClassifierCV

    from dkernel.svm import BudgetedSVC

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=4000, help="checkerboard training rows")
    ap.add_argument("--quick", action="store_true", help="small smoke run, nothing written")
    args = ap.parse_args()
    n = 600 if args.quick else args.n
    rows = []
    for name, B, X, y, Xt, yt in _cases(n):
        if args.quick:
            X, y = X[:600], y[:600]
        for label, model in (
            ("probability=False", BudgetedSVC(budget=B, random_state=0)),
            ("probability=True", BudgetedSVC(budget=B, probability=True, random_state=0)),
            (
                "CalibratedClassifierCV(cv=3)",
                CalibratedClassifierCV(BudgetedSVC(budget=B, random_state=0), cv=3),
            ),
        ):
            row = _row(name, model, X, y, Xt, yt)
            row["model"] = f"B={B} {label}"
            rows.append(row)
            print(json.dumps(row))
    if args.quick:
        return
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    with open(os.path.join(HERE, "results", "svm_proba.json"), "w") as fh:
        json.dump(rows, fh, indent=2)
    lines = [
        "# BudgetedSVC probabilities (`benchmarks/svm_proba.py`)",
        "",
        "| data | model | test accuracy | log loss | argmax = predict |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        ll = f"{r['log_loss']:.4f}" if "log_loss" in r else "-"
        agree = f"{100 * r['argmax_agrees']:.2f} %" if "argmax_agrees" in r else "-"
        lines.append(
            f"| {r['data']} | {r['model']} | {100 * r['accuracy']:.2f} % | {ll} | {agree} |"
        )
    with open(os.path.join(HERE, "results", "svm_proba.md"), "w") as fh:
        fh.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
