"""Scoring a fitted :class:`~dkernel.svm.BudgetedSVC`: the row functions that run on each
block of rows (scores, labels, Platt probabilities), Platt's sigmoid fit, and the
blockwise accuracy of ``score`` on dask input (two numbers per row chunk come back)."""

from __future__ import annotations

from typing import Any, NamedTuple

import dask.array as da
import numpy as np

from .._base import _BaseKernelEstimator
from .._validation import DKernelError, is_dask_array
from ..data import row_blocks
from ..kernels import KernelSpec
from .stream import Standardizer

#: Rows per block when scoring (bounds the kernel block's memory).
_PREDICT_ROWS = 8192


class Model(NamedTuple):
    """What a row pass needs of a fitted model: SVs, coefficients, intercept, kernel,
    scaler (the trailing arguments of :func:`decision_rows`)."""

    SV: np.ndarray
    coef: np.ndarray
    intercept: np.ndarray
    spec: KernelSpec
    scaler: Standardizer | None

    @classmethod
    def of(cls, fitted: Any) -> Model:
        """The model of a fitted estimator (any object with its fitted attributes)."""
        return cls(
            np.ascontiguousarray(fitted.support_vectors_, dtype=np.float64),
            np.asarray(fitted.dual_coef_, dtype=np.float64),
            np.asarray(fitted.intercept_, dtype=np.float64),
            fitted._spec,
            scaler_of(fitted),
        )


def scaler_of(fitted: Any) -> Standardizer | None:
    """The standardisation of a fitted estimator (None without one)."""
    mean = getattr(fitted, "feature_mean_", None)
    if mean is None:
        return None
    return Standardizer(np.asarray(mean), np.asarray(fitted.feature_scale_))


def scaler_attributes(scaler: Standardizer | None) -> dict[str, Any]:
    """``feature_mean_`` and ``feature_scale_`` of ``scaler`` (None without one)."""
    return {
        "feature_mean_": None if scaler is None else scaler.mean,
        "feature_scale_": None if scaler is None else scaler.scale,
    }


def decision_rows(Xb, SV, coef, intercept, spec, scaler=None) -> np.ndarray:
    """Scores of the rows of Xb, (r,) for one column, (r, c) otherwise (in row tiles)."""
    Xb = np.ascontiguousarray(Xb, dtype=np.float64) if scaler is None else scaler.apply(Xb)
    out = np.empty((Xb.shape[0], coef.shape[1]))
    for r in range(0, Xb.shape[0], _PREDICT_ROWS):
        blk = Xb[r : r + _PREDICT_ROWS]
        if SV.shape[0]:
            out[r : r + len(blk)] = _BaseKernelEstimator._kernel(blk, SV, spec) @ coef + intercept
        else:
            out[r : r + len(blk)] = intercept
    return out[:, 0] if coef.shape[1] == 1 else out


def proba_rows(Xb, SV, coef, intercept, spec, scaler, A, B) -> np.ndarray:
    """Probabilities of the rows of Xb, (r, n_classes): the Platt sigmoid of each score
    column; one column gives both classes, several are normalised (uniform where all are
    0)."""
    z = decision_rows(Xb, SV, coef, intercept, spec, scaler).reshape(len(Xb), -1) * A + B
    if z.shape[1] == 1:  # each side as its own sigmoid: no 1 - P rounding to 0
        return np.hstack([_sigmoid(z), _sigmoid(-z)])
    P = _sigmoid(-z)
    total = P.sum(axis=1, keepdims=True)
    out = np.full_like(P, 1.0 / P.shape[1])
    np.divide(P, total, out=out, where=total > 0)
    return out


def predict_rows(Xb, SV, coef, intercept, spec, scaler, classes) -> np.ndarray:
    """Labels of the rows of Xb (``classes`` values)."""
    scores = decision_rows(Xb, SV, coef, intercept, spec, scaler)
    if scores.ndim == 1:
        return classes[(scores > 0).astype(np.intp)]
    return classes[np.argmax(scores, axis=1)]


def log(P):
    """``log P`` (0 -> -inf, without a warning)."""
    with np.errstate(divide="ignore"):
        return np.log(P)


def _sigmoid(z: np.ndarray) -> np.ndarray:
    """``1 / (1 + exp(-z))`` without overflow."""
    return np.exp(-np.logaddexp(0.0, -z))


# ------------------------------------------------------------------ calibration
def calibrate(model: Model, classes, Xc, yc, wc, *, weighted: bool):
    """Platt scaling of every score column of ``model`` on the held-out rows ``(Xc, yc,
    wc)``: ``(probA_, probB_)``."""
    scores = np.asarray(decision_rows(Xc, *model)).reshape(len(yc), -1)
    cols = classes[1:] if scores.shape[1] == 1 else classes
    fits = [_platt(scores[:, j], yc == c, wc if weighted else None) for j, c in enumerate(cols)]
    return np.array([a for a, _ in fits]), np.array([b for _, b in fits])


def _platt(f: np.ndarray, positive: np.ndarray, w: np.ndarray | None) -> tuple[float, float]:
    """Platt's sigmoid ``P(+|f) = 1 / (1 + exp(a f + b))`` by weighted maximum likelihood
    with the smoothed targets of Platt (1999) and Lin, Lin & Weng (2007):
    ``(N+ + 1) / (N+ + 2)`` and ``1 / (N- + 2)`` (weights summed for the counts)."""
    from scipy.optimize import minimize

    f = np.asarray(f, dtype=np.float64)
    w = np.ones(len(f)) if w is None else np.asarray(w, dtype=np.float64)
    pos = np.asarray(positive, dtype=bool)
    n_pos, n_neg = float(w[pos].sum()), float(w[~pos].sum())
    t = np.where(pos, (n_pos + 1.0) / (n_pos + 2.0), 1.0 / (n_neg + 2.0))

    def loss(ab):
        z = ab[0] * f + ab[1]  # -log P(+) = log(1 + exp(z)); -log P(-) = that - z
        value = float(w @ (np.logaddexp(0.0, z) - (1.0 - t) * z))
        g = w * (t - _sigmoid(-z))  # d/dz = (1 - P(+)) - (1 - t)
        return value, np.array([g @ f, g.sum()])

    b0 = float(np.log((n_neg + 1.0) / (n_pos + 1.0)))
    res = minimize(loss, np.array([0.0, b0]), jac=True, method="L-BFGS-B")
    return float(res.x[0]), float(res.x[1])


# ------------------------------------------------------------------ score
def dask_accuracy(pred, y, sample_weight, *, classes) -> float:
    """Accuracy of the lazy predictions ``pred`` (dask) against ``y``, weighted by
    ``sample_weight``: one task per block of ``pred``, two numbers back from each."""
    chunks = pred.chunks[0]
    n = int(sum(chunks))
    y = _as_row_chunks(y, chunks, n, "y")
    kinds = (y.dtype.kind, classes.dtype.kind)
    if "O" not in kinds and (kinds[0] in "US") != (kinds[1] in "US"):
        raise DKernelError(
            f"y has labels of dtype {y.dtype}, the model's classes are of dtype "
            f"{classes.dtype}: they cannot match"
        )
    parts = [pred, y]
    if sample_weight is not None:
        parts.append(_as_row_chunks(sample_weight, chunks, n, "sample_weight"))
    num, den = _per_block(_score_block, *parts, width=2, token="svm-score").sum(axis=0)
    if not den > 0:
        raise DKernelError(f"sample_weight sums to {den}; it must be positive")
    return float(num) / float(den)


def _per_block(func, *arrays, width: int, token: str) -> np.ndarray:
    """``func`` over the row chunks of the 1-D dask ``arrays`` (aligned), one named task per
    chunk returning a (1, width) row; the rows, stacked, as NumPy (small results reduced
    on the client)."""
    out = da.map_blocks(
        func,
        *arrays,
        new_axis=1,
        chunks=((1,) * arrays[0].numblocks[0], (width,)),
        dtype=np.float64,
        meta=np.empty((0, 0)),
        token=token,
    )
    return np.asarray(out.compute())


def _score_block(pred: np.ndarray, yb: np.ndarray, wb: np.ndarray | None = None) -> np.ndarray:
    """One row chunk of ``score``: [[weighted hits, total weight]]."""
    hits = np.asarray(pred) == np.asarray(yb)
    if wb is None:
        return np.array([[float(hits.sum()), float(len(hits))]])
    wf = np.asarray(wb, dtype=np.float64)
    return np.array([[float(wf[hits].sum()), float(wf.sum())]])


def _as_row_chunks(v, chunks, n: int, name: str):
    """``v`` (y or weights, NumPy or dask) as a 1-D dask array of ``n`` rows in the
    predictions' row chunks (blockwise with them; dask chunked otherwise is rechunked)."""
    if not is_dask_array(v):
        v = np.asarray(v)
    if v.ndim == 2 and v.shape[1] == 1:
        v = v.reshape(-1)
    if v.ndim != 1 or int(v.shape[0]) != n:
        raise DKernelError(f"{name} has shape {v.shape}, expected ({n},)")
    if not is_dask_array(v):
        return da.from_array(v, chunks=(chunks,))
    # a row source is read in the predictions' blocks, by the same tasks (blockwise)
    return v if v.chunks[0] == tuple(chunks) else row_blocks(v, chunks)
