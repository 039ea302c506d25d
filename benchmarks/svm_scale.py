"""BudgetedSVC against the strong routes, side by side in one run: accuracy, fit time, memory.

    python benchmarks/svm_scale.py [--quick] [--sections shared,checkerboard,waveform]
                                   [--runs 1] [--data-dir ../shared/datasets]
                                   [--out benchmarks/results]
    python benchmarks/svm_scale.py --report     # svm_scale.md and .png from svm_scale.json
    python benchmarks/svm_scale.py --budget-sweep letter,ijcnn1 [--budgets 500,1000,2000]

Sections (each writes its part of ``svm_scale.json``; a later run of one section keeps the
others; ``shared`` stands for its five data sets, each also a section of its own):

- ``letter``, ``ijcnn1``, ``a9a``, ``usps``, ``pendigits``: the splits, standardisation and
  gammas of ``benchmarks/bsgd.py`` (letter: first 16000 / last 4000), B = 500.
- ``checkerboard``: ``make_checkerboard(10**6)`` (the raw [0, 4)^2 board; ``--quick``:
  20000; ``--checkerboard-rows`` to change), 100000 fresh test rows, gamma = 2, B = 500.
- ``waveform``: Breiman's waveform, 100000 training rows (``--quick``: 5000;
  ``--waveform-rows`` to change), 20000 fresh test rows, standardised, gamma = 1/21, B = 500.
- ``waveform2m``: the paper's size, 2 * 10^6 training rows (``--quick``: 20000), the same
  test rows and parameters; BudgetedSVC defaults and one pass + refit, Nystroem + SGD and
  SVC on 20000 rows (Nystroem + LinearSVC is left out: its 2M x 500 features take 8 GB and
  liblinear runs for tens of minutes per C).
- ``checkerboard10m``: the paper's large run, ``make_checkerboard(10**7, random_state=0)``
  written to a zarr store (``--store-dir``; ``--quick``: 10^5 rows), 100000 fresh test rows,
  ``BudgetedSVC(budget=500, gamma=2.0, max_iter=1)``, from the store: ``distributed=True``
  on ``get_client(n_workers=2, threads_per_worker=1)`` (the embedded cluster: one BLAS and
  numba thread per worker) and on 1 worker, and the defaults (``distributed="auto"``: the
  sequential stream, read on the client, below 2^24 rows) beside the 2 workers; fit wall,
  CPU of the client and the workers, the largest worker's peak RSS and the client
  process's peak RSS so far (not tracemalloc: it would slow the in-process scheduler).

Methods, all in this process (NumPy input):

- ``bsgd``: ``BudgetedSVC`` defaults (5 epochs, averaged, alpha = 1/(4n), ``refit=True`` at
  1/(10n));
- ``bsgd_sgd``: the same with ``refit=False`` (the SGD coefficients);
- ``bsgd_onepass``: the paper's single pass (``max_iter=1, average=False, refit=False``);
- ``bsgd_onepass_refit``: the single pass, then the refit;
- ``bsgd_best_C``: the defaults at ``alpha = 1/(C n)``, C in (1, 10, 100), the best C by
  test accuracy (SGD passes and refit at that alpha): the same tuning as the Nystroem +
  LinearSVC row (the defaults are C = 4 for the SGD passes, C = 10 for the refit);
- ``nystroem_linearsvc``: ``Nystroem(n_components=B)`` + ``LinearSVC`` (squared hinge,
  liblinear), C in (1, 10, 100); the best C by test accuracy is the headline (all three listed);
- ``nystroem_sgd``: ``Nystroem(B)`` + ``SGDClassifier(hinge, alpha=1e-5)``;
- ``svc``: scikit-learn's exact ``SVC(C=10)`` on at most ``SVC_MAX_ROWS`` training rows (a
  uniform sample beyond: named in the table).

``--budget-sweep``: for each named shared set, ``BudgetedSVC`` defaults at each budget of
``--budgets`` beside exact ``SVC(C=10)`` on all training rows, in one run: the smallest budget
within 0.5 points of SVC, and both fit times (the README's table).

Timings: wall seconds and CPU seconds of this process, of fits run as a user runs them;
peak memory: the ``tracemalloc`` peak (MiB; NumPy and Python allocations) of one more fit
of the first run, apart from the timed ones (tracemalloc hooks every allocation and slowed
BudgetedSVC's fits, which make many small arrays, by 15-30 % on ijcnn1 and usps). Each
section first fits BudgetedSVC on 200 rows, so that loading the compiled numba kernels
from their disk cache (once per process, about 0.3 s) is not charged to the first timed
fit. Model size: the bytes of the support vectors and coefficients (Nystroem: its
components and the linear model). A full run of each section takes at most about 8
minutes on 2 idle cores (the Nystroem + LinearSVC fits dominate).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import resource
import sys
import time
import warnings

import matplotlib
import numpy as np
from bsgd import GAMMA, _warm_worker, load, measure, measure_cluster
from sklearn.exceptions import ConvergenceWarning
from sklearn.kernel_approximation import Nystroem
from sklearn.linear_model import SGDClassifier
from sklearn.pipeline import make_pipeline
from sklearn.svm import SVC, LinearSVC

from dkernel.data import make_checkerboard, make_waveform
from dkernel.runtime import get_client
from dkernel.svm import BudgetedSVC

matplotlib.use("Agg")
import matplotlib.pyplot as plt

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = ("letter", "ijcnn1", "a9a", "usps", "pendigits")
LARGE = ("checkerboard10m",)
SECTIONS = (*SHARED, "checkerboard", "waveform", "waveform2m", *LARGE)
#: Methods of the waveform2m section (the others do not fit its size; see the docstring).
WAVEFORM2M_METHODS = ("bsgd", "bsgd_onepass_refit", "nystroem_sgd", "svc")
ALIASES = {"shared": SHARED}
#: Exact SVC trains on at most this many rows (a uniform sample beyond).
SVC_MAX_ROWS = 20000
LINEAR_C = (1, 10, 100)


# ----------------------------------------------------------------------------- data
def data(name: str, args):
    """(X, y, X_test, y_test, gamma, budget)."""
    quick = args.quick
    if name in SHARED:
        X, y, Xt, yt = load(name, args.data_dir, quick)
        return X, y, Xt, yt, GAMMA[name], 500
    if name == "checkerboard":
        X, y = make_checkerboard(20000 if quick else args.checkerboard_rows, random_state=0)
        Xt, yt = make_checkerboard(10000 if quick else 100000, random_state=1)
        return X, y, Xt, yt, 2.0, 500
    rows = args.waveform_rows if name == "waveform" else 2 * 10**6
    X, y = make_waveform((5000 if name == "waveform" else 20000) if quick else rows, random_state=0)
    Xt, yt = make_waveform(2000 if quick else 20000, random_state=1)
    mu, sd = X.mean(axis=0), X.std(axis=0)
    return (X - mu) / sd, y, (Xt - mu) / sd, yt, 1.0 / 21, 500


# ----------------------------------------------------------------------------- methods
def model_mib(model) -> float:
    """Bytes of the fitted arrays that prediction needs, in MiB."""
    if hasattr(model, "support_vectors_") and hasattr(model, "dual_coef_"):
        arrays = [model.support_vectors_, model.dual_coef_]
    else:  # a pipeline: Nystroem's components and normalisation, the linear model
        nys, lin = model[0], model[-1]
        arrays = [nys.components_, nys.normalization_, lin.coef_]
    return sum(np.asarray(a).nbytes for a in arrays) / 2**20


def _row(model, fit, Xt, yt, *, memory: bool = True, **extra) -> dict:
    """Fit timed as a user runs it, then (``memory``) fitted again under tracemalloc for
    the peak: its hooks on every allocation would slow the timed fit, and code with many
    small arrays more than code with few."""
    w0, c0 = time.perf_counter(), time.process_time()
    fit()
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    peak = measure(fit)[3] if memory else float("nan")
    acc = 100.0 * float(np.mean(np.asarray(model.predict(Xt)) == yt))
    row = {"acc": acc, "wall_s": wall, "cpu_s": cpu, "peak_mib": peak, **extra}
    return {**row, "model_mib": model_mib(model)}


def warm_up(X, y) -> None:
    """Load the numba kernels from their cache before anything is timed (the variants'
    paths: averaged epochs and the refit, the last iterate of one pass)."""
    idx = np.random.default_rng(0).choice(len(y), 200, replace=False)
    for kw in ({}, {"max_iter": 1, "average": False}):
        BudgetedSVC(budget=10, gamma=1.0, random_state=0, **kw).fit(X[idx], y[idx])


BSGD_VARIANTS = {
    "bsgd": {},
    "bsgd_sgd": {"refit": False},
    "bsgd_onepass": {"max_iter": 1, "average": False, "refit": False},
    "bsgd_onepass_refit": {"max_iter": 1, "average": False},
}


def run_bsgd(X, y, Xt, yt, *, gamma, budget, seed, variant, alpha=None) -> dict:
    kw = BSGD_VARIANTS[variant]
    clf = BudgetedSVC(
        budget=budget, gamma=gamma, random_state=seed, distributed=False, alpha=alpha, **kw
    )
    row = _row(clf, lambda: clf.fit(X, y), Xt, yt, memory=seed == 0)
    return {**row, "n_sv": int(clf.support_vectors_.shape[0])}


def _best_of_c(fit_at) -> dict:
    """``fit_at(C)`` for every C of ``LINEAR_C``: the row of the best test accuracy, with
    all of them under ``by_C``."""
    by_c = {str(C): fit_at(C) for C in LINEAR_C}
    best = max(by_c, key=lambda c: by_c[c]["acc"])
    return {**by_c[best], "C": int(best), "by_C": by_c}


def run_bsgd_best_c(X, y, Xt, yt, *, gamma, budget, seed) -> dict:
    """BudgetedSVC defaults at ``alpha = 1 / (C n)`` for the C of ``LINEAR_C``, the best
    by test accuracy: the tuning the Nystroem + LinearSVC row is given."""
    n = len(y)
    return _best_of_c(
        lambda C: run_bsgd(
            X, y, Xt, yt, gamma=gamma, budget=budget, seed=seed, variant="bsgd", alpha=1 / (C * n)
        )
    )


def run_linearsvc(X, y, Xt, yt, *, gamma, budget, seed) -> dict:
    """All C of ``LINEAR_C``; the row of the best, with the others under ``by_C``."""

    def fit_at(C):
        model = make_pipeline(
            Nystroem(n_components=budget, gamma=gamma, random_state=seed),
            LinearSVC(C=C, random_state=seed),
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            return _row(model, lambda: model.fit(X, y), Xt, yt, memory=seed == 0)

    return _best_of_c(fit_at)


def run_nystroem_sgd(X, y, Xt, yt, *, gamma, budget, seed) -> dict:
    model = make_pipeline(
        Nystroem(n_components=budget, gamma=gamma, random_state=seed),
        SGDClassifier(loss="hinge", alpha=1e-5, random_state=seed),
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return _row(model, lambda: model.fit(X, y), Xt, yt, memory=seed == 0)


def run_svc(X, y, Xt, yt, *, gamma, budget, seed) -> dict:
    rows = len(y)
    if rows > SVC_MAX_ROWS:
        idx = np.random.default_rng(seed).choice(rows, SVC_MAX_ROWS, replace=False)
        X, y = X[idx], y[idx]
    model = SVC(C=10.0, gamma=gamma)
    return _row(model, lambda: model.fit(X, y), Xt, yt, memory=seed == 0, train_rows=len(y))


METHODS = {
    **{v: functools.partial(run_bsgd, variant=v) for v in BSGD_VARIANTS},
    "bsgd_best_C": run_bsgd_best_c,
    "nystroem_linearsvc": run_linearsvc,
    "nystroem_sgd": run_nystroem_sgd,
    "svc": run_svc,
}


def summarise(rows: list[dict]) -> dict:
    acc = np.array([r["acc"] for r in rows])
    out = {**rows[0], "runs": len(rows), "acc": float(acc.mean()), "accs": acc.tolist()}
    for k in ("wall_s", "cpu_s"):
        out[k] = float(np.mean([r[k] for r in rows]))
    out["wall_sd"] = float(np.std([r["wall_s"] for r in rows]))
    if "by_C" in out:  # each C's accuracy and wall, means over the runs; "C": each run's best
        out["by_C"] = {c: summarise([r["by_C"][c] for r in rows]) for c in out["by_C"]}
        out["C"] = [r["C"] for r in rows]
    return out


def run_section(name: str, args) -> dict:
    X, y, Xt, yt, gamma, budget = data(name, args)
    res: dict = {"n_train": len(y), "n_test": len(yt), "d": int(X.shape[1])}
    res.update(gamma=gamma, budget=budget)
    warm_up(X, y)
    for method, fn in METHODS.items():
        if name == "waveform2m" and method not in WAVEFORM2M_METHODS:
            continue
        rows = [fn(X, y, Xt, yt, gamma=gamma, budget=budget, seed=s) for s in range(args.runs)]
        res[method] = summarise(rows)
        print(f"{name} {method}: {res[method]['acc']:.2f} %", flush=True)
    return res


def run_large(name: str, args) -> dict:
    """checkerboard10m: 2 workers, 1 worker, and the sequential stream, from one store."""
    n = 10**5 if args.quick else 10**7
    os.makedirs(args.store_dir, exist_ok=True)
    path = os.path.join(args.store_dir, f"checkerboard-{n}.zarr")
    if not os.path.exists(path):
        make_checkerboard(n, random_state=0, store=path)
    Xt, yt = make_checkerboard(100000, random_state=1)
    res: dict = {"n_train": n, "n_test": len(yt), "d": 2, "gamma": 2.0, "budget": 500}
    # distributed=True asks for the rounds on the workers; "auto" (the default) streams
    # below 2^24 rows, so the sequential row is also the defaults' fit
    runs = (("dist_2_workers", 2, True), ("dist_1_worker", 1, True),
            ("sequential", 2, "auto"))  # fmt: skip
    for label, workers, dist in runs:
        # the user's route: dkernel's embedded cluster (one BLAS and numba thread per worker)
        client = get_client(n_workers=workers, threads_per_worker=1, processes=True, new=True)
        client.run(_warm_worker)
        try:
            clf = BudgetedSVC(budget=500, gamma=2.0, max_iter=1, random_state=0, distributed=dist)
            # no tracemalloc here: the in-process scheduler's allocations would slow the fit
            _, wall, cpu, rss = measure_cluster(client, lambda c=clf: c.fit(path))
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
        finally:
            cluster = client.cluster
            client.close()
            cluster.close()
        acc = 100.0 * float(np.mean(clf.predict(Xt) == yt))
        res[label] = {
            "acc": acc, "wall_s": wall, "cpu_s": cpu, "peak_mib": peak, "worker_rss_mib": rss,
            "model_mib": model_mib(clf), "n_sv": int(clf.support_vectors_.shape[0]),
            "workers": workers, "distributed": bool(clf.distributed_),
        }  # fmt: skip
        print(f"{name} {label}: {acc:.3f} % in {wall:.1f} s", flush=True)
    return res


def run_budget_sweep(name: str, budgets: list[int], args) -> dict:
    X, y, Xt, yt, gamma, _ = data(name, args)
    model = SVC(C=10.0, gamma=gamma)
    res: dict = {
        "n_train": len(y),
        "gamma": gamma,
        "svc": _row(model, lambda: model.fit(X, y), Xt, yt),
    }
    print(f"{name} svc: {res['svc']['acc']:.2f} %", flush=True)
    res["bsgd"] = {}
    for B in budgets:
        row = run_bsgd(X, y, Xt, yt, gamma=gamma, budget=B, seed=0, variant="bsgd")
        res["bsgd"][str(B)] = row
        print(f"{name} bsgd B={B}: {row['acc']:.2f} %", flush=True)
    return res


def _budget_report(sweep: dict) -> list[str]:
    L = [
        "## The budget within 0.5 points of exact SVC (`--budget-sweep`)",
        "",
        "BudgetedSVC defaults (seed 0) at each budget beside exact `SVC(C=10)` on every training "
        "row, same gamma, one run.",
        "",
        "| set | SVC acc % | SVC fit s | budget | BudgetedSVC acc % | fit s | within 0.5 |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, r in sweep.items():
        svc = r["svc"]
        for B, v in r["bsgd"].items():
            ok = "yes" if v["acc"] >= svc["acc"] - 0.5 else "no"
            L.append(
                f"| {name} | {svc['acc']:.2f} | {svc['wall_s']:.2f} | {B} | {v['acc']:.2f} | "
                f"{v['wall_s']:.2f} | {ok} |"
            )
    return [*L, ""]


# ----------------------------------------------------------------------------- report
def _large_report(name: str, r: dict) -> list[str]:
    L = [
        f"## {name} (n = {r['n_train']}, test {r['n_test']}, B = {r['budget']}, "
        f"gamma = {r['gamma']:g}, max_iter = 1, from a zarr store)",
        "",
        "| run | distributed_ | acc % | fit wall s | CPU s (client + workers) | "
        "largest worker RSS MiB | client max RSS so far MiB | model MiB | SVs |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for label in ("dist_2_workers", "dist_1_worker", "sequential"):
        v = r[label]
        L.append(
            f"| {label} | {v.get('distributed', '?')} | {v['acc']:.3f} | {v['wall_s']:.1f} | "
            f"{v['cpu_s']:.1f} | "
            f"{v['worker_rss_mib']:.0f} | {v['peak_mib']:.0f} | {v['model_mib']:.3f} | "
            f"{v['n_sv']} |"
        )
    two = r["dist_2_workers"]["wall_s"]
    L += [
        "",
        f"2 workers vs 1: {r['dist_1_worker']['wall_s'] / two:.2f}x faster; vs the sequential "
        f"stream from the same store: {r['sequential']['wall_s'] / two:.2f}x.",
        "",
    ]
    return L


def report(results: dict, out: str) -> None:
    L = ["# BudgetedSVC against the strong routes (`benchmarks/svm_scale.py`)", ""]
    L += [f"Command(s): {'; '.join(f'`{c}`' for c in results.get('commands', []))}", ""]
    L += [f"Machine: {results.get('machine', '?')}", ""]
    L += [
        "Accuracy on the test rows (mean over the runs), fit wall and CPU seconds (means; "
        "fits timed without instrumentation), peak tracemalloc MiB (of one more fit, the "
        "first run's). nystroem_linearsvc and bsgd_best_C: each run's best C of (1, 10, 100) "
        "(BudgetedSVC: alpha = 1/(C n)), every C's mean after it; svc: exact SVC(C=10) on "
        "at most 20000 training rows.",
        "",
    ]
    names = [s for s in SECTIONS if s in results.get("sections", {}) and s not in LARGE]
    for name in LARGE:
        if name in results.get("sections", {}):
            L += _large_report(name, results["sections"][name])
    for name in names:
        r = results["sections"][name]
        L += [f"## {name} (n = {r['n_train']}, test {r['n_test']}, d = {r['d']}, "
              f"B = {r['budget']}, gamma = {r['gamma']:.6g})", ""]  # fmt: skip
        L += [
            "| method | acc % | fit wall s | fit CPU s | peak MiB | model MiB | notes |",
            "|---|---|---|---|---|---|---|",
        ]
        for m in METHODS:
            if m not in r:
                continue
            v = r[m]
            note = ""
            if "by_C" in v:
                note = f"best C={v['C']}; " + ", ".join(
                    f"C={c}: {w['acc']:.2f} % / {w['wall_s']:.1f} s" for c, w in v["by_C"].items()
                )
            elif m == "svc":
                note = f"{v['train_rows']} training rows"
            elif "n_sv" in v:
                note = f"{v['n_sv']} SVs"
            L.append(
                f"| {m} | {v['acc']:.2f} | {v['wall_s']:.2f} | {v['cpu_s']:.2f} | "
                f"{v['peak_mib']:.0f} | {v.get('model_mib', float('nan')):.2f} | {note} |"
            )
        L.append("")
    if results.get("budget_sweep"):
        L += _budget_report(results["budget_sweep"])
    with open(os.path.join(out, "svm_scale.md"), "w") as fh:
        fh.write("\n".join(L))
    if names:
        cols = min(4, len(names))
        rows = (len(names) + cols - 1) // cols
        fig, axes = plt.subplots(rows, cols, figsize=(4 * cols, 3.4 * rows), squeeze=False)
        for ax, name in zip(axes.ravel(), names):
            r = results["sections"][name]
            for m in METHODS:
                if m in r:
                    ax.scatter(r[m]["wall_s"], r[m]["acc"], label=m)
            ax.set_xscale("log")
            ax.set_title(name)
            ax.set_xlabel("fit wall s")
            ax.set_ylabel("test accuracy %")
        for ax in axes.ravel()[len(names) :]:
            ax.axis("off")
        axes.ravel()[0].legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(os.path.join(out, "svm_scale.png"), dpi=110)
        plt.close(fig)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data-dir", default=os.path.join(ROOT, "..", "shared", "datasets"))
    p.add_argument("--out", default=os.path.join(ROOT, "benchmarks", "results"))
    p.add_argument("--quick", action="store_true", help="small data, for checking the script")
    p.add_argument("--runs", type=int, default=1, help="seeds per method")
    p.add_argument("--sections", default="shared,checkerboard,waveform")
    p.add_argument("--checkerboard-rows", type=int, default=10**6, help="training rows")
    p.add_argument("--waveform-rows", type=int, default=100000, help="training rows")
    p.add_argument("--store-dir", default="/tmp/dkernel-bench", help="checkerboard10m's store")
    p.add_argument("--report", action="store_true", help="only rewrite svm_scale.md and .png")
    p.add_argument("--budget-sweep", default="", help="shared sets for the budget sweep")
    p.add_argument("--budgets", default="500,1000,2000", help="budgets of the sweep")
    args = p.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "svm_scale.json")
    results: dict = {}
    if os.path.exists(path):
        with open(path) as fh:
            results = json.load(fh)
    if args.budget_sweep:
        cmd = "python " + " ".join(["benchmarks/svm_scale.py", *sys.argv[1:]])
        results["commands"] = [*results.get("commands", []), cmd]
        budgets = [int(b) for b in args.budgets.split(",")]
        for name in args.budget_sweep.split(","):
            if name not in SHARED:
                p.error(f"--budget-sweep takes shared sets ({', '.join(SHARED)}), got {name!r}")
            results.setdefault("budget_sweep", {})[name] = run_budget_sweep(name, budgets, args)
            with open(path, "w") as fh:
                json.dump(results, fh, indent=1)
    elif not args.report:
        wanted: list[str] = []
        for s in args.sections.split(","):
            for name in ALIASES.get(s, (s,)):
                if name not in SECTIONS:
                    p.error(f"unknown section {name!r}; choose from {', '.join(SECTIONS)}")
                wanted.append(name)
        cmd = "python " + " ".join(["benchmarks/svm_scale.py", *sys.argv[1:]])
        results["commands"] = [*results.get("commands", []), cmd]
        results["machine"] = (
            f"{platform.machine()}, {os.cpu_count()} CPUs, {platform.python_version()}"
        )
        results.setdefault("sections", {})
        for name in wanted:
            run = run_large if name in LARGE else run_section
            results["sections"][name] = run(name, args)
            with open(path, "w") as fh:
                json.dump(results, fh, indent=1)
    report(results, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
