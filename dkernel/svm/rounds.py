"""BSGD trained on every worker: rounds of local passes over fixed shards, merged by a tree.

Design (the model travels to the data, as mature Dask trainers do; Zinkevich et al. 2010 for
the averaging, Graf et al. 2005 for the rounds seeded by the global model):

- **Shards** are fixed at fit start from the number of rows alone (``n_shards`` ranges of
  consecutive rows of equal size, cut across storage chunks where needed), so the model
  never depends on how many workers there are nor on the chunking. Each shard
  is loaded once into the memory of one worker (one future per shard; values checked there,
  labels mapped there) and never sent to the client.
- **Rounds**: an epoch is ``n_rounds`` rounds; in a round every shard runs the numba BSGD
  pass (:func:`~dkernel.svm._budget.sgd_chunk`) from the current global model over its next
  ``1 / n_rounds`` of its rows, in an order drawn from ``SeedSequence([seed, epoch, shard])``.
  One ``client.submit`` per shard: the model travels to the data, not the reverse.
- **Combine** (:func:`combine`): the partial models are merged by
  :func:`~dkernel.runtime._tree.tree_reduce` (fan-in ``split_every``): the union of their SVs
  with coefficients weighted by ``n_k / sum n`` (the global scale folded in; the SVs of the
  round's start model that a shard left untouched are identical in every partial model and
  are summed into one), then budget maintenance down to B, choosing merges on the iterate
  and the averaged iterate together. The root seeds the next round; the client waits only
  for the last root. Tasks are pure functions of their inputs, so a lost result is
  recomputed identically from lineage.

The Pegasos clock ``t`` of a shard starts at the global clock and counts its own steps; the
combined clock is the weighted mean (the average of K shards that each took H steps is a
Pegasos iterate at ``t0 + H`` with K-row mini-batch gradients). The tree's merges screen
only the 32 partners nearest in feature space (``NEAR`` search).

Averaging the shards' models does not remove the bias of the smaller clock (Zinkevich et
al.), so the rounds can trail the sequential stream in accuracy; the measurements and the
variants tried are in benchmarks/results/bsgd_notes.md.
"""

from __future__ import annotations

import functools
import logging
import uuid
from collections.abc import Callable
from typing import Any, NamedTuple

import dask
import numpy as np

from ..data import ResidentRows
from ..kernels import pair_gram, sq_norms
from ..runtime import TreeNode, phase, timer, worker_addresses
from . import _budget as nb
from .state import Partial, empty_partial, partial_from_state, state_from_partial
from .stream import Standardizer, block_plan, load_ranges, row_parts

logger = logging.getLogger(__name__)


def _with_table(cfg: nb.BSGDConfig) -> nb.BSGDConfig:
    """Tasks carry the config without the 320 KB merge table; each process builds its own."""
    if cfg.search == nb.LOOKUP and cfg.T.shape[0] != nb.LOOKUP_M:
        return cfg._replace(T=nb.lookup_table(int(cfg.pw)))
    return cfg


def _without_table(cfg: nb.BSGDConfig) -> nb.BSGDConfig:
    """The config as tasks carry it: without the merge table (:func:`_with_table` puts it
    back)."""
    return cfg._replace(T=np.zeros((1, 1))) if cfg.search == nb.LOOKUP else cfg


def _round_rows(nk: int, rnd: int, n_rounds: int) -> slice:
    """The positions, in a shard's visiting order of its nk rows, that round ``rnd`` of
    ``n_rounds`` runs over."""
    return slice(rnd * nk // n_rounds, (rnd + 1) * nk // n_rounds)


def shard_round(
    data,
    shard: int,
    model: Partial,
    cfg: nb.BSGDConfig,
    *,
    run_seed: int,
    epoch: int,
    rnd: int,
    n_rounds: int,
    shuffle: bool,
) -> Partial:
    """One shard's pass over its rows of round ``rnd`` of ``epoch``, from ``model``.

    Shard 0's partial model keeps the start model's maintenance counters (exactly one
    shard per round does, so the combined counters are totals).
    """
    Xk, yk, wk = data
    nk = len(yk)
    carry = shard == 0
    if shuffle:
        rng = np.random.default_rng(np.random.SeedSequence([run_seed, epoch, shard]))
        order = rng.permutation(nk)
    else:
        order = np.arange(nk)
    idx = order[_round_rows(nk, rnd, n_rounds)]
    cfg = _with_table(cfg)
    st = state_from_partial(model, cfg)
    if not carry:
        st.fs[nb.FS_DEGR] = st.fs[nb.FS_DEGR2] = 0.0
        st.ist[nb.IS_NMAINT] = 0
    if len(idx):
        Xr = np.ascontiguousarray(Xk[idx])
        nb.sgd_chunk(Xr, yk[idx], wk[idx], st, cfg)
    return partial_from_state(st, n=len(idx))


def combine(children: list[Partial], node: TreeNode | None, *, cfg: nb.BSGDConfig) -> Partial:
    """Weighted union of partial models, brought down to the budget (the tree's combine).

    Weights ``n_k / sum n`` on the iterates, the averaged sums, their weight totals and the
    clocks; SVs that are bit-identical are summed into one; then budget maintenance (merge,
    removal or projection as configured) until B SVs remain, each step chosen on the
    iterate and the averaged model ``Abar / W`` stacked, so that both stay close.
    """
    total = float(sum(p.n for p in children))
    if total <= 0:
        rho = np.full(len(children), 1.0 / len(children))
    else:
        rho = np.array([p.n / total for p in children])
    c = children[0].A.shape[1]
    SV = np.concatenate([p.SV for p in children])
    A = np.concatenate([r * p.A for r, p in zip(rho, children)])
    Abar = np.concatenate([r * p.Abar for r, p in zip(rho, children)])
    W = float(sum(r * p.W for r, p in zip(rho, children)))
    b = sum(r * p.b for r, p in zip(rho, children))
    bbar = sum(r * p.bbar for r, p in zip(rho, children))
    t = float(sum(r * p.t for r, p in zip(rho, children)))
    n_maint = sum(p.n_maint for p in children)
    degr = sum(p.degr for p in children)
    degr2 = sum(p.degr2 for p in children)
    if len(SV):
        SV, inv = np.unique(SV, axis=0, return_inverse=True)
        inv = inv.ravel()
        A = _sum_rows(A, inv, len(SV))
        Abar = _sum_rows(Abar, inv, len(SV))
    m = len(SV)
    B = int(cfg.budget)
    if m > B:
        cfg = _with_table(cfg)
        wn = W if W > 0 else 1.0
        C = np.ascontiguousarray(np.hstack([A, Abar / wn]))
        SVc = np.ascontiguousarray(SV)
        st = _union_state(SVc, C, cfg)
        # the tree's merges screen only the nearest partners (NEAR)
        dg, dg2 = nb.reduce_to(st, cfg._replace(search=nb.NEAR))
        SV, A, Abar = SVc[:B].copy(), C[:B, :c].copy(), C[:B, c:] * wn
        n_maint += m - B
        degr += dg
        degr2 += dg2
    return Partial(SV, A, b, Abar, bbar, W, t, int(total), n_maint, degr, degr2)


def warm_up(cfg: nb.BSGDConfig, n_features: int, n_cols: int) -> None:
    """Compile (or load from numba's cache) every kernel a round and a merge use: a round
    over 4 rows on two shards with a budget of 1, then their merge. Types, not values,
    decide what numba compiles, so this is the compilation of the real fit and nothing else.
    Nothing runs in a process whose learner loop is compiled already (a streaming fit's
    process compiles the merge in its first round, a fraction of the loop's time).
    """
    if getattr(nb.sgd_chunk, "signatures", True):
        return
    tiny = cfg._replace(budget=1)
    X = np.random.default_rng(0).normal(size=(4, n_features))
    data = (X, np.arange(4, dtype=np.int64) % max(2, n_cols), np.ones(4))
    start = empty_partial(n_features, n_cols)
    kw: dict[str, Any] = dict(run_seed=0, epoch=0, rnd=0, n_rounds=1, shuffle=False)
    parts = [shard_round(data, k, start, tiny, **kw) for k in range(2)]
    combine(parts, None, cfg=tiny)


def compile_kernels(client: Any, cfg: nb.BSGDConfig, n_features: int, n_cols: int) -> None:
    """:func:`warm_up` on every worker of ``client`` at once (tasks ``bsgd-compile``), or here
    without one; waits until all are done, so a fit's first round counts no compilation."""
    light = _without_table(cfg)
    if client is None:
        warm_up(light, n_features, n_cols)
        return
    run = uuid.uuid4().hex
    futures = [
        client.submit(warm_up, light, n_features, n_cols, key=f"bsgd-compile-{run}-{i}",
                      workers=[addr], allow_other_workers=True)
        for i, addr in enumerate(worker_addresses(client))
    ]  # fmt: skip
    client.gather(futures)


def _union_state(SV: np.ndarray, C: np.ndarray, cfg: nb.BSGDConfig) -> nb.BSGDState:
    """The learner state of a union of SVs with coefficients C (no averaged sums: the
    averaged model is a block of C's columns), scale 1, for :func:`~._budget.reduce_to`."""
    m = len(SV)
    sqn = sq_norms(SV)
    fs, ist = nb.fresh_counters()
    ist[nb.IS_NSV] = m
    return nb.BSGDState(
        SV=SV,
        sqn=sqn,
        A=C,
        K=pair_gram(SV, sqn, cfg.kind, cfg.gamma, cfg.degree, cfg.coef0),
        M=np.zeros((m, m)) if cfg.maint == nb.PROJECT else np.zeros((1, 1)),
        b=np.zeros(C.shape[1]),
        fs=fs,
        ist=ist,
        Abar=np.zeros((1, 1)),
        bbar=np.zeros(1),
        sref=np.zeros(1),
        SVT=np.ascontiguousarray(SV.T),
    )


def _sum_rows(V: np.ndarray, inv: np.ndarray, m: int) -> np.ndarray:
    out = np.zeros((m, V.shape[1]))
    np.add.at(out, inv, V)
    return out


class ShardPlan(NamedTuple):
    """Row ranges ``[starts[k], stops[k])`` of the shards."""

    starts: list[int]
    stops: list[int]


def plan_shards(n: int, n_shards: int) -> ShardPlan:
    """``n_shards`` ranges of consecutive rows of about equal counts (never more than n),
    cut wherever the rows fall, not at storage chunks: every worker gets a shard even from a
    store of one chunk. Depends on n only."""
    parts = row_parts(n, n_shards)
    return ShardPlan([a for a, _ in parts], [b for _, b in parts])


#: A distributed fit runs its first whole epochs as one sequential stream, in one task on
#: one worker, while they add up to at most ``dkernel.svm.prefix-steps`` SGD steps (Dask
#: config, read at each fit) and its rows to at most ``PREFIX_BYTES`` (float64): a fit of
#: that size is the sequential fit (averaging shards costs accuracy most while the steps
#: are large, and buys least on few rows).
PREFIX_BYTES = 1 << 30


def prefix_epochs(n: int, d: int, n_epochs: int) -> int:
    """Whole epochs of a distributed fit of n rows x d features run as one stream."""
    steps = int(dask.config.get("dkernel.svm.prefix-steps", 0) or 0)
    if n * d * 8 > PREFIX_BYTES:
        return 0
    return min(int(n_epochs), steps // max(1, n))


def stream_prefix(
    parts: list,
    cfg: nb.BSGDConfig,
    *,
    n_cols: int,
    seed: int,
    epochs: int,
    shuffle: bool,
    block_rows: int,
) -> Partial:
    """``epochs`` epochs of the sequential stream over all the shards' rows, joined in row
    order, in the sequential fit's visiting order (:func:`~.stream.block_plan`): the
    model ``BudgetedSVC(distributed=False)`` trains on them, here in one task."""
    X = np.concatenate([p[0] for p in parts])
    y = np.concatenate([p[1] for p in parts])
    w = np.concatenate([p[2] for p in parts])
    cfg = _with_table(cfg)
    st = nb.new_state(int(cfg.budget), X.shape[1], n_cols, int(cfg.maint))
    for epoch in range(epochs):
        for task in block_plan(len(y), seed=seed, epoch=epoch, shuffle=shuffle,
                               block_rows=block_rows):  # fmt: skip
            rows = slice(task.start, task.stop)
            Xb, yb, wb = X[rows], y[rows], w[rows]
            if task.order is not None:
                Xb, yb, wb = Xb[task.order], yb[task.order], wb[task.order]
            nb.sgd_chunk(np.ascontiguousarray(Xb), yb, wb, st, cfg)
    return partial_from_state(st, n=len(y))


def load_shards(
    X, y, w, *, n_shards: int, classes: np.ndarray, scaler: Standardizer | None, client: Any
) -> ResidentRows:
    """The shards' rows (:func:`plan_shards`) read once into the workers' memory (values
    checked and labels mapped there), or here without a client: the SGD rounds run on
    them, and the refit's parts are cut from them, so a distributed fit reads X once."""
    plan = plan_shards(int(X.shape[0]), n_shards)
    with timer("bsgd shards", logger), phase("shards", width=len(plan.starts)):
        # the dashboard shows bsgd-shard (the loads, and the reads of the stored chunks two
        # shards share), bsgd-round (each round's tasks and their merges)
        return load_ranges(
            X, y, w, list(zip(plan.starts, plan.stops)), classes=classes, scaler=scaler,
            client=client, name=f"bsgd-shard-{uuid.uuid4().hex}",
        )  # fmt: skip


def fit_rounds(
    shards: ResidentRows,
    *,
    cfg: nb.BSGDConfig,
    start: Partial,
    n_rounds: int,
    n_epochs: int,
    split_every: int,
    seed: int,
    shuffle: bool,
    first: tuple[int, int] = (0, 0),
    on_round: Callable[[int, int, Partial | None], None] | None = None,
    fetch_every: int = 0,
) -> Partial:
    """Train ``n_epochs`` epochs of ``n_rounds`` rounds over the ``shards``; the final model.

    Under a client one task per shard per round runs where the shard lives and the tree of
    merges runs on the workers; without one the same computation runs here (the result is
    identical).

    ``start`` is the model before round ``first = (epoch, round)`` (a resumed fit starts
    there; every round is a pure function of its start model and position, so the result is
    that of the whole run). ``on_round(epoch, rnd, model)`` is called after each round, with
    the merged model every ``fetch_every`` rounds (waiting for it) and None otherwise.
    """
    light = _without_table(cfg)
    comb = functools.partial(combine, cfg=light)
    local = shards.client is None
    run = uuid.uuid4().hex
    model: Any = start
    count = 0
    sizes = [b - a for a, b in shards.ranges]
    with phase("rounds", width=len(shards)):
        for epoch in range(first[0], n_epochs):
            for rnd in range(first[1] if epoch == first[0] else 0, n_rounds):
                model = shards.reduce(
                    shard_round, comb, model, cfg if local else light,
                    name=f"bsgd-round-{run}-{epoch}-{rnd}", split_every=split_every, seed=seed,
                    tree_name=f"bsgd-merge-{run}-{epoch}-{rnd}",
                    epoch=epoch, rnd=rnd, n_rounds=n_rounds, shuffle=shuffle, run_seed=seed,
                )  # fmt: skip
                count += 1
                if logger.isEnabledFor(logging.DEBUG):
                    spans = [_round_rows(k, rnd, n_rounds) for k in sizes]
                    rows = sum(r.stop - r.start for r in spans)
                    logger.debug("bsgd round %d of epoch %d: %d rows through the SGD loop",
                                 rnd, epoch, rows)  # fmt: skip
                if on_round is not None:
                    fetched = None
                    if fetch_every and count % fetch_every == 0:
                        fetched = model if local else model.result()
                    on_round(epoch, rnd, fetched)
        with timer("bsgd rounds", logger):
            return model if isinstance(model, Partial) else model.result()
