"""Model files of every dkernel estimator: one container, a versioned non-pickle format.

A model file is an uncompressed ``.npz`` (read with ``allow_pickle=False``) holding a
``header`` (a 0-d unicode array with a JSON object ``{"format": "dkernel.<Estimator>",
"version": ..., "params": {...}, "fitted": {...}}``) and the estimator's arrays. Each
estimator's module knows its own arrays and checks (``dkernel.svm._io``,
``dkernel.cluster._io``); this one writes and reads the container (atomically, through
:func:`dkernel.data.write_bytes`, so that a path or a URL such as ``s3://`` names it) and
finds the estimator a file belongs to (:func:`read_model`, public as
:func:`dkernel.load_model`).
"""

from __future__ import annotations

import importlib
import io
import json
import os
import zipfile
from typing import Any

import numpy as np

from ._validation import DKernelError, json_value
from .data import as_location, check_output, file_size, read_bytes, write_bytes
from .kernels import KernelSpec

#: Largest model file (and total of its uncompressed arrays) read by default: 1 GiB, far
#: above any budget (B = 10^4 SVs of 10^3 features take 80 MB); ``max_bytes`` overrides.
MAX_MODEL_BYTES = 1 << 30
#: The estimator class of each format name (module, class), imported on first use.
FORMATS = {
    "dkernel.BudgetedSVC": ("dkernel.svm._bsgd", "BudgetedSVC"),
    "dkernel.MiniBatchKernelKMeans": ("dkernel.cluster._minibatch", "MiniBatchKernelKMeans"),
    "dkernel.KernelKMeans": ("dkernel.cluster._full", "KernelKMeans"),
}


def jsonable(v: Any) -> Any:
    """``v`` as a JSON value (NumPy scalars and numeric arrays too); anything else raises."""
    return json_value(v, lambda bad: f"parameter value {bad!r} cannot be saved (not JSON)",
                      arrays=True)  # fmt: skip


def header_params(est) -> dict[str, Any]:
    """The constructor parameters of ``est`` as JSON values (a path as a string, a
    ``RandomState`` as None)."""
    params = est.get_params(deep=False)
    if isinstance(params.get("checkpoint"), os.PathLike):
        params["checkpoint"] = os.fspath(params["checkpoint"])
    if not isinstance(params.get("random_state"), (int, np.integer, type(None))):
        params["random_state"] = None
    return {k: jsonable(v) for k, v in params.items()}


def feature_names(est) -> list[str] | None:
    """The column names the estimator was fitted with (``feature_names_in_``), for a header."""
    names = getattr(est, "feature_names_in_", None)
    return None if names is None else [str(v) for v in names]


def set_feature_names(est, fitted: dict[str, Any]) -> None:
    """``feature_names_in_`` back from a header (absent when the fit had none)."""
    names = fitted.get("feature_names_in_")
    if names is not None:
        est.feature_names_in_ = np.asarray(names, dtype=object)


def fitted_spec(params: dict[str, Any], fitted: dict[str, Any]) -> KernelSpec:
    """The kernel a model was fitted with, from its header's checked values."""
    return KernelSpec(
        fitted["kernel"],
        fitted["gamma_"],
        fitted["degree"],
        fitted["coef0"],
        dict(params.get("kernel_params") or {}),
    )


def label_array(classes) -> np.ndarray:
    """Labels as a numeric or fixed-width unicode array (objects become ``str``)."""
    classes = np.asarray(classes)
    if classes.dtype == object:
        classes = classes.astype(str)
    if classes.dtype.kind not in "biufU":
        raise DKernelError(f"classes of dtype {classes.dtype} cannot be saved")
    return classes


def write_npz(path, header: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
    """Write ``header`` and ``arrays`` to ``path`` atomically (one PUT on object storage)."""
    path = check_output(path, "model file")  # a trailing '/' (a folder) refused, not dropped
    payload: dict[str, Any] = {"header": np.array(json.dumps(header)), **arrays}
    buf = io.BytesIO()
    np.savez(buf, **payload)
    write_bytes(path, buf.getvalue())


def read_npz(
    path, *, max_bytes: int = MAX_MODEL_BYTES
) -> tuple[str, dict[str, Any], dict[str, np.ndarray]]:
    """``(url, header, arrays)`` of a model file: missing, foreign, corrupt or oversized
    (above ``max_bytes`` on disk or uncompressed) files raise before their arrays are read.
    The header is a JSON object with a ``format``; its other keys are the caller's to check."""
    url = as_location(path).url
    size = file_size(url)
    if size is None:
        raise DKernelError(f"no model file at {url!r}")
    if size > max_bytes:
        raise DKernelError(
            f"{url!r} is {size:,} bytes, above the limit of {max_bytes:,} for a model file "
            "(pass max_bytes= to read it anyway)"
        )
    try:
        raw = io.BytesIO(read_bytes(url))
        with zipfile.ZipFile(raw) as zf:
            unpacked = sum(info.file_size for info in zf.infolist())
    except (OSError, zipfile.BadZipFile) as exc:
        raise DKernelError(f"{url!r} is not a dkernel model file ({exc})") from None
    if unpacked > max_bytes:
        raise DKernelError(
            f"{url!r} unpacks to {unpacked:,} bytes, above the limit of {max_bytes:,} for a "
            "model file (pass max_bytes= to read it anyway)"
        )
    try:
        raw.seek(0)
        with np.load(raw, allow_pickle=False) as data:
            arrays = {k: data[k] for k in data.files}
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
        raise DKernelError(f"{url!r} is not a dkernel model file ({exc})") from None
    if "header" not in arrays:
        raise DKernelError(f"{url!r} is not a dkernel model file (arrays {sorted(arrays)})")
    try:
        header = json.loads(str(arrays.pop("header")))
    except json.JSONDecodeError as exc:
        raise DKernelError(f"{url!r} has a corrupt header ({exc})") from None
    if not isinstance(header, dict) or not isinstance(header.get("format"), str):
        raise DKernelError(f"{url!r} is not a dkernel model file (no format in its header)")
    return url, header, arrays


def check_format(url: str, header: dict[str, Any], fmt: str, version: int) -> None:
    """Refuse a file of another estimator or format version."""
    if header.get("format") != fmt:
        found = header.get("format")
        other = f" (it holds a {found[8:]})" if found in FORMATS else ""
        raise DKernelError(f"{url!r} is not a {fmt} model file{other}")
    if header.get("version") != version:
        raise DKernelError(
            f"{url!r} has model format version {header.get('version')!r}; "
            f"this dkernel reads version {version}"
        )


def read_model(path, *, max_bytes: int = MAX_MODEL_BYTES):
    """Read a model written by the ``save`` method of any dkernel estimator.

    The file's header names its estimator (:class:`~dkernel.svm.BudgetedSVC`,
    :class:`~dkernel.cluster.MiniBatchKernelKMeans` or :class:`~dkernel.cluster.KernelKMeans`);
    that class checks and rebuilds it, as its own ``load`` does. Files above ``max_bytes``
    (1 GiB by default, on disk or unpacked) are refused before their arrays are read.
    Raises ``DKernelError``.
    """
    url, header, arrays = read_npz(path, max_bytes=max_bytes)
    where = FORMATS.get(header["format"])
    if where is None:
        raise DKernelError(
            f"{url!r} holds a model of format {header['format']!r}; this dkernel reads "
            f"{', '.join(FORMATS)}"
        )
    cls = getattr(importlib.import_module(where[0]), where[1])
    return cls._from_file(url, header, arrays)
