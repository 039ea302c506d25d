"""BudgetedSVC defaults on four shared datasets: raw vs standardised, gamma 1/d vs median.

Run: .venv/bin/python benchmarks/bsgd_defaults.py [names]; results in benchmarks/results/bsgd_defaults.md
"""

import sys
import time

import numpy as np

from dkernel.kernels import estimate_gamma
from dkernel.svm import BudgetedSVC


def load(name):
    d = np.load(f"/work/shared/datasets/{name}.npz", allow_pickle=False)
    X, y = d["X"].astype(np.float64), d["y"]
    if "X_test" in d.files:
        Xt, yt = d["X_test"].astype(np.float64), d["y_test"]
    else:
        p = np.random.RandomState(0).permutation(len(X))
        k = int(0.8 * len(X))
        X, y, Xt, yt = X[p[:k]], y[p[:k]], X[p[k:]], y[p[k:]]
    r = np.random.RandomState(1)
    if len(X) > 20000:
        i = r.choice(len(X), 20000, replace=False)
        X, y = X[i], y[i]
    if len(Xt) > 10000:
        i = r.choice(len(Xt), 10000, replace=False)
        Xt, yt = Xt[i], yt[i]
    return X, y, Xt, yt


def msd(X):
    i = np.random.RandomState(0).choice(len(X), min(1000, len(X)), replace=False)
    S = X[i]
    sq = (S * S).sum(1)
    D = sq[:, None] + sq[None] - 2 * S @ S.T
    return float(np.median(D[np.triu_indices(len(S), 1)]))


if __name__ == "__main__":
    names = sys.argv[1:] or ["ijcnn1", "a9a", "letter", "usps"]
    for name in names:
        X, y, Xt, yt = load(name)
        _, cnt = np.unique(yt, return_counts=True)
        print(
            f"{name}: n={len(X)} d={X.shape[1]} test={len(Xt)} majority={cnt.max() / cnt.sum():.4f}",
            flush=True,
        )
        mu, sd = X.mean(0), X.std(0)
        sd[sd == 0] = 1
        for scaled in (False, True):
            A, At = ((X - mu) / sd, (Xt - mu) / sd) if scaled else (X, Xt)
            m = msd(A)
            for rule in ("inverse_dim", "median"):
                g = 1.0 / A.shape[1] if rule == "inverse_dim" else estimate_gamma(A, random_state=0)
                t0 = time.perf_counter()
                clf = BudgetedSVC(gamma=g, random_state=0, distributed=False).fit(A, y)
                acc = clf.score(At, yt)
                print(
                    f"  scaled={scaled!s:5} gamma={rule:11} g={g:.4g} g*msd={g * m:.3g} acc={acc:.4f} ({time.perf_counter() - t0:.1f}s)",
                    flush=True,
                )
