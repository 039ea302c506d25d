"""The BSGD learner's state (:class:`~._budget.BSGDState`) and every conversion of it.

The state is one explicit value: the numba loop (:mod:`._budget`) updates its arrays in
place, the fit's steps (:mod:`._fit`, :mod:`._partial`) pass it along, and this module turns
it into what the rest of the package needs:

- the model it stands for (:func:`coefficients`: the one rule choosing the averaged iterate
  ``Abar / W`` or the last one ``s * A``) and the fitted attributes of an estimator
  (:func:`fitted_attributes`);
- a model file's raw arrays and back (:func:`raw_arrays`, :func:`state_from_model`), so that
  a loaded model goes on exactly as the original;
- checkpoint entries and back, for a sequential fit's state (:func:`checkpoint_arrays`,
  :func:`state_from_checkpoint`) and a distributed fit's merged model
  (:func:`partial_arrays`, :func:`partial_of`).

- the merged model of a distributed fit (:class:`Partial`, small: O(B d), what travels
  between workers) and back (:func:`partial_from_state`, :func:`state_from_partial`).

A named module (``dkernel.svm.state``): the state's conversions are tested through it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

import numpy as np

from .._validation import DKernelError, is_dask_array
from ..data import take_rows
from ..kernels import KernelSpec, pair_gram
from . import _budget as nb
from . import _refit


class Partial(NamedTuple):
    """A model in transit (small: O(B d)); coefficients in true units (scale folded in).

    ``A``/``b``: the iterate; ``Abar``/``bbar``: ``sum_t omega_t w_t`` and ``W`` the weight
    total (the averaged model is ``Abar / W``); ``t``: the Pegasos clock; ``n``: rows behind
    this partial model in its round (its weight in the combine); ``n_maint``, ``degr``,
    ``degr2``: maintenance steps so far and the sums of ``||Delta||`` and ``||Delta||^2``.
    """

    SV: np.ndarray
    A: np.ndarray
    b: np.ndarray
    Abar: np.ndarray
    bbar: np.ndarray
    W: float
    t: float
    n: int
    n_maint: int
    degr: float
    degr2: float


def empty_partial(n_features: int, n_cols: int) -> Partial:
    """The model before any step."""
    z = np.zeros((0, n_cols))
    return Partial(
        np.zeros((0, n_features)),
        z,
        np.zeros(n_cols),
        z,
        np.zeros(n_cols),
        0.0,
        0.0,
        0,
        0,
        0.0,
        0.0,
    )


def partial_from_state(state: nb.BSGDState, *, n: int = 0) -> Partial:
    """A state as a Partial (flushes the averaged sums)."""
    m = state.n_sv
    nb.flush_average(state.A, state.Abar, state.sref, state.fs, m)
    s = float(state.fs[nb.FS_SCALE])
    return Partial(
        SV=state.SV[:m].copy(),
        A=s * state.A[:m],
        b=s * state.b,
        Abar=state.Abar[:m].copy(),
        bbar=state.bbar.copy(),
        W=float(state.fs[nb.FS_WSUM]),
        t=float(state.ist[nb.IS_T]),
        n=int(n),
        n_maint=int(state.ist[nb.IS_NMAINT]),
        degr=float(state.fs[nb.FS_DEGR]),
        degr2=float(state.fs[nb.FS_DEGR2]),
    )


def state_from_partial(p: Partial, cfg: nb.BSGDConfig) -> nb.BSGDState:
    """A learner state (room for B + 1 SVs, scale 1) holding the Partial's model."""
    return _rebuilt_state(
        p.SV, p.A, p.b, p.Abar, p.bbar, cfg, n_cols=p.A.shape[1], clock=round(p.t),
        n_maint=p.n_maint, counters={nb.FS_WSUM: p.W, nb.FS_DEGR: p.degr, nb.FS_DEGR2: p.degr2},
    )  # fmt: skip


def _rebuilt_state(
    SV: np.ndarray,
    A: np.ndarray,
    b: np.ndarray,
    Abar: np.ndarray,
    bbar: np.ndarray,
    cfg: nb.BSGDConfig,
    *,
    n_cols: int,
    clock: int,
    n_maint: int,
    counters: Mapping[int, float],
    sref: float | None = None,
) -> nb.BSGDState:
    """A new state (room for ``cfg.budget + 1`` SVs) holding the SVs ``SV``, the iterate
    ``(A, b)`` and the averaged sums ``(Abar, bbar)``, with the float counters ``counters``
    (indices into ``fs``; the others fresh), every SV's averaged-sum offset ``sref`` when
    given, and the clock and maintenance count. The kernel matrix is rebuilt with the loop's
    own pair arithmetic (:func:`dkernel.kernels.pair_gram`), projection's inverse from
    scratch, and ``||w||^2`` (radius) from the counters set."""
    m, d = SV.shape
    st = nb.new_state(int(cfg.budget), d, n_cols, int(cfg.maint))
    nb.set_support(st, SV)
    st.A[:m] = A
    st.b[:] = b
    st.Abar[:m] = Abar
    st.bbar[:] = bbar
    for k, v in counters.items():
        st.fs[k] = v
    if sref is not None:
        st.sref[:m] = sref
    st.ist[nb.IS_T] = clock
    st.ist[nb.IS_NSV] = m
    st.ist[nb.IS_NMAINT] = n_maint
    if m:
        st.K[:m, :m] = pair_gram(SV, st.sqn[:m], cfg.kind, cfg.gamma, cfg.degree, cfg.coef0)
    if cfg.maint == nb.PROJECT:
        nb.refresh_inverse(st.K, st.M, m, cfg.ridge)
    if cfg.radius > 0:
        st.fs[nb.FS_WNORM2] = nb.exact_wnorm2(st.A, st.K, st.b, st.fs, m, cfg.icpt)
    return st


def coefficients(state: nb.BSGDState, cfg: nb.BSGDConfig) -> tuple[np.ndarray, np.ndarray]:
    """``(coef, b)`` of the model ``state`` stands for: the averaged iterate ``Abar / W``
    when averaging is on and has weight, else the last iterate ``s * A`` (``b``: the
    intercept feature's coefficients, before ``cfg.icpt``). Brings the lazy averaged sums
    up to date first."""
    n_sv = state.n_sv
    s = float(state.fs[nb.FS_SCALE])
    nb.flush_average(state.A, state.Abar, state.sref, state.fs, n_sv)
    W = float(state.fs[nb.FS_WSUM])
    if cfg.avg_mode != nb.AVG_OFF and W > 0:
        return state.Abar[:n_sv] / W, state.bbar / W
    return s * state.A[:n_sv], s * state.b


def fitted_attributes(
    state: nb.BSGDState, classes, spec: KernelSpec, cfg: nb.BSGDConfig, *, n_iter: int, d: int
) -> dict[str, Any]:
    """The fitted attributes of an estimator holding ``state`` (the model of
    :func:`coefficients`; ``refit_alpha_`` None: a fit's refit sets it)."""
    coef, b = coefficients(state, cfg)
    ist, n_maint = state.ist, int(state.ist[nb.IS_NMAINT])
    degradation = float(state.fs[nb.FS_DEGR]) / max(1, n_maint) if n_maint else 0.0
    return {
        "n_features_in_": d,
        "classes_": classes,
        "support_vectors_": state.SV[: state.n_sv].copy(),
        "dual_coef_": coef,
        "intercept_": b * cfg.icpt,
        "gamma_": float(spec.gamma) if spec.gamma is not None else None,
        "alpha_": float(cfg.alpha),
        "refit_alpha_": None,
        "n_iter_": n_iter,
        "t_": int(ist[nb.IS_T]),
        "_clock": int(ist[nb.IS_T]),
        "_avg_start": int(cfg.avg_start),
        "n_maintenance_": n_maint,
        "weight_degradation_": degradation,
        "_spec": spec,
        "_state": state,
    }


def check_trained(state: nb.BSGDState, w) -> None:
    """Refuse a state that overflowed in training (the fitted attributes stay untouched)."""
    n_sv = state.n_sv
    if (
        np.isfinite(state.A[:n_sv]).all()
        and np.isfinite(state.Abar[:n_sv]).all()
        and np.isfinite(state.b).all()
        and np.isfinite(state.fs).all()
    ):
        return
    hint = ""
    if w is not None:
        top = float(w.max().compute() if is_dask_array(w) else np.max(w))
        hint = (
            f"; sample_weight reaches {top:.3g}, and a weight scales its row's SGD step: "
            "use weights of order 1 (divide them by their mean)"
        )
    raise DKernelError(f"training diverged: the SGD coefficients overflowed{hint}")


# ------------------------------------------------------------------ model files
def raw_arrays(state: nb.BSGDState) -> dict[str, np.ndarray]:
    """The learner's own representation (iterate unscaled, global scale, averaged sums),
    saved so that a loaded model continues like the original (Pegasos gives every SV the
    same unscaled |alpha|, so the removal candidate is often decided by a tie that
    rounding must not change). Flushes the averaged sums."""
    n_sv = state.n_sv
    nb.flush_average(state.A, state.Abar, state.sref, state.fs, n_sv)
    return {
        "coef_unscaled": state.A[:n_sv].copy(),
        "bias_unscaled": state.b.copy(),
        "scale": np.array(float(state.fs[nb.FS_SCALE])),
        "coef_average_sum": state.Abar[:n_sv].copy(),
        "bias_average_sum": state.bbar.copy(),
        "average_weight": np.array(float(state.fs[nb.FS_WSUM])),
        "average_offset": np.array(float(state.fs[nb.FS_SACC])),
    }


def state_from_model(
    raw: Mapping[str, np.ndarray],
    support_vectors,
    *,
    n_cols: int,
    cfg: nb.BSGDConfig,
    clock: int,
    n_maintenance: int,
    weight_degradation: float,
) -> nb.BSGDState:
    """The state of a loaded model (room for ``cfg.budget + 1`` SVs) from its
    :func:`raw_arrays` and fitted scalars. The kernel matrix is rebuilt with the loop's own
    pair arithmetic (:func:`dkernel.kernels.pair_gram`), so it equals the one in memory;
    projection's inverse is recomputed from scratch and may differ in the last bits."""
    offset = float(raw["average_offset"])  # the saved sums are flushed: every SV's offset
    counters = {
        nb.FS_SCALE: float(raw["scale"]),
        nb.FS_WSUM: float(raw["average_weight"]),
        nb.FS_SACC: offset,
        nb.FS_DEGR: weight_degradation * n_maintenance,
    }
    return _rebuilt_state(
        np.asarray(support_vectors, dtype=np.float64), raw["coef_unscaled"],
        raw["bias_unscaled"], raw["coef_average_sum"], raw["bias_average_sum"], cfg,
        n_cols=n_cols, clock=clock, n_maint=n_maintenance, counters=counters, sref=offset,
    )  # fmt: skip


# ------------------------------------------------------------------ checkpoints
def checkpoint_arrays(st: nb.BSGDState) -> dict[str, np.ndarray]:
    """The state as checkpoint entries ``state_<field>`` (copies), without ``SVT``, which
    :func:`state_from_checkpoint` derives from ``SV``."""
    return {f"state_{f}": np.array(a) for f, a in zip(st._fields, st) if f != "SVT"}


def state_from_checkpoint(saved) -> nb.BSGDState:
    """The state saved by :func:`checkpoint_arrays` (``SVT`` rebuilt from ``SV``)."""
    fields = {f: saved[f"state_{f}"] for f in nb.BSGDState._fields if f != "SVT"}
    return nb.BSGDState(**fields, SVT=np.ascontiguousarray(fields["SV"].T))


_PARTIAL_ARRAYS = ("SV", "A", "b", "Abar", "bbar")


def partial_arrays(p: Partial) -> dict:
    """A merged model as checkpoint entries (floats as JSON keep every bit)."""
    out: dict = {f"part_{k}": np.asarray(getattr(p, k)) for k in _PARTIAL_ARRAYS}
    out["part_scalars"] = [float(p.W), float(p.t), int(p.n), int(p.n_maint)]
    out["part_degr"] = [float(p.degr), float(p.degr2)]
    return out


def partial_of(saved: dict) -> Partial:
    """The merged model saved by :func:`partial_arrays`."""
    W, t, n, n_maint = saved["part_scalars"]
    degr, degr2 = saved["part_degr"]
    arrays = {k: saved[f"part_{k}"] for k in _PARTIAL_ARRAYS}
    return Partial(
        W=float(W), t=float(t), n=int(n), n_maint=int(n_maint), degr=float(degr),
        degr2=float(degr2), **arrays,
    )  # fmt: skip


#: At most this many bytes of rows in the sample that ``partial_fit(refit=True)`` solves over.
_RESERVOIR_BYTES = 64 * 2**20


# ------------------------------------------------------------------ the reservoir
class Reservoir(NamedTuple):
    """A uniform sample of the rows :meth:`BudgetedSVC.partial_fit` streamed (Vitter's
    algorithm R): ``seen`` rows so far, at most ``cap`` kept (X, raw labels, weights)."""

    X: np.ndarray
    y: np.ndarray
    w: np.ndarray | None
    seen: int
    #: the model's step count after the call that last added rows
    clock: int = 0


def reservoir_cap(budget: int, d: int, refit_rows) -> int:
    """Rows the reservoir keeps: ``refit_rows`` ("auto": 256 per support vector), at most
    ``_RESERVOIR_BYTES`` of rows."""
    rows = _refit._ROWS_PER_SV * budget if refit_rows == "auto" else int(refit_rows)
    return max(1, min(rows, _RESERVOIR_BYTES // (8 * max(1, d))))


def reservoir_add(res: Reservoir | None, X, y, w, *, rng, cap: int) -> Reservoir:
    """``res`` with the n rows of (X, y, w) offered in order: row t (counted over the whole
    stream) enters with probability ``cap / (t + 1)`` in a uniform slot, the later of two
    rows for one slot kept. The entering rows are gathered once (one task per touched
    chunk for dask input)."""
    n = int(X.shape[0])
    seen = 0 if res is None else res.seen
    kept = 0 if res is None else len(res.y)
    t = seen + np.arange(n)
    slot = np.where(t < cap, t, rng.randint(0, np.maximum(t, cap) + 1))
    enter = np.flatnonzero(slot < cap)
    last = len(enter) - 1 - np.unique(slot[enter][::-1], return_index=True)[1]
    rows, slots = enter[last], slot[enter[last]]
    Xn, yn = take_rows(X, rows), take_rows(y, rows)
    wn = None if w is None else take_rows(w, rows)
    size = max(kept, int(slots.max()) + 1) if len(slots) else kept
    if res is None:
        res = Reservoir(
            np.empty((0, Xn.shape[1]), Xn.dtype), np.empty(0, yn.dtype),
            None if wn is None else np.empty(0), 0,
        )  # fmt: skip
    Xr, yr = _grown(res.X, size), _grown(res.y, size)
    Xr[slots], yr[slots] = Xn, yn
    wr = None
    if wn is not None or res.w is not None:
        wr = _grown(np.ones(kept) if res.w is None else res.w, size, fill=1.0)
        wr[slots] = 1.0 if wn is None else wn
    return Reservoir(Xr, yr, wr, seen + n)


def _grown(a: np.ndarray, size: int, fill=None) -> np.ndarray:
    """A copy of ``a`` with ``size`` rows (new rows ``fill``, or uninitialised)."""
    out = np.empty((size, *a.shape[1:]), a.dtype) if fill is None else np.full(size, fill)
    out[: len(a)] = a
    return out
