"""Model files of :class:`~dkernel.svm.BudgetedSVC`: a versioned, non-pickle format.

A model file is an uncompressed ``.npz`` (read with ``allow_pickle=False``) holding

- ``header``: a 0-d unicode array with a JSON object ``{"format": "dkernel.BudgetedSVC",
  "version": 2, "params": {...}, "fitted": {...}}`` (constructor parameters, the resolved
  kernel, ``alpha_``, ``t_``, ``n_iter_``, ``weight_degradation_``, ``n_maintenance_``,
  ``n_features_in_``);
- ``support_vectors`` (n_sv, d) float64, ``dual_coef`` (n_sv, c) float64, ``intercept`` (c,);
- ``coef_unscaled`` (n_sv, c), ``bias_unscaled`` (c,), ``scale`` (0-d), ``coef_average_sum``
  (n_sv, c), ``bias_average_sum`` (c,), ``average_weight`` and ``average_offset`` (0-d): the
  learner's own representation (the iterate is ``scale * coef_unscaled``, the averaged model
  ``coef_average_sum / average_weight``; ``average_offset`` is the lazy averaging's running
  sum, kept so that the arithmetic goes on unchanged), so that ``partial_fit`` on a loaded
  model continues exactly as the original would;
- ``feature_mean``, ``feature_scale`` (d,), only for ``standardize=True``;
- ``platt_a``, ``platt_b`` (c,), only for ``probability=True``: the Platt scaling of each
  score column;
- ``classes``: the labels as a numeric or fixed-width unicode array (strings come back as
  ``str``).

The container (header, size limits, the atomic write) is :mod:`dkernel._model_io`'s, shared
with the k-means models: a failed save never leaves a half-written model, a path or URL
(``s3://``, ``gs://``...) names it. Files of another format or version are rejected with a
clear error.
Version 1 (before the ``lam`` -> ``alpha``, ``max_epochs`` -> ``max_iter`` renames) is not read.

This module knows the file format only; :class:`~dkernel.svm.BudgetedSVC` builds the arrays
(``save``) and the estimator (``load``).
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from .._model_io import (
    MAX_MODEL_BYTES,
    check_format,
    feature_names,
    header_params,
    label_array,
    write_npz,
)
from .._validation import DKernelError, check_scalar

FORMAT = "dkernel.BudgetedSVC"
VERSION = 2
#: Arrays every model file holds.
#: The learner's own state (unscaled coefficients, averaging sums): a loaded model continues
#: bit for bit.
RAW_ARRAYS = (
    "coef_unscaled",
    "bias_unscaled",
    "scale",
    "coef_average_sum",
    "bias_average_sum",
    "average_weight",
    "average_offset",
)
ARRAYS = ("support_vectors", "dual_coef", "intercept", *RAW_ARRAYS)
#: Platt scaling of ``probability=True`` models: ``p = 1 / (1 + exp(a f + b))`` per column.
PLATT_ARRAYS = ("platt_a", "platt_b")

__all__ = ["MAX_MODEL_BYTES", "check_model", "model_header", "write_model"]


def model_header(est) -> dict[str, Any]:
    """The JSON header of a fitted estimator: its parameters and fitted scalars."""
    return {
        "format": FORMAT,
        "version": VERSION,
        "params": header_params(est),
        "fitted": {
            "gamma_": est.gamma_,
            "alpha_": est.alpha_,
            "refit_alpha_": getattr(est, "refit_alpha_", None),
            "t_": est.t_,
            "n_iter_": est.n_iter_,
            "weight_degradation_": est.weight_degradation_,
            "n_maintenance_": est.n_maintenance_,
            "n_features_in_": int(est.n_features_in_),
            "feature_names_in_": feature_names(est),
            "distributed_": bool(getattr(est, "distributed_", False)),
            "clock": int(getattr(est, "_clock", est.t_)),
            "avg_start": int(getattr(est, "_avg_start", 1)),
            "kernel": est._spec.kernel,
            "degree": est._spec.degree,
            "coef0": est._spec.coef0,
        },
    }


def write_model(path, header: dict[str, Any], arrays: dict[str, np.ndarray], classes) -> None:
    """Write ``header``, ``arrays`` and ``classes`` to ``path`` atomically."""
    write_npz(path, header, {"classes": label_array(classes), **arrays})


def check_model(
    path: str, header: dict[str, Any], arrays: dict[str, np.ndarray]
) -> tuple[dict[str, Any], dict[str, np.ndarray], np.ndarray]:
    """``(header, arrays, classes)`` of a model file's parts (``arrays`` without the
    header): foreign, old or corrupt files raise."""
    check_format(path, header, FORMAT, VERSION)
    if not {"support_vectors", "dual_coef", "intercept", "classes"} <= set(arrays):
        raise DKernelError(f"{path!r} is not a dkernel model file (arrays {sorted(arrays)})")
    if not set(ARRAYS) <= set(arrays):
        raise DKernelError(
            f"{path!r} is corrupt: arrays {sorted(set(ARRAYS) - set(arrays))} missing"
        )
    classes = arrays.pop("classes")
    try:
        d = int(header["fitted"]["n_features_in_"])
        params = header["params"]
    except (KeyError, TypeError) as exc:
        raise DKernelError(f"{path!r} has a corrupt header (missing {exc})") from None
    if not isinstance(params, dict):
        raise DKernelError(f"{path!r} has a corrupt header (params)")
    SV, A, b = arrays["support_vectors"], arrays["dual_coef"], arrays["intercept"]
    if (
        SV.ndim != 2
        or A.ndim != 2
        or SV.shape[0] != A.shape[0]
        or SV.shape[1] != d
        or b.shape != (A.shape[1],)
        or A.shape[1] != (1 if len(classes) == 2 else len(classes))
        or arrays["coef_unscaled"].shape != A.shape
        or arrays["coef_average_sum"].shape != A.shape
        or arrays["bias_unscaled"].shape != b.shape
        or arrays["bias_average_sum"].shape != b.shape
    ):
        raise DKernelError(
            f"{path!r} is corrupt: array shapes do not agree "
            f"({SV.shape}, {A.shape}, {b.shape}, {len(classes)} classes)"
        )
    if not all(np.isfinite(arrays[k]).all() for k in ARRAYS):
        raise DKernelError(f"{path!r} is corrupt: non-finite coefficients")
    if ("feature_mean" in arrays) != ("feature_scale" in arrays) or any(
        k in arrays
        and (
            arrays[k].shape != (d,)
            or not np.isfinite(arrays[k]).all()
            or (k == "feature_scale" and not (arrays[k] > 0).all())
        )
        for k in ("feature_mean", "feature_scale")
    ):
        raise DKernelError(f"{path!r} is corrupt: bad feature_mean / feature_scale")
    if ("platt_a" in arrays) != ("platt_b" in arrays) or any(
        k in arrays and (arrays[k].shape != b.shape or not np.isfinite(arrays[k]).all())
        for k in PLATT_ARRAYS
    ):
        raise DKernelError(f"{path!r} is corrupt: bad platt_a / platt_b")
    _check_fitted(path, header["fitted"])
    return header, arrays, classes


def _check_fitted(path: str, fitted: Any) -> None:
    """Types and ranges of the header's fitted values."""
    if not isinstance(fitted, dict):
        raise DKernelError(f"{path!r} has a corrupt header (fitted)")
    for k in ("gamma_", "alpha_", "t_", "n_iter_", "weight_degradation_", "n_maintenance_"):
        if k not in fitted:
            raise DKernelError(f"{path!r} has a corrupt header (missing {k!r})")
    counts = ("t_", "n_iter_", "n_maintenance_", "n_features_in_", "clock", "avg_start")
    reals = ("alpha_", "weight_degradation_", "degree", "coef0")
    for k in counts + reals + ("gamma_",):
        v = fitted.get(k, 0)
        if k == "gamma_" and v is None:
            continue
        kind = numbers.Integral if k in counts else numbers.Real
        try:
            check_scalar(v, k, kind=kind, low=None if k == "coef0" else 0)
        except DKernelError as exc:
            raise DKernelError(f"{path!r} has a corrupt header ({exc})") from None
    if not isinstance(fitted.get("kernel"), str):
        raise DKernelError(f"{path!r} has a corrupt header (kernel {fitted.get('kernel')!r})")
