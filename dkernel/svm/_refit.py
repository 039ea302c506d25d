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
in BSGD. Multi-class problems are one-vs-rest, one column per class, solved together.

The solver is a truncated Newton method (Keerthi & DeCoste 2005; liblinear's primal
Newton): at each step, preconditioned conjugate gradients (Jacobi preconditioner) on the
generalised Hessian ``I + 2C Phi_A^T W Phi_A`` over the rows with an active margin, then a
backtracking line search whose candidate steps are all evaluated in one pass. Every pass
over the rows (gradient, Hessian-vector product, line search) is one task per row part,
summed by a fixed tree, so the model does not depend on where parts run; all classes share
each pass. Rows never leave their part: on a cluster each part's features live in its
worker's memory (recomputed from its rows per pass when they would not fit).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from .._base import _BaseKernelEstimator
from ..kernels import KernelSpec
from ..runtime import timer, tree_reduce
from ._budget import weighted_colsums
from ._stream import Standardizer, load_ranges, range_workers, row_parts

logger = logging.getLogger(__name__)

#: Rows per tile inside a part (bounds the temporaries of a pass).
_TILE_ROWS = 8192
#: Rows per step of a pass: a step's features stay in cache across its products (a pass
#: over 8192-row steps read the features from memory once per product).
_PASS_ROWS = 256
#: Cached features of all parts together may take this many bytes; above it each pass
#: recomputes them from the part's rows.
_FEATURE_CACHE_BYTES = 2 << 30
#: The refit's default row count per support vector (above it: a uniform sample).
_ROWS_PER_SV = 256
#: Eigenvalues of K_ZZ below this share of the largest are dropped.
_EIG_FLOOR = 1e-10
#: Line-search steps, all evaluated in one pass.
_STEPS = 0.5 ** np.arange(12)
_ARMIJO = 1e-4


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


def take_rows(rows, sample: tuple[int, int, int] | None):
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


def part_grad(part: Part, basis: Basis, V: np.ndarray, with_zero: bool) -> np.ndarray:
    """Sums over the part's rows, stacked in one array of shape (3 or 4, width + 1, c):
    ``[0, :-1]`` the loss gradient, ``[0, -1]`` the loss, ``[1, :-1]`` the Hessian's
    diagonal, and the loss gradient at ``V = 0`` in ``[2]`` when asked (``[2]`` zero
    otherwise). Gradients and diagonal without the factor C."""
    c = V.shape[1]
    out = np.zeros((3, V.shape[0] + 1, c))
    for F, yi, w in _tiles(part, basis):
        Y = _signs(yi, c)
        z = 1.0 - Y * (F @ V)
        act = z > 0
        wz = np.where(act, z, 0.0) * w[:, None]
        out[0, :-1] -= 2.0 * weighted_colsums(F, wz * Y, False)
        out[0, -1] += (wz * np.where(act, z, 0.0)).sum(axis=0)
        out[1, :-1] += 2.0 * weighted_colsums(F, act * w[:, None], True)
        if with_zero:
            out[2, :-1] -= 2.0 * weighted_colsums(F, Y * w[:, None], False)
    return out


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


def part_line(part: Part, basis: Basis, V: np.ndarray, S: np.ndarray) -> np.ndarray:
    """Loss at ``V + t S`` for every t of ``_STEPS``, shape (len(_STEPS), c)."""
    c = V.shape[1]
    out = np.zeros((len(_STEPS), c))
    for F, yi, w in _tiles(part, basis):
        Y = _signs(yi, c)
        M = F @ np.hstack([V, S])
        m0, m1 = Y * M[:, :c], Y * M[:, c:]
        for k, t in enumerate(_STEPS):
            z = np.maximum(1.0 - m0 - t * m1, 0.0)
            out[k] += (w[:, None] * z * z).sum(axis=0)
    return out


def _add(children: list, node=None) -> np.ndarray:
    """Sum in the given order (the tree's combine)."""
    total = children[0].copy()
    for a in children[1:]:
        total += a
    return total


#: The dashboard's name of each pass (task key prefix ``svm-refit-<step>``).
_STEP_NAMES = {"part_grad": "grad", "part_hess": "hess", "part_line": "line"}


class _Passes:
    """One pass over all parts: ``op(part, basis, *args)`` summed by a fixed tree.

    Under a client the tasks are named ``svm-refit-grad``/``-hess``/``-line`` and their sums
    ``svm-refit-sum`` (``run``: the fit's id, which keeps the keys unique)."""

    def __init__(self, parts: list, basis: Any, client: Any, run: str = "") -> None:
        self.parts, self.basis, self.client, self.run = parts, basis, client, run
        self.count = 0

    def __call__(self, op, *args) -> np.ndarray:
        self.count += 1
        if self.client is None:
            leaves = [op(p, self.basis, *args) for p in self.parts]
            return tree_reduce(None, leaves, _add, split_every=4)
        tag = f"{self.run}-{self.count}"
        step = f"svm-refit-{_STEP_NAMES.get(op.__name__, 'pass')}"
        leaves = [
            self.client.submit(op, p, self.basis, *args, key=f"{step}-{tag}-{k}")
            for k, p in enumerate(self.parts)
        ]
        root = tree_reduce(self.client, leaves, _add, split_every=4, key=f"svm-refit-sum-{tag}")
        return root.result()


def newton(
    passes: _Passes,
    V0: np.ndarray,
    C: float,
    *,
    tol: float,
    max_iter: int,
    cg_max: int = 100,
    on_step: Callable[[int, float], None] | None = None,
) -> tuple[np.ndarray, int]:
    """Minimise ``1/2 ||v_j||^2 + C loss_j(v_j)`` for every column j (see the module
    docstring) from ``V0``; stop when each ``||grad_j|| <= tol ||grad_j(0)||``. Returns
    (V, Newton steps). ``on_step(steps, g)`` at each gradient: the steps taken so far and
    ``g`` the largest ``||grad_j|| / ||grad_j(0)||`` (the stop is at ``tol``)."""
    V = V0.copy()
    g0 = None
    it = 0
    for it in range(1, max_iter + 1):
        st = passes(part_grad, V, g0 is None)
        if g0 is None:
            g0 = np.linalg.norm(C * st[2, :-1], axis=0)
        grad = V + C * st[0, :-1]
        f = 0.5 * np.einsum("ij,ij->j", V, V) + C * st[0, -1]
        gnorm = np.linalg.norm(grad, axis=0)
        todo = gnorm > tol * g0
        if on_step is not None:
            on_step(it - 1, float(np.max(gnorm / np.where(g0 > 0, g0, 1.0))))
        if not todo.any():
            it -= 1
            break
        S = _pcg(passes, V, grad, 1.0 + C * st[1, :-1], C, todo, cg_max)
        loss_t = passes(part_line, V, S)
        gs = np.einsum("ij,ij->j", grad, S)
        t = np.zeros(V.shape[1])
        for j in np.flatnonzero(todo):
            for k, step in enumerate(_STEPS):
                vn = V[:, j] + step * S[:, j]
                if 0.5 * vn @ vn + C * loss_t[k, j] <= f[j] + _ARMIJO * step * gs[j]:
                    t[j] = step
                    break
        V += S * t
        if not t.any():
            break
    return V, it


def _pcg(passes: _Passes, V, grad, diag, C: float, todo, cg_max: int) -> np.ndarray:
    """Newton directions ``(I + C H) S = -grad`` for the columns in ``todo`` by Jacobi-
    preconditioned CG, each column to a relative residual of ``min(0.5, sqrt(||g||))``."""
    S = np.zeros_like(grad)
    R = np.where(todo, -grad, 0.0)
    gn = np.linalg.norm(grad, axis=0)
    stop = np.minimum(0.5, np.sqrt(gn)) * gn
    Zr = R / diag
    P = Zr.copy()
    rz = np.einsum("ij,ij->j", R, Zr)
    for _ in range(cg_max):
        live = todo & (np.linalg.norm(R, axis=0) > stop)
        if not live.any():
            break
        P[:, ~live] = 0.0
        HP = P + C * passes(part_hess, V, P)
        pHp = np.einsum("ij,ij->j", P, HP)
        a = np.where(live, rz / np.where(pHp > 0, pHp, 1.0), 0.0)
        S += a * P
        R -= a * HP
        Zr = R / diag
        rz_new = np.einsum("ij,ij->j", R, Zr)
        P = Zr + np.where(live, rz_new / np.where(rz > 0, rz, 1.0), 0.0) * P
        rz = rz_new
    return S


def _build_parts(data, ranges, samples, groups, basis, cache, client, run, classes, scaler):
    """The solver's parts (futures on the workers under a client) and the basis as the
    passes take it. Part g joins the kept rows of the ranges ``groups[g]``."""
    X, y, w = data

    def kept(k: int):  # the rows of range k the refit keeps, read here
        rows = load_ranges(X, y, w, [ranges[k]], classes=classes, scaler=scaler)[0]
        return take_rows(rows, samples[k])

    if client is None:  # one range at a time: only its raw rows are held beside the parts
        return [make_part([kept(k) for k in range(a, b)], basis, cache) for a, b in groups], basis
    # the basis (O(B^2)) travels once to every worker, not with every task (scattered as
    # one value under its own key: a NamedTuple given alone would be scattered by field)
    key = f"svm-refit-basis-{run}"
    shared = client.scatter({key: basis}, broadcast=True)[key]
    rows = load_ranges(
        X, y, w, ranges, classes=classes, scaler=scaler, client=client,
        name=f"svm-refit-rows-{run}",
    )  # fmt: skip
    if samples[0] is not None:
        rows = [
            client.submit(take_rows, r, sample, key=f"svm-refit-sample-{run}-{k}")
            for k, (r, sample) in enumerate(zip(rows, samples))
        ]
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
        for g, ((a, b), who) in enumerate(zip(groups, range_workers(client, len(groups))))
    ]
    return parts, shared  # the raw rows are dropped once the parts are built


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
) -> RefitResult:
    """Exact coefficients (and intercept) over the SVs Z, warm-started from ``coef`` /
    ``intercept`` (see the module docstring). X, y, w: NumPy or dask (w None: unit
    weights); ``client``: parts in its workers' memory, else read here.

    Over at most ``max_rows`` rows (default: ``_ROWS_PER_SV`` per support vector): beyond,
    over a uniform sample of that many rows, drawn per row range (``seed``, the range's
    index) so it depends on n and the seed only."""
    n = int(X.shape[0])
    c = coef.shape[1]
    basis, up = make_basis(Z, spec, icpt)
    V0 = up.T @ coef
    if icpt > 0:
        V0 = np.vstack([V0, np.asarray(intercept, dtype=np.float64)[None, :] / icpt])
    ranges = row_parts(n)
    m = min(n, max_rows if max_rows is not None else _ROWS_PER_SV * len(Z))
    cache = m * basis.width * 8 <= _FEATURE_CACHE_BYTES
    samples: list = [None] * len(ranges)
    groups = [(k, k + 1) for k in range(len(ranges))]
    if m < n:  # the kept rows of consecutive ranges make a part of the sampled size
        samples = [(seed, k, mk) for k, mk in enumerate(sample_sizes(ranges, n, m))]
        groups = row_parts(len(ranges), len(row_parts(m)))
        logger.info("refit on a uniform sample of %d of the %d rows", m, n)
    run = uuid.uuid4().hex  # this refit's id in its task keys
    with timer("bsgd refit parts", logger):
        parts, shared = _build_parts(
            (X, y, w), ranges, samples, groups, basis, cache, client, run, classes, scaler
        )
    passes = _Passes(parts, shared, client, run=run)
    C = 1.0 / (alpha * m)  # the sample's losses stand for n / m rows each
    with timer("bsgd refit solve", logger):
        V, it = newton(passes, V0, C, tol=tol, max_iter=max_iter, on_step=on_step)
    r = basis.T.shape[1]
    beta = basis.T @ V[:r]
    b = V[r] * icpt if icpt > 0 else np.zeros(c)
    logger.debug("refit: %d Newton steps, %d passes over %d parts", it, passes.count, len(parts))
    return RefitResult(beta, b, it, passes.count, m)
