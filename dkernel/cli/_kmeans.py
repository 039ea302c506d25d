"""``dkernel kmeans``: mini-batch kernel k-means on a store, labels written back atomically.

Also the demo step :func:`step_kmeans` (rings: k-means vs mini-batch kernel k-means).
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

import numpy as np

from .._validation import DKernelError
from ._common import (
    check_new_array,
    check_output_file,
    check_store_writable,
    cluster_session,
    coreset_record,
    emit_json,
    local_path,
    weights_note,
)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "kmeans",
        help="mini-batch kernel k-means on a store; labels back into it",
        description="Cluster a store's X with mini-batch kernel k-means (or --full-batch "
        "KernelKMeans) on the cluster; write the labels into the store as array "
        "--labels-name and print a JSON summary (ARI when the store has y).",
    )
    p.add_argument(
        "store", help="dataset store (path or URL) written by `dkernel ingest` or a generator"
    )
    p.add_argument("--n-clusters", type=int, required=True, help="number of clusters k")
    p.add_argument("--batch-size", type=int, default=256, help="rows per mini-batch")
    p.add_argument("--tau", default="50", help="truncation (int) or 'none' (default 50)")
    p.add_argument("--max-iter", type=int, default=200, help="mini-batch iterations")
    p.add_argument(
        "--gamma",
        default="scale",
        help="kernel width: a number, 'scale' (1/(n_features*X.var()), the estimators' "
        "default), 'median' (heuristic) or 'select' (label-free selection, "
        "dkernel.cluster.select_gamma)",
    )
    p.add_argument("--kernel", default="rbf", help="rbf, laplacian, polynomial, ... (default rbf)")
    p.add_argument(
        "--learning-rate",
        default="beta",
        help="'beta', 'sklearn' or a float in (0, 1] (default beta)",
    )
    p.add_argument(
        "--full-batch",
        action="store_true",
        help="use full-batch KernelKMeans instead (O(n^2) kernel per iteration)",
    )
    p.add_argument("--seed", type=int, default=0, help="random seed")
    p.add_argument(
        "--labels-name", default="labels", help="name of the labels array (default labels)"
    )
    p.add_argument(
        "--overwrite", action="store_true", help="replace an existing array of that name"
    )
    p.add_argument("--summary", default=None, help="also write the JSON summary to this file")
    p.add_argument(
        "--checkpoint",
        default=None,
        metavar="PATH",
        help="save the fit's state to PATH (.npz) every --checkpoint-every iterations; "
        "the same command run again resumes from it (removed when the fit ends)",
    )
    p.add_argument("--checkpoint-every", type=int, default=10, help="iterations (default 10)")
    p.set_defaults(func=run_kmeans)


def _parse_tau(text: str) -> int | None:
    if text.lower() == "none":
        return None
    try:
        return int(text)
    except ValueError:
        raise DKernelError(f"--tau must be an integer or 'none', got {text!r}") from None


def _parse_rate(text: str) -> str | float:
    if text in ("beta", "sklearn"):
        return text
    try:
        return float(text)
    except ValueError:
        raise DKernelError(
            f"--learning-rate must be 'beta', 'sklearn' or a number, got {text!r}"
        ) from None


def _parse_gamma(text: str) -> str | float:
    if text in ("scale", "median", "select"):
        return text
    try:
        return float(text)
    except ValueError:
        raise DKernelError(
            f"--gamma must be a number, 'scale', 'median' or 'select', got {text!r}"
        ) from None


def _parse_flags(args) -> tuple[int | None, str | float, str | float]:
    """``tau``, learning rate and gamma option, every flag checked that needs no data."""
    from ..data import check_array_name
    from ..kernels import kernel_info, width_kernels

    check_array_name(args.labels_name, what="--labels-name")
    tau = _parse_tau(args.tau)
    rate = _parse_rate(args.learning_rate)
    gamma_opt = _parse_gamma(args.gamma)
    for flag, value in (("--batch-size", args.batch_size), ("--max-iter", args.max_iter)):
        if value < 1:
            raise DKernelError(f"{flag} must be >= 1, got {value}")
    if tau is not None and tau < 1:
        raise DKernelError(f"--tau must be >= 1 or 'none', got {tau}")
    if gamma_opt in ("median", "select") and kernel_info(args.kernel).distance is None:
        raise DKernelError(f"--gamma {gamma_opt} needs a --kernel of {width_kernels()}")
    if isinstance(gamma_opt, float) and not (np.isfinite(gamma_opt) and gamma_opt > 0):
        raise DKernelError(f"--gamma must be > 0, 'scale', 'median' or 'select', got {gamma_opt}")
    return tau, rate, gamma_opt


def _build_model(args, ds, tau, rate, gamma_opt):
    """The estimator the arguments describe, its parameters checked (no cluster yet)."""
    from ..cluster import KernelKMeans, MiniBatchKernelKMeans

    if not 1 <= args.n_clusters <= ds.n_samples:
        raise DKernelError(f"--n-clusters must be in [1, {ds.n_samples}], got {args.n_clusters}")
    gamma = gamma_opt if isinstance(gamma_opt, float) else None
    common: dict[str, Any] = dict(
        kernel=args.kernel, gamma=gamma, max_iter=args.max_iter, random_state=args.seed
    )
    if args.full_batch:
        if args.checkpoint is not None:
            raise DKernelError("--checkpoint works with the mini-batch fit, not --full-batch")
        model: Any = KernelKMeans(args.n_clusters, **common)
    else:
        model = MiniBatchKernelKMeans(
            args.n_clusters,
            batch_size=args.batch_size,
            tau=tau,
            learning_rate=rate,
            checkpoint=args.checkpoint,
            checkpoint_every=args.checkpoint_every,
            **common,
        )
    model.check_params()  # kernel names and the rest, before a cluster starts
    return model


def _class_codes(yb: np.ndarray, classes: np.ndarray) -> np.ndarray:
    return np.searchsorted(classes, yb).astype(np.int64)


def _fit_weighted(model, ds, X) -> dict[str, Any]:
    """Fit ``model`` on X: with the store's ``weight`` array when it is a coreset's (its rows
    stand for the source's with their weights). The summary's entry for the weights."""
    meta = coreset_record(ds)
    if meta is None:
        model.fit(X)
        return {"sample_weight": None}
    weights = weights_note(ds, meta)
    model.fit(X, sample_weight=np.asarray(ds.read("weight"), dtype=np.float64))
    return weights


def _ari(y, labels, k: int) -> float:
    """The adjusted Rand index of ``labels`` against the store's ``y`` from their
    contingency table, counted on the workers (k x classes numbers come back, not n rows)."""
    import dask.array as da
    from scipy.special import comb

    classes = np.unique(da.unique(y).compute())
    codes = y.map_blocks(_class_codes, classes, dtype=np.int64)
    labels = da.asarray(labels).rechunk((y.chunks[0],))
    table = da.bincount(codes * k + labels, minlength=len(classes) * k).compute()
    table = np.asarray(table).reshape(len(classes), k)
    pairs = comb(table, 2).sum()
    rows, cols = comb(table.sum(axis=1), 2).sum(), comb(table.sum(axis=0), 2).sum()
    expected = rows * cols / comb(table.sum(), 2)
    top = (rows + cols) / 2
    return 1.0 if top == expected else float((pairs - expected) / (top - expected))


def run_kmeans(args) -> int:
    from ..cluster import select_gamma
    from ..data import open_dataset, write_array
    from ..kernels import estimate_gamma

    tau, rate, gamma_opt = _parse_flags(args)
    summary_path = check_output_file(args.summary, "summary file")
    if args.checkpoint is not None:
        args.checkpoint = check_output_file(args.checkpoint, "checkpoint", remote=True)
    ds = open_dataset(local_path(args.store))
    check_new_array(ds, args.labels_name, args.overwrite)
    check_store_writable(ds.path)
    model = _build_model(args, ds, tau, rate, gamma_opt)
    with cluster_session(args.cluster):
        t0 = time.perf_counter()
        # the store's row source, not a persisted copy: the fit reads what it needs (its
        # batches, a sample, the labels pass) and the store may exceed the workers' memory
        X = ds.X
        if gamma_opt == "select":
            model.set_params(
                gamma=select_gamma(X, args.n_clusters, kernel=args.kernel, random_state=args.seed)
            )
        elif gamma_opt == "median":
            model.set_params(gamma=estimate_gamma(X, kernel=args.kernel, random_state=args.seed))
        weights = _fit_weighted(model, ds, X)
        fit_s = time.perf_counter() - t0
        fitted = model.summary()  # the model's own numbers, as its summary() gives them
        summary: dict[str, Any] = {
            "store": ds.path,
            "algorithm": fitted.pop("estimator"),
            "n_samples": ds.n_samples,
            **weights,
            **fitted,
            "batch_size": None if args.full_batch else args.batch_size,
            "tau": None if args.full_batch else tau,
            "learning_rate": None if args.full_batch else rate,
            "time_s": fit_s,
            "labels_array": args.labels_name,
        }
        if ds.y is not None:
            summary["ari"] = _ari(ds.y, model.labels_, args.n_clusters)
        # the labels stay on the workers (a dask array): they write them, chunk by chunk
        write_array(
            ds,
            args.labels_name,
            model.labels_,
            attrs={
                "algorithm": summary["algorithm"],
                "n_clusters": args.n_clusters,
                "gamma": float(model.gamma_),
                "seed": args.seed,
                "inertia": float(model.inertia_),
            },
            overwrite=args.overwrite,
        )
    emit_json(summary, summary_path)
    return 0


def step_kmeans(ctx) -> dict:
    """Blob-in-ring data in a zarr store: k-means fails, mini-batch kernel k-means succeeds."""
    from sklearn.cluster import KMeans
    from sklearn.metrics import adjusted_rand_score

    from ..cluster import MiniBatchKernelKMeans
    from ..data import make_rings
    from ..kernels import estimate_gamma

    n = int(min(max(ctx.n_rows // 20, 10_000), 50_000))
    ds = make_rings(
        n,
        n_rings=2,
        inner_radius=0.5,
        spacing=2.0,
        noise=0.15,
        random_state=ctx.seed,
        overwrite=True,
        store=os.path.join(ctx.workdir, "rings.zarr"),
        chunk_rows=max(1, n // 8),
    )
    y = np.asarray(ds.y.compute())
    X = ds.X.persist()
    t0 = time.perf_counter()
    km = KMeans(2, n_init=3, random_state=ctx.seed).fit(np.asarray(X.compute()))
    km_s = time.perf_counter() - t0
    ari_km = float(adjusted_rand_score(y, km.labels_))
    gamma = estimate_gamma(X, random_state=ctx.seed)
    t0 = time.perf_counter()
    model = MiniBatchKernelKMeans(2, gamma=gamma, random_state=ctx.seed).fit(X)
    kk_s = time.perf_counter() - t0
    ari_kk = float(adjusted_rand_score(y, model.labels_))
    ctx.say(f"{n:,} points: a compact ring inside a wide one (zarr, {ds.X.numblocks[0]} chunks)")
    ctx.say(f"scikit-learn KMeans:            ARI {ari_km:.3f} ({km_s:.1f} s)")
    ctx.say(
        f"MiniBatchKernelKMeans (rbf, median gamma={gamma:.3g}, b={model.batch_size}, "
        f"tau={model.tau}, {model.n_iter_} iterations): "
        f"ARI {ari_kk:.3f} ({kk_s:.1f} s, {model.n_kernel_evals_ / 1e6:.0f} M kernel values, "
        f"labels in one blockwise pass)"
    )
    return {
        "rows": n,
        "ari_kmeans": ari_km,
        "ari_kernel_kmeans": ari_kk,
        "kmeans_s": km_s,
        "kernel_kmeans_s": kk_s,
        "inertia": model.inertia_,
    }
