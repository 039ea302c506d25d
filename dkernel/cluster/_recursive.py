"""The untruncated mini-batch kernel k-means fit (``tau=None``): the paper's dynamic program.

Every row's inner products with the centers are kept (``P``, n x k) and updated by the
recursion ``<phi(x), C_j> <- (1 - a) <phi(x), C_j> + a <phi(x), cm(B_j)>``; the state is
:class:`RecursiveState`, the steps functions of it.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from . import _numba as _nb
from ._blocks import _TILE_ROWS
from ._fit import run_iterations
from ._window import StepRule, assign, record_iteration, starved, step_size


@dataclasses.dataclass
class RecursiveState:
    """The untruncated fit's state: every row's inner products with the centers, the
    centers' norms, their coefficients over the rows and over the initial points, the
    weight each center has won (the "sklearn" rate), the batch objectives, the batch
    rows each center has won and the generator of the re-seeding draws."""

    P: np.ndarray
    norms: np.ndarray
    A: np.ndarray
    AZ: np.ndarray
    seen: np.ndarray
    rng: np.random.RandomState
    history: list = dataclasses.field(default_factory=list)
    wins: np.ndarray | None = None

    @property
    def n_iter(self) -> int:
        return len(self.history)


def fit_untruncated(oracle, rows, Z, w, batches, bar, rule: StepRule, loop, rng):
    """The untruncated fit from the initial centers ``Z`` over the rows held
    (``rows.all``, or row indices for a graph kernel): its state, ``(labels, inertia)``
    of every row (NumPy labels) and the centers as ``(points, coef, norms)``."""
    X_all = np.arange(len(w)) if rows.graph is not None else rows.all
    st, diag_all = start_recursive(oracle, X_all, Z, rng)
    labels, dist = fit_recursive(st, oracle, X_all, diag_all, w, batches, bar, rule, loop=loop)
    points = np.concatenate([X_all, Z if oracle.graph else Z.astype(X_all.dtype)])
    fitted = labels, float(np.dot(np.asarray(w), dist))
    return st, fitted, (points, np.hstack([st.A, st.AZ]), st.norms)


def start_recursive(oracle, X_all, Z, rng) -> tuple[RecursiveState, np.ndarray]:
    """The state of centers at the initial points ``Z``, and the rows' kernel diagonal."""
    n, k = len(X_all), len(Z)
    diag_all = oracle.diag(X_all)
    P = np.empty((n, k))  # <phi(x_i), C_j>
    for r0 in range(0, n, _TILE_ROWS):
        P[r0 : r0 + _TILE_ROWS] = oracle.kernel(X_all[r0 : r0 + _TILE_ROWS], Z)
    st = RecursiveState(
        P, oracle.diag(Z), A=np.zeros((k, n)), AZ=np.eye(k), seen=np.zeros(k), rng=rng
    )
    st.wins = np.zeros(k, dtype=np.int64)
    return st, diag_all


def fit_recursive(st, oracle, X_all, diag_all, w, batches, bar, rule: StepRule, *, loop):
    """The iterations of the untruncated fit (``loop``: :class:`~._fit.Loop`; the loop is
    :func:`~._fit.run_iterations`, this fit's ``step`` its own); returns every row's
    ``(labels, squared distances)``."""
    n = len(X_all)
    labels = np.empty(loop.batch_size, dtype=np.int64)
    mind = np.empty(loop.batch_size)

    def step(it: int) -> bool:
        idx, Xb = next(batches)
        wb, diag_b = w[idx], diag_all[idx]
        inner = np.ascontiguousarray(st.P[idx])
        f_before, W_tot = assign(diag_b, inner, st.norms, wb, labels, mind)
        recursive_step(st, oracle, X_all, idx, Xb, inner, wb, W_tot, labels, rule)
        plan = starved(st.seen, wb, mind, rule, st.rng)
        if plan is not None:
            _reseed_recursive(st, oracle, X_all, idx, diag_all, plan)
        record_iteration(st, f_before, rule.verbose)
        below_tol = False
        if rule.tol > 0:
            f_after, _ = assign(diag_b, np.ascontiguousarray(st.P[idx]), st.norms, wb, labels, mind)
            below_tol = f_before - f_after < rule.tol
        return below_tol

    run_iterations(step, st, n, bar, loop)
    labels_all = np.empty(n, dtype=np.int64)
    dist_all = np.empty(n)
    _nb.assign_nearest(diag_all, st.P, st.norms, labels_all, dist_all)
    return labels_all, dist_all


def recursive_step(st, oracle, X_all, idx, Xb, inner, wb, W_tot, labels, rule: StepRule):
    """Move the centers towards the batch (its rows assigned to ``labels``, ``inner``
    their inner products with the centers): update every row's inner products, the
    norms and the coefficients over the rows."""
    k = rule.n_clusters
    Kbb = oracle.kernel(Xb, Xb)
    W, cross, selfk, count = _nb.batch_center_terms(Kbb, inner, labels, wb, k)
    st.wins += count
    a = np.zeros(k)
    for j in range(k):
        if count[j] and W[j] > 0:
            a[j] = step_size(rule.rate, W[j], W_tot, st.seen[j])
            st.seen[j] += W[j]
    Wd = np.where(W > 0, W, 1.0)
    norms = (1 - a) ** 2 * st.norms + 2 * a * (1 - a) * cross / Wd + a * a * selfk / Wd**2
    st.norms = np.maximum(norms, 0.0)
    vals = a[labels] * wb / Wd[labels]
    Wb = np.zeros((len(idx), k))
    Wb[np.arange(len(idx)), labels] = vals
    st.A *= (1 - a)[:, None]
    st.AZ *= (1 - a)[:, None]
    np.add.at(st.A, (labels, idx), vals)
    st.P *= (1 - a)[None, :]
    for r0 in range(0, len(X_all), _TILE_ROWS):
        st.P[r0 : r0 + _TILE_ROWS] += oracle.kernel(X_all[r0 : r0 + _TILE_ROWS], Xb) @ Wb


def _reseed_recursive(st, oracle, X_all, idx, diag_all, plan):
    """The untruncated fit's re-seeding: each starved center becomes its single batch
    row (coefficient 1 on that row, its inner products with every row recomputed)."""
    out, pos, seen = plan
    rows = idx[pos]
    Xr = X_all[rows]
    for r0 in range(0, len(X_all), _TILE_ROWS):
        st.P[r0 : r0 + _TILE_ROWS, out] = oracle.kernel(X_all[r0 : r0 + _TILE_ROWS], Xr)
    st.A[out] = 0.0
    st.A[out, rows] = 1.0
    st.AZ[out] = 0.0
    st.norms[out] = diag_all[rows]
    st.seen[out] = seen
