"""``dkernel coreset`` and the demo's coreset step.

The algorithm packages are imported when a command runs, not with the module: the parser
imports every command module, and ``dkernel --help`` should not pay for loading the numba
kernels of ``dkernel.cluster`` and ``dkernel.svm``.
"""

from __future__ import annotations

import argparse
import logging
import os
import time
from typing import Any

import numpy as np

from .._validation import DKernelError, check_scalar
from ._common import (
    check_output_file,
    check_output_store,
    cluster_session,
    emit_json,
    local_path,
    store_exists,
)

logger = logging.getLogger(__name__)

_METHODS = ("two-pass", "merge-reduce", "uniform")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "coreset",
        help="SVM coreset of a store, written as a new store",
        description="Build a weighted SVM coreset of a labelled store on the cluster (two-pass "
        "sensitivity sampling, merge-reduce, or uniform; more than two classes: one-vs-rest, "
        "--size draws per class) and write it as a new store with X, y and weight.",
    )
    p.add_argument("store", help="input dataset store with labels: path or URL")
    p.add_argument("out_store", help="output zarr store: X, y and weight (and sensitivity)")
    p.add_argument("--size", type=int, required=True, help="coreset draws m")
    p.add_argument("--method", choices=_METHODS, default="two-pass", help="construction")
    p.add_argument("--C", type=float, default=1.0, help="hinge weight C of the SVM cost")
    p.add_argument(
        "--beta", type=float, default=0.3, help="mixture weight of uniform sampling in [0, 1]"
    )
    p.add_argument("--split-every", type=int, default=2, help="merge-reduce fan-in")
    p.add_argument("--leaf-size", type=int, default=None, help="rows per merge-reduce leaf")
    p.add_argument("--seed", type=int, default=0, help="random seed")
    p.add_argument("--overwrite", action="store_true", help="replace an existing output store")
    p.add_argument("--summary", default=None, help="also write the JSON summary here")
    p.set_defaults(func=_coreset)


def build(
    ds,
    *,
    size: int,
    method: str,
    C: float,
    beta: float,
    split_every: int,
    leaf_size: int | None,
    seed: int,
):
    from ..coreset import distributed_coreset, uniform_store_coreset

    if method == "uniform":
        return uniform_store_coreset(ds, size, random_state=seed)
    return distributed_coreset(
        ds,
        None,
        size,
        method=method,
        C=C,
        beta=beta,
        split_every=split_every,
        leaf_size=leaf_size,
        multiclass="ovr",
        random_state=seed,
    )


def _check_args(args, ds) -> None:
    """Every argument checked before a cluster starts."""
    if ds.y is None:
        raise DKernelError(f"store {ds.path!r} has no labels; an SVM coreset needs y")
    out = check_output_store(args.out_store, "output store", inputs=(ds.path,))
    if store_exists(out) and not args.overwrite:
        raise DKernelError(f"{args.out_store!r} already exists; pass --overwrite to replace it")
    args.summary = check_output_file(args.summary, "summary file")
    if args.size < 1 or args.size > ds.n_samples:
        raise DKernelError(f"--size must be in [1, {ds.n_samples}], got {args.size}")
    check_scalar(args.C, "--C", low=0.0, low_inclusive=False)
    check_scalar(args.beta, "--beta", low=0.0, high=1.0)
    check_scalar(args.split_every, "--split-every", kind=int, low=2)
    check_scalar(args.leaf_size, "--leaf-size", kind=int, low=args.size, allow_none=True)
    rows = max(ds.X.chunks[0])
    merge_reduce = args.method == "merge-reduce" and args.leaf_size is None
    if merge_reduce and args.size < ds.n_samples and rows < args.size:
        raise DKernelError(
            f"the store's chunks hold {rows} rows, fewer than --size {args.size}; "
            "pass --leaf-size >= --size"
        )


def _coreset(args) -> int:
    from ..coreset import write_coreset
    from ..data import open_dataset

    ds = open_dataset(local_path(args.store))
    _check_args(args, ds)
    with cluster_session(args.cluster):
        t0 = time.perf_counter()
        c = build(
            ds,
            size=args.size,
            method=args.method,
            C=args.C,
            beta=args.beta,
            split_every=args.split_every,
            leaf_size=args.leaf_size,
            seed=args.seed,
        )
        seconds = time.perf_counter() - t0
    source = f"dkernel coreset {args.method} of {ds.path}"
    out = local_path(args.out_store)
    write_coreset(c, out, source=source, overwrite=args.overwrite)
    if isinstance(c, dict):
        emit_json(ovr_summary(c, ds, out, seconds), args.summary)
        return 0
    emit_json(summary(c, ds, out, seconds), args.summary)
    return 0


def ovr_summary(cores: dict, ds, out: str, seconds: float) -> dict[str, Any]:
    per_class = {str(label): summary(c, ds, out, seconds) for label, c in cores.items()}
    keep = ("rows", "total_weight", "total_sensitivity", "t_over_n", "opt_lower_bound")
    first = next(iter(cores.values()))
    return {
        "store": ds.path,
        "out_store": out,
        "method": first.info.get("method"),
        "multiclass": "ovr",
        "n_samples": int(first.source_size),
        "n_features": int(first.X.shape[1]),
        "rows": sum(len(c) for c in cores.values()),
        "C": float(first.C),
        "classes": list(cores),
        "per_class": {k: {f: v[f] for f in keep} for k, v in per_class.items()},
        "seconds": seconds,
    }


def summary(c, ds, out: str, seconds: float) -> dict[str, Any]:
    return {
        "store": ds.path,
        "out_store": os.path.abspath(out),
        "method": c.info.get("method"),
        "n_samples": int(c.source_size),
        "n_features": int(c.X.shape[1]),
        "rows": len(c),
        "total_weight": float(c.weight.sum()),
        "total_sensitivity": float(c.total_sensitivity),
        "t_over_n": float(c.total_sensitivity) / max(1, c.source_size),
        "C": float(c.C),
        "classes": list(c.classes),
        "opt_lower_bound": c.info.get("opt"),
        "seconds": seconds,
    }


def step_coreset(ctx) -> dict:
    """Coreset of a 10^6-row non-separable store across the workers vs a uniform sample."""
    import dask

    from ..coreset import regulariser, uniform_store_coreset

    m = 1000
    ds = _demo_store(ctx)
    X, y = dask.persist(ds.X, ds.y)
    core, build_s = _demo_two_pass(ctx, X, y, m)
    unif = uniform_store_coreset(ds, m, random_state=ctx.seed)
    opt = float(core.info["opt"])
    ws = {"coreset": _fit_linear(core), "uniform": _fit_linear(unif)}
    tot = _full_data_terms(ctx, X, y, list(ws.values()))
    out: dict[str, Any] = {
        "m": m,
        "rows": ds.n_samples,
        "build_s": build_s,
        "opt_lower_bound": opt,
        "t_over_n": core.total_sensitivity / ds.n_samples,
    }
    ctx.say(
        f"two-pass coreset of {m} draws ({len(core)} rows) across the workers in "
        f"{build_s:.1f} s; total sensitivity t/n = {out['t_over_n']:.4f}"
    )
    for i, (name, w) in enumerate(ws.items()):
        F = regulariser(w) + core.C * tot[i, 0]
        acc = tot[i, 1] / ds.n_samples
        out[name] = {"objective_over_opt_bound": F / opt, "accuracy": acc}
        ctx.say(
            f"linear SVM on the {name:8s}: full-data objective / certified optimum bound "
            f"= {F / opt:.4f}, accuracy {acc:.4f}"
        )
    return out


def _demo_store(ctx):
    """The demo's overlapping-classes store (``make_pathological``), in eight chunks."""
    from ..data import make_pathological

    t0 = time.perf_counter()
    ds = make_pathological(
        ctx.n_rows,
        separation=1.5,
        spread=1.0,
        random_state=ctx.seed,
        store=os.path.join(ctx.workdir, "pathological.zarr"),
        chunk_rows=max(1, ctx.n_rows // 8),
        overwrite=True,
    )
    write_s = time.perf_counter() - t0
    ctx.say(
        f"wrote {ds.n_samples:,} x {ds.n_features} overlapping-classes set "
        f"(make_pathological) in {write_s:.1f} s"
    )
    return ds


def _demo_two_pass(ctx, X, y, m: int):
    """The two-pass coreset of m draws on the demo's client, and its build time."""
    import dask

    from ..coreset import distributed_coreset

    t0 = time.perf_counter()
    with dask.config.set(scheduler=ctx.client):
        core = distributed_coreset(
            X, y, m, method="two-pass", classes=(-1, 1), random_state=ctx.seed
        )
    return core, time.perf_counter() - t0


def _fit_linear(c) -> np.ndarray:
    """A linear SVM (w, bias last) trained on a coreset with the certified coarse solver."""
    from ..coreset import coarse_svm, with_bias

    return coarse_svm(with_bias(c.X), c.signs, c.weight, c.C, tol=1e-3, max_iter=300).w


def _block_terms(Xb, yb, ws) -> np.ndarray:
    """For each w: the hinge sum and the correctly classified rows of one block."""
    from ..coreset import decision, hinge, signs

    ys = signs(yb, 1)
    rows = []
    for w in ws:
        scores = decision(Xb, w)
        rows.append([hinge(scores, ys).sum(), float((np.sign(scores) == ys).sum())])
    return np.array(rows)


def _full_data_terms(ctx, X, y, ws) -> np.ndarray:
    """:func:`_block_terms` summed over the blocks of the whole set, on the demo's client."""
    import dask

    parts = [
        dask.delayed(_block_terms)(xb, yb, ws)
        for xb, yb in zip(X.to_delayed().ravel(), y.to_delayed().ravel())
    ]
    with dask.config.set(scheduler=ctx.client):
        return np.sum(dask.compute(*parts), axis=0)
