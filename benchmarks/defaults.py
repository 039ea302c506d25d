"""Benchmark: which label-free gamma default works across datasets (issue 14, item 4).

Quality only (ARI for kernel k-means, test accuracy for BudgetedSVC), no timing. Candidates:

- ``median``: 1 / median ||x - x'||^2 on the raw rows (kernel k-means' old default);
- ``inv_dim``: 1 / n_features on the raw rows (BudgetedSVC's old default);
- ``scale``: 1 / (n_features * X.var()) on the raw rows (scikit-learn's ``gamma="scale"``);
- ``std+inv_dim``: StandardScaler, then 1 / n_features;
- ``std+median``: StandardScaler, then the median heuristic;
- ``select``: :func:`dkernel.cluster.select_gamma` (kernel k-means only).

Kernel k-means: ``MiniBatchKernelKMeans(k)`` defaults otherwise, on at most ``--n`` rows
(train + test joined), ARI against the labels, mean of ``--seeds`` seeds.
BudgetedSVC: ``BudgetedSVC(budget=200)`` defaults otherwise, trained on at most ``--n``
training rows, accuracy on the test split (letter: the UCI 16000/4000 split).

Usage::

    python benchmarks/defaults.py            # a few minutes on 2 cores
    python benchmarks/defaults.py --quick    # smoke run

Results: ``benchmarks/results/defaults.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import os
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = "/work/shared/datasets"
KMEANS_SETS = {"pendigits": 10, "usps": 10, "letter": 26, "mnist_partial": 10, "fashion_mnist": 10}
SVM_SETS = ("ijcnn1", "a9a", "letter", "usps")
RAW = ("median", "inv_dim", "scale")
SCALED = ("std+inv_dim", "std+median")


def _load(name: str):
    with np.load(os.path.join(DATA, f"{name}.npz")) as f:
        out = {k: f[k] for k in f.files}
    if name == "letter":
        out = {"X": out["X"][:16000], "y": out["y"][:16000]} | {
            "X_test": out["X"][16000:],
            "y_test": out["y"][16000:],
        }
    return out


def _gamma(rule: str, X: np.ndarray, seed: int) -> float:
    from dkernel.kernels import estimate_gamma

    if rule.endswith("median"):
        return float(estimate_gamma(X, random_state=seed))
    if rule.endswith("inv_dim"):
        return 1.0 / X.shape[1]
    if rule == "scale":
        return float(1.0 / (X.shape[1] * X.var()))
    raise ValueError(rule)


def _scaled(X: np.ndarray, X_test: np.ndarray | None = None):
    from sklearn.preprocessing import StandardScaler

    sc = StandardScaler().fit(X)
    return sc.transform(X), None if X_test is None else sc.transform(X_test)


def kmeans_rows(n_max: int, seeds: int, quick: bool) -> list[dict]:
    from sklearn.metrics import adjusted_rand_score

    from dkernel.cluster import MiniBatchKernelKMeans, select_gamma

    rows = []
    for name, k in KMEANS_SETS.items():
        d = _load(name)
        X = np.concatenate([d["X"], d["X_test"]]) if "X_test" in d else d["X"]
        y = np.concatenate([d["y"], d["y_test"]]) if "y_test" in d else d["y"]
        rng = np.random.default_rng(0)
        pick = rng.choice(len(X), min(n_max, len(X)), replace=False)
        X, y = X[pick].astype(np.float64), y[pick]
        Xs, _ = _scaled(X)
        row: dict = {"dataset": name, "n": len(X), "d": X.shape[1], "k": k}
        for rule in (*RAW, *SCALED, "select"):
            data = Xs if rule.startswith("std") else X
            aris, gammas = [], []
            for s in range(seeds):
                if rule == "select":
                    g = select_gamma(data, k, sample_size=1000 if quick else 2000, random_state=s)
                else:
                    g = _gamma(rule, data, s)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    km = MiniBatchKernelKMeans(
                        k, gamma=g, random_state=s, max_iter=20 if quick else 100
                    ).fit(data)
                aris.append(adjusted_rand_score(y, km.labels_))
                gammas.append(g)
            row[rule] = {"ari": float(np.mean(aris)), "gamma": float(np.mean(gammas))}
            print(name, rule, row[rule], flush=True)
        rows.append(row)
    return rows


def svm_rows(n_max: int, quick: bool) -> list[dict]:
    from dkernel.svm import BudgetedSVC

    rows = []
    for name in SVM_SETS:
        d = _load(name)
        rng = np.random.default_rng(0)
        pick = rng.choice(len(d["X"]), min(n_max, len(d["X"])), replace=False)
        X, y = d["X"][pick].astype(np.float64), d["y"][pick]
        Xt, yt = d["X_test"].astype(np.float64), d["y_test"]
        tp = rng.choice(len(Xt), min(n_max, len(Xt)), replace=False)
        Xt, yt = Xt[tp], yt[tp]
        Xs, Xts = _scaled(X, Xt)
        majority = float(np.max(np.unique(yt, return_counts=True)[1]) / len(yt))
        row: dict = {"dataset": name, "n": len(X), "d": X.shape[1], "majority": majority}
        for rule in (*RAW, *SCALED):
            tr, te = (Xs, Xts) if rule.startswith("std") else (X, Xt)
            g = _gamma(rule, tr, 0)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                clf = BudgetedSVC(
                    budget=200, gamma=g, random_state=0, max_iter=1 if quick else 5
                ).fit(tr, y)
            row[rule] = {"acc": float(clf.score(te, yt)), "gamma": g}
            print(name, rule, row[rule], flush=True)
        rows.append(row)
    return rows


def _table(rows: list[dict], rules: tuple, metric: str, old: str, extra: str = "") -> str:
    head = ["dataset", "n", "d", *([extra] if extra else []), *rules, "best"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        vals = {rule: r[rule][metric] for rule in rules}
        best = max(vals, key=lambda k: vals[k])
        cells = [r["dataset"], str(r["n"]), str(r["d"])]
        if extra:
            cells.append(f"{r[extra]:.3f}")
        for rule in rules:
            mark = " (old)" if rule == old else ""
            cells.append(f"{vals[rule]:.3f}{mark} (γ={r[rule]['gamma']:.3g})")
        cells.append(best)
        lines.append("| " + " | ".join(cells) + " |")
    means = {rule: np.mean([r[rule][metric] for r in rows]) for rule in rules}
    pad = ["mean", "", "", *([""] if extra else [])]
    lines.append("| " + " | ".join(pad + [f"{means[r]:.3f}" for r in rules] + [""]) + " |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=5000, help="rows per dataset (<= 20000)")
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--skip-svm", action="store_true")
    args = ap.parse_args()
    n = min(args.n, 20000) if not args.quick else 1000
    seeds = 1 if args.quick else args.seeds
    km = kmeans_rows(n, seeds, args.quick)
    svm = [] if args.skip_svm else svm_rows(n, args.quick)
    suffix = "_quick" if args.quick else ""
    out = os.path.join(HERE, "results", f"defaults{suffix}")
    with open(out + ".json", "w") as fh:
        json.dump({"n": n, "seeds": seeds, "kmeans": km, "svm": svm}, fh, indent=1)
    md = [
        "# Gamma defaults, measured (issue 14 item 4)",
        "",
        f"Made by `python benchmarks/defaults.py{' --quick' if args.quick else ''}`: at most "
        f"{n} rows per dataset, quality only (no timing). γ is the mean over seeds.",
        "",
        "Rules: `median` = 1/median‖x−x'‖² (raw), `inv_dim` = 1/d (raw), `scale` = "
        "1/(d·X.var()) (raw, scikit-learn's 'scale'), `std+…` = after StandardScaler, "
        "`select` = `select_gamma` (silhouette over 0.25–4 × median).",
        "",
        f"## MiniBatchKernelKMeans (defaults otherwise), ARI, mean of {seeds} seed(s)",
        "",
        _table(km, (*RAW, *SCALED, "select"), "ari", "median"),
    ]
    if svm:
        md += [
            "",
            "## BudgetedSVC(budget=200) (defaults otherwise), test accuracy, seed 0",
            "",
            _table(svm, (*RAW, *SCALED), "acc", "inv_dim", extra="majority"),
        ]
    with open(out + ".md", "w") as fh:
        fh.write("\n".join(md) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    main()
