"""Benchmark of BudgetedSVC (BSGD) against its peers, side by side in one run.

    python benchmarks/bsgd.py [--data-dir ../shared/datasets] [--out benchmarks/results]
                              [--quick] [--runs 3] [--big] [--big-rows 10000000]

Datasets: checkerboard 1e5 / 1e6 (test 2e4), gauss 1e4 (test 1e4), pendigits, letter (first
16000 / last 4000), usps, ijcnn1, a9a, shuttle, dna; features standardised with training
statistics. For each dataset gamma and lam are tuned once on a validation split (BSGD
pegasos + merge, B=100; a 4 x 4 grid) and shared by every method. One pass, B in {100, 500},
every algorithm x maintenance combination, ``--runs`` seeds; peers in the same run: SVC (on
at most 20000 training rows), Nystroem(B) + SGDClassifier(hinge), RBFSampler(B) +
SGDClassifier(hinge). ``--big`` instead streams a 10^7-row checkerboard from zarr once with
B = 100 and reports time and peak RSS (run it in its own process).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import sys
import time
import tracemalloc

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CPP = {  # the issue's reference table: (C++ merge acc, C++ CPU s, Nystroem+SGD acc, CPU s)
    ("gauss_1e4", 100): (81.00, 10.55, 81.59, 0.06),
    ("gauss_1e4", 500): (81.15, 45.29, 81.61, 0.28),
    ("checkerboard_1e5", 100): (97.56, 87.05, 98.94, 0.69),
    ("checkerboard_1e5", 500): (98.07, 376.5, 99.20, 2.79),
    ("pendigits", 100): (96.31, 0.75, 97.14, 0.21),
    ("pendigits", 500): (96.43, 0.28, 97.43, 1.39),
    ("ijcnn1", 100): (96.26, 16.18, 95.51, 0.31),
    ("ijcnn1", 500): (97.75, 50.27, 98.03, 1.31),
    ("a9a", 100): (83.80, 32.98, 84.46, 0.56),
    ("a9a", 500): (83.96, 158.0, 84.59, 0.95),
    ("letter", 100): (70.07, 19.25, None, None),
    ("letter", 500): (83.90, 66.09, None, None),
}
PAPER = {
    "a9a": (84.55, 83.93),
    "ijcnn1": (97.27, 98.08),
    "pendigits": (97.06, 97.63),
    "usps": (91.76, 92.91),
    "letter": (73.63, 89.68),
    "dna": (93.13, 92.42),
    "shuttle": (99.63, 99.89),
    "checkerboard_1e5": (99.55, 99.83),
    "checkerboard_1e6": (99.55, 99.83),
}


def load(name: str, data_dir: str, quick: bool):
    from dkernel.data import make_checkerboard, make_gauss

    if name.startswith("checkerboard"):
        n = 5000 if quick else int(float(name.split("_")[1]))
        X, y = make_checkerboard(n, random_state=0)
        Xt, yt = make_checkerboard(20000, random_state=1)
    elif name == "gauss_1e4":
        X, y = make_gauss(10000, random_state=0)
        Xt, yt = make_gauss(10000, random_state=1)
    else:
        d = np.load(os.path.join(data_dir, f"{name}.npz"))
        if name == "letter":
            X, y, Xt, yt = d["X"][:16000], d["y"][:16000], d["X"][16000:], d["y"][16000:]
        else:
            X, y, Xt, yt = d["X"], d["y"], d["X_test"], d["y_test"]
    X = np.asarray(X, dtype=np.float64)
    Xt = np.asarray(Xt, dtype=np.float64)
    mu, sd = X.mean(axis=0), X.std(axis=0)
    sd[sd == 0] = 1.0
    return (X - mu) / sd, np.asarray(y), (Xt - mu) / sd, np.asarray(yt)


def measure(fn):
    """(result, CPU seconds, peak traced MiB)."""
    tracemalloc.start()
    t0 = time.process_time()
    out = fn()
    cpu = time.process_time() - t0
    peak = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    return out, cpu, peak


def tune(X, y, d, seed=0):
    from dkernel.svm import BudgetedSVC

    rng = np.random.default_rng(seed)
    idx = rng.permutation(len(X))[:20000]
    cut = int(0.8 * len(idx))
    tr, va = idx[:cut], idx[cut:]
    best = None
    for gm in (0.25, 1.0, 4.0, 16.0, 64.0):
        for lam in (1e-3, 1e-4, 1e-5, 1e-6):
            clf = BudgetedSVC(budget=100, gamma=gm / d, lam=lam, random_state=seed)
            acc = clf.fit(X[tr], y[tr]).score(X[va], y[va])
            if best is None or acc > best[0]:
                best = (acc, gm / d, lam)
    # lam = 1 / (C n): keep the tuned C when moving from the tuning split to all n rows
    return best[0], best[1], best[2] * len(tr) / len(X)


def run_bsgd(X, y, Xt, yt, *, B, algo, maint, gamma, lam, seed):
    from dkernel.svm import BudgetedSVC

    clf = BudgetedSVC(
        budget=B, algorithm=algo, maintenance=maint, gamma=gamma, lam=lam, random_state=seed
    )
    _, cpu, peak = measure(lambda: clf.fit(X, y))
    t0 = time.perf_counter()
    acc = float(np.mean(clf.predict(Xt) == yt))
    return {
        "acc": 100 * acc,
        "train_cpu_s": cpu,
        "predict_s": time.perf_counter() - t0,
        "peak_mib": peak,
        "n_sv": int(clf.support_vectors_.shape[0]),
        "degradation": clf.weight_degradation_,
    }


def run_peer(kind, X, y, Xt, yt, *, B, gamma, lam, seed):
    from sklearn.kernel_approximation import Nystroem, RBFSampler
    from sklearn.linear_model import SGDClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.svm import SVC

    note = ""
    if kind == "SVC":
        if len(X) > 20000:
            idx = np.random.default_rng(seed).permutation(len(X))[:20000]
            X, y = X[idx], y[idx]
            note = "20000-row subsample"
        model = SVC(C=min(1e3, 1.0 / (lam * len(X))), gamma=gamma, cache_size=500)
    else:
        mapper = (Nystroem if kind == "Nystroem+SGD" else RBFSampler)(
            gamma=gamma, n_components=B, random_state=seed
        )
        model = make_pipeline(mapper, SGDClassifier(loss="hinge", alpha=lam, random_state=seed))
    _, cpu, peak = measure(lambda: model.fit(X, y))
    t0 = time.perf_counter()
    acc = float(np.mean(model.predict(Xt) == yt))
    out = {
        "acc": 100 * acc,
        "train_cpu_s": cpu,
        "predict_s": time.perf_counter() - t0,
        "peak_mib": peak,
        "note": note,
    }
    if kind != "SVC":
        out["sgd_epochs"] = int(model[-1].n_iter_)
    return out


def merge_search_timing(X, y, gamma, lam):
    """Golden section vs lookup table for the merge search: train CPU s and accuracy."""
    from dkernel.svm import BudgetedSVC, _bsgd

    out = {}
    for mode in ("golden", "lookup"):
        _bsgd._MERGE_SEARCH = mode
        _bsgd._lookup_table(2)
        res = []
        for B in (100, 500):
            clf = BudgetedSVC(budget=B, gamma=gamma, lam=lam, random_state=0)
            _, cpu, _ = measure(lambda: clf.fit(X, y))
            res.append({"B": B, "train_cpu_s": cpu})
        out[mode] = res
    _bsgd._MERGE_SEARCH = "golden"
    return out


#: gamma, lam tuned by the original run (commit 3136c4d, BudgetedSVC's old default
#: fit_intercept=True); the diagnosis re-uses them to isolate the intercept's effect.
ORIGINAL_TUNING = {
    "dna": (0.001388888888888889, 0.0008),
    "usps": (0.00390625, 7.998902756823481e-05),
    "pendigits": (0.25, 0.0007999733119829197),
    "letter": (0.0625, 0.0008),
    "a9a": (0.008130081300813009, 4.913853997113111e-05),
    "checkerboard_1e5": (8.0, 0.00016),
}


def _numpy_pegasos(X, yi, c, order, gamma, lam, icpt):
    """Plain-NumPy kernel Pegasos (rate 1/(lam t), Crammer-Singer for c > 1), no budget."""
    SV, A, b, s = [], [], np.zeros(c), 1.0
    sq = np.einsum("ij,ij->i", X, X)
    for t, i in enumerate(order, 1):
        x, eta = X[i], 1.0 / (lam * t)
        f = s * icpt * b
        if SV:
            k = np.exp(-gamma * np.maximum(sq[SV] + sq[i] - 2.0 * X[SV] @ x, 0.0))
            f = f + s * (k @ np.array(A))
        if c == 1:
            sgn = 1.0 if yi[i] == 1 else -1.0
            viol, r = sgn * f[0] < 1.0, -1
        else:
            g = f.copy()
            g[yi[i]] = -np.inf
            r = int(np.argmax(g))
            viol = f[yi[i]] - f[r] < 1.0
        if 1.0 - eta * lam <= 0.0:
            SV, A, b, s = [], [], np.zeros(c), 1.0
        else:
            s *= 1.0 - eta * lam
        if viol:
            a, beta = np.zeros(c), eta / s
            if c == 1:
                a[0] = sgn * beta
            else:
                a[yi[i]], a[r] = beta, -beta
            b += a * icpt
            SV.append(i)
            A.append(a)
    return np.array(SV), s * np.array(A), s * b * icpt


def diagnose(data_dir: str) -> dict:
    """Bug or tuning? (1) no-budget BudgetedSVC against plain-NumPy Pegasos on the same
    order; (2) each maintenance step's ||Delta||^2 against NumPy; (3) the intercept's effect
    at the original tuning."""
    from sklearn.datasets import load_digits
    from sklearn.utils import check_random_state

    from dkernel.svm import BudgetedSVC
    from dkernel.svm import _budget as nb
    from dkernel.svm._stream import visit_order

    out = {"no_budget": [], "degradation": [], "intercept": []}
    for name in ("dna", "usps"):
        X, y, Xt, yt = load(name, data_dir, False)
        gamma, lam = ORIGINAL_TUNING[name]
        classes = np.unique(y)
        c = 1 if len(classes) == 2 else len(classes)
        order = visit_order(len(X), seed=int(check_random_state(0).randint(np.iinfo(np.int32).max)))
        for fi in (True, False):
            clf = BudgetedSVC(
                budget=len(X) + 1, gamma=gamma, lam=lam, fit_intercept=fi, random_state=0
            ).fit(X, y)
            SV, A, b = _numpy_pegasos(
                X, np.searchsorted(classes, y), c, order, gamma, lam, 1.0 if fi else 0.0
            )
            Kt = np.exp(
                -gamma
                * np.maximum(
                    (Xt**2).sum(1)[:, None] + (X[SV] ** 2).sum(1) - 2.0 * Xt @ X[SV].T, 0.0
                )
            )
            F = Kt @ A + b
            pred = classes[(F[:, 0] > 0).astype(int)] if c == 1 else classes[F.argmax(1)]
            same = clf.dual_coef_.shape == A.shape
            out["no_budget"].append(
                {
                    "data": name,
                    "fit_intercept": fi,
                    "n_sv": int(clf.dual_coef_.shape[0]),
                    "n_sv_numpy": len(SV),
                    "n_maintenance": int(clf.n_maintenance_),
                    "max_abs_coef_diff": float(np.abs(clf.dual_coef_ - A).max()) if same else None,
                    "acc": 100 * float(clf.score(Xt, yt)),
                    "acc_numpy": 100 * float(np.mean(pred == yt)),
                }
            )
            print(out["no_budget"][-1], flush=True)
    X, y = load_digits(return_X_y=True)
    X = (X - X.mean(0)) / np.where(X.std(0) > 0, X.std(0), 1.0)
    g = 1.0 / 64

    def kern(P, Q):
        return np.exp(-g * np.maximum((P**2).sum(1)[:, None] + (Q**2).sum(1) - 2 * P @ Q.T, 0))

    for binary in (False, True):
        yy = y % 2 if binary else y
        for maint in ("remove", "project", "merge"):
            clf = BudgetedSVC(budget=50, maintenance=maint, gamma=g, lam=1e-3, random_state=0).fit(
                X[:1000], yy[:1000]
            )
            SV, sqn, A, K, M, b, fs, ist = [a.copy() for a in clf._state]
            cfg = clf._config(clf._spec)
            rng = np.random.default_rng(1)
            worst = 0.0
            for step in range(5):  # add one SV to a full model, maintain, compare
                n = int(ist[nb.IS_NSV])
                x = X[1000 + step]
                SV[n], sqn[n] = x, x @ x
                A[n] = rng.normal(size=A.shape[1]) * np.abs(A[:n]).mean()
                kr = kern(SV[: n + 1], x[None])[:, 0]
                K[n, : n + 1], K[: n + 1, n] = kr, kr
                if maint == "project":
                    nb.refresh_inverse(K, M, n + 1, nb.PROJECT_RIDGE)
                ist[nb.IS_NSV] = n + 1
                S0, A0 = SV[: n + 1].copy(), fs[0] * A[: n + 1]
                d2 = nb.maintain(
                    SV,
                    sqn,
                    A,
                    K,
                    M,
                    fs,
                    ist,
                    cfg["maint"],
                    cfg["kind"],
                    g,
                    3.0,
                    0.0,
                    nb.PROJECT_RIDGE,
                    2,
                    cfg["search"],
                    cfg["T"],
                    50,
                )
                m = int(ist[nb.IS_NSV])
                Z, C = np.vstack([S0, SV[:m]]), np.vstack([A0, -fs[0] * A[:m]])
                true = float(np.einsum("ic,ij,jc->", C, kern(Z, Z), C))
                worst = max(worst, abs(d2 - true) / max(true, 1e-300))
            out["degradation"].append(
                {
                    "classes": 2 if binary else 10,
                    "maintenance": maint,
                    "steps": 5,
                    "max_rel_err": worst,
                }
            )
            print(out["degradation"][-1], flush=True)
    for name, Bs, nrun in (
        ("dna", (100, 500), 5),
        ("usps", (100, 500), 3),
        ("pendigits", (100, 500), 3),
        ("letter", (500,), 2),
        ("a9a", (100,), 2),
        ("checkerboard_1e5", (100, 500), 3),
    ):
        X, y, Xt, yt = load(name, data_dir, False)
        gamma, lam = ORIGINAL_TUNING[name]
        for B in Bs:
            row = {"data": name, "B": B, "runs": nrun, "gamma": gamma, "lam": lam}
            for fi in (True, False):
                a = [
                    100
                    * BudgetedSVC(budget=B, gamma=gamma, lam=lam, fit_intercept=fi, random_state=s)
                    .fit(X, y)
                    .score(Xt, yt)
                    for s in range(nrun)
                ]
                row["on" if fi else "off"] = (float(np.mean(a)), float(np.std(a)))
            out["intercept"].append(row)
            print(row, flush=True)
    return out


def big_run(rows: int, workdir: str) -> dict:
    """One pass over a ``rows``-row checkerboard read from zarr, B = 100."""
    import dask
    import psutil

    from dkernel.data import make_checkerboard
    from dkernel.svm import BudgetedSVC

    dask.config.set(scheduler="threads")
    path = os.path.join(workdir, f"checkerboard_{rows}.zarr")
    t0 = time.perf_counter()
    if not os.path.exists(path):
        make_checkerboard(rows, random_state=0, store=path, chunk_rows=1 << 20)
    write_s = time.perf_counter() - t0
    Xt, yt = make_checkerboard(20000, random_state=1)
    # raw features ([0, 4)^2, no standardisation pass over 1e7 rows); gamma = 2, lam = 1e-6
    rss0 = psutil.Process().memory_info().rss
    clf = BudgetedSVC(budget=100, gamma=2.0, lam=1e-6, random_state=0)
    t0, c0 = time.perf_counter(), time.process_time()
    clf.fit(path)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    acc = float(np.mean(clf.predict(Xt) == yt))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {
        "rows": rows,
        "write_s": write_s,
        "train_wall_s": wall,
        "train_cpu_s": cpu,
        "acc": 100 * acc,
        "peak_rss_mib": peak,
        "rss_before_fit_mib": rss0 / 2**20,
        "gamma": 2.0,
        "lam": 1e-6,
        "budget": 100,
        "t_": clf.t_,
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data-dir", default=os.path.join(ROOT, "..", "shared", "datasets"))
    p.add_argument("--out", default=os.path.join(ROOT, "benchmarks", "results"))
    p.add_argument("--quick", action="store_true")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--big", action="store_true")
    p.add_argument("--big-rows", type=int, default=10_000_000)
    p.add_argument("--workdir", default="/tmp/bsgd-bench")
    p.add_argument("--datasets", default=None)
    p.add_argument(
        "--passes",
        action="store_true",
        help="for each dataset/B where one pass of pegasos+merge is below "
        "Nystroem+SGD, count the passes (up to 5) it takes to reach it",
    )
    p.add_argument(
        "--report",
        action="store_true",
        help="only (re)write bsgd.md and the plots from the saved JSON files",
    )
    p.add_argument(
        "--update",
        action="store_true",
        help="with --datasets: re-run only these datasets and replace their entries "
        "in the existing bsgd.json (the others are kept); no checkerboard curves",
    )
    p.add_argument(
        "--diagnose",
        action="store_true",
        help="bug or tuning: no-budget fit vs plain-NumPy Pegasos, maintenance "
        "degradation vs NumPy, intercept on/off (bsgd_diagnosis.json)",
    )
    p.add_argument("--note", default="", help="why this --update run was made (goes in bsgd.md)")
    args = p.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    os.makedirs(args.workdir, exist_ok=True)
    cmd = "python benchmarks/bsgd.py " + " ".join(sys.argv[1:] if argv is None else argv)
    if args.report:
        with open(os.path.join(args.out, "bsgd.json")) as fh:
            results = json.load(fh)
        plots(results, args.out)
        report(results, args.out)
        return 0
    if args.passes:
        with open(os.path.join(args.out, "bsgd.json")) as fh:
            results = json.load(fh)
        out = {"command": cmd, "rows": []}
        old_path = os.path.join(args.out, "bsgd_passes.json")
        if args.datasets and os.path.exists(old_path):  # keep the other datasets' rows
            with open(old_path) as fh:
                old = json.load(fh)
            keep = args.datasets.split(",")
            out = {
                "command": old["command"] + "` and `" + cmd,
                "rows": [r for r in old["rows"] if r["data"] not in keep],
            }
        for name, e in results["datasets"].items():
            if args.datasets and name not in args.datasets.split(","):
                continue
            X, y, Xt, yt = load(name, args.data_dir, args.quick)
            for B in (100, 500):
                m, ny = _row(e, "BSGD pegasos+merge", B), _row(e, "Nystroem+SGD", B)
                if m is None or ny is None or m["acc"] >= ny["acc"]:
                    continue
                from dkernel.svm import BudgetedSVC

                got = None
                for ep in range(2, 6):
                    clf = BudgetedSVC(
                        budget=B, gamma=e["gamma"], lam=e["lam"], max_epochs=ep, random_state=0
                    )
                    _, cpu, _ = measure(lambda: clf.fit(X, y))
                    acc = 100 * float(np.mean(clf.predict(Xt) == yt))
                    got = {
                        "data": name,
                        "B": B,
                        "passes": ep,
                        "acc": acc,
                        "train_cpu_s": cpu,
                        "nystroem_acc": ny["acc"],
                        "reached": acc >= ny["acc"],
                    }
                    if acc >= ny["acc"]:
                        break
                out["rows"].append(got)
                print(got, flush=True)
        with open(os.path.join(args.out, "bsgd_passes.json"), "w") as fh:
            json.dump(out, fh, indent=2)
        return 0
    if args.diagnose:
        res = diagnose(args.data_dir)
        res["command"] = cmd
        with open(os.path.join(args.out, "bsgd_diagnosis.json"), "w") as fh:
            json.dump(res, fh, indent=2)
        return 0
    if args.big:
        res = big_run(args.big_rows, args.workdir)
        res["command"] = cmd
        with open(os.path.join(args.out, "bsgd_big.json"), "w") as fh:
            json.dump(res, fh, indent=2)
        print(json.dumps(res, indent=2))
        return 0
    names = [
        "checkerboard_1e5",
        "gauss_1e4",
        "pendigits",
        "letter",
        "usps",
        "ijcnn1",
        "a9a",
        "shuttle",
        "dna",
        "checkerboard_1e6",
    ]
    if args.quick:
        names = ["checkerboard_1e5", "pendigits"]
    if args.datasets:
        names = args.datasets.split(",")
    budgets = (20,) if args.quick else (100, 500)
    runs = 1 if args.quick else args.runs
    algos = ("pegasos", "norma", "perceptron")
    maints = ("remove", "project", "merge")
    results: dict = {
        "command": cmd,
        "machine": f"{platform.node()}, 2 shared cores, contended by other jobs",
        "datasets": {},
    }
    if args.update:
        if not args.datasets:
            p.error("--update needs --datasets")
        with open(os.path.join(args.out, "bsgd.json")) as fh:
            results = json.load(fh)
        results.setdefault("reruns", []).append(
            {"command": cmd, "datasets": names, "note": args.note}
        )
    t_all = time.perf_counter()
    for name in names:
        X, y, Xt, yt = load(name, args.data_dir, args.quick)
        d = X.shape[1]
        acc, gamma, lam = tune(X, y, d)
        entry = {
            "n": len(X),
            "n_test": len(Xt),
            "d": d,
            "classes": len(np.unique(y)),
            "gamma": gamma,
            "lam": lam,
            "val_acc": 100 * acc,
            "rows": [],
        }
        if args.update:
            entry["rerun"] = cmd
        print(
            f"{name}: n={len(X)} d={d} gamma={gamma:.4g} lam={lam:g} (val {100 * acc:.2f})",
            flush=True,
        )
        big = name == "checkerboard_1e6"
        for B in budgets:
            for algo in ("pegasos",) if big else algos:
                for maint in maints:
                    nrun = 1 if big else runs
                    rs = [
                        run_bsgd(
                            X, y, Xt, yt, B=B, algo=algo, maint=maint, gamma=gamma, lam=lam, seed=s
                        )
                        for s in range(nrun)
                    ]
                    row = {
                        "method": f"BSGD {algo}+{maint}",
                        "B": B,
                        "runs": nrun,
                        **{k: float(np.mean([r[k] for r in rs])) for k in rs[0]},
                        "acc_std": float(np.std([r["acc"] for r in rs])),
                    }
                    entry["rows"].append(row)
                    print(
                        f"  B={B} {row['method']:28s} acc {row['acc']:.2f} "
                        f"cpu {row['train_cpu_s']:.2f}s",
                        flush=True,
                    )
            for kind in ("Nystroem+SGD", "RBFSampler+SGD") + (("SVC",) if B == budgets[0] else ()):
                if kind == "SVC" and big:
                    continue  # the 1e5 entry already has SVC on 20000 rows of the same board
                nrun = 1 if kind == "SVC" else runs
                rs = [
                    run_peer(kind, X, y, Xt, yt, B=B, gamma=gamma, lam=lam, seed=s)
                    for s in range(nrun)
                ]
                row = {
                    "method": kind,
                    "B": B if kind != "SVC" else None,
                    "runs": nrun,
                    **{
                        k: (float(np.mean([r[k] for r in rs])) if k != "note" else rs[0][k])
                        for k in rs[0]
                    },
                }
                entry["rows"].append(row)
                print(
                    f"  B={B} {kind:28s} acc {row['acc']:.2f} cpu {row['train_cpu_s']:.2f}s",
                    flush=True,
                )
        results["datasets"][name] = entry
        with open(os.path.join(args.out, "bsgd.json"), "w") as fh:
            json.dump(results, fh, indent=2)
    if args.update:
        plots(results, args.out)
        report(results, args.out)
        return 0
    # merge search variants, accuracy vs B, time vs n (checkerboard)
    X, y, Xt, yt = load("checkerboard_1e5", args.data_dir, args.quick)
    g, lam = (
        results["datasets"]["checkerboard_1e5"]["gamma"],
        results["datasets"]["checkerboard_1e5"]["lam"],
    )
    results["merge_search"] = merge_search_timing(X, y, g, lam)
    curve = []
    for B in (10, 20) if args.quick else (25, 50, 100, 200, 500, 1000):
        for maint in maints:
            r = run_bsgd(X, y, Xt, yt, B=B, algo="pegasos", maint=maint, gamma=g, lam=lam, seed=0)
            curve.append({"B": B, "maintenance": maint, **r})
        print(f"  curve B={B} done", flush=True)
    results["acc_vs_B"] = curve
    from dkernel.data import make_checkerboard

    scaling = []
    sizes = (2000, 5000) if args.quick else (10**4, 3 * 10**4, 10**5, 3 * 10**5, 10**6)
    Xall, yall = make_checkerboard(max(sizes), random_state=0)
    Xall = (Xall - 2.0) / (4.0 / np.sqrt(12.0))
    for n in sizes:
        for B, maint in (
            (100, "merge"),
            (500, "merge"),
            (100, "project"),
            (500, "project"),
            (100, "remove"),
        ):
            if maint == "project" and B == 500 and n > 10**5:
                continue
            r = run_bsgd(
                Xall[:n],
                yall[:n],
                Xt,
                yt,
                B=B,
                algo="pegasos",
                maint=maint,
                gamma=g,
                lam=lam,
                seed=0,
            )
            scaling.append({"n": n, "B": B, "maintenance": maint, **r})
        print(f"  scaling n={n} done", flush=True)
    results["time_vs_n"] = scaling
    results["total_wall_s"] = time.perf_counter() - t_all
    with open(os.path.join(args.out, "bsgd.json"), "w") as fh:
        json.dump(results, fh, indent=2)
    plots(results, args.out)
    report(results, args.out)
    print(f"done in {results['total_wall_s']:.0f} s")
    return 0


def _row(entry, method, B):
    for r in entry["rows"]:
        if r["method"] == method and r["B"] == B:
            return r
    return None


def _diagnosis_section(results: dict, out: str) -> list[str]:
    """'Why accuracy fell short': rendered from bsgd_diagnosis.json and the tables."""
    path = os.path.join(out, "bsgd_diagnosis.json")
    if not os.path.exists(path):
        return []
    with open(path) as fh:
        dg = json.load(fh)
    L = [
        "## Why accuracy fell short of the paper (diagnosis)",
        "",
        f"Command: `{dg['command']}` (writes `bsgd_diagnosis.json`).",
        "",
        "**Not an arithmetic bug.** (1) With a budget above n (no maintenance ever), "
        "`BudgetedSVC` equals a 30-line plain-NumPy kernel Pegasos (rate 1/(lam t), "
        "Crammer-Singer multi-class) run on the same visiting order, coefficient for "
        "coefficient, at the original tuning:",
        "",
        "| data | fit_intercept | SVs | SVs NumPy | max abs coef diff | acc % | acc % NumPy |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in dg["no_budget"]:
        diff = "-" if r["max_abs_coef_diff"] is None else f"{r['max_abs_coef_diff']:.3g}"
        L.append(
            f"| {r['data']} | {r['fit_intercept']} | {r['n_sv']} | {r['n_sv_numpy']} | "
            f"{diff} | {r['acc']:.2f} | {r['acc_numpy']:.2f} |"
        )
    L += [
        "",
        "(2) Each maintenance step's reported ||Delta||^2 equals the NumPy value "
        "||w_before - w_after||^2 (kernel quadratic form over old and new SVs, merged "
        "point included), 5 steps each on standardised digits, B = 50:",
        "",
        "| classes | maintenance | max relative error |",
        "|---|---|---|",
    ]
    for r in dg["degradation"]:
        L.append(f"| {r['classes']} | {r['maintenance']} | {r['max_rel_err']:.2g} |")
    L += [
        "",
        "(3) The large mean degradations (usps, shuttle) are the Pegasos scale, not an "
        "error: every Pegasos SV has the same true coefficient 1/(lam t) at step t (times "
        "sqrt 2 for the two multi-class entries), so removing one costs ||Delta_t|| = "
        "(sqrt 2)/(lam t) and the mean over steps B..n is about (sqrt 2) ln(n/B) / "
        "(lam (n - B)) (if every step violated the margin): usps at lam = 8.0e-5, "
        "B = 100: 10.5 predicted, 8.27 measured for removal in the original run. The values "
        "scale with 1/lam; shuttle has the smallest lam of all sets (3.68e-6), hence its "
        "19.7 (merge) and 23.4 (removal) at B = 100. The paper's E-bar is at its own lam.",
        "",
        "**The cause: the intercept.** BudgetedSVC's default was `fit_intercept=True`: a "
        "constant feature of value 1 appended to phi(x), regularised with w and stepped by "
        "eta_t = 1/(lam t) on every violation. The paper and the C++ toolbox have no "
        "intercept. Pegasos + merge, one pass, at the original tuned gamma and lam "
        "(mean +- std over seeds):",
        "",
        "| data | B | runs | gamma | lam | intercept on % | off % | gain |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in dg["intercept"]:
        L.append(
            f"| {r['data']} | {r['B']} | {r['runs']} | {r['gamma']:.4g} | {r['lam']:.3g} "
            f"| {r['on'][0]:.2f} +- {r['on'][1]:.2f} | {r['off'][0]:.2f} +- "
            f"{r['off'][1]:.2f} | {r['off'][0] - r['on'][0]:+.2f} |"
        )
    L += [
        "",
        "So the default is now `fit_intercept=False` (regression test "
        "`tests/test_svm_bsgd.py::test_default_one_pass_accuracy_on_digits_is_not_lost_"
        "to_the_intercept`), and the datasets named in the re-run notes above were re-tuned "
        "and re-run with it. Tuning was the lesser factor: the old grid's edge was hit on "
        "dna (gamma 0.25/d, lam 1e-3) and letter/pendigits (lam 1e-3), and one-pass "
        "Pegasos on dna (2000 steps) varies by several points between seeds, so a wider "
        "grid tuned on a 400-row validation split overfits the split (a 7 x 7 grid, "
        "gamma in {1/16..4}/d, lam in {1e-1..1e-5}, 2 seeds, picked gamma = 2/d, "
        "lam = 1e-4 for B = 100 and scored 58.9% on the test set; an ad-hoc script outside "
        "this benchmark, seeds 0-2 on the test set). In the re-runs pegasos+merge lost "
        "accuracy on checkerboard_1e5 (-0.4 / -0.6 points; the other losses, gauss B=100 "
        "and shuttle B=500, are under 0.2 points, within one std), and that is the "
        "re-tune's doing: at the original tuning "
        "the intercept makes no real difference there (table above), and the re-tune picked "
        "lam at the grid's low edge (1e-6; validation 96.65% against 96.67% before). "
        "Not re-run, so still "
        "with the old default (intercept on): "
        + ", ".join(
            [n for n, e in results["datasets"].items() if not e.get("rerun")]
            + ["the merge-search, accuracy-vs-B and time-vs-n curves", "the 10^7-row run"]
        )
        + ".",
        "",
    ]
    return L


def report(results: dict, out: str) -> None:
    """bsgd.md: every table from the JSON, the targets met or missed with the gaps."""
    big = None
    if os.path.exists(os.path.join(out, "bsgd_big.json")):
        with open(os.path.join(out, "bsgd_big.json")) as fh:
            big = json.load(fh)
    L = [
        "# BSGD (BudgetedSVC) benchmark",
        "",
        f"Command: `{results['command']}` (and `python benchmarks/bsgd.py --big` for the "
        "10^7-row run, in its own process at the same time; this file and the plots were "
        "rewritten from the JSON files by `python benchmarks/bsgd.py --report` after the "
        "`--passes` runs).",
        "",
        f"Machine: {results['machine']}. Timings are CPU seconds of training "
        "(`time.process_time`, includes the numba loop and the prefetch thread), predict "
        "times are wall seconds, peak memory is the `tracemalloc` peak of Python/NumPy "
        "allocations during `fit` (MiB).",
        "",
        "Protocol and what was reduced: one pass (`max_epochs=1`), B in {100, 500}, all 9 "
        "algorithm x maintenance combinations; **3 runs (seeds 0-2) instead of 5**, and "
        "**1 run** on checkerboard 1e6 and for SVC; on checkerboard 1e6 only the pegasos rate "
        "(norma/perceptron with projection at B=500 would take minutes each on the shared "
        "cores); in the time-vs-n curve projection with B=500 stops at n=1e5; gamma and "
        "lam tuned once per dataset on a 80/20 validation split of at most 20000 "
        "training rows (BSGD pegasos+merge, B=100, "
        "grid gamma in {0.25, 1, 4, 16, 64}/d x lam in {1e-3, 1e-4, 1e-5, 1e-6}; the chosen lam "
        "is then scaled by n_tune / n, i.e. C = 1/(lam n) is kept) and shared by every "
        "method (SGDClassifier alpha = lam; SVC C = 1/(lam n), capped at 1000). "
        "SVC is trained on at most 20000 rows (said in its row). Features standardised "
        "with training statistics. Notes: the paper's checkerboard and adult/a9a numbers "
        "come from its own data, sizes and splits; "
        "dna has 2000 training rows, so one pass is 2000 SGD steps. "
        "Nystroem/RBFSampler + SGDClassifier run with "
        "scikit-learn's defaults (up to 1000 epochs with tol=1e-3; their epoch count is "
        "given), so they are not one-pass.",
        "",
    ]
    for rr in results.get("reruns", []):
        shown = rr["command"].split(" --note ")[0] + (' --note "..."' if rr["note"] else "")
        L += [
            f"**Re-run** of {', '.join(rr['datasets'])} (their sections below replace the "
            f"original ones; every other section is from the original command): "
            f"`{shown}`, followed by `python benchmarks/bsgd.py --diagnose`, "
            f"`python benchmarks/bsgd.py --passes --datasets {','.join(rr['datasets'])}` "
            f"(replaces those datasets' rows in the passes table) and "
            f"`python benchmarks/bsgd.py --report`. Note: {rr['note']}",
            "",
        ]
    L += _diagnosis_section(results, out)
    targets = []
    for name, e in results["datasets"].items():
        L += [
            f"## {name}: n={e['n']}, test={e['n_test']}, d={e['d']}, "
            f"{e['classes']} classes; gamma={e['gamma']:.4g}, lam={e['lam']:g} "
            f"(validation accuracy {e['val_acc']:.2f}%)" + (" (re-run)" if e.get("rerun") else ""),
            "",
            "| method | B | runs | acc % | std | train CPU s | predict s | peak MiB | "
            "mean degradation |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for r in e["rows"]:
            extra = r.get("note") or (
                f"SGD epochs {r['sgd_epochs']:.0f}" if "sgd_epochs" in r else ""
            )
            L.append(
                f"| {r['method']}{' (' + extra + ')' if extra else ''} | "
                f"{r['B'] if r['B'] else '-'} | {r['runs']} | {r['acc']:.2f} | "
                f"{r.get('acc_std', 0):.2f} | {r['train_cpu_s']:.2f} | "
                f"{r['predict_s']:.3f} | {r['peak_mib']:.1f} | "
                f"{r.get('degradation', float('nan')):.4g} |"
            )
        L.append("")
        for i, B in enumerate((100, 500)):
            m = _row(e, "BSGD pegasos+merge", B)
            if m is None:
                continue
            ny = _row(e, "Nystroem+SGD", B)
            cpp = CPP.get((name, B))
            paper = PAPER.get(name)
            t = {
                "data": name,
                "B": B,
                "acc": m["acc"],
                "cpu": m["train_cpu_s"],
                "ny_acc": ny["acc"] if ny else None,
                "ny_cpu": ny["train_cpu_s"] if ny else None,
                "cpp_acc": cpp[0] if cpp else None,
                "cpp_cpu": cpp[1] if cpp else None,
                "paper": paper[i] if paper else None,
            }
            targets.append(t)
    L += [
        "## Targets (BSGD pegasos + merge, one pass)",
        "",
        "C++ = the issue's BudgetedSVM table; paper = Wang et al. one-pass BPegasos+merge; "
        "Nystroem+SGD measured in this run. A target is 'met' when the number satisfies it.",
        "",
        "| data | B | acc % | C++ acc | >= C++ | paper | within 1 pt of paper | CPU s | "
        "C++ CPU s | >= 10x faster | Nystroem acc | acc >= Nystroem | Nystroem CPU s | "
        "time <= 3x Nystroem |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]

    def yn(ok):
        return "-" if ok is None else ("met" if ok else "**missed**")

    for t in targets:
        c1 = None if t["cpp_acc"] is None else t["acc"] >= t["cpp_acc"]
        c2 = None if t["paper"] is None else t["acc"] >= t["paper"] - 1.0
        c3 = None if t["cpp_cpu"] is None else t["cpu"] * 10 <= t["cpp_cpu"]
        c4 = None if t["ny_acc"] is None else t["acc"] >= t["ny_acc"]
        c5 = None if t["ny_cpu"] is None else t["cpu"] <= 3 * t["ny_cpu"]

        def f(v, fmt="{:.2f}"):
            return "-" if v is None else fmt.format(v)

        L.append(
            f"| {t['data']} | {t['B']} | {t['acc']:.2f} | {f(t['cpp_acc'])} | {yn(c1)} "
            f"({f(None if c1 is None else t['acc'] - t['cpp_acc'], '{:+.2f}')}) | "
            f"{f(t['paper'])} | {yn(c2)} "
            f"({f(None if c2 is None else t['acc'] - t['paper'], '{:+.2f}')}) | "
            f"{t['cpu']:.2f} | {f(t['cpp_cpu'])} | {yn(c3)} "
            f"({f(None if c3 is None else t['cpp_cpu'] / max(t['cpu'], 1e-9), '{:.0f}x')}) | "
            f"{f(t['ny_acc'])} | {yn(c4)} "
            f"({f(None if c4 is None else t['acc'] - t['ny_acc'], '{:+.2f}')}) | "
            f"{f(t['ny_cpu'])} | {yn(c5)} "
            f"({f(None if c5 is None else t['cpu'] / max(t['ny_cpu'], 1e-9), '{:.1f}x')}) |"
        )
    L.append("")
    if os.path.exists(os.path.join(out, "bsgd_passes.json")):
        with open(os.path.join(out, "bsgd_passes.json")) as fh:
            ps = json.load(fh)
        L += [
            "## Passes to reach Nystroem+SGD where one pass falls short",
            "",
            f"Command: `{ps['command']}` (pegasos+merge, seed 0, 2 to 5 passes, same gamma "
            "and lam).",
            "",
            "| data | B | passes | acc % | Nystroem acc % | reached | train CPU s |",
            "|---|---|---|---|---|---|---|",
        ]
        for r in ps["rows"]:
            L.append(
                f"| {r['data']} | {r['B']} | {r['passes']} | {r['acc']:.2f} | "
                f"{r['nystroem_acc']:.2f} | {'yes' if r['reached'] else '**no** (5 passes)'}"
                f" | {r['train_cpu_s']:.2f} |"
            )
        L.append("")
    if "merge_search" in results:
        L += [
            "## Merge search: golden section vs lookup table (checkerboard 1e5, one pass)",
            "",
            "| search | B | train CPU s |",
            "|---|---|---|",
        ]
        for mode, rows in results["merge_search"].items():
            for r in rows:
                L.append(f"| {mode} | {r['B']} | {r['train_cpu_s']:.2f} |")
        L.append("")
    if big:
        ok = big["peak_rss_mib"] < 1024
        L += [
            "## 10^7-row checkerboard streamed from zarr, one pass, B = 100 (merge, pegasos)",
            "",
            f"Command: `{big['command']}`; gamma={big['gamma']}, lam={big['lam']:g}, raw "
            "features. Run once, in the background, at the same time as the main benchmark.",
            "",
            "| rows | store write s | train wall s | train CPU s | test acc % | "
            "peak RSS MiB | RSS before fit MiB |",
            "|---|---|---|---|---|---|---|",
            f"| {big['rows']:,} | "
            f"{'(reused)' if big['write_s'] < 0.5 else format(big['write_s'], '.1f')} | "
            f"{big['train_wall_s']:.1f} | "
            f"{big['train_cpu_s']:.1f} | {big['acc']:.2f} | {big['peak_rss_mib']:.0f} | "
            f"{big['rss_before_fit_mib']:.0f} |",
            "",
            "Store write '(reused)': the zarr store written by an earlier run of the same "
            "command was reused. Wall time far above CPU time: the process shared 2 cores "
            "with a load average near 10 (other engineers' jobs and the main benchmark).",
            "",
            f"Target peak under 1 GB: {'met' if ok else '**missed**'} "
            f"({big['peak_rss_mib']:.0f} MiB).",
            "",
        ]
    L += [
        "## Plots",
        "",
        "![accuracy vs B](bsgd_acc_vs_budget.png)",
        "![train time vs n](bsgd_time_vs_n.png)",
        "",
    ]
    if "time_vs_n" in results:
        L += [
            "Train CPU s against n (checkerboard, pegasos):",
            "",
            "| n | "
            + " | ".join(
                f"{m} B={B}"
                for B, m in (
                    (100, "merge"),
                    (500, "merge"),
                    (100, "project"),
                    (500, "project"),
                    (100, "remove"),
                )
            )
            + " |",
            "|---|---|---|---|---|---|",
        ]
        for n in sorted({r["n"] for r in results["time_vs_n"]}):
            cells = []
            for B, m in (
                (100, "merge"),
                (500, "merge"),
                (100, "project"),
                (500, "project"),
                (100, "remove"),
            ):
                v = [
                    r["train_cpu_s"]
                    for r in results["time_vs_n"]
                    if r["n"] == n and r["B"] == B and r["maintenance"] == m
                ]
                cells.append(f"{v[0]:.2f}" if v else "-")
            L.append(f"| {n:,} | " + " | ".join(cells) + " |")
        L.append("")
    if "acc_vs_B" in results:
        L += [
            "Accuracy against B (checkerboard 1e5, pegasos, seed 0):",
            "",
            "| B | remove | project | merge |",
            "|---|---|---|---|",
        ]
        for B in sorted({r["B"] for r in results["acc_vs_B"]}):
            cells = []
            for m in ("remove", "project", "merge"):
                v = [r for r in results["acc_vs_B"] if r["B"] == B and r["maintenance"] == m]
                cells.append(f"{v[0]['acc']:.2f} ({v[0]['train_cpu_s']:.2f} s)" if v else "-")
            L.append(f"| {B} | " + " | ".join(cells) + " |")
        L.append("")
    with open(os.path.join(out, "bsgd.md"), "w") as fh:
        fh.write("\n".join(L))


def plots(results: dict, out: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if "acc_vs_B" not in results:
        return
    fig, ax = plt.subplots(figsize=(5, 3.5))
    for maint in ("remove", "project", "merge"):
        pts = [(r["B"], r["acc"]) for r in results["acc_vs_B"] if r["maintenance"] == maint]
        ax.plot(*zip(*pts), marker="o", label=maint)
    ax.set_xscale("log")
    ax.set_xlabel("budget B")
    ax.set_ylabel("test accuracy %")
    ax.set_title("checkerboard 1e5, BSGD pegasos, one pass")
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(out, "bsgd_acc_vs_budget.png"), dpi=120)
    fig, ax = plt.subplots(figsize=(5, 3.5))
    for B, maint in (
        (100, "merge"),
        (500, "merge"),
        (100, "project"),
        (500, "project"),
        (100, "remove"),
    ):
        pts = [
            (r["n"], r["train_cpu_s"])
            for r in results["time_vs_n"]
            if r["B"] == B and r["maintenance"] == maint
        ]
        if pts:
            ax.plot(*zip(*pts), marker="o", label=f"{maint} B={B}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("training rows n")
    ax.set_ylabel("train CPU s")
    ax.set_title("checkerboard, one pass")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "bsgd_time_vs_n.png"), dpi=120)


if __name__ == "__main__":
    sys.exit(main())
