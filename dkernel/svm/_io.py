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
- ``classes``: the labels as a numeric or fixed-width unicode array (strings come back as
  ``str``).

The file is written to a temporary name and renamed (on object storage: one PUT), so a
failed save never leaves a half-written model. A path or URL (``s3://``, ``gs://``...)
names it. Files of another format or version are rejected with a clear error.
Version 1 (before the ``lam`` -> ``alpha``, ``max_epochs`` -> ``max_iter`` renames) is not read.

This module knows the file format only; :class:`~dkernel.svm.BudgetedSVC` builds the arrays
(``save``) and the estimator (``load``).
"""

from __future__ import annotations

import io
import json
import numbers
import os
import zipfile
from typing import Any

import numpy as np

from .._validation import DKernelError, check_scalar
from ..data import file_size, read_bytes, write_bytes

#: Largest model file (and total of its uncompressed arrays) read by default: 1 GiB, far
#: above any budget (B = 10^4 SVs of 10^3 features take 80 MB); ``max_bytes`` overrides.
MAX_MODEL_BYTES = 1 << 30
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


def _jsonable(v: Any) -> Any:
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, (str, int, float, bool, type(None), list, dict)):
        return v
    raise DKernelError(f"parameter value {v!r} cannot be saved (not JSON)")


def model_header(est) -> dict[str, Any]:
    """The JSON header of a fitted estimator: its parameters and fitted scalars."""
    params = est.get_params(deep=False)
    if isinstance(params.get("checkpoint"), os.PathLike):
        params["checkpoint"] = os.fspath(params["checkpoint"])
    params = {k: _jsonable(v) for k, v in params.items()}
    if not isinstance(params.get("random_state"), (int, type(None))):
        params["random_state"] = None
    return {
        "format": FORMAT,
        "version": VERSION,
        "params": params,
        "fitted": {
            "gamma_": est.gamma_,
            "alpha_": est.alpha_,
            "t_": est.t_,
            "n_iter_": est.n_iter_,
            "weight_degradation_": est.weight_degradation_,
            "n_maintenance_": est.n_maintenance_,
            "n_features_in_": int(est.n_features_in_),
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
    classes = np.asarray(classes)
    if classes.dtype == object:
        classes = classes.astype(str)
    if classes.dtype.kind not in "biufU":
        raise DKernelError(f"classes of dtype {classes.dtype} cannot be saved")
    payload: dict[str, Any] = {"header": np.array(json.dumps(header)), "classes": classes, **arrays}
    buf = io.BytesIO()
    np.savez(buf, **payload)
    write_bytes(path, buf.getvalue())


def read_model(
    path, *, max_bytes: int = MAX_MODEL_BYTES
) -> tuple[dict[str, Any], dict[str, np.ndarray], np.ndarray]:
    """``(header, arrays, classes)`` of a model file; foreign, old, corrupt or oversized
    (above ``max_bytes`` on disk or uncompressed) files raise before their arrays are read."""
    from ..data import as_location

    path = as_location(path).url
    size = file_size(path)
    if size is None:
        raise DKernelError(f"no model file at {path!r}")
    if size > max_bytes:
        raise DKernelError(
            f"{path!r} is {size:,} bytes, above the limit of {max_bytes:,} for a model file "
            "(pass max_bytes= to read it anyway)"
        )
    try:
        raw = io.BytesIO(read_bytes(path))
        with zipfile.ZipFile(raw) as zf:
            unpacked = sum(info.file_size for info in zf.infolist())
    except (OSError, zipfile.BadZipFile) as exc:
        raise DKernelError(f"{path!r} is not a dkernel model file ({exc})") from None
    if unpacked > max_bytes:
        raise DKernelError(
            f"{path!r} unpacks to {unpacked:,} bytes, above the limit of {max_bytes:,} for a "
            "model file (pass max_bytes= to read it anyway)"
        )
    try:
        raw.seek(0)
        with np.load(raw, allow_pickle=False) as data:
            arrays = {k: data[k] for k in data.files}
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
        raise DKernelError(f"{path!r} is not a dkernel model file ({exc})") from None
    if not {"header", "support_vectors", "dual_coef", "intercept", "classes"} <= set(arrays):
        raise DKernelError(f"{path!r} is not a dkernel model file (arrays {sorted(arrays)})")
    try:
        header = json.loads(str(arrays.pop("header")))
    except json.JSONDecodeError as exc:
        raise DKernelError(f"{path!r} has a corrupt header ({exc})") from None
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise DKernelError(f"{path!r} is not a {FORMAT} model file")
    if header.get("version") != VERSION:
        raise DKernelError(
            f"{path!r} has model format version {header.get('version')!r}; "
            f"this dkernel reads version {VERSION}"
        )
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
