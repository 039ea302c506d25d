"""The coarse linear SVM solve behind the sensitivities, with a certified lower bound.

Problem (the coreset paper's cost with a constant last feature for the bias)::

    F(w) = ||w_{1:d}||^2 / 2 + C * sum_i u_i * max(0, 1 - y_i <w, x_i>)

solved approximately by L-BFGS on a Huber-smoothed hinge (deterministic: same input, same
``w``, bit for bit, so a recomputed Dask task gives the same coreset). The lower bound comes
from a dual-feasible point of the weighted-hinge dual

    D(a) = sum_i a_i - ||sum_i a_i y_i x_i[:d]||^2 / 2,  0 <= a_i <= C u_i,  sum a_i y_i = 0

built from the smoothed solution's loss derivatives, balanced between the classes and
scaled optimally; weak duality gives D(a) <= opt <= F(w).
"""

from __future__ import annotations

import logging
from typing import NamedTuple

import numpy as np
from scipy.optimize import minimize

from ._svm_terms import SIGNS, margin_gap, regulariser, svm_cost

logger = logging.getLogger(__name__)

#: Huber widths of the continuation (wide first, then close to the hinge).
_SMOOTHING = (1.0, 0.1, 0.01)
#: Widths whose smoothed-hinge derivatives are tried as dual points by the certificate.
_CERT_WIDTHS = (0.001, 0.01, 0.1, 1.0)
#: The solve stops when a round of L-BFGS improves F(w) by less than this (relative): on
#: separable or degenerate data the certificate may never close, and the dual bound it
#: has is still a valid lower bound.
_STALL = 1e-4


class CoarseSolution(NamedTuple):
    w: np.ndarray  # (d + 1,) weights, bias last
    upper: float  # F(w): the primal value with the true hinge
    lower: float  # a certified lower bound of min F (dual value, >= 0)
    n_iter: int  # L-BFGS iterations run


def _huber_fun(w, X1, ys, u, C, h):
    z = margin_gap(X1 @ w, ys)
    quad = (z > 0) & (z <= h)
    lin = z > h
    loss = np.where(lin, z - 0.5 * h, np.where(quad, 0.5 * z * z / h, 0.0))
    dz = np.where(lin, 1.0, np.where(quad, z / h, 0.0))
    f = regulariser(w) + C * float(u @ loss)
    g = -C * (X1.T @ (u * ys * dz))
    g[:-1] += w[:-1]
    return f, g


def _local_aggregates(X1, ys, u, C, w):
    """Per-class dual pieces of one block: sums of a_i and of a_i y_i x_i for several a.

    Choices: a_i = C u_i clip(z_i / h, 0, 1) for every h of :data:`_CERT_WIDTHS` (smoothed
    loss derivatives: one of them is close to the dual optimum whatever the smoothing the
    solution came from), and a_i = C u_i (the box corner, always usable).
    Returns an array of shape (choices, 2, d + 1): ``[choice, class (neg, pos), (sum a,
    sum a y x)]``; aggregates of blocks add up, so the bound of a distributed set needs one
    pass.
    """
    z = margin_gap(X1 @ w, ys)
    d = X1.shape[1] - 1
    choices = [C * u * np.clip(z / h, 0.0, 1.0) for h in _CERT_WIDTHS] + [C * u]
    out = np.zeros((len(choices), 2, d + 1))
    for cls, sign in enumerate(SIGNS):
        mask = ys == sign
        if not mask.any():
            continue
        Xm = X1[mask, :d]
        for choice, a in enumerate(choices):
            am = a[mask]
            out[choice, cls, 0] = am.sum()
            out[choice, cls, 1:] = sign * (am @ Xm)
    return out


def _dual_bound(agg) -> float:
    """Best certified dual value from per-class aggregates (see :func:`_local_aggregates`).

    The larger class's a is scaled down to balance sum a_i y_i = 0 (keeps the box); then
    D(s a) = s A - s^2 ||g||^2 / 2 is maximised over s in [0, 1].
    """
    best = 0.0
    for choice in range(agg.shape[0]):
        a_neg, a_pos = agg[choice, 0, 0], agg[choice, 1, 0]
        if a_neg <= 0.0 or a_pos <= 0.0:
            continue
        s_neg, s_pos = (1.0, a_neg / a_pos) if a_pos > a_neg else (a_pos / a_neg, 1.0)
        A = s_neg * a_neg + s_pos * a_pos
        g = s_neg * agg[choice, 0, 1:] + s_pos * agg[choice, 1, 1:]
        gg = float(g @ g)
        s = 1.0 if gg <= 0.0 else min(1.0, A / gg)
        best = max(best, s * A - 0.5 * s * s * gg)
    return best


def coarse_svm(
    X1,
    ys,
    u,
    C,
    *,
    tol: float = 0.005,
    max_iter: int = 600,
    w0=None,
    widths: tuple[float, ...] = _SMOOTHING,
    round_iters: int = 50,
    stall: float = _STALL,
) -> CoarseSolution:
    """Approximate SVM solution with a certified lower bound on one in-memory block.

    L-BFGS runs over the Huber continuation ``widths`` (30 iterations on each but the
    last), then in rounds of ``round_iters`` iterations on the last one until the certified
    ratio ``upper / lower <= 1 + tol``, a round improves the cost by less than ``stall``
    (relative; 0 never stops there), or ``max_iter`` iterations in all. The lower bound is valid
    whichever stop is met. A warm start ``w0`` near the optimum needs no continuation:
    ``widths=(0.1,)`` and short rounds certify it in a few dozen iterations. The result
    does not depend on any random state (same input, same output, bit for bit).
    """
    logger.debug("coarse SVM solve: %d rows", X1.shape[0])
    w = np.zeros(X1.shape[1]) if w0 is None else np.asarray(w0, dtype=np.float64).copy()
    used = 0
    for h in widths[:-1]:
        w = _lbfgs(w, X1, ys, u, C, h, 30)
        used += 30
    h = widths[-1]
    previous = np.inf
    while True:
        w = _lbfgs(w, X1, ys, u, C, h, round_iters)
        used += round_iters
        upper = svm_cost(X1, ys, u, C, w)
        lower = min(_dual_bound(_local_aggregates(X1, ys, u, C, w)), upper)
        if upper <= (1.0 + tol) * lower or used >= max_iter or upper >= (1.0 - _STALL) * previous:
            return CoarseSolution(w=w, upper=upper, lower=lower, n_iter=used)
        previous = upper


def _lbfgs(w, X1, ys, u, C, h, iters):
    res = minimize(
        _huber_fun,
        w,
        args=(X1, ys, u, C, h),
        jac=True,
        method="L-BFGS-B",
        options={"maxiter": iters, "gtol": 1e-12, "ftol": 1e-14},
    )
    return res.x
