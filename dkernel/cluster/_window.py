"""The truncated mini-batch kernel k-means step: its state as a value, its steps as functions.

:class:`WindowState` is everything a truncated fit carries from one iteration to the next
(each center's sliding window, the batch objectives, the winners' counts, the generator of
the re-seeding draws, the kernel's resolved width and centre, the kernel-value counters);
:meth:`WindowState.to_arrays` is exactly what a checkpoint holds and
:meth:`WindowState.from_arrays` its inverse. :func:`window_step` is one iteration on one
batch, shared by ``fit`` and ``partial_fit`` (the shape of scikit-learn's
``_mini_batch_step``): arrays and the state in, the state updated, nothing read from the
estimator but its :class:`StepRule`.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any, NamedTuple

import numpy as np

from . import _numba as _nb
from ._common import _check_rate

logger = logging.getLogger(__name__)


class StepRule(NamedTuple):
    """The estimator's parameters that one iteration reads (``rate``: the checked
    ``learning_rate``)."""

    n_clusters: int
    tau: int | None
    tol: float
    rate: Any
    renormalize: bool
    reassignment_ratio: float
    verbose: int


def step_rule(est) -> StepRule:
    """The :class:`StepRule` of a (checked) estimator."""
    return StepRule(
        est.n_clusters,
        est.tau,
        est.tol,
        _check_rate(est.learning_rate),
        est.renormalize,
        est.reassignment_ratio,
        est.verbose,
    )


class _Window:
    """One center's sliding window over recent batches (oldest first).

    ``pts``/``pc``/``sq``/``count``: per batch, its points (rows as given, or indices),
    the same rows as the kernel calls take them (centred by the oracle's ``mu``; the same
    arrays when nothing is centred), their squared norms (None for kernels without
    norms) and how many; ``c``:
    the coefficients of all points, flat; ``gram``: the kernel matrix of the window's
    points (float64), kept across iterations so that the center norm ``c^T G c`` needs
    no kernel evaluation.
    """

    __slots__ = ("c", "count", "gram", "norm", "pc", "pts", "seen", "sq")

    def __init__(self, pts, pc, sq, gram):
        self.pts = [pts]
        self.pc = [pc]
        self.sq = [sq]
        self.count = [len(pts)]
        self.c = np.ones(len(pts))
        self.gram = np.asarray(gram, dtype=np.float64)
        self.norm = float(_nb.bilinear(self.gram, self.c, self.c))
        self.seen = 0.0  # running weight N_j of the "sklearn" rate

    @property
    def total(self) -> int:
        return int(sum(self.count))


@dataclasses.dataclass
class WindowState:
    """A truncated fit between two iterations.

    ``windows``: one :class:`_Window` per center; ``history``: the batch objective of each
    iteration done (``n_iter`` of them); ``wins``: batch rows each center has won;
    ``rng``: the generator of the re-seeding draws (the estimator's); ``batch_seed``: the
    seed of the batch indices; ``gamma``/``mu``: the kernel's width and the centre of its
    calls; ``evals``/``evals_init``: kernel values counted so far / by the initialisation;
    ``f_after``: the last batch's objective after its update (``tol > 0`` only).
    """

    windows: list
    rng: np.random.RandomState
    history: list = dataclasses.field(default_factory=list)
    wins: np.ndarray | None = None
    batch_seed: int = 0
    gamma: Any = None
    mu: np.ndarray | None = None
    evals: int = 0
    evals_init: int = 0
    f_after: float | None = None

    def __post_init__(self):
        if self.wins is None:
            self.wins = np.zeros(len(self.windows), dtype=np.int64)

    @property
    def n_iter(self) -> int:
        return len(self.history)

    def to_arrays(self) -> dict:
        """The state as checkpoint entries (arrays and JSON values), the inverse of
        :meth:`from_arrays`."""
        rs: Any = self.rng.get_state()
        out: dict[str, Any] = {
            "n_iter": int(self.n_iter),
            "batch_seed": int(self.batch_seed),
            "history": np.asarray(self.history, dtype=np.float64),
            "wins": self.wins,
            "gamma": self.gamma,
            "mu": self.mu,
            "evals": int(self.evals),
            "evals_init": int(self.evals_init),
            "rng_keys": rs[1],
            "rng_rest": [rs[0], int(rs[2]), int(rs[3]), float(rs[4])],
        }
        for j, win in enumerate(self.windows):
            out[f"w{j}_count"] = np.asarray(win.count, dtype=np.int64)
            out[f"w{j}_pts"] = np.concatenate(win.pts)
            if any(pc is not pts for pc, pts in zip(win.pc, win.pts)):
                out[f"w{j}_pc"] = np.concatenate(win.pc)
            if win.sq[0] is not None:
                out[f"w{j}_sq"] = np.concatenate(win.sq)
            out[f"w{j}_c"] = win.c
            out[f"w{j}_gram"] = win.gram
            out[f"w{j}_scalars"] = [float(win.norm), float(win.seen)]
        return out

    @classmethod
    def from_arrays(cls, arrays: dict, *, rng: np.random.RandomState) -> WindowState:
        """The state saved by :meth:`to_arrays`; ``rng`` (the fit's generator) is set to
        the saved generator state."""
        name, pos, has_gauss, cached = arrays["rng_rest"]
        rng.set_state((name, arrays["rng_keys"], pos, has_gauss, cached))

        def split(a, count):
            return np.split(a, np.cumsum(count)[:-1])

        windows = []
        j = 0
        while f"w{j}_count" in arrays:
            count = arrays[f"w{j}_count"]
            win = _Window.__new__(_Window)
            win.count = [int(c) for c in count]
            win.pts = split(arrays[f"w{j}_pts"], count)
            pc = arrays.get(f"w{j}_pc")
            win.pc = list(win.pts) if pc is None else split(pc, count)
            sq = arrays.get(f"w{j}_sq")
            win.sq = [None] * len(count) if sq is None else split(sq, count)
            win.c = arrays[f"w{j}_c"]
            win.gram = arrays[f"w{j}_gram"]
            win.norm, win.seen = (float(v) for v in arrays[f"w{j}_scalars"])
            windows.append(win)
            j += 1
        return cls(
            windows,
            rng,
            history=[float(v) for v in arrays["history"]],
            wins=arrays["wins"].astype(np.int64),
            batch_seed=arrays["batch_seed"],
            gamma=arrays["gamma"],
            mu=arrays["mu"],
            evals=int(arrays["evals"]),
            evals_init=int(arrays["evals_init"]),
        )


# ------------------------------------------------------------------ the steps
def new_windows(oracle, Z) -> list:
    """One window per initial center, each the single point ``Z[j]``."""
    Zc, z_sq = oracle.prep(Z)
    wins = []
    for j in range(len(Z)):
        sq = None if z_sq is None else z_sq[j : j + 1]
        gram = oracle.kernel_p(Zc[j : j + 1], sq)
        wins.append(_Window(Z[j : j + 1], Zc[j : j + 1], sq, gram))
    return wins


def _stack(windows, oracle=None):
    """Stacked support (as the kernel calls take it when ``oracle`` is given, the rows
    as given otherwise), its squared norms, the per-center segment pointers and the
    coefficients: one copy per iteration."""
    which = "pts" if oracle is None else "pc"
    S = np.concatenate([p for win in windows for p in getattr(win, which)])
    S_sq = None
    if oracle is not None and windows[0].sq[0] is not None:
        S_sq = np.concatenate([q for win in windows for q in win.sq])
    ptr = np.zeros(len(windows) + 1, dtype=np.int64)
    ptr[1:] = np.cumsum([len(win.c) for win in windows])
    coef = np.concatenate([win.c for win in windows]).astype(np.float64)
    return S, S_sq, ptr, coef


def export_windows(windows):
    """The centers as ``(support, coef (k, s), norms)``: each window's points stacked."""
    S, _, ptr, coef = _stack(windows)
    C = np.zeros((len(windows), len(S)))
    for j in range(len(windows)):
        C[j, ptr[j] : ptr[j + 1]] = coef[ptr[j] : ptr[j + 1]]
    return S, C, np.array([win.norm for win in windows])


def window_step(state: WindowState, oracle, Xb, wb, rule: StepRule) -> bool:
    """One truncated iteration on the batch ``Xb`` (weights ``wb``): assign, move each
    winning center, truncate, re-seed; returns True to stop (``tol``)."""
    k = rule.n_clusters
    S, S_sq, ptr, coef = _stack(state.windows, oracle)
    Xc, x_sq = oracle.prep(Xb)
    Kxs = oracle.kernel_p(Xc, x_sq, S, S_sq)  # the one block: batch x every window
    inner = np.empty((len(Xb), k))
    _nb.center_inner(Kxs, ptr, coef, inner)
    diag_b = oracle.diag(Xb)
    norms = np.array([win.norm for win in state.windows])
    labels = np.empty(len(Xb), dtype=np.int64)
    mind = np.empty(len(Xb))
    f_before, W_tot = assign(diag_b, inner, norms, wb, labels, mind)
    W = np.bincount(labels, weights=wb, minlength=k)
    count = np.bincount(labels, minlength=k)
    assert state.wins is not None  # set when the state is made
    state.wins += count
    new = _sort_by_center(Xb, Xc, x_sq, wb, labels, count)
    Kbb = oracle.kernel_p(Xc, x_sq) if rule.tol > 0 else None
    # each center's new rows among themselves (the k blocks in parallel, or from Kbb)
    if Kbb is None:
        Kjjs = oracle.kernel_blocks(new.pc, new.sq, new.bounds)
    else:
        Kjjs = [Kbb[np.ix_(new.rows(j), new.rows(j))] for j in range(k)]
    inner_new = inner.copy() if Kbb is not None else None
    for j in range(k):
        if count[j] == 0 or W[j] <= 0.0:
            continue  # empty cluster: the center stays as it is
        win = state.windows[j]
        a = step_size(rule.rate, W[j], W_tot, win.seen)
        win.seen += W[j]
        m_drop = _move_window(win, a, W[j], new, j, Kxs, ptr[j], Kjjs[j], rule)
        if inner_new is not None and Kbb is not None:  # both set when tol > 0
            c, m_keep = win.c, len(win.c) - count[j]
            cols = slice(ptr[j] + m_drop, ptr[j + 1])
            inner_new[:, j] = Kxs[:, cols] @ c[:m_keep] + Kbb[:, new.rows(j)] @ c[m_keep:]
    plan = starved([win.seen for win in state.windows], wb, mind, rule, state.rng)
    if plan is not None:
        _reseed_windows(state, oracle, Xb, plan, Kbb, inner_new)
    record_iteration(state, f_before, rule.verbose)
    state.evals = oracle.evals
    if inner_new is None:
        return False
    norms = np.array([win.norm for win in state.windows])
    state.f_after, _ = assign(diag_b, inner_new, norms, wb, labels, mind)
    return f_before - state.f_after < rule.tol


def _reseed_windows(state, oracle, Xb, plan, Kbb, inner_new) -> None:
    """Each starved center restarts as a window of its one seeding batch row."""
    starved_, pos, seen = plan
    for j, p, win in zip(starved_, pos, new_windows(oracle, Xb[pos])):
        win.seen = seen
        state.windows[j] = win
        if inner_new is not None and Kbb is not None:
            inner_new[:, j] = Kbb[:, p]


def _move_window(win, a, W_j, new, j, Kxs, col0, Kjj, rule: StepRule) -> int:
    """Move one center a step ``a`` towards the mean of its new rows (``new``'s
    segment ``j``, total weight ``W_j``) and truncate its window; returns how many
    of its old points it dropped."""
    tau = np.inf if rule.tau is None else rule.tau
    r0, r1 = new.bounds[j], new.bounds[j + 1]
    # drop whole oldest batches while the rest (the new one included) holds >= tau
    counts = [*win.count, r1 - r0]
    n_drop, total = 0, sum(counts)
    while n_drop < len(counts) - 1 and total - counts[n_drop] >= tau:
        total -= counts[n_drop]
        n_drop += 1
    m_drop = sum(counts[:n_drop])
    c = np.concatenate([win.c[m_drop:] * (1 - a), a * new.w[r0:r1] / W_j])
    # the kept window's Gram, the new rows x kept window (from the block), Kjj
    G = _nb.window_gram(win.gram, m_drop, Kxs, new.rows(j), col0 + m_drop, Kjj)
    if n_drop and rule.renormalize:
        c /= c.sum()
    win.gram, win.c = G, c
    win.norm = max(float(_nb.bilinear(G, c, c)), 0.0)
    del win.pts[:n_drop], win.pc[:n_drop], win.sq[:n_drop], win.count[:n_drop]
    win.pts.append(new.pts[r0:r1])
    win.pc.append(new.pc[r0:r1])
    win.sq.append(None if new.sq is None else new.sq[r0:r1])
    win.count.append(r1 - r0)
    return m_drop


# ------------------------------------------------ rules shared with tau=None
def step_size(rate, W_j, W_tot, seen) -> float:
    """The step ``alpha_j`` of a center that won weight ``W_j`` of the batch's ``W_tot``
    (``seen``: the weight it had won before)."""
    if rate == "beta":
        return float(np.sqrt(W_j / W_tot))
    if rate == "sklearn":
        return float(W_j / (seen + W_j))
    return rate


def starved(seen, wb, mind, rule: StepRule, rng):
    """The centers to re-seed (``reassignment_ratio``) after an iteration: their
    indices, the batch positions that seed them (drawn from ``rng`` in proportion to
    ``wb * mind``, without replacement) and the accumulated weight they restart from;
    None when there is nothing to re-seed."""
    if not rule.reassignment_ratio:
        return None
    seen = np.asarray(seen, dtype=np.float64)
    out = np.flatnonzero(seen < rule.reassignment_ratio * seen.max())
    p = wb * np.maximum(mind, 0.0)
    # at most half a batch, and never more than the rows that can be drawn
    limit = min(len(wb) // 2, int(np.count_nonzero(p > 0)))
    if out.size > limit:
        out = np.sort(out[np.argsort(seen[out], kind="stable")[:limit]])
    if out.size == 0:
        return None
    pos = rng.choice(len(wb), size=out.size, replace=False, p=p / p.sum())
    rest = np.delete(seen, out)
    logger.debug("re-seeding %d starved center(s): %s", out.size, out.tolist())
    return out, pos, float(rest.min())


def record_iteration(state, f_before: float, verbose: int) -> None:
    """Append the batch objective to ``state.history`` (logged every ``verbose``)."""
    state.history.append(f_before)
    if verbose and state.n_iter % verbose == 0:
        logger.info("iteration %d: batch objective %.6g", state.n_iter, f_before)


class Plateau:
    """Early stop on the exponentially weighted average of the batch objective."""

    __slots__ = ("alpha", "best", "ewa", "patience", "since")

    def __init__(self, patience, alpha):
        self.patience, self.alpha = patience, alpha
        self.ewa, self.best, self.since = None, np.inf, 0

    def __call__(self, f) -> bool:
        if self.patience is None:
            return False
        self.ewa = f if self.ewa is None else (1.0 - self.alpha) * self.ewa + self.alpha * f
        if self.ewa < self.best:
            self.best, self.since = self.ewa, 0
        else:
            self.since += 1
        return self.since >= self.patience


def plateau(patience, n: int, b: int, history=()) -> Plateau:
    """The ``max_no_improvement`` rule: a callable fed each batch objective in turn,
    True once the smoothed objective has gone that many iterations without a new
    minimum. A resumed fit replays its saved ``history``, so it stops where an
    uninterrupted fit does."""
    rule = Plateau(patience, min(1.0, 2.0 * b / (n + 1)))
    for f in history:
        rule(f)
    return rule


def stop_reason(below_tol: bool, patience) -> str:
    if below_tol:
        return "the batch objective improved by less than tol"
    return f"no new best smoothed batch objective in {patience} iterations"


class _SortedBatch(NamedTuple):
    """A batch sorted by center (stable: rows keep their batch order), so each center's
    new rows are one slice, kept in its window as a view: ``pts`` the rows as given,
    ``pc`` as the kernel calls take them, ``sq`` their squared norms, ``w`` weights,
    ``order`` the batch positions, ``bounds`` the k + 1 segment ends."""

    pts: np.ndarray
    pc: np.ndarray
    sq: np.ndarray | None
    w: np.ndarray
    order: np.ndarray
    bounds: np.ndarray

    def rows(self, j):
        """Batch positions of center ``j``'s new rows."""
        return self.order[self.bounds[j] : self.bounds[j + 1]]


def _sort_by_center(Xb, Xc, x_sq, wb, labels, count) -> _SortedBatch:
    order = np.argsort(labels, kind="stable")
    bounds = np.concatenate([[0], np.cumsum(count)])
    Xs = Xb[order]
    Xcs = Xc[order] if Xc is not Xb else Xs
    sqs = None if x_sq is None else x_sq[order]
    return _SortedBatch(Xs, Xcs, sqs, wb[order], order, bounds)


def assign(diag_b, inner, norms, wb, labels, mind) -> tuple[float, float]:
    """Assign a batch to its nearest centers (``labels``, ``mind`` filled in place);
    returns its objective f_B and total weight."""
    _nb.assign_nearest(diag_b, inner, norms, labels, mind)
    W_tot = float(wb.sum())
    return _batch_objective(wb, mind, W_tot), W_tot


def _batch_objective(wb, mind, W_tot: float) -> float:
    """Weighted mean feature-space distance of a batch to its nearest centers (f_B)."""
    return float(np.dot(wb, mind) / W_tot) if W_tot > 0 else 0.0
