"""``dkernel demo``: the main job on the embedded default, one step per library feature.

Each step is a function ``step(ctx) -> dict`` that prints its own short lines and returns
its numbers for the JSON summary. Algorithm modules add their steps to :data:`STEPS`.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .._validation import DKernelError
from ..data import make_checkerboard, sample_rows
from ..kernels import estimate_gamma, kernel_matrix, pairwise_kernels
from ..runtime import worker_addresses
from ._common import check_output_file, cluster_session, emit_json, local_path


@dataclass
class DemoContext:
    client: Any
    workdir: str
    n_rows: int
    seed: int
    stores: dict[str, Any] = field(default_factory=dict)

    def say(self, text: str) -> None:
        print(f"  {text}", flush=True)


def step_data(ctx: DemoContext) -> dict:
    """Write a synthetic set to zarr chunk by chunk; sample seeded batches on the cluster."""

    t0 = time.perf_counter()
    ds = make_checkerboard(
        ctx.n_rows,
        random_state=ctx.seed,
        overwrite=True,
        store=os.path.join(ctx.workdir, "checkerboard.zarr"),
        chunk_rows=max(1, ctx.n_rows // 16),
    )
    write_s = time.perf_counter() - t0
    ctx.stores["checkerboard"] = ds
    ctx.say(
        f"wrote {ds.n_samples:,} x {ds.n_features} checkerboard to {ds.path} "
        f"({ds.X.numblocks[0]} chunks) in {write_s:.2f} s"
    )
    X = ds.X.persist()
    batches, size = 20, 1024
    sample_rows(X, size, random_state=ctx.seed)  # warm-up: workers import dkernel once
    t0 = time.perf_counter()
    first = sample_rows(X, size, random_state=ctx.seed)
    for i in range(1, batches):
        sample_rows(X, size, random_state=ctx.seed + i)
    batch_s = (time.perf_counter() - t0) / batches
    again = sample_rows(ds.X.rechunk((ctx.n_rows // 5 + 1, 2)), size, random_state=ctx.seed)
    same = bool(np.array_equal(first, again))
    ctx.say(
        f"{batches} seeded batches of {size} rows: {1e3 * batch_s:.1f} ms/batch "
        f"from persisted chunks; same rows under another chunking: {same}"
    )
    return {
        "rows": ds.n_samples,
        "write_s": write_s,
        "batch_ms": 1e3 * batch_s,
        "reproducible_across_chunking": same,
    }


def step_kernels(ctx: DemoContext) -> dict:
    """RBF kernel blocks: local numba+BLAS throughput, and lazy blocks on the cluster."""

    ds = ctx.stores["checkerboard"]
    gamma = estimate_gamma(ds.X, random_state=ctx.seed)
    A = np.ascontiguousarray(ds.X[:4096].compute())
    pairwise_kernels(A[:64], A[:64], gamma=gamma)  # compile once
    t0 = time.perf_counter()
    pairwise_kernels(A, A, gamma=gamma)
    local_s = time.perf_counter() - t0
    m = min(ds.n_samples, 32768)
    K = kernel_matrix(ds.X[:m].rechunk((4096, -1)), ds.X[:8192], gamma=gamma)
    t0 = time.perf_counter()
    row_sums = K.sum(axis=1).compute()
    dist_s = time.perf_counter() - t0
    evals = float(m) * min(ds.n_samples, 8192)
    ctx.say(f"median-heuristic gamma = {gamma:.3g}")
    ctx.say(f"local 4096 x 4096 RBF block: {4096 * 4096 / local_s / 1e6:.0f} M kernel values/s")
    ctx.say(
        f"lazy {m:,} x 8,192 kernel matrix as {K.npartitions} blocks on the cluster: "
        f"{evals / dist_s / 1e6:.0f} M values/s (never held whole; "
        f"row-sum mean {row_sums.mean():.1f})"
    )
    return {
        "gamma": gamma,
        "local_mvals_per_s": 4096 * 4096 / local_s / 1e6,
        "cluster_mvals_per_s": evals / dist_s / 1e6,
        "blocks": int(K.npartitions),
    }


def _numba_cached() -> bool:
    """Whether this Python has compiled dkernel's SGD loop before (numba's on-disk cache,
    beside the modules or under ``NUMBA_CACHE_DIR``)."""
    import glob
    import sys

    tag = f"py{sys.version_info.major}{sys.version_info.minor}"
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    roots = [os.path.join(here, "svm", "__pycache__")]
    if os.environ.get("NUMBA_CACHE_DIR"):
        roots.append(os.path.join(os.environ["NUMBA_CACHE_DIR"], "**"))
    return any(
        glob.glob(os.path.join(r, f"_budget.sgd_chunk-*.{tag}.nbi"), recursive=True) for r in roots
    )


#: The warm-up's parts, the longest to compile first (a fresh machine: the SGD loop takes
#: most of the time).
_WARM_PARTS = ("svm", "coreset", "kmeans", "kernels")


def _warm_up(parts: tuple[str, ...] = _WARM_PARTS) -> None:
    """Run the numba kernels of the demo's ``parts`` once on a few rows (compiles them, or
    loads them from numba's cache)."""
    from ..cluster import MiniBatchKernelKMeans
    from ..coreset import svm_coreset
    from ..svm import BudgetedSVC

    X, y = make_checkerboard(1500, random_state=0)
    if "kernels" in parts:
        pairwise_kernels(X[:64], X[:64], gamma=1.0)
    if "kmeans" in parts:
        MiniBatchKernelKMeans(3, batch_size=64, max_iter=3, random_state=0).fit(X)
    if "svm" in parts:
        BudgetedSVC(budget=20, max_iter=1, random_state=0).fit(X, y)
    if "coreset" in parts:
        svm_coreset(X, y, 100, random_state=0)


def compile_kernels(client) -> float:
    """The one-time numba compilation, said and timed apart from the steps. Not cached
    yet: the parts are compiled side by side on the workers (numba caches the machine code
    on disk), then every process loads them all."""
    cached = _numba_cached()
    what = (
        "loading numba kernels from the cache"
        if cached
        else "compiling numba kernels, once per machine: the SGD loop, kernel blocks, "
        "k-means and coreset kernels (later runs load them from the cache)"
    )
    print(f"{what} ...", flush=True)
    t0 = time.perf_counter()
    workers = worker_addresses(client) if client is not None else []
    if not cached and len(workers) > 1:
        shares = [_WARM_PARTS[i :: len(workers)] for i in range(len(workers))]
        client.gather(
            [
                client.submit(_warm_up, part, workers=[w], pure=False)
                for w, part in zip(workers, shares)
                if part
            ]
        )
    futures = [client.submit(_warm_up, workers=[w], pure=False) for w in workers]
    _warm_up()
    if futures:
        client.gather(futures)
    seconds = time.perf_counter() - t0
    print(f"  numba kernels ready in {seconds:.1f} s (not counted in the steps below)", flush=True)
    return seconds


from ._coreset import step_coreset as _step_coreset  # noqa: E402
from ._kmeans import step_kmeans as _step_kmeans  # noqa: E402
from ._svm import step_svm as _step_svm  # noqa: E402

#: (title, step) in the order the demo runs them.
STEPS: list[tuple[str, Callable[[DemoContext], dict]]] = [
    ("data layer: zarr store + seeded batches", step_data),
    ("kernel blocks", step_kernels),
    ("kernel k-means: rings, k-means vs mini-batch kernel k-means", _step_kmeans),
    ("budgeted SVM: BSGD merge streamed from zarr", _step_svm),
    ("SVM coreset: two-pass sensitivity sampling across the workers vs uniform", _step_coreset),
]


def register(sub: argparse._SubParsersAction) -> None:
    steps = "; ".join(f"{i} {title}" for i, (title, _) in enumerate(STEPS, start=1))
    p = sub.add_parser(
        "demo",
        help="run every dkernel feature on the embedded default",
        description=f"Run dkernel's features one step each, on synthetic data: {steps}.",
    )
    p.add_argument("--rows", type=int, default=1_000_000, help="rows of the synthetic sets")
    p.add_argument("--workdir", default="demo-data", help="where the demo's zarr stores go")
    p.add_argument("--seed", type=int, default=0, help="random seed")
    p.add_argument("--json", default=None, help="also write the summary to this file")
    p.add_argument(
        "--only",
        default=None,
        help=f"comma-separated step numbers to run (step 1 always runs): {steps}",
    )
    p.set_defaults(func=run_demo)


def _parse_only(text: str, n_steps: int) -> set[int]:
    """``--only 1,3`` -> {1, 3}; step numbers are 1-based (step 1 writes the data, always runs)."""

    try:
        wanted = {int(s) for s in text.split(",") if s.strip()}
    except ValueError:
        raise DKernelError(f"--only takes comma-separated step numbers, got {text!r}") from None
    bad = sorted(i for i in wanted if not 1 <= i <= n_steps)
    if not wanted or bad:
        raise DKernelError(f"--only: steps are numbered 1 to {n_steps}, got {text!r}")
    return wanted


def run_demo(args) -> int:

    if args.rows < 10_000:
        raise DKernelError(f"--rows must be at least 10000, got {args.rows}")
    wanted = None if not args.only else _parse_only(args.only, len(STEPS))
    json_path = check_output_file(args.json, "summary file")
    workdir = local_path(args.workdir)
    if not os.path.isdir(os.path.dirname(workdir)):
        raise DKernelError(f"folder {os.path.dirname(workdir)!r} for --workdir does not exist")
    summary: dict[str, Any] = {}
    t_all = time.perf_counter()
    with cluster_session(args.cluster) as client:
        print(f"dkernel demo on {client}", flush=True)
        os.makedirs(workdir, exist_ok=True)  # only once the options and cluster are good
        ctx = DemoContext(client=client, workdir=workdir, n_rows=args.rows, seed=args.seed)
        summary["compile_seconds"] = compile_kernels(client)
        t_steps = time.perf_counter()
        for i, (title, step) in enumerate(STEPS, start=1):
            if wanted is not None and i not in wanted and i != 1:
                continue
            print(f"[{i}/{len(STEPS)}] {title}", flush=True)
            t0 = time.perf_counter()
            summary[step.__name__.removeprefix("step_")] = step(ctx)
            summary[step.__name__.removeprefix("step_")]["seconds"] = time.perf_counter() - t0
        summary["steps_seconds"] = time.perf_counter() - t_steps
    summary["total_seconds"] = time.perf_counter() - t_all
    print(
        f"done in {summary['total_seconds']:.1f} s: the steps {summary['steps_seconds']:.1f} s, "
        f"numba kernels {summary['compile_seconds']:.1f} s"
    )
    if args.json:
        emit_json(summary, json_path)
    return 0
