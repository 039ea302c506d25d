"""Exact coefficients over a fixed budget: the kernel SVM restricted to the span of the
support vectors Z, solved over all training rows (``BudgetedSVC(refit=True)``).

With Z fixed, ``f(x) = sum_j beta_j k(x, z_j) + b`` is a linear model in the B features
``k(x, Z)``, and the RKHS norm of the expansion is ``beta^T K_ZZ beta``. Whitening by the
eigendecomposition ``K_ZZ = U diag(s) U^T`` (directions with ``s <= 1e-10 max s`` dropped),
``phi(x) = k(x, Z) U diag(s)^-1/2`` and ``v = diag(s)^1/2 U^T beta`` turn it into a linear
SVM with the plain ``||v||^2`` regulariser::

    min_v  1/2 ||v||^2 + C sum_i w_i max(0, 1 - y_i phi(x_i)^T v)^2,   C = 1 / (alpha n)

(the squared hinge of liblinear's primal solver; ``alpha`` BSGD's lambda, so the
regulariser is the same ``alpha/2 ||w||^2`` BSGD optimises; ``n`` the number of rows). An
intercept is the weight of a constant feature of value 1, regularised with the others, as
in BSGD. Multi-class problems have one column per class, solved together, and one of three
losses. One-vs-rest: each column the binary problem of its class against the others.
Weston-Watkins: with ``f_j(x) = phi(x)^T v_j``, one joint problem

    min_V  1/2 sum_j ||v_j||^2 + C sum_i w_i sum_{r != y_i} max(0, 1 - f_{y_i}(x_i) + f_r(x_i))^2

(every other class held a margin below the true one). Crammer-Singer: the same with only
the largest slack per row, ``max(0, 1 - f_y + max_{r != y} f_r)^2`` (the loss the SGD
passes take, squared). The joint losses' generalised Hessians couple, for each active
(row, class r) pair, the true class's column and r's: ``2 w (e_y - e_r)(e_y - e_r)^T`` in
score space, so their Newton systems are solved for all columns at once (one CG, one line
search) where one-vs-rest solves each column on its own. The Weston-Watkins loss is
continuously differentiable, like the binary squared hinge, and its solve converges as
one-vs-rest's does; the Crammer-Singer loss is not differentiable where two other classes
tie for the largest active slack, so its gradient need not vanish at the optimum: its
Newton steps slow down near those kinks and the gradient stop is rarely met (it then ends
at the step cap). Binary problems have one column and no choice to make.

The solver is a truncated Newton method (Keerthi & DeCoste 2005; liblinear's primal
Newton): at each step, preconditioned conjugate gradients (Jacobi preconditioner) on the
generalised Hessian ``I + 2C Phi_A^T W Phi_A`` over the rows with an active margin, then
one trial pass along the direction: the losses at every step length of a backtracking
line search (Armijo's rule, per problem) and the gradient sums at the full and the half
step, so that the next step needs no gradient pass of its own when the line search takes
either (the usual case; another length costs one more pass). CG's Hessian products are
passes over the rows, except for one-vs-rest problems whose Hessians fit in
``_DENSE_BYTES`` (binary ones up to a width of about 1,400): their passes also bring the
Gram sums ``2 Phi_A^T W Phi_A`` (at the trial's two points), and CG takes its products
from those here, with no pass. The Gram sums add exactly: each part rounds its own to a
grid ``2^E`` fixed by one pass over the rows first (``E`` from
``max_j sum_i w_i phi_ij^2``, which bounds every entry), so they are the same bits in any
order and grouping, and each worker adds its parts' sums before sending one matrix. On the
10^7-row checkerboard's refit (128,000 sampled rows, 501 features) it takes the same
steps (the same gradient norms, to three digits) in 11 passes instead of 48.

Every pass over the rows (energy, gradient, Hessian-vector product, trial) is one task per
worker over its parts; each part's sums come back on their own and are summed by a fixed
tree (the Gram sums: exactly, in any order), so the model does not depend on where parts
run; all classes share each pass. Rows never leave their part: on a cluster each part's
features live in its worker's memory (recomputed from its rows per pass when they would
not fit).
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable
from functools import partial
from typing import Any, NamedTuple

import numpy as np

from .._base import _BaseKernelEstimator
from .._defaults import setting
from ..data import ResidentRows, collect_parts, range_workers
from ..kernels import ONE_BLAS_THREAD, KernelSpec, effective_n_jobs, run_tiles
from ..runtime import add_in_order, phase, timer, tree_reduce
from ._budget import weighted_colsums
from .stream import Standardizer, load_ranges, row_parts

logger = logging.getLogger(__name__)

#: Rows per tile inside a part (bounds the temporaries of a pass).
_TILE_ROWS = 8192
#: Rows per step of a pass: a step's features stay in cache across its products (a pass
#: over 8192-row steps read the features from memory once per product).
_PASS_ROWS = 256
#: The refit's default row count per support vector (above it: a uniform sample).
_ROWS_PER_SV = 256
#: Eigenvalues of K_ZZ below this share of the largest are dropped.
_EIG_FLOOR = 1e-10
#: Line-search steps, all evaluated in one pass.
_STEPS = 0.5 ** np.arange(12)
_ARMIJO = 1e-4
#: The shorter step whose gradient the trial pass of a Newton step computes beside the
#: full step's: where the full step fails Armijo's rule the line search takes the half
#: step nearly always (in every refit of the 10^7-row checkerboard measured), and its
#: gradient then needs no pass of its own.
_HALF = 0.5
#: One-vs-rest problems whose generalised Hessians (one ``width x width`` matrix per
#: column) take at most this many bytes form them from the passes' Gram sums and take
#: CG's products from them here; larger ones, and the joint losses, make a pass per product.
_DENSE_BYTES = 1 << 24


class Basis(NamedTuple):
    """The feature map ``x -> [k(x, Z) T, icpt]`` (``T = U diag(s)^-1/2``)."""

    Z: np.ndarray
    T: np.ndarray
    spec: KernelSpec
    icpt: float

    @property
    def width(self) -> int:
        return self.T.shape[1] + (self.icpt > 0)


def make_basis(Z: np.ndarray, spec: KernelSpec, icpt: float) -> tuple[Basis, np.ndarray]:
    """The whitened basis of the SVs ``Z`` and ``U diag(s)^1/2`` (maps coefficients beta
    to the whitened v: ``v = (U diag(s)^1/2)^T beta``)."""
    Z = np.ascontiguousarray(Z, dtype=np.float64)
    K = _BaseKernelEstimator._kernel(Z, Z, spec)
    s, U = np.linalg.eigh(0.5 * (K + K.T))
    keep = s > _EIG_FLOOR * max(float(s[-1]), 0.0)
    s, U = s[keep], U[:, keep]
    T = U / np.sqrt(s)
    return Basis(Z, np.ascontiguousarray(T), spec, float(icpt)), U * np.sqrt(s)


def features(Xb: np.ndarray, basis: Basis) -> np.ndarray:
    """``phi`` of standardised rows (the constant column last when there is an intercept)."""
    out = np.empty((Xb.shape[0], basis.width))
    r = basis.T.shape[1]
    for a in range(0, Xb.shape[0], _TILE_ROWS):
        K = _BaseKernelEstimator._kernel(Xb[a : a + _TILE_ROWS], basis.Z, basis.spec)
        out[a : a + len(K), :r] = K @ basis.T
    if basis.icpt > 0:
        out[:, r] = basis.icpt
    return out


class Part(NamedTuple):
    """A part's rows as the solver reads them: features (or standardised rows when not
    cached), class indices, weights."""

    F: np.ndarray
    yi: np.ndarray
    w: np.ndarray
    cached: bool


def sample_part(rows, sample: tuple[int, int, int] | None):
    """The rows a part keeps of a loaded range: all (``sample`` None), or for ``sample =
    (seed, range index, m)`` a seeded uniform draw of m of them, in their order."""
    if sample is None:
        return rows
    Xb, yi, wb = rows
    seed, k, m = sample
    idx = np.sort(np.random.default_rng([seed, k]).choice(len(yi), m, replace=False))
    return Xb[idx], yi[idx], wb[idx]


def make_part(pieces: list, basis: Basis, cache: bool) -> Part:
    """A part from the kept rows of its ranges, joined in order (featurised when
    ``cache``; runs where the part lives)."""
    Xb, yi, wb = (np.concatenate(a) for a in zip(*pieces)) if len(pieces) > 1 else pieces[0]
    return Part(features(Xb, basis) if cache else Xb, yi, wb, cache)


def sample_sizes(ranges: list[tuple[int, int]], n: int, m: int) -> list[int]:
    """Rows kept of each range when m of the n rows are kept, in proportion to the
    ranges' sizes (summing to m exactly; depends on the ranges and m only)."""
    cut = [e * m // n for _, e in ranges]
    return [b - a for a, b in zip([0, *cut[:-1]], cut)]


def _signs(yi: np.ndarray, c: int) -> np.ndarray:
    """+-1 labels, one column per class (one column: ``classes_[1]`` positive)."""
    if c == 1:
        return np.where(yi == 1, 1.0, -1.0)[:, None]
    return np.where(yi[:, None] == np.arange(c), 1.0, -1.0)


def _tiles(part: Part, basis: Basis):
    """(features, class indices, weights) of the part's rows, ``_PASS_ROWS`` at a time (the
    features computed ``_TILE_ROWS`` at a time when not cached)."""
    for a in range(0, len(part.yi), _TILE_ROWS):
        F = part.F[a : a + _TILE_ROWS]
        if not part.cached:
            F = features(F, basis)
        for b in range(0, len(F), _PASS_ROWS):
            sl = slice(a + b, a + b + _PASS_ROWS)
            yield F[b : b + _PASS_ROWS], part.yi[sl], part.w[sl]


def part_grad(
    part: Part, basis: Basis, V: np.ndarray, with_zero: bool, grid: int | None = None
) -> Any:
    """Sums over the part's rows, stacked in one array of shape (3, width + 1, c):
    ``[0, :-1]`` the loss gradient, ``[0, -1]`` the loss, ``[1, :-1]`` the Hessian's
    diagonal, and the loss gradient at ``V = 0`` in ``[2]`` when asked (``[2]`` zero
    otherwise). Gradients and diagonal without the factor C. With a ``grid`` (formed
    Hessians): the pair (those sums, the generalised Hessians' Gram sums, :meth:`_Active.grams`)."""
    c = V.shape[1]
    out = np.zeros((3, V.shape[0] + 1, c))
    active = _Active(part, c, basis.width)
    for F, yi, w in _tiles(part, basis):
        Y = _signs(yi, c)
        z = 1.0 - Y * (F @ V)
        _add_grad(out, F, Y, w, z)
        if grid is not None:
            active.add(F, w, z)
        if with_zero:
            out[2, :-1] -= 2.0 * weighted_colsums(F, Y * w[:, None], False)
    if grid is None:
        return out
    return out, active.grams(grid)


def part_energy(part: Part, basis: Basis) -> np.ndarray:
    """``sum_i w_i phi_i^2`` per feature over all the part's rows, shape (width, 1): the
    bound of every Gram sum that fixes the grid (:func:`_grid`)."""
    out = np.zeros((basis.width, 1))
    for F, _, w in _tiles(part, basis):
        out += weighted_colsums(F, w[:, None], True)
    return out


def _grid(energy: np.ndarray) -> int:
    """The exponent E of the grid ``2^E Z`` the parts round their Gram sums to. An entry of
    a Gram sum is at most ``2 max(energy)`` (Cauchy-Schwarz over the rows, active or not),
    so every partial sum of rounded values stays below ``2^(52 + E)``: the sums are exact,
    the same bits in any order and grouping, on any number of workers."""
    return int(np.frexp(4.0 * float(energy.max()))[1]) - 52


def _packed_size(width: int) -> int:
    """Entries of a ``width x width`` symmetric matrix's upper triangle."""
    return width * (width + 1) // 2


def _unpacked(packed: np.ndarray, width: int) -> np.ndarray:
    """The symmetric matrices (shape (c, width, width)) of upper triangles packed by rows
    (shape (c, width (width + 1) / 2))."""
    rows, cols = np.triu_indices(width)
    G = np.empty((len(packed), width, width))
    G[:, rows, cols] = packed
    G[:, cols, rows] = packed
    return G


class _Active:
    """A part's rows with an active margin (``z > 0``) per column at one point, gathered
    over its tiles for their Gram sums: cached features are picked once at the end by the
    tiles' masks, features recomputed per tile are kept (scaled) as the tiles pass."""

    def __init__(self, part: Part, c: int, width: int) -> None:
        self.part, self.width = part, width
        self.masks: list = []
        self.rows: list = [[] for _ in range(c)]

    def add(self, F: np.ndarray, w: np.ndarray, z: np.ndarray) -> None:
        act = z > 0
        if self.part.cached:
            self.masks.append(act)
            return
        for j, rows in enumerate(self.rows):
            if act[:, j].any():
                rows.append(F[act[:, j]] * np.sqrt(2.0 * w[act[:, j]])[:, None])

    def grams(self, grid: int) -> np.ndarray:
        """Per column the Gram ``sum 2 w phi phi^T`` of its active rows, its upper triangle
        by rows (shape (c, width (width + 1) / 2); :func:`_unpacked` restores it), rounded
        to the grid ``2^grid`` (BLAS at one thread: the same bits wherever it runs, features
        cached or not). Half the matrix is half the bytes each worker sends per pass."""
        out = np.zeros((len(self.rows), _packed_size(self.width)))
        act = np.concatenate(self.masks) if self.masks else None
        upper = None
        with ONE_BLAS_THREAD:
            for j, G in enumerate(out):
                if act is not None:
                    idx = np.flatnonzero(act[:, j])
                    A = self.part.F[idx] * np.sqrt(2.0 * self.part.w[idx])[:, None]
                elif self.rows[j]:
                    A = np.concatenate(self.rows[j])
                else:
                    continue
                if len(A):
                    upper = upper or np.triu_indices(A.shape[1])
                    G[:] = (A.T @ A)[upper]
                    np.ldexp(G, -grid, out=G)  # exact: powers of two
                    np.rint(G, out=G)
                    np.ldexp(G, grid, out=G)
        return out


def _add_grad(out: np.ndarray, F: np.ndarray, Y: np.ndarray, w: np.ndarray, z: np.ndarray):
    """Add a tile's gradient, loss and Hessian diagonal (:func:`part_grad`'s ``[0]`` and
    ``[1]``) to ``out``, for the margin slacks ``z = 1 - y f(x)`` of its rows."""
    act = z > 0
    wz = np.where(act, z, 0.0) * w[:, None]
    out[0, :-1] -= 2.0 * weighted_colsums(F, wz * Y, False)
    out[0, -1] += (wz * np.where(act, z, 0.0)).sum(axis=0)
    out[1, :-1] += 2.0 * weighted_colsums(F, act * w[:, None], True)


def part_hess(part: Part, basis: Basis, V: np.ndarray, D: np.ndarray) -> np.ndarray:
    """``2 Phi_A^T W Phi_A D`` over the part's rows (A: rows with an active margin at V)."""
    c = V.shape[1]
    out = np.zeros_like(D)
    for F, yi, w in _tiles(part, basis):
        Y = _signs(yi, c)
        M = F @ np.hstack([V, D])
        act = Y * M[:, :c] < 1.0
        out += 2.0 * weighted_colsums(F, np.where(act, M[:, c:], 0.0) * w[:, None], False)
    return out


def _add_line(out: np.ndarray, m0: np.ndarray, m1: np.ndarray, w: np.ndarray) -> None:
    """Add a tile's losses at every step of ``_STEPS`` to ``out``, for the margins ``m0``
    at V and ``m1`` along S (``y phi^T V`` and ``y phi^T S``)."""
    for k, t in enumerate(_STEPS):
        z = np.maximum(1.0 - m0 - t * m1, 0.0)
        out[k] += (w[:, None] * z * z).sum(axis=0)


def part_trial(
    part: Part, basis: Basis, V: np.ndarray, S: np.ndarray, grid: int | None = None
) -> Any:
    """The pass that tries a Newton step S from V (:func:`_trial`): :func:`part_grad`'s
    sums at ``V + S`` and at ``V + _HALF S``, and the losses at ``V + t S`` for every t of
    ``_STEPS``; flattened (:func:`_packed`). The sums are the gradient pass's own bits (its
    product with ``V + t S``, not the line's with ``[V, S]``): a solve resumed from a
    checkpoint recomputes that pass and must get the same. With a ``grid``: the pair (those
    sums, the Gram sums at both points, shape (2, c, width (width + 1) / 2))."""
    c = V.shape[1]
    at = np.zeros((2, 3, V.shape[0] + 1, c))
    line = np.zeros((len(_STEPS), c))
    VS, points = np.hstack([V, S]), [V + S * t for t in (1.0, _HALF)]
    active = [_Active(part, c, basis.width) for _ in points]
    for F, yi, w in _tiles(part, basis):
        Y = _signs(yi, c)
        M = F @ VS
        _add_line(line, Y * M[:, :c], Y * M[:, c:], w)
        for j, Vt in enumerate(points):
            z = 1.0 - Y * (F @ Vt)
            _add_grad(at[j], F, Y, w, z)
            if grid is not None:
                active[j].add(F, w, z)
    if grid is None:
        return _packed(at, line)
    return _packed(at, line), np.stack([a.grams(grid) for a in active])


def _slacks(M: np.ndarray, yi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row of the scores ``M``: the row indices and the active slacks
    ``max(0, 1 - M[y] + M[r])`` of every other class r (zero in the true class's column)."""
    rows = np.arange(len(yi))
    Zs = 1.0 - M[rows, yi][:, None] + M
    Zs[rows, yi] = 0.0
    return rows, np.maximum(Zs, 0.0)


def part_grad_ww(part: Part, basis: Basis, V: np.ndarray, with_zero: bool) -> np.ndarray:
    """:func:`part_grad` of the Weston-Watkins loss: ``[0, :-1]`` the loss gradient,
    ``[0, -1, 0]`` the loss (the other columns of that row zero: the loss is one per row,
    not per class), ``[1, :-1]`` the generalised Hessian's diagonal, ``[2]`` the gradient
    at ``V = 0`` when asked (every slack 1 there)."""
    return _joint_grad(part, basis, V, with_zero, _add_grad_ww)


def _joint_grad(part: Part, basis: Basis, V: np.ndarray, with_zero: bool, add) -> np.ndarray:
    """The gradient pass of a joint loss: ``add(out, F, yi, w, F @ V, with_zero)`` adds
    each tile's sums."""
    out = np.zeros((3, V.shape[0] + 1, V.shape[1]))
    for F, yi, w in _tiles(part, basis):
        add(out, F, yi, w, F @ V, with_zero)
    return out


def _add_grad_ww(out, F, yi, w, M, with_zero: bool) -> None:
    """Add a tile's Weston-Watkins sums (:func:`part_grad_ww`) for its scores ``M``."""
    c = M.shape[1]
    rows, Zs = _slacks(M, yi)
    G = Zs * w[:, None]
    G[rows, yi] = -G.sum(axis=1)
    out[0, :-1] += 2.0 * weighted_colsums(F, G, False)
    out[0, -1, 0] += (w[:, None] * Zs * Zs).sum()
    A = (Zs > 0) * w[:, None]
    A[rows, yi] = A.sum(axis=1)
    out[1, :-1] += 2.0 * weighted_colsums(F, A, True)
    if with_zero:
        G0 = np.repeat(w[:, None], c, axis=1)
        G0[rows, yi] = -(c - 1) * w
        out[2, :-1] += 2.0 * weighted_colsums(F, G0, False)


def part_hess_ww(part: Part, basis: Basis, V: np.ndarray, D: np.ndarray) -> np.ndarray:
    """The Weston-Watkins generalised Hessian times ``D``: each active pair (row, other
    class r) at V adds ``2 w phi (e_y - e_r) (d_y - d_r)`` (``d = phi^T D``)."""
    c = V.shape[1]
    out = np.zeros_like(D)
    for F, yi, w in _tiles(part, basis):
        M = F @ np.hstack([V, D])
        rows, Zs = _slacks(M[:, :c], yi)
        Md = M[:, c:]
        U = np.where(Zs > 0, (Md[rows, yi][:, None] - Md) * w[:, None], 0.0)
        Q = -U
        Q[rows, yi] = U.sum(axis=1)
        out += 2.0 * weighted_colsums(F, Q, False)
    return out


def _ww_sq_loss(M: np.ndarray, yi: np.ndarray, w: np.ndarray) -> float:
    """The Weston-Watkins loss of rows with scores ``M``."""
    _, Zs = _slacks(M, yi)
    return float((w[:, None] * Zs * Zs).sum())


def _add_joint_line(out: np.ndarray, M: np.ndarray, yi, w, loss) -> None:
    """Add a tile's joint loss (``loss(scores, yi, w)``) at ``V + t S`` for every t of
    ``_STEPS`` to column 0 of ``out`` (shape (len(_STEPS), c)), for its scores ``M`` at
    ``[V, S]``."""
    c = out.shape[1]
    for k, t in enumerate(_STEPS):
        out[k, 0] += loss(M[:, :c] + t * M[:, c:], yi, w)


def _runner_up(M: np.ndarray, yi: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row of the scores ``M``: the row indices, the runner-up class ``r`` (the best
    class other than ``yi``; ties to the lowest index) and the Crammer-Singer margin slack
    ``1 - M[y] + M[r]``."""
    rows = np.arange(len(yi))
    other = M.copy()
    other[rows, yi] = -np.inf
    r = other.argmax(axis=1)
    return rows, r, 1.0 - M[rows, yi] + other[rows, r]


def part_grad_cs(part: Part, basis: Basis, V: np.ndarray, with_zero: bool) -> np.ndarray:
    """:func:`part_grad_ww` of the Crammer-Singer loss (the runner-up's slack only).
    All scores tie at ``V = 0``: the gradient there (``[2]``) is the subgradient splitting
    each row's runner-up share evenly over its c - 1 other classes."""
    return _joint_grad(part, basis, V, with_zero, _add_grad_cs)


def _add_grad_cs(out, F, yi, w, M, with_zero: bool) -> None:
    """Add a tile's Crammer-Singer sums (:func:`part_grad_cs`) for its scores ``M``."""
    c = M.shape[1]
    rows, r, z = _runner_up(M, yi)
    wz = np.where(z > 0, z, 0.0) * w
    G = np.zeros((len(yi), c))
    G[rows, yi] = -wz
    G[rows, r] = wz
    out[0, :-1] += 2.0 * weighted_colsums(F, G, False)
    out[0, -1, 0] += (wz * np.where(z > 0, z, 0.0)).sum()
    A = np.zeros((len(yi), c))
    A[rows, yi] = A[rows, r] = np.where(z > 0, w, 0.0)
    out[1, :-1] += 2.0 * weighted_colsums(F, A, True)
    if with_zero:
        G0 = np.repeat(w[:, None] / (c - 1), c, axis=1)
        G0[rows, yi] = -w
        out[2, :-1] += 2.0 * weighted_colsums(F, G0, False)


def part_hess_cs(part: Part, basis: Basis, V: np.ndarray, D: np.ndarray) -> np.ndarray:
    """The Crammer-Singer generalised Hessian times ``D``: each row with an active margin
    at V adds ``2 w phi (e_y - e_r) (d_y - d_r)`` (``d = phi^T D``, r its runner-up)."""
    c = V.shape[1]
    out = np.zeros_like(D)
    for F, yi, w in _tiles(part, basis):
        M = F @ np.hstack([V, D])
        rows, r, z = _runner_up(M[:, :c], yi)
        u = np.where(z > 0, (M[rows, c + yi] - M[rows, c + r]) * w, 0.0)
        Q = np.zeros((len(yi), c))
        Q[rows, yi] = u
        Q[rows, r] = -u
        out += 2.0 * weighted_colsums(F, Q, False)
    return out


def _cs_sq_loss(M: np.ndarray, yi: np.ndarray, w: np.ndarray) -> float:
    """The Crammer-Singer loss of rows with scores ``M`` (the runner-up chosen from M)."""
    _, _, z = _runner_up(M, yi)
    z = np.maximum(z, 0.0)
    return float((w * z * z).sum())


def _joint_trial(part: Part, basis: Basis, V, S, add: Callable, loss: Callable) -> np.ndarray:
    """:func:`part_trial` of a joint loss (``add``: its tile's gradient sums, ``loss``: its
    loss of a tile's scores), in one pass over the tiles (each tile's features made once):
    the gradient pass's bits at ``V + S`` and ``V + _HALF S``, the line's losses."""
    at = np.zeros((2, 3, V.shape[0] + 1, V.shape[1]))
    line = np.zeros((len(_STEPS), V.shape[1]))
    VS, points = np.hstack([V, S]), [V + S * t for t in (1.0, _HALF)]
    for F, yi, w in _tiles(part, basis):
        _add_joint_line(line, F @ VS, yi, w, loss)
        for j, Vt in enumerate(points):
            add(at[j], F, yi, w, F @ Vt, False)
    return _packed(at, line)


def part_trial_ww(part: Part, basis: Basis, V: np.ndarray, S: np.ndarray) -> np.ndarray:
    """:func:`part_trial` of the Weston-Watkins loss."""
    return _joint_trial(part, basis, V, S, _add_grad_ww, _ww_sq_loss)


def part_trial_cs(part: Part, basis: Basis, V: np.ndarray, S: np.ndarray) -> np.ndarray:
    """:func:`part_trial` of the Crammer-Singer loss."""
    return _joint_trial(part, basis, V, S, _add_grad_cs, _cs_sq_loss)


def _packed(at: np.ndarray, line: np.ndarray) -> np.ndarray:
    """A trial pass's sums as one flat array (the passes add arrays)."""
    return np.concatenate([at.ravel(), line.ravel()])


class Objective(NamedTuple):
    """A multi-class loss as the solver sees it: its pass ops, and whether its columns are
    coupled (``joint``: one Newton system and one step length for all columns) or
    separate problems (one CG and one step length per column)."""

    grad: Callable
    hess: Callable
    trial: Callable
    joint: bool


OVR = Objective(part_grad, part_hess, part_trial, joint=False)
WESTON_WATKINS = Objective(part_grad_ww, part_hess_ww, part_trial_ww, joint=True)
CRAMMER_SINGER = Objective(part_grad_cs, part_hess_cs, part_trial_cs, joint=True)
#: ``refit``'s spellings of the multi-class losses.
OBJECTIVES = {"ovr": OVR, "weston_watkins": WESTON_WATKINS, "crammer_singer": CRAMMER_SINGER}


def _grouped(x: np.ndarray, joint: bool) -> np.ndarray:
    """Per-column values (last axis) summed over each problem: unchanged one-vs-rest, one
    total (keeping the axis, length 1) when the columns are one problem."""
    return x.sum(axis=-1, keepdims=True) if joint else x


def _dots(A: np.ndarray, B: np.ndarray, joint: bool) -> np.ndarray:
    """Inner products of A and B per problem (see :func:`_grouped`)."""
    return _grouped(np.einsum("ij,ij->j", A, B), joint)


class NewtonState(NamedTuple):
    """Where a solve stands after ``steps`` Newton steps (what a checkpoint keeps):
    ``g0`` the gradient norms at zero (None before the first gradient)."""

    V: np.ndarray
    steps: int
    g0: np.ndarray | None


#: The dashboard's name of each pass (task key prefix ``svm-refit-<step>``), by the name of
#: its op (``part_<step>`` or ``part_<step>_<loss>``).
_STEP_NAMES = {
    f"part_{step}{loss}": step for step in ("grad", "hess", "trial") for loss in ("", "_ww", "_cs")
}
_STEP_NAMES["part_energy"] = "energy"


class _Passes:
    """One pass over all parts: ``op(part, basis, *args)`` summed by a fixed tree.

    Under a client, one task per worker over the parts it holds (``workers``: each part's
    worker; :func:`~dkernel.data.collect_parts`), named ``svm-refit-grad``/``-hess``/
    ``-trial`` (``run``: the fit's id, which keeps the keys unique); each part's value
    comes back on its own and the values are summed here in part order, so the grouping
    never enters the result."""

    def __init__(
        self, parts: list, basis: Any, client: Any, run: str = "", workers: list | None = None
    ) -> None:
        self.parts, self.basis, self.client, self.run = parts, basis, client, run
        self.owners = workers if workers is not None else [None] * len(parts)
        self.count = 0

    def __call__(self, op, *args) -> np.ndarray:
        return self._pass(op, args, False)

    def with_gram(self, op, *args, grid: int | None) -> tuple[np.ndarray, Any]:
        """``(sums, Gram sums)`` of a pass of ``op`` (the gradient or the trial pass): with
        a ``grid`` the op returns pairs, the sums as ``__call__`` gives them and the Gram
        sums added where they are (on each worker, then here: exact on the grid, so in any
        grouping); without one the Gram sums are None."""
        if grid is None:
            return self._pass(op, args, False), None
        return self._pass(op, (*args, grid), True)

    def _pass(self, op, args: tuple, gram: bool) -> Any:
        self.count += 1
        if self.client is None:
            if gram:  # each part's Gram sums added as it ends (exact: in any order)
                totals: list = []
                lock = threading.Lock()

                def keep(part, basis, *a):
                    value, G = op(part, basis, *a)
                    with lock:
                        if totals:
                            totals[0] += G
                        else:
                            totals.append(G)
                    return value

                leaves = self._here(keep, *args)
            else:
                leaves = self._here(op, *args)
        else:
            # the small sums come here in one gather (one round trip per pass) and are
            # added in the same tree order as without a client, so the bits do not
            # depend on it
            step = f"svm-refit-{_STEP_NAMES.get(op.__name__, 'pass')}-{self.run}-{self.count}"
            leaves = collect_parts(
                self.client, self.parts, self.owners, _part_op, [()] * len(self.parts),
                name=step, stack=True, summed=gram, op=op, basis=self.basis, args=args,
            )  # fmt: skip
            if gram:
                leaves, totals = leaves
        value = tree_reduce(None, leaves, add_in_order, split_every=4)
        return (value, add_in_order(totals)) if gram else value

    def _here(self, op, *args) -> list:
        """Every part's ``op`` in this process, the parts spread over the usable cores
        (BLAS at one thread meanwhile); each part's value is the same bits either way."""
        leaves: list = [None] * len(self.parts)

        def work(a: int, b: int) -> None:
            for k in range(a, b):
                leaves[k] = op(self.parts[k], self.basis, *args)

        c = args[0].shape[1] if args else 1  # the columns of V (none: the energy pass)
        size = sum(len(p.yi) for p in self.parts) * self.basis.width * c
        threads = effective_n_jobs(None, len(self.parts), size)
        run_tiles(work, [(k, k + 1) for k in range(len(self.parts))], threads)
        return leaves


def _part_op(part, k: int, *, op, basis, args):
    return op(part, basis, *args)


def newton(
    passes: _Passes,
    V0: np.ndarray,
    C: float,
    *,
    tol: float,
    max_iter: int,
    cg_max: int = 100,
    objective: Objective = OVR,
    on_step: Callable[[int, float], None] | None = None,
    start: NewtonState | None = None,
    on_save: Callable[[NewtonState], None] | None = None,
) -> tuple[np.ndarray, int]:
    """Minimise ``1/2 ||V||^2 + C loss(V)`` (see the module docstring) from ``V0``; stop
    when each column's ``||grad_j|| <= tol ||grad_j(0)||``. Returns (V, Newton steps).
    ``on_step(steps, g)`` at each gradient: the steps taken so far and ``g`` the largest
    ``||grad_j|| / ||grad_j(0)||`` (the stop is at ``tol``). ``on_save(state)`` as the
    solve starts and after each step; ``start``: such a state to go on from (``V0`` is then
    ignored), which gives the same bits as the solve that saved it would have."""
    if start is None:
        V, g0, done = V0.copy(), None, 0
    else:
        V, g0, done = start.V.copy(), start.g0, int(start.steps)
    joint = objective.joint
    if on_save is not None and start is None:
        on_save(NewtonState(V, 0, None))
    # one-vs-rest problems of a small width form their Hessians from the Gram sums that
    # come with the gradient sums (on a grid set by one pass over the rows): CG's products
    # are then made here, with no pass each
    dense = not joint and V.shape[1] * V.shape[0] ** 2 * 8 <= _DENSE_BYTES
    grid = _grid(passes(part_energy)) if dense else None
    G: np.ndarray | None
    it = done
    st = G = None  # the gradient pass at V (and its Gram sums), when the last trial made it
    for it in range(done + 1, max_iter + 1):
        if st is None:
            st, G = passes.with_gram(objective.grad, V, g0 is None, grid=grid)
        if g0 is None:
            g0 = np.linalg.norm(C * st[2, :-1], axis=0)
        grad = V + C * st[0, :-1]
        f = _grouped(0.5 * np.einsum("ij,ij->j", V, V) + C * st[0, -1], joint)
        gnorm = np.linalg.norm(grad, axis=0)
        todo = gnorm > tol * g0
        if joint:
            todo[:] = todo.any()
        if on_step is not None:
            on_step(it - 1, float(np.max(gnorm / np.where(g0 > 0, g0, 1.0))))
        if not todo.any():
            it -= 1
            break
        # the same CG either way, its Hessian products passes or, with a grid, made here
        # from the Gram sums at V
        if G is None:
            hess = partial(passes, objective.hess, V)
        else:
            hess = partial(_gram_products, _unpacked(G, V.shape[0]))
        S = _pcg(hess, joint, grad, 1.0 + C * st[1, :-1], C, todo, cg_max)
        packed, grams = passes.with_gram(objective.trial, V, S, grid=grid)
        # one pass tries the step: the losses along it and the gradient sums at the full
        # and the half step, so the next step's gradient pass is this one whenever the
        # line search takes either (the usual case)
        t, st, G = _trial(
            packed, st.shape, V, S, C, f, _dots(grad, S, joint), todo[:1] if joint else todo,
            joint, grams=grams,
        )  # fmt: skip
        V = V + S * t
        if not t.any():
            break
        if on_save is not None:
            on_save(NewtonState(V, it, g0))
    return V, it


def _trial(packed: np.ndarray, shape, V, S, C: float, f, gs, todo_g, joint: bool, grams=None):
    """The step lengths and the next gradient pass from a trial pass (:func:`part_trial`):
    per problem the first step of ``_STEPS`` that meets Armijo's rule (0: none; problems
    not in ``todo_g`` have ``S = 0`` and take 0), and the gradient sums at ``V + t S`` when
    every problem's t is the full or the half step (else None: a pass of its own); with
    ``grams`` (the trial's Gram sums at both points), the Gram sums at that point too."""
    size = int(np.prod(shape))
    at = packed[: 2 * size].reshape(2, *shape)
    loss_t = _grouped(packed[2 * size :].reshape(len(_STEPS), -1), joint)
    t = np.zeros(len(todo_g))
    for k, step in enumerate(_STEPS):
        Vn = V + step * S
        ok = _dots(Vn, Vn, joint) * 0.5 + C * loss_t[k] <= f + _ARMIJO * step * gs
        t = np.where(todo_g & ok & (t == 0), step, t)
    cols = np.broadcast_to(t, shape[-1:])
    half = cols == _HALF
    if not ((cols == 1.0) | half | ~np.broadcast_to(todo_g, shape[-1:])).all():
        return t, None, None
    st = np.where(half, at[1], at[0])
    return t, st, None if grams is None else np.where(half[:, None], grams[1], grams[0])


def _gram_products(G: np.ndarray, P: np.ndarray) -> np.ndarray:
    """``2 Phi_A^T W Phi_A P`` per column from the Gram sums G (what a Hessian pass of
    :func:`part_hess` computes over the rows)."""
    with ONE_BLAS_THREAD:
        return np.stack([G[j] @ P[:, j] for j in range(P.shape[1])], axis=1)


def _pcg(
    hess: Callable[[np.ndarray], np.ndarray], joint: bool, grad, diag, C: float, todo, cg_max: int
) -> np.ndarray:
    """Newton directions ``(I + C H) S = -grad`` for the columns in ``todo`` by Jacobi-
    preconditioned CG, each problem (a column, or all of them when ``joint``) to a
    relative residual of ``min(0.5, sqrt(||g||))``; ``hess(P)``: the products ``H P`` (a
    pass over the rows, or the formed Hessians' products here)."""
    S = np.zeros_like(grad)
    R = np.where(todo, -grad, 0.0)
    gn = np.sqrt(_dots(grad, grad, joint))
    stop = np.minimum(0.5, np.sqrt(gn)) * gn
    Zr = R / diag
    P = Zr.copy()
    rz = _dots(R, Zr, joint)
    for _ in range(cg_max):
        live = todo & (np.sqrt(_dots(R, R, joint)) > stop)
        if not live.any():
            break
        P = np.where(live, P, 0.0)
        HP = P + C * hess(P)
        pHp = _dots(P, HP, joint)
        a = np.where(live, rz / np.where(pHp > 0, pHp, 1.0), 0.0)
        S += a * P
        R -= a * HP
        Zr = R / diag
        rz_new = _dots(R, Zr, joint)
        P = Zr + np.where(live, rz_new / np.where(rz > 0, rz, 1.0), 0.0) * P
        rz = rz_new
    return S


def _build_parts(data, ranges, samples, groups, basis, cache, client, run, classes, scaler):
    """The solver's parts (futures on the workers under a client), the basis as the passes
    take it and each part's worker (None without a client). Part g joins the kept rows of
    the ranges ``groups[g]``."""
    X, y, w = data

    def kept(k: int):  # the rows of range k the refit keeps, read here
        rows = load_ranges(X, y, w, [ranges[k]], classes=classes, scaler=scaler).parts[0]
        return sample_part(rows, samples[k])

    if client is None:  # one range at a time: only its raw rows are held beside the parts
        parts = [make_part([kept(k) for k in range(a, b)], basis, cache) for a, b in groups]
        return parts, basis, None
    # the basis (O(B^2)) travels once to every worker, not with every task (scattered as
    # one value under its own key: a NamedTuple given alone would be scattered by field)
    key = f"svm-refit-basis-{run}"
    shared = client.scatter({key: basis}, broadcast=True)[key]
    rows = load_ranges(
        X, y, w, ranges, classes=classes, scaler=scaler, client=client,
        name=f"svm-refit-rows-{run}",
    ).parts  # fmt: skip
    if samples[0] is not None:
        rows = [
            client.submit(sample_part, r, sample, key=f"svm-refit-sample-{run}-{k}")
            for k, (r, sample) in enumerate(zip(rows, samples))
        ]
    owners = range_workers(client, len(groups))
    parts = [
        client.submit(
            make_part,
            rows[a:b],
            shared,
            cache,
            key=f"svm-refit-part-{run}-{g}",
            workers=[who],
            allow_other_workers=True,
        )
        for g, ((a, b), who) in enumerate(zip(groups, owners))
    ]
    # the raw rows are dropped once the parts are built
    return parts, shared, owners


def _resident_part(rows, k: int, sample, basis: Basis, cache: bool) -> Part:
    return make_part([sample_part(rows, sample)], basis, cache)


def _parts_of_resident(resident: ResidentRows, n: int, m: int, seed: int, basis, cache, run):
    """The solver's parts cut from rows already on the workers (a distributed fit's
    shards), one per shard, each where its shard lives: X is not read again."""
    samples: list = [None] * len(resident)
    if m < n:
        sizes = sample_sizes(resident.ranges, n, m)
        samples = [(seed, k, mk) for k, mk in enumerate(sizes)]
    shared = resident.scatter(basis, name=f"svm-refit-basis-{run}")
    # each task is sent its own sample, not every part's
    parts = resident.map(_resident_part, shared, cache, each=samples, name=f"svm-refit-part-{run}")
    return parts, shared, resident.workers


class RefitResult(NamedTuple):
    coef: np.ndarray
    intercept: np.ndarray
    n_iter: int
    n_passes: int
    n_rows: int


def refit(
    X,
    y,
    w,
    *,
    classes: np.ndarray,
    Z: np.ndarray,
    coef: np.ndarray,
    intercept: np.ndarray,
    spec: KernelSpec,
    icpt: float,
    scaler: Standardizer | None,
    alpha: float,
    tol: float,
    max_iter: int,
    client: Any = None,
    on_step: Callable[[int, float], None] | None = None,
    seed: int = 0,
    max_rows: int | None = None,
    multi_class: str = "ovr",
    start: NewtonState | None = None,
    on_save: Callable[[NewtonState], None] | None = None,
    resident: ResidentRows | None = None,
) -> RefitResult:
    """Exact coefficients (and intercept) over the SVs Z, warm-started from ``coef`` /
    ``intercept`` (see the module docstring). X, y, w: NumPy or dask (w None: unit
    weights); ``client``: parts in its workers' memory, else read here. ``multi_class``:
    "ovr", "weston_watkins" or "crammer_singer" (a key of ``OBJECTIVES``; one-column
    problems are binary either way). ``start``, ``on_save``: see :func:`newton` (a
    checkpointed solve).

    Over at most ``max_rows`` rows (default: ``_ROWS_PER_SV`` per support vector): beyond,
    over a uniform sample of that many rows, drawn per row range (``seed``, the range's
    index) so it depends on n and the seed only. ``resident``: the rows already on the
    workers (a distributed fit's shards): the parts are cut from them, one per shard, and
    the ranges are theirs; X, y and w are then not read."""
    n = int(X.shape[0])
    c = coef.shape[1]
    basis, up = make_basis(Z, spec, icpt)
    V0 = up.T @ coef
    if icpt > 0:
        V0 = np.vstack([V0, np.asarray(intercept, dtype=np.float64)[None, :] / icpt])
    m = min(n, max_rows if max_rows is not None else _ROWS_PER_SV * len(Z))
    # cached features of all parts together (setting "svm.refit-feature-cache-bytes"); above
    # it each pass recomputes them from the part's rows
    cache = m * basis.width * 8 <= int(setting("svm.refit-feature-cache-bytes"))
    if m < n:
        logger.info("refit on a uniform sample of %d of the %d rows", m, n)
    run = uuid.uuid4().hex  # this refit's id in its task keys
    if resident is not None:
        client = resident.client
        with timer("bsgd refit parts", logger), phase("refit parts", width=len(resident)):
            parts, shared, owners = _parts_of_resident(resident, n, m, seed, basis, cache, run)
    else:
        ranges = row_parts(n)
        samples: list = [None] * len(ranges)
        groups = [(k, k + 1) for k in range(len(ranges))]
        if m < n:  # the kept rows of consecutive ranges make a part of the sampled size
            samples = [(seed, k, mk) for k, mk in enumerate(sample_sizes(ranges, n, m))]
            groups = row_parts(len(ranges), len(row_parts(m)))
        with timer("bsgd refit parts", logger), phase("refit parts", width=len(ranges)):
            parts, shared, owners = _build_parts(
                (X, y, w), ranges, samples, groups, basis, cache, client, run, classes, scaler
            )
    passes = _Passes(parts, shared, client, run=run, workers=owners)
    C = 1.0 / (alpha * m)  # the sample's losses stand for n / m rows each
    with timer("bsgd refit solve", logger), phase("refit solve", width=len(parts)):
        V, it = newton(
            passes, V0, C, tol=tol, max_iter=max_iter, on_step=on_step, start=start,
            on_save=on_save, objective=OBJECTIVES[multi_class] if c > 1 else OVR,
        )  # fmt: skip
    r = basis.T.shape[1]
    beta = basis.T @ V[:r]
    b = V[r] * icpt if icpt > 0 else np.zeros(c)
    logger.debug("refit: %d Newton steps, %d passes over %d parts", it, passes.count, len(parts))
    return RefitResult(beta, b, it, passes.count, m)
