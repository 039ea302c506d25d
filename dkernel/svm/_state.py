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

The merged model of a distributed fit (:class:`~._distributed.Partial`) converts to and from
a state in :mod:`._distributed` (``partial_from_state``, ``state_from_partial``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from .._validation import DKernelError, is_dask_array
from ..kernels import KernelSpec, pair_gram
from . import _budget as nb
from ._distributed import Partial


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
    SV0 = np.asarray(support_vectors, dtype=np.float64)
    n_sv, d = SV0.shape
    state = nb.new_state(int(cfg.budget), d, n_cols, cfg.maint)
    nb.set_support(state, SV0)
    state.A[:n_sv] = raw["coef_unscaled"]
    state.b[:] = raw["bias_unscaled"]
    state.Abar[:n_sv] = raw["coef_average_sum"]
    state.bbar[:] = raw["bias_average_sum"]
    state.fs[nb.FS_SCALE] = float(raw["scale"])
    state.fs[nb.FS_WSUM] = float(raw["average_weight"])
    state.fs[nb.FS_SACC] = float(raw["average_offset"])
    state.sref[:n_sv] = float(raw["average_offset"])  # the saved sums are flushed
    state.K[:n_sv, :n_sv] = pair_gram(
        SV0, state.sqn[:n_sv], cfg.kind, cfg.gamma, cfg.degree, cfg.coef0
    )
    if cfg.maint == nb.PROJECT:
        nb.refresh_inverse(state.K, state.M, n_sv, cfg.ridge)
    state.ist[nb.IS_T] = clock
    state.ist[nb.IS_NSV] = n_sv
    state.ist[nb.IS_NMAINT] = n_maintenance
    state.fs[nb.FS_DEGR] = weight_degradation * n_maintenance
    if cfg.radius > 0:
        state.fs[nb.FS_WNORM2] = nb.exact_wnorm2(
            state.A, state.K, state.b, state.fs, n_sv, cfg.icpt
        )
    return state


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
