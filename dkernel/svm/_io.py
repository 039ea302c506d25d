"""Model files of :class:`~dkernel.svm.BudgetedSVC`: a versioned, non-pickle format.

A model file is an uncompressed ``.npz`` (read with ``allow_pickle=False``) holding

- ``header``: a 0-d unicode array with a JSON object ``{"format": "dkernel.BudgetedSVC",
  "version": 1, "params": {...}, "fitted": {...}}`` (constructor parameters, the resolved
  kernel, ``t_``, ``n_iter_``, ``weight_degradation_``, ``n_maintenance_``, ``n_features_in_``);
- ``support_vectors`` (n_sv, d) float64, ``dual_coef`` (n_sv, c) float64, ``intercept`` (c,);
- ``coef_unscaled`` (n_sv, c), ``bias_unscaled`` (c,) and ``scale`` (0-d): the learner's own
  representation (``dual_coef = scale * coef_unscaled``), so that ``partial_fit`` on a loaded
  model continues exactly as the original would;
- ``classes``: the labels as a numeric or fixed-width unicode array (strings come back as
  ``str``).

The file is written to a temporary name and renamed, so a failed save never leaves a
half-written model. Files of another format or version are rejected with a clear error.
"""

from __future__ import annotations

import json
import os
import uuid
import zipfile
from typing import Any

import numpy as np

from .._validation import DKernelError

FORMAT = "dkernel.BudgetedSVC"
VERSION = 1
_PARAMS = (
    "budget",
    "maintenance",
    "algorithm",
    "lam",
    "eta0",
    "radius",
    "kernel",
    "gamma",
    "degree",
    "coef0",
    "kernel_params",
    "fit_intercept",
    "max_epochs",
    "shuffle",
    "random_state",
    "verbose",
)


def _jsonable(v: Any) -> Any:
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, (str, int, float, bool, type(None), list, dict)):
        return v
    raise DKernelError(f"parameter value {v!r} cannot be saved (not JSON)")


def save_model(est, path) -> None:
    """Write a fitted BudgetedSVC to ``path`` (atomically)."""
    from sklearn.utils.validation import check_is_fitted

    check_is_fitted(est, "dual_coef_")
    params = {k: _jsonable(getattr(est, k)) for k in _PARAMS}
    if not isinstance(params["random_state"], (int, type(None))):
        params["random_state"] = None
    classes = np.asarray(est.classes_)
    if classes.dtype == object:
        classes = classes.astype(str)
    if classes.dtype.kind not in "biufU":
        raise DKernelError(f"classes of dtype {classes.dtype} cannot be saved")
    header = {
        "format": FORMAT,
        "version": VERSION,
        "params": params,
        "fitted": {
            "gamma_": est.gamma_,
            "t_": est.t_,
            "n_iter_": est.n_iter_,
            "weight_degradation_": est.weight_degradation_,
            "n_maintenance_": est.n_maintenance_,
            "n_features_in_": int(est.n_features_in_),
            "kernel": est._spec.kernel,
            "degree": est._spec.degree,
            "coef0": est._spec.coef0,
        },
    }
    A_raw, b_raw, scale = est._raw_coef()
    path = os.fspath(path)
    tmp = f"{path}.tmp-{uuid.uuid4().hex[:8]}.npz"
    try:
        with open(tmp, "wb") as fh:
            np.savez(
                fh,
                header=np.array(json.dumps(header)),
                support_vectors=np.asarray(est.support_vectors_, dtype=np.float64),
                dual_coef=np.asarray(est.dual_coef_, dtype=np.float64),
                intercept=np.asarray(est.intercept_, dtype=np.float64),
                coef_unscaled=A_raw,
                bias_unscaled=b_raw,
                scale=np.array(scale),
                classes=classes,
            )
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def load_model(path):
    """Read a model written by :func:`save_model`; reject foreign or corrupt files."""
    from ..kernels import KernelSpec
    from ._bsgd import BudgetedSVC

    path = os.fspath(path)
    if not os.path.isfile(path):
        raise DKernelError(f"no model file at {path!r}")
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {k: data[k] for k in data.files}
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
        raise DKernelError(f"{path!r} is not a dkernel model file ({exc})") from None
    need = {"header", "support_vectors", "dual_coef", "intercept", "classes"}
    if not need <= set(arrays):
        raise DKernelError(f"{path!r} is not a dkernel model file (arrays {sorted(arrays)})")
    try:
        header = json.loads(str(arrays["header"]))
    except json.JSONDecodeError as exc:
        raise DKernelError(f"{path!r} has a corrupt header ({exc})") from None
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise DKernelError(f"{path!r} is not a {FORMAT} model file")
    if header.get("version") != VERSION:
        raise DKernelError(
            f"{path!r} has model format version {header.get('version')!r}; "
            f"this dkernel reads version {VERSION}"
        )
    try:
        params, fitted = header["params"], header["fitted"]
        est = BudgetedSVC(**params)
        SV, A, b = arrays["support_vectors"], arrays["dual_coef"], arrays["intercept"]
        classes = arrays["classes"]
        d = int(fitted["n_features_in_"])
        if (
            SV.ndim != 2
            or A.ndim != 2
            or SV.shape[0] != A.shape[0]
            or SV.shape[1] != d
            or b.shape != (A.shape[1],)
            or A.shape[1] != (1 if len(classes) == 2 else len(classes))
        ):
            raise DKernelError(
                f"{path!r} is corrupt: array shapes do not agree "
                f"({SV.shape}, {A.shape}, {b.shape}, {len(classes)} classes)"
            )
        if not (np.isfinite(SV).all() and np.isfinite(A).all() and np.isfinite(b).all()):
            raise DKernelError(f"{path!r} is corrupt: non-finite coefficients")
        est.support_vectors_, est.dual_coef_, est.intercept_ = SV, A, b
        est.classes_ = classes
        est.n_features_in_ = d
        for k in ("gamma_", "t_", "n_iter_", "weight_degradation_", "n_maintenance_"):
            setattr(est, k, fitted[k])
        est._spec = KernelSpec(
            fitted["kernel"],
            fitted["gamma_"],
            fitted["degree"],
            fitted["coef0"],
            dict(params.get("kernel_params") or {}),
        )
        est._state = None
        if {"coef_unscaled", "bias_unscaled", "scale"} <= set(arrays):
            raw = (arrays["coef_unscaled"], arrays["bias_unscaled"], float(arrays["scale"]))
            if raw[0].shape != A.shape or raw[1].shape != b.shape:
                raise DKernelError(f"{path!r} is corrupt: array shapes do not agree")
            est._raw = raw
    except (KeyError, TypeError) as exc:
        raise DKernelError(f"{path!r} has a corrupt header (missing {exc})") from None
    return est
