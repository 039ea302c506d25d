"""Model files of the kernel k-means estimators: the container of :mod:`dkernel._model_io`.

A model file holds

- ``header``: ``{"format": "dkernel.MiniBatchKernelKMeans"`` (or ``"dkernel.KernelKMeans"``),
  ``"version": 1, "params": {...}, "fitted": {...}}``: the constructor parameters (an
  ``init`` array as a nested list), the resolved kernel (``kernel``, ``gamma_``, ``degree``,
  ``coef0``), ``n_features_in_``, ``inertia_``, ``n_iter_``, ``history_``,
  ``n_kernel_evals_``, ``cluster_sizes`` (of the training rows), and ``timings_`` and
  ``kernel_evals_`` where the fit recorded them;
- ``center_support`` (s, d) in the dtype the model predicts in (float32 or float64),
  ``center_coef`` (k, s) and ``center_norms`` (k,) float64: all that ``predict``,
  ``transform`` and ``score`` use, so a loaded model gives the same bits.

``labels_`` of the training rows are not saved (n values; ``cluster_sizes`` summarises
them). Models of the transductive graph kernels (defined on the training rows only) and of
callable kernels (not JSON) cannot be saved.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from .._model_io import check_format, feature_names, header_params, write_npz
from .._validation import DKernelError, check_scalar

VERSION = 1
ARRAYS = ("center_support", "center_coef", "center_norms")


def format_of(est) -> str:
    return f"dkernel.{type(est).__name__}"


def check_savable(est) -> None:
    """Refuse models that a file cannot carry, before anything is written."""
    if est._is_graph():
        raise DKernelError(
            f"a model of the transductive kernel {est.kernel!r} cannot be saved: it is "
            "defined on the training rows only (save labels_ instead)"
        )
    if not isinstance(est._spec.kernel, str):
        raise DKernelError("a model of a callable kernel cannot be saved (use a named kernel)")


def write_kmeans(est, path) -> None:
    """Write the fitted estimator ``est`` to ``path`` atomically."""
    check_savable(est)
    spec = est._spec
    fitted: dict[str, Any] = {
        "kernel": spec.kernel,
        "gamma_": spec.gamma,
        "degree": float(spec.degree),
        "coef0": float(spec.coef0),
        "n_features_in_": int(est.n_features_in_),
        "feature_names_in_": feature_names(est),
        "inertia_": None if getattr(est, "inertia_", None) is None else float(est.inertia_),
        "n_iter_": int(est.n_iter_),
        "history_": [float(v) for v in est.history_],
        "n_kernel_evals_": int(est.n_kernel_evals_),
        "cluster_sizes": est._cluster_sizes(),
    }
    for key in ("timings_", "kernel_evals_"):
        if hasattr(est, key):
            fitted[key] = dict(getattr(est, key))
    header = {
        "format": format_of(est),
        "version": VERSION,
        "params": header_params(est),
        "fitted": fitted,
    }
    arrays = {
        "center_support": np.ascontiguousarray(est.center_support_),
        "center_coef": np.asarray(est.center_coef_, dtype=np.float64),
        "center_norms": np.asarray(est.center_norms_, dtype=np.float64),
    }
    write_npz(path, header, arrays)


def check_kmeans(cls, path: str, header: dict[str, Any], arrays: dict[str, np.ndarray]):
    """``(params, fitted, arrays)`` of a k-means model file, every value checked."""
    check_format(path, header, f"dkernel.{cls.__name__}", VERSION)
    missing = set(ARRAYS) - set(arrays)
    if missing:
        raise DKernelError(f"{path!r} is corrupt: arrays {sorted(missing)} missing")
    params, fitted = header.get("params"), header.get("fitted")
    if not isinstance(params, dict) or not isinstance(fitted, dict):
        raise DKernelError(f"{path!r} has a corrupt header (params / fitted)")
    try:
        for k in ("n_features_in_", "n_iter_", "n_kernel_evals_"):
            check_scalar(fitted[k], k, kind=numbers.Integral, low=0)
        check_scalar(fitted["inertia_"], "inertia_", low=0.0, allow_none=True)
        for k in ("degree", "coef0"):
            check_scalar(fitted[k], k)
        if fitted["gamma_"] is not None:
            check_scalar(fitted["gamma_"], "gamma_", low=0.0, low_inclusive=False)
        if not isinstance(fitted["kernel"], str):
            raise DKernelError(f"kernel {fitted['kernel']!r} is not a name")
        history, sizes = fitted["history_"], fitted["cluster_sizes"]
        if not isinstance(history, list) or not isinstance(sizes, list):
            raise DKernelError("history_ and cluster_sizes must be lists")
    except KeyError as exc:
        raise DKernelError(f"{path!r} has a corrupt header (missing {exc})") from None
    except DKernelError as exc:
        raise DKernelError(f"{path!r} has a corrupt header ({exc})") from None
    S, C, norms = (arrays[k] for k in ARRAYS)
    d = int(fitted["n_features_in_"])
    if (
        S.ndim != 2
        or S.shape[1] != d
        or S.dtype not in (np.float32, np.float64)
        or C.ndim != 2
        or C.shape[1] != S.shape[0]
        or norms.shape != (C.shape[0],)
        or C.shape[0] != params.get("n_clusters")
        or len(fitted["cluster_sizes"]) not in (0, C.shape[0])
    ):
        raise DKernelError(
            f"{path!r} is corrupt: array shapes do not agree ({S.shape} {S.dtype}, "
            f"{C.shape}, {norms.shape}, n_clusters={params.get('n_clusters')!r})"
        )
    if not all(np.isfinite(arrays[k]).all() for k in ARRAYS):
        raise DKernelError(f"{path!r} is corrupt: non-finite centers")
    return params, fitted, arrays
