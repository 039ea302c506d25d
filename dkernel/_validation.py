"""Input checks shared by every subpackage: clear errors, raised before any work."""

from __future__ import annotations

import numbers
from collections.abc import Callable, Mapping

import numpy as np


class DKernelError(ValueError):
    """Bad input or parameters given to dkernel (a ``ValueError``)."""


def is_dask_array(a) -> bool:
    """True for a dask array (the one test used everywhere; no dask import needed)."""
    return hasattr(a, "dask") and hasattr(a, "chunks") and hasattr(a, "__dask_keys__")


def check_dense_chunks(X, *, name: str = "X") -> None:
    """Refuse a dask array whose chunks are sparse matrices (its ``_meta``), naming them as
    sparse: every pass reads dense row blocks."""
    meta = getattr(X, "_meta", None)
    if meta is not None and hasattr(meta, "toarray") and not isinstance(meta, np.ndarray):
        raise DKernelError(
            f"{name} is a dask array of sparse chunks ({type(meta).__name__}): sparse input is "
            f"not supported; make the chunks dense ({name}.map_blocks(lambda b: b.toarray(), "
            f"dtype={name}.dtype)) or ingest the data into a store"
        )


def check_finite_2d(X, *, name: str = "X", allow_empty: bool = False, dtype=None) -> np.ndarray:
    """Return ``X`` as a 2-D floating NumPy array, or raise naming the first bad entry.

    float32 and float64 are kept as they are; other numeric types become float64.
    Read-only and Fortran-ordered inputs are accepted without a copy where possible.
    """
    if hasattr(X, "toarray") and not isinstance(X, np.ndarray):
        raise DKernelError(f"{name}: sparse input is not supported; pass a dense array")
    arr = np.asarray(X)
    if arr.dtype == object or not (np.issubdtype(arr.dtype, np.number) or arr.dtype == np.bool_):
        raise DKernelError(f"{name} must be numeric, got dtype {arr.dtype}")
    if np.issubdtype(arr.dtype, np.complexfloating):
        raise DKernelError(f"{name} must be real, got dtype {arr.dtype}")
    if arr.ndim != 2:
        raise DKernelError(
            f"{name} must be 2-D (n_samples, n_features), got an array of shape {arr.shape}"
        )
    if not allow_empty and (arr.shape[0] == 0 or arr.shape[1] == 0):
        raise DKernelError(f"{name} is empty (shape {arr.shape})")
    if dtype is not None:
        arr = arr.astype(dtype, copy=False)
    elif arr.dtype not in (np.float32, np.float64):
        arr = arr.astype(np.float64)
    report_nonfinite(arr, name=name)
    return arr


def report_nonfinite(arr: np.ndarray, *, name: str = "X", row_offset: int = 0) -> None:
    """Raise naming the first NaN/inf entry of ``arr`` (row offset for chunked checks)."""
    if arr.size and not np.isfinite(arr).all():
        bad = np.argwhere(~np.isfinite(arr))[0]
        what = "NaN" if np.isnan(arr[tuple(bad)]) else "inf"
        where = f"row {int(bad[0]) + row_offset}"
        if arr.ndim > 1:
            where += f", column {int(bad[1])}"
        raise DKernelError(f"{name} contains {what} at {where}")


def column_moments(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and variance of every column; an overflow gives inf, judged by
    :func:`feature_stats_error`, without numpy's warning."""
    with np.errstate(over="ignore", invalid="ignore"):
        return X.mean(axis=0), X.var(axis=0)


def feature_stats_error(mean, var, *, name: str = "X") -> DKernelError:
    """The error for feature statistics that are not finite: finite means with an infinite
    variance are finite values whose squares overflow (named as such, with the feature);
    anything else is a NaN or inf in the data (or sums beyond the float range)."""
    mean, var = np.asarray(mean, dtype=np.float64), np.asarray(var, dtype=np.float64)
    over = np.isfinite(mean) & np.isinf(var)
    if over.any():
        j = int(np.argmax(over))
        return DKernelError(
            f"{name} is finite but too large for float64 statistics: the squares of feature "
            f"{j} (mean {mean[j]:.3g}) overflow (float64 ends at {np.finfo(np.float64).max:.3g}); "
            f"rescale {name}, e.g. divide it by a constant"
        )
    j = int(np.argmax(~(np.isfinite(mean) & np.isfinite(var))))
    return DKernelError(
        f"{name} contains NaN or inf, or sums beyond float64, in feature {j} (found computing "
        "the feature statistics)"
    )


def check_scalar(
    value,
    name: str,
    *,
    kind=numbers.Real,
    low=None,
    high=None,
    low_inclusive: bool = True,
    high_inclusive: bool = True,
    allow_none=False,
):
    """Check a scalar parameter's type and range; return it unchanged."""
    if value is None and allow_none:
        return value
    if isinstance(value, bool) or not isinstance(value, kind):
        kinds = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
        raise DKernelError(f"{name} must be {kinds}, got {value!r}")
    if isinstance(value, numbers.Real) and not np.isfinite(float(value)):
        raise DKernelError(f"{name} must be finite, got {value!r}")
    if low is not None and (value < low or (value == low and not low_inclusive)):
        op = ">=" if low_inclusive else ">"
        raise DKernelError(f"{name} must be {op} {low}, got {value!r}")
    if high is not None and (value > high or (value == high and not high_inclusive)):
        op = "<=" if high_inclusive else "<"
        raise DKernelError(f"{name} must be {op} {high}, got {value!r}")
    return value


def check_sample_weight(sample_weight, n: int, dtype=np.float64, *, name="sample_weight"):
    """Weights as a 1-D array of length ``n``: finite, non-negative, not all zero."""
    if sample_weight is None:
        return np.ones(n, dtype=dtype)
    w = np.asarray(sample_weight)
    if w.ndim == 0:
        w = np.full(n, float(w))
    if w.ndim != 1 or w.shape[0] != n:
        raise DKernelError(f"{name} has shape {w.shape}, expected ({n},) to match the rows of X")
    if not np.issubdtype(w.dtype, np.number):
        raise DKernelError(f"{name} must be numeric, got dtype {w.dtype}")
    w = w.astype(dtype, copy=False)
    report_nonfinite(w, name=name)
    if (w < 0).any():
        i = int(np.argmax(w < 0))
        raise DKernelError(f"{name} is negative at row {i} ({w[i]})")
    if not (w > 0).any():
        raise DKernelError(f"{name} is zero everywhere: nothing to fit")
    return w


def checked_block(Xb, func: Callable, *args, block_info=None, **kwargs):
    """``func(Xb, *args)`` after checking the block's values (NaN/inf named by global row).

    The map_blocks body of every row pass: the value check rides on the read that the pass
    makes anyway, so no separate scan reads the chunks a second time.
    """
    Xb = np.asarray(Xb)
    offset = int(block_info[0]["array-location"][0][0]) if block_info else 0
    report_nonfinite(Xb, name="X", row_offset=offset)
    return func(Xb, *args, **kwargs)


def label_classes(y, *, name: str = "y", row_offset: int = 0) -> np.ndarray:
    """The sorted distinct labels of ``y``, refusing NaN labels (named as NaN, with the
    row) and labels of mixed types (``1`` and ``"a"``), which have no order."""
    y = np.asarray(y)
    if y.dtype.kind == "f" and y.size and np.isnan(y).any():
        row = int(np.argmax(np.isnan(y))) + row_offset
        raise DKernelError(f"{name} contains NaN at row {row}: every row needs a label")
    if y.dtype == object:
        values = y.ravel().tolist()
        for i, v in enumerate(values):
            if v is None or (isinstance(v, numbers.Real) and v != v):
                raise DKernelError(
                    f"{name} contains NaN at row {i + row_offset} ({v!r}): every row needs a label"
                )
        kinds = sorted({_label_kind(v) for v in values})
        if len(kinds) > 1:
            raise DKernelError(
                f"{name} mixes label types ({', '.join(kinds)}): convert the labels to one type"
            )
    return np.unique(y)


def _label_kind(value) -> str:
    if isinstance(value, (str, np.str_)):
        return "str"
    if isinstance(value, (bool, np.bool_)):
        return "bool"
    if isinstance(value, numbers.Integral):
        return "int"
    return "float" if isinstance(value, numbers.Real) else type(value).__name__


def _chunk_classes(yb, block_info=None):
    offset = int(block_info[0]["array-location"][0][0]) if block_info else 0
    return label_classes(yb, row_offset=offset)


def unique_labels(y, *, token: str) -> np.ndarray:
    """The sorted distinct values of a 1-D dask array: one ``np.unique`` task per chunk
    (key prefix ``token`` on the dashboard, where ``da.unique`` shows Dask's internal
    ``getitem-unique-aggregate``), the small results joined here."""
    import dask

    per_chunk = y.map_blocks(
        _chunk_classes, chunks=((np.nan,) * y.numblocks[0],), dtype=y.dtype, token=token
    )
    return label_classes(np.concatenate(dask.compute(*per_chunk.to_delayed().ravel())))


def json_value(value, error: Callable[[object], str], *, arrays: bool = False):
    """``value`` as a JSON value: NumPy scalars become Python ones, tuples lists and (with
    ``arrays``) numeric arrays lists, recursively; anything else raises a ``DKernelError``
    with ``error(the value)``."""
    if isinstance(value, np.generic):
        return value.item()
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if arrays and isinstance(value, np.ndarray) and value.dtype.kind in "biuf":
        return value.tolist()
    if isinstance(value, Mapping):
        return {str(k): json_value(v, error, arrays=arrays) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_value(v, error, arrays=arrays) for v in value]
    raise DKernelError(error(value))
