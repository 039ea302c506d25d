"""Coresets of dask arrays and zarr stores: a two-pass build and a merge-and-reduce tree.

Both builds cut the rows into the same canonical leaves, fixed row ranges of ``leaf_size``
rows that depend on (n, m) only, never on the input's chunks; every random choice comes from
``SeedSequence([seed, start, stop, tag])`` of the node's row range; the coarse solver uses
no randomness and sums are reduced in a fixed order on the client. So a task recomputed
after a lost worker gives the identical coreset, and so does the same data chunked
differently.

Which build to use:

- ``"two-pass"`` (default): one resampling level, so the error of the single-machine
  coreset of the same size; a handful of round trips (a uniform sample, one blockwise pass
  for the certificate and the clustering, one for the sensitivity totals, one for the
  draws). Needs the whole array at once (persisted on the workers).
- ``"merge-reduce"``: a tree over the leaves (fan-in ``split_every``); no pass needs all the
  data at once, each node sees only its children's coresets, so it suits data larger than
  the cluster's memory and composes with streaming (:class:`StreamingCoreset`). Inner nodes
  keep ``m * 3 * levels`` draws so the error stays close to one level's. The tree is
  :func:`dkernel.runtime._tree.tree_reduce`, the package's one tree; a node's seed comes
  from its row range, derived from its (level, index). Every inner node re-solves and
  re-clusters the union of its children, so the tree does several times the two-pass
  build's work for about the same error (benchmarks/results/coreset.md measures both).
"""

from __future__ import annotations

import itertools
import logging
import numbers
import uuid
from functools import partial, reduce
from typing import Any, NamedTuple

import dask
import dask.array as da
import numpy as np
from dask import delayed
from dask.base import tokenize
from dask.callbacks import Callback

from .._base import read_classes, read_inputs
from .._validation import (
    DKernelError,
    check_scalar,
    is_dask_array,
    report_nonfinite,
)
from ..data import ALIGN_ROWS, ResidentRows, chunk_bounds, row_blocks
from ..kernels import ONE_BLAS_THREAD
from ..runtime import (
    Progress,
    TreeNode,
    accounting,
    distributed_client,
    phase,
    progress,
    progress_enabled,
    timer,
    tree_levels,
    tree_reduce,
)
from ._coreset import (
    BETA,
    LOSS_SHARE,
    Coreset,
    Mixture,
    _build,
    _check_m,
    _check_mixture,
    _draw,
    _exact,
    _mixture_q,
    _warn_vacuous,
    _with_labels,
    merge,
)
from ._numba import _bounds_from_geometry
from ._sensitivity import Geometry, _base_seed, _cluster_geometry, check_C
from ._solver import _dual_bound, _local_aggregates, coarse_svm
from ._svm_terms import (
    class_counts,
    hinge,
    part_costs,
    point_costs,
    regulariser,
    signs,
    with_bias,
)

logger = logging.getLogger(__name__)

_METHODS = ("two-pass", "merge-reduce")
#: Rows of the uniform sample the coarse solve of the two-pass build runs on.
_SAMPLE_ROWS = 20000
#: L-BFGS iterations at most of a block's certificate solve (warm-started at the sample's w).
_BLOCK_ITERS = 100
#: The sample solve's hinge part below this share of its cost marks (nearly) separable
#: classes: the cost is the regulariser's, the sensitivity bound is vacuous (see _two_pass).
_SEPARABLE_HINGE_SHARE = 0.25
#: Smallest default leaf (see default_leaf_size).
_MIN_LEAF = ALIGN_ROWS
#: Inner nodes of the tree keep m * _INNER_FACTOR * levels draws.
_INNER_FACTOR = 3
#: Seed tags of the node kinds (a node with one child has its child's row range).
_LEAF, _NODE, _SAMPLE, _BLOCKS = 0, 1, 2, 3


def _step(func, name: str):
    """``delayed(func)`` whose calls are keyed ``coreset-<name>-<token of the inputs>``: the
    step's name on the dashboard, and the same key for the same inputs (every step is a pure
    function of them)."""

    def call(*args):
        return delayed(func)(*args, dask_key_name=f"coreset-{name}-{tokenize(func, *args)}")

    return call


def _node_rng(seed: int, start: int, stop: int, tag: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence([seed, start, stop, tag]))


def default_leaf_size(n: int, m: int) -> int:
    """Rows per leaf by default: the power of two at or above max(16 m, 65536) (so the
    leaves of a store with default chunks are whole chunks), a function of (n, m) only."""
    rows = max(16 * m, _MIN_LEAF)
    return int(min(n, 1 << (int(rows) - 1).bit_length()))


def _leaves(a, leaf_size: int):
    """``a`` in blocks of ``leaf_size`` rows (:func:`~dkernel.data.row_blocks`): a store's
    row source is regrouped, not rechunked, so each leaf's task reads its chunks itself
    (each chunk once when the leaves are unions of chunks, as with the defaults)."""
    return row_blocks(a, leaf_size)


def _block(Xb, yb, pos, offset):
    """A block as (X1 float64 with bias column, signs), NaN/inf reported with global rows."""
    Xb = np.asarray(Xb)
    report_nonfinite(Xb, name="X", row_offset=offset)
    return with_bias(Xb), signs(yb, pos)


# ----------------------------------------------------------------------------- two-pass
def _pair(Xb, yb, start: int):
    """A block as it stays on its worker: its rows and labels as they were read."""
    return np.asarray(Xb), np.asarray(yb)


def _pick_pair(block, pos: np.ndarray):
    Xb, yb = block
    return Xb[pos], yb[pos]


def _block_sizes(blocks: ResidentRows) -> np.ndarray:
    return np.array([e - s for s, e in blocks.ranges])


class _TwoPassConfig(NamedTuple):
    """What every step of the two-pass build shares."""

    C: float
    k: int | None
    mix: Mixture
    seed: int
    pos: Any  # the label that plays +1
    tol: float
    U: float  # weight of the whole set (its rows: unit weights)


class SampleSolve(NamedTuple):
    """Step 1: the coarse solve on a uniform sample."""

    w: np.ndarray  # the coarse solution, bias last
    opt_est: float  # its cost: the estimate of opt the clustering picks k with
    separable: bool  # (nearly) separable classes: draw uniformly (see _sample_solve)


class BlockStats(NamedTuple):
    """Pass 1's summary of one block, sent to the client."""

    hinge_sum: float  # sum of hinge(p, w) at the sample's w
    aggregates: np.ndarray  # the dual pieces at w (see _solver._local_aggregates)
    class_counts: np.ndarray  # rows of each sign
    share: float  # the block's certified share of opt (see _block_geometry)


class BlockState(NamedTuple):
    """Pass 1's result of one block, persisted on its worker for the later passes."""

    stats: BlockStats
    geometry: Geometry | None  # None when separable (no clustering)
    hinge: np.ndarray  # hinge(p, w) of every row


class BlockGamma(NamedTuple):
    """Pass 2's result of one block: gamma(p) of every row and their sum."""

    gamma: np.ndarray
    total: float


class Certificate(NamedTuple):
    """The coarse solution's cost on the whole set and a certified lower bound of opt."""

    reg: float  # regulariser(w)
    upper: float  # F(P, w)
    lower: float  # <= min F(P, .)


class DrawTotals(NamedTuple):
    """The global totals that the restriction of q to one block needs."""

    t: float  # total sensitivity
    L: float  # F(P, w): the sum of the point costs
    U: float
    reg: float
    C: float


class BlockDraw(NamedTuple):
    """Pass 3's result of one block: its share of the global draw."""

    X: np.ndarray
    y: np.ndarray
    weight: np.ndarray
    sensitivity: np.ndarray


def _block_geometry(Xb, yb, cfg: _TwoPassConfig, sol: SampleSolve, start, stop) -> BlockState:
    """Pass 1 of a block: the certificate's pieces and the clustering's geometry
    (``sol.separable``: neither the block's solve nor its clustering).

    The block's share is a certified lower bound of min_v [U_b / U |v|^2 / 2 + C hinge_b(v)],
    from its own coarse solve warm-started at ``w``; the shares of a partition add up to a
    lower bound of the whole optimum (a min of a sum is at least the sum of the mins),
    which a solution from a sample cannot certify on its own (its dual point is off by the
    sampling noise of n terms).
    """
    X1, ys = _block(Xb, yb, cfg.pos, start)
    n_b = len(ys)
    u = np.ones(n_b)
    hinges = hinge(X1 @ sol.w, ys)
    share = 0.0  # one label: the bias alone fits it, a share of 0 is its bound
    if np.unique(ys).size == 2 and not sol.separable:
        own = coarse_svm(
            X1,
            ys,
            u,
            cfg.C * cfg.U / n_b,
            tol=cfg.tol,
            max_iter=_BLOCK_ITERS,
            w0=sol.w,
            widths=(0.1,),
            round_iters=25,
        )
        share = own.lower * n_b / cfg.U
    stats = BlockStats(
        hinge_sum=float(hinges.sum()),
        aggregates=_local_aggregates(X1, ys, u, cfg.C, sol.w),
        class_counts=class_counts(ys),
        share=share,
    )
    geom = None
    if not sol.separable:
        rng = _node_rng(cfg.seed, start, stop, _LEAF)
        geom = _cluster_geometry(
            X1, ys, u, C=cfg.C, opt=sol.opt_est, U_total=cfg.U, k=cfg.k, rng=rng
        )
    return BlockState(stats, geom, hinges)


def _block_stats(state: BlockState) -> BlockStats:
    return state.stats


def _block_gamma(state: BlockState, C, opt, U) -> BlockGamma:
    """Pass 2 of a block: gamma(p) of its rows given the certified ``opt``."""
    geom = state.geometry
    if geom is None:  # separable: the trivial bound, every row's share at most 1
        return BlockGamma(np.ones(state.hinge.shape[0]), float(state.hinge.shape[0]))
    gamma = np.empty(geom.d2.shape[0])
    t = _bounds_from_geometry(geom.d2, np.ones(gamma.shape[0]), geom.cluster_u, C, opt, U, gamma)
    return BlockGamma(gamma, t)


def _block_sample(
    Xb, yb, state: BlockState, gam: BlockGamma, count, m, totals: DrawTotals, mix, seed, start, stop
) -> BlockDraw:
    """``count`` draws inside one block from the global q restricted to it; the weights use
    the global q (so the union over blocks is one i.i.d. draw of m from the whole set)."""
    Xb, yb = np.asarray(Xb), np.asarray(yb)
    u = np.ones(len(yb))
    loss = point_costs(state.hinge, u, C=totals.C, reg=totals.reg, U_total=totals.U)
    q = _mixture_q(gam.gamma, totals.t, loss, totals.L, u, totals.U, mix)
    idx, weight = _draw(q, u, count, _node_rng(seed, start, stop, _SAMPLE))
    # _draw divides by count * q; the global draw has m draws in all
    return BlockDraw(Xb[idx], yb[idx], weight * count / m, gam.gamma[idx])


def _sample_solve(blocks: ResidentRows, cfg: _TwoPassConfig) -> SampleSolve:
    """Step 1: the coarse solve on a uniform sample of at most :data:`_SAMPLE_ROWS` rows,
    drawn from the seed alone.

    (Nearly) separable classes: the optimum is almost all regulariser, and a w close to it
    that lets one point violate the margin costs about C more, so that point's share of it
    is close to 1; every bound of the sup over w is then vacuous (t ~ n). The block solves
    and clusterings would buy nothing, and the loss part leans on the few rows near the
    coarse w's margin, which other w's do not favour: such a set is drawn uniformly.
    """
    n = blocks.n_rows
    take = np.sort(
        _node_rng(cfg.seed, 0, n, _SAMPLE).choice(n, size=min(n, _SAMPLE_ROWS), replace=False)
    )
    picked = blocks.take(take, _pick_pair, name=f"coreset-solve-sample-{uuid.uuid4().hex}")
    Xs1 = with_bias(np.concatenate([p[0] for p in picked]))
    ys = signs(np.concatenate([p[1] for p in picked]), cfg.pos)
    if np.unique(ys).size < 2:  # a sample with one label: w = 0 (cost C n), certified later
        return SampleSolve(np.zeros(Xs1.shape[1]), cfg.C * cfg.U, False)
    C_s = cfg.C * n / len(take)
    sol = coarse_svm(Xs1, ys, np.ones(len(take)), C_s, tol=cfg.tol)
    hinge_s = C_s * float(hinge(Xs1 @ sol.w, ys).sum())
    return SampleSolve(sol.w, sol.upper, hinge_s < _SEPARABLE_HINGE_SHARE * sol.upper)


def _certify(stats, sol: SampleSolve, cfg: _TwoPassConfig, neg) -> Certificate:
    """The sample's w on the whole set: its cost, and the better of two certified lower
    bounds of opt (the dual point at w, the sum of the blocks' shares)."""
    counts = np.sum([s.class_counts for s in stats], axis=0)
    if (counts == 0).any():
        raise DKernelError(
            f"y has one class only ({cfg.pos if counts[0] == 0 else neg}); an SVM coreset needs two"
        )
    reg = regulariser(sol.w)
    upper = reg + cfg.C * sum(s.hinge_sum for s in stats)
    dual = _dual_bound(np.sum([s.aggregates for s in stats], axis=0))
    lower = min(max(dual, sum(s.share for s in stats)), upper)
    if not lower > 0 and not sol.separable:
        raise DKernelError("the coarse SVM solve found no positive lower bound")
    logger.info("two-pass coarse solve: cost %.6g, certified bound %.6g", upper, lower)
    return Certificate(reg, upper, lower)


def _block_counts(blocks: ResidentRows, stats, t_blocks, totals: DrawTotals, m, cfg):
    """Draws of each block: a multinomial split of m by the blocks' shares of q."""
    sizes = _block_sizes(blocks)
    hinge_sums = np.array([s.hinge_sum for s in stats])
    L_blocks = part_costs(hinge_sums, sizes, C=cfg.C, reg=totals.reg, U_total=totals.U)
    mass = _mixture_q(t_blocks, totals.t, L_blocks, totals.L, sizes, totals.U, cfg.mix)
    return _node_rng(cfg.seed, 0, blocks.n_rows, _BLOCKS).multinomial(m, mass / mass.sum())


def _geometry_part(block, k: int, rows, cfg: _TwoPassConfig, sol: SampleSolve) -> BlockState:
    (Xb, yb), (start, stop) = block, rows
    return _block_geometry(Xb, yb, cfg, sol, start, stop)


def _stats_part(state: BlockState, k: int) -> BlockStats:
    return state.stats


def _total_part(state: BlockState, k: int, C, opt, U) -> float:
    return _block_gamma(state, C, opt, U).total


def _sample_part(block, k: int, each, m, totals: DrawTotals, opt, mix, seed) -> BlockDraw | None:
    (Xb, yb), (state, count, (start, stop)) = block, each
    if count == 0:
        return None
    gam = _block_gamma(state, totals.C, opt, totals.U)  # pass 2's values, recomputed here
    return _block_sample(Xb, yb, state, gam, count, m, totals, mix, seed, start, stop)


def _certificate_pass(blocks: ResidentRows, cfg: _TwoPassConfig, sol: SampleSolve):
    """Pass 1 (:func:`_block_geometry` on every block): the states, kept on the workers,
    and their stats, here."""
    run = uuid.uuid4().hex
    states = blocks.apply(
        _geometry_part, cfg, sol, name=f"coreset-certificate-{run}", each=blocks.ranges
    )
    return states, states.collect(_stats_part, name=f"coreset-certificate-stats-{run}")


def _sensitivity_pass(states: ResidentRows, cfg: _TwoPassConfig, opt: float) -> np.ndarray:
    """Pass 2: every block's total sensitivity, one task per worker. The per-row values
    are not kept: the draw recomputes a block's where it draws (2-3 ms a block), which
    costs less than a resident part and a dependent task per block (2.5-2.7 ms of dispatch
    each, measured at one worker)."""
    name = f"coreset-sensitivity-total-{uuid.uuid4().hex}"
    return np.array(states.collect(_total_part, cfg.C, opt, cfg.U, name=name))


def _draw_pass(blocks: ResidentRows, states, counts, m, totals: DrawTotals, opt, cfg):
    """Pass 3: each block's share of the global draw of m (blocks with no draws send
    nothing)."""
    each = list(zip(states.parts, counts.tolist(), blocks.ranges))
    drawn = blocks.collect(
        _sample_part,
        m,
        totals,
        opt,
        cfg.mix,
        cfg.seed,
        name=f"coreset-sample-{uuid.uuid4().hex}",
        each=each,
    )
    return [d for d in drawn if d is not None]


def _two_pass(X, y, m, *, cfg: _TwoPassConfig, neg, bar: Progress) -> Coreset:
    """The two-pass build (see :func:`distributed_coreset`): a sample solve, the
    certificate's task per block (its state kept on the workers), then the sensitivities'
    totals and the draw, one task per worker each."""
    with phase("blocks", width=X.numblocks[0]):  # read once: every pass runs on them
        blocks = ResidentRows.load(
            (X, y), itertools.pairwise(chunk_bounds(X)), _pair,
            name=f"coreset-block-{uuid.uuid4().hex}",
        )  # fmt: skip
    # the sample's products (<= _SAMPLE_ROWS x d) are too small for BLAS threads to pay,
    # and on a busy client the threads oversubscribe the cores and slow every product down
    with timer("two-pass: sample solve", logger), phase("sample solve"), ONE_BLAS_THREAD:
        sol = _sample_solve(blocks, cfg)
    if sol.separable:
        cfg = cfg._replace(mix=cfg.mix._replace(beta=1.0))
    bar.update(1, step="sample solve")
    width = len(blocks)
    with timer("two-pass: certificate and clustering", logger), phase("certificate", width=width):
        states, stats = _certificate_pass(blocks, cfg, sol)
    bar.update(1, step="certificate")
    cert = _certify(stats, sol, cfg, neg)
    with timer("two-pass: sensitivities", logger), phase("sensitivities", width=width):
        t_blocks = _sensitivity_pass(states, cfg, cert.lower)
    bar.update(1, step="sensitivities")
    totals = DrawTotals(float(t_blocks.sum()), cert.upper, cfg.U, cert.reg, cfg.C)
    counts = _block_counts(blocks, stats, t_blocks, totals, m, cfg)
    with timer("two-pass: draw", logger), phase("draw", width=width):
        parts = _draw_pass(blocks, states, counts, m, totals, cert.lower, cfg)
    bar.update(1, step="draw")
    return Coreset(
        X=np.concatenate([p.X for p in parts]),
        y=np.concatenate([p.y for p in parts]),
        weight=np.concatenate([p.weight for p in parts]),
        sensitivity=np.concatenate([p.sensitivity for p in parts]),
        total_sensitivity=totals.t,
        source_size=blocks.n_rows,
        C=cfg.C,
        classes=(neg, cfg.pos),
        info={
            "method": "two-pass",
            "opt": cert.lower,
            "coarse_cost": cert.upper,
            "n_blocks": len(blocks),
            "levels": 1,
            "beta": cfg.mix.beta,
            "loss_share": cfg.mix.loss_share,
            "separable": sol.separable,
        },
    )


# ------------------------------------------------------------------------- merge-reduce
def _leaf(Xb, yb, draws, C, k, U_total, classes, mix, seed, start, stop) -> Coreset:
    Xb, yb = np.asarray(Xb), np.asarray(yb)
    report_nonfinite(Xb, name="X", row_offset=start)
    pos = classes[1]
    n = Xb.shape[0]
    if n <= draws:  # nothing to reduce: the rows themselves, unit weights
        return _exact(Xb, yb, C=C, classes=classes)
    out = _build(
        Xb,
        signs(yb, pos),
        np.ones(n),
        draws,
        C=C,
        k=k,
        rng=_node_rng(seed, start, stop, _LEAF),
        mix=mix,
        tol=0.05,
        U_total=U_total,
    )
    return _with_labels(out, classes)


def _node(children, draws, k, U_total, mix, seed, start, stop) -> Coreset:
    """Union of the children, resampled (sensitivities recomputed on the union) only when
    it holds more than ``draws`` rows."""
    return reduce(merge, children).reduce(
        draws,
        random_state=_node_rng(seed, start, stop, _NODE),
        total_weight=U_total,
        k=k,
        beta=mix.beta,
        loss_share=mix.loss_share,
    )


def _tree_shape(X, m: int, split_every: int):
    """A merge-reduce tree over the blocks of X (its leaves): the blocks as delayed
    objects, their row bounds, the tree's levels and the draws of its inner nodes."""
    blocks = X.to_delayed().ravel()
    bounds = chunk_bounds(X)
    levels = tree_levels(len(blocks), split_every)
    return blocks, bounds, levels, m * _INNER_FACTOR * max(levels, 1)


def _node_rows(node: TreeNode, bounds, split_every: int, m: int, inner: int):
    """Node (level, idx) covers leaves [idx f^level, (idx + 1) f^level) (level 0: the leaf
    idx): its rows ``(start, stop)``, whose range seeds it, and its draws (the root m,
    every other node ``inner``)."""
    n_leaves = len(bounds) - 1
    span = split_every**node.level
    first, last = node.idx * span, min((node.idx + 1) * span, n_leaves)
    draws = m if last - first == n_leaves else inner
    return int(bounds[first]), int(bounds[last]), draws


def _combine(children, node: TreeNode, *, bounds, split_every, m, inner, k, U_total, mix, seed):
    """The tree's combine: the union of a node's children, resampled (:func:`_node_rows`)."""
    start, stop, draws = _node_rows(node, bounds, split_every, m, inner)
    return _node(children, draws, k, U_total, mix, seed, start, stop)


class _CountLeaves(Callback):
    """Advances ``bar`` as leaf tasks finish (local schedulers; a cluster reports at the end)."""

    def __init__(self, bar: Progress):
        super().__init__()
        self.bar = bar
        self.done = 0

    def _posttask(self, key, result, dsk, state, worker_id):
        name = key[0] if isinstance(key, tuple) else key
        if isinstance(name, str) and name.startswith("coreset-leaf-"):
            self.done += 1
            self.bar.update(1, step="leaves")


def _merge_reduce(X, y, m, *, C, k, mix, seed, pos, neg, split_every, bar: Progress):
    n = int(X.shape[0])
    xb, bounds, levels, inner = _tree_shape(X, m, split_every)
    yb = y.to_delayed().ravel()
    n_leaves = len(xb)
    leaves = []
    for i, (a, b) in enumerate(zip(xb, yb)):
        start, stop, draws = _node_rows(TreeNode(0, i, seed), bounds, split_every, m, inner)
        leaves.append(
            _step(_leaf, "leaf")(a, b, draws, C, k, float(n), (neg, pos), mix, seed, start, stop)
        )

    combine = partial(
        _combine,
        bounds=bounds,
        split_every=split_every,
        m=m,
        inner=inner,
        k=k,
        U_total=float(n),
        mix=mix,
        seed=seed,
    )
    with timer("merge-reduce tree", logger), _CountLeaves(bar) as counted:
        tree = tree_reduce(
            None, leaves, combine, split_every=split_every, key=f"coreset-merge-{tokenize(leaves)}"
        )
        (root,) = dask.compute(tree)
    bar.update(n_leaves - counted.done + 1, step="tree")  # leaves not seen here, and the root
    return Coreset(
        X=root.X,
        y=root.y,
        weight=root.weight,
        sensitivity=root.sensitivity,
        total_sensitivity=root.total_sensitivity,
        source_size=n,
        C=C,
        classes=(neg, pos),
        info={
            **root.info,
            "method": "merge-reduce",
            "tree_levels": levels,
            "n_leaves": n_leaves,
            "split_every": split_every,
            "inner_draws": inner,
        },
    )


# ------------------------------------------------------------------------------ public
def _inputs(X, y):
    """(X, y, store classes) from the floor's one reader (:func:`read_inputs`), as
    row-chunked dask arrays with one column chunk."""
    got = read_inputs(X, y, needs_y=True)
    X, y = got.X, got.y
    if not got.is_dask:
        X = da.from_array(X, chunks=(max(1, min(len(X), 65536)), X.shape[1]))
    if not is_dask_array(y):
        y = da.from_array(y, chunks=(X.chunks[0],))
    return X, y, got.classes


def distributed_coreset(
    X,
    y=None,
    m=1000,
    *,
    method="two-pass",
    C=1.0,
    k=None,
    beta=BETA,
    loss_share=LOSS_SHARE,
    split_every=2,
    leaf_size=None,
    classes=None,
    multiclass=None,
    random_state=None,
    tol=0.05,
    verbose=0,
):
    """SVM coreset of a dask array or zarr store, built across the workers.

    Parameters
    ----------
    X : dask.array.Array, zarr.Array, store path, Dataset or ndarray (n_samples, n_features)
    y : dask.array.Array or array-like of shape (n_samples,), optional
        Two classes, or more with ``multiclass="ovr"``; taken from the store when ``X`` is a
        path or Dataset.
    m : int, default=1000
        Draws of the coreset (at most m distinct rows).
    method : {"two-pass", "merge-reduce"}, default="two-pass"
        ``"two-pass"``: the coarse solve on a uniform sample of 20,000 rows, certified by
        one blockwise pass (which also clusters every leaf), then the leaves' sensitivities
        with the global totals and one global draw of m split across the leaves in
        proportion to their mass: one resampling level, the single-machine coreset's error.
        ``"merge-reduce"``: every leaf gets its own coreset (node hinge weight
        C * n / n_leaf), a tree with fan-in ``split_every`` merges them; a node resamples the
        union of its children, with sensitivities recomputed on the union, to
        ``m * 3 * levels`` draws, the root to m. See the module docstring for which to use.
    C : float, default=1.0
        Hinge weight of the SVM cost (see :func:`svm_coreset`).
    k : int, optional
        k-means++ clusters per label and leaf (default: chosen by :func:`k_grid`).
    beta, loss_share : float
        The sampling mixture (see :func:`svm_coreset`).
    split_every : int, default=2
        Fan-in of the merge-reduce tree.
    leaf_size : int, optional
        Rows per leaf (the array is re-chunked to it). Default: the power of two at or
        above ``max(16 m, 65536)``, a
        function of (n, m) only, so the coreset does not depend on the input's chunks.
        Must be at least ``m``.
    classes : sequence of labels, optional
        (negative, positive), or every class with ``multiclass="ovr"``; read from the
        store's attributes or computed from ``y``.
    multiclass : {None, "ovr"}, default=None
        ``"ovr"`` builds one coreset per class when there are more than two (that class
        +1, the rest -1, each of m draws, as :func:`svm_coreset`) and returns a dict
        ``{class: Coreset}``; more than two classes without it is an error.
    random_state : int, SeedSequence, Generator or None
        Base seed; every node draws from ``SeedSequence([seed, start, stop, tag])`` of its
        row range.
    tol : float, default=0.05
        Certified-gap target of the two-pass coarse solve on its sample; the gap actually
        certified on the whole data (one pass) inflates the bounds by at most its square
        root, whatever it is.
    verbose : int, default=0
        ``>= 1``: a progress bar on stderr (a notebook widget in Jupyter): the four
        two-pass steps, or the merge-reduce leaves done and the tree.

    Returns
    -------
    Coreset, or dict of Coreset with ``multiclass="ovr"`` and more than two classes

    Warns
    -----
    VacuousCoresetWarning
        Two-pass: when the total sensitivity is at least n (standardise X).

    Notes
    -----
    Two-pass: the sample solve on the client (O(20000 d) per L-BFGS iteration), then three
    rounds of one task per leaf; O(n d k) work in all. Merge-reduce: one task per leaf and
    one per tree node; O(n d k) at the leaves plus O(m levels d k) per node; no global pass.
    NaN/inf are reported by the leaf that holds them, with the global row.

    The two-pass bound on opt adds up the leaves' own certified optima: on rows sorted by
    label a leaf holding one class contributes 0, so the bound loosens (several times
    below opt on a set stored sorted, such as skin_nonskin), the total sensitivity grows
    with it and the coreset leans on the mixture's uniform part. Shuffled rows avoid it.

    References
    ----------
    M. Tukan, C. Baykal, D. Feldman, D. Rus, "On coresets for support vector machines",
    TAMC 2020 / Theoretical Computer Science 2021, Algorithms 1 and 2.

    Examples
    --------
    >>> import numpy as np, dask, dask.array as da
    >>> from dkernel.coreset import distributed_coreset
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(2000, 2)); y = np.where(X[:, 0] > 0, 1, -1)
    >>> with dask.config.set(scheduler="sync"):
    ...     S = distributed_coreset(da.from_array(X, chunks=500), y, 100,
    ...                             method="merge-reduce", leaf_size=500, random_state=0)
    >>> S.source_size, len(S) <= 100
    (2000, True)
    """
    C, mix, k = _check_options(
        method, multiclass, C, beta, loss_share, split_every, tol, verbose, k
    )
    with accounting(distributed_client()) as acc:
        out = _build_coreset(
            X, y, m, method=method, C=C, k=k, mix=mix, beta=beta, loss_share=loss_share,
            split_every=split_every, leaf_size=leaf_size, classes=classes,
            multiclass=multiclass, random_state=random_state, tol=tol, verbose=verbose,
        )  # fmt: skip
    if isinstance(out, Coreset):  # one-vs-rest: each class's coreset has its own
        out.info["phases"] = acc.report()
        out.info["timings"] = {name: row["wall"] for name, row in out.info["phases"].items()}
    return out


def _build_coreset(
    X, y, m, *, method, C, k, mix, beta, loss_share, split_every, leaf_size, classes,
    multiclass, random_state, tol, verbose,
):  # fmt: skip
    """:func:`distributed_coreset` after its option checks."""
    with phase("setup"):
        X, y, store_classes = _inputs(X, y)
        m = _check_m(m, int(X.shape[0]))
        leaf_size = _check_leaf_size(leaf_size, int(X.shape[0]), m)
        # a store's row source is regrouped, not rechunked: each leaf's task reads its
        # chunks itself (whole chunks once each when the leaves align with them, as by
        # default)
        X = _leaves(X, leaf_size)
        y = _leaves(y, leaf_size)
        classes = _labels(y, store_classes if classes is None else classes, multiclass)
    if len(classes) > 2:
        return _one_vs_rest(
            X,
            y,
            m,
            classes,
            random_state=random_state,
            method=method,
            C=C,
            k=k,
            beta=beta,
            loss_share=loss_share,
            split_every=split_every,
            leaf_size=leaf_size,
            tol=tol,
            verbose=verbose,
        )
    neg, pos = classes
    seed = _base_seed(random_state)
    n_steps = 4 if method == "two-pass" else len(X.chunks[0]) + 1
    with (
        timer(f"distributed coreset ({method})", logger),
        progress(
            n_steps, f"distributed_coreset ({method})", enabled=progress_enabled(verbose)
        ) as bar,
    ):
        if method == "two-pass":
            cfg = _TwoPassConfig(C, k, mix, seed, pos, float(tol), float(X.shape[0]))
            out = _two_pass(X, y, m, cfg=cfg, neg=neg, bar=bar)
            _warn_vacuous(out)  # the root of a tree resamples m rows: its t is not over n
            return out
        with phase("merge-reduce", width=X.numblocks[0]):
            return _merge_reduce(
                X,
                y,
                m,
                C=C,
                k=k,
                mix=mix,
                seed=seed,
                pos=pos,
                neg=neg,
                split_every=int(split_every),
                bar=bar,
            )


def _check_options(method, multiclass, C, beta, loss_share, split_every, tol, verbose, k):
    """The options of :func:`distributed_coreset` that need no data: ``(C, mixture, k)``."""
    if method not in _METHODS:
        raise DKernelError(f"method must be one of {_METHODS}, got {method!r}")
    if multiclass not in (None, "ovr"):
        raise DKernelError(f"multiclass must be None or 'ovr', got {multiclass!r}")
    C = check_C(C)
    mix = _check_mixture(beta, loss_share)
    check_scalar(split_every, "split_every", kind=numbers.Integral, low=2)
    check_scalar(tol, "tol", low=0.0)
    check_scalar(verbose, "verbose", kind=numbers.Integral, low=0)
    k = check_scalar(k, "k", kind=numbers.Integral, low=1, allow_none=True)
    return C, mix, k


def _check_leaf_size(leaf_size, n: int, m: int) -> int:
    """``leaf_size``, or the default of (n, m), checked to hold at least m rows."""
    if leaf_size is None:
        leaf_size = default_leaf_size(n, m)
    check_scalar(leaf_size, "leaf_size", kind=numbers.Integral, low=1)
    if leaf_size < m:
        raise DKernelError(f"leaf_size={leaf_size} is smaller than the coreset size m={m}")
    return int(leaf_size)


def _labels(y, classes, multiclass) -> list:
    """The sorted labels: ``classes`` when known, else computed from ``y``; two, or more
    with ``multiclass="ovr"``."""
    if classes is None:
        with timer("labels", logger):
            classes = read_classes(y, token="coreset-classes")
    classes = sorted(np.asarray(classes).tolist())
    if len(classes) < 2:
        raise DKernelError(f"y has one class only ({classes}); an SVM coreset needs two")
    if len(classes) > 2 and multiclass != "ovr":
        raise DKernelError(
            f"y has {len(classes)} classes; pass multiclass='ovr' for one coreset per "
            "class (that class +1, the rest -1)"
        )
    return classes


def _one_vs_rest(X, y, m, classes, *, random_state, **binary) -> dict:
    """One binary coreset per class (that class +1, the rest -1), each from its own seed."""
    seed = _base_seed(random_state)
    out = {}
    for i, c in enumerate(classes):
        seq = np.random.SeedSequence([seed, i])
        class_seed = int(seq.generate_state(1, np.uint64)[0] >> np.uint64(1))
        signs = da.where(y == c, 1, -1).astype(np.int8)
        out[c] = distributed_coreset(
            X, signs, m, classes=(-1, 1), random_state=class_seed, **binary
        )
    return out
