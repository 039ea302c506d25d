"""Labels that are class names, one rule for every source.

Labels that are names rather than numbers (text, a NumPy string or object array, a pandas
Series of strings or a categorical) are stored the same way whatever brought them: a CSV
column, an array, a pandas Series or a DataFrame column. The store's ``y`` holds each
label's index in the sorted distinct names (int64) and the store's ``label_names``
attribute the names (label ``i`` is ``label_names[i]``). Reading the labels for a fit
(:meth:`~dkernel.data.Dataset.labels`) gives the names back, so a model's ``classes_`` and
its predictions are the user's names whichever way the rows arrived, as when the same
labels are passed to an estimator directly.
"""

from __future__ import annotations

from typing import Any

import dask
import numpy as np

from .._defaults import setting
from .._validation import DKernelError, is_dask_array


def as_labels(y) -> np.ndarray:
    """``y`` as a NumPy array: a pandas Series or categorical gives its values (an object
    array of numbers that pandas held becomes numeric again)."""
    y = np.asarray(y)
    if y.dtype == object and y.size and all(_is_number(v) for v in y.ravel()):
        y = np.asarray(y.tolist())
    return y


def _is_number(v) -> bool:
    return isinstance(v, (int, float, np.number)) and not isinstance(v, bool) and v == v


def _column(y: np.ndarray) -> np.ndarray:
    return y.ravel() if y.ndim > 1 and y.size == y.shape[0] else y


def are_names(y) -> bool:
    """Labels that are names: text, bytes or (non-numeric) object dtype."""
    return y.dtype.kind in "OUS"


def distinct_names(y: np.ndarray, *, name: str = "y", row_offset: int = 0) -> set[str]:
    """The distinct labels of a block of names, each checked to be text (a missing or
    empty label, or a number among names, is named by its row)."""
    values = np.unique(y).tolist() if y.dtype.kind in "US" else list(dict.fromkeys(y.tolist()))
    bad = [v for v in values if not isinstance(v, (str, bytes)) or not v]
    if bad:
        row = row_offset + next(i for i, v in enumerate(y.tolist()) if v is bad[0] or v == bad[0])
        missing = bad[0] is None or bad[0] != bad[0] or bad[0] in ("", b"")
        raise DKernelError(
            f"{name}: the label at row {row} is {'missing' if missing else 'not text'} "
            f"({bad[0]!r}); labels that are names must all be text"
        )
    return {_text(v) for v in values}


def _text(v) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def name_limit() -> int:
    """The most distinct names that are class labels (setting ``data.max-label-names``)."""
    return int(setting("data.max-label-names"))


def check_name_limit(count: int, most: int, *, name: str = "y", hint: str = "") -> None:
    """Raise if ``count`` distinct names pass ``most`` (from :func:`name_limit`): so many
    are not class labels. ``hint`` ends the message (the CSV reader's way out)."""
    if count > most:
        raise DKernelError(
            f"{name} has more than {most} distinct text values: not class labels{hint}"
        )


def check_name_count(names, *, name: str = "y") -> tuple[str, ...]:
    """The sorted names; more than ``data.max-label-names`` of them are not class labels
    (the limit the CSV reader applies to a text label column)."""
    check_name_limit(len(names), name_limit(), name=name)
    return tuple(sorted(names))


def code_names(yb: np.ndarray, names: tuple[str, ...] | np.ndarray) -> np.ndarray:
    """A block of names as their indices in the sorted ``names`` (int64)."""
    ref = np.asarray(names)
    yb = np.ravel(yb)
    text = np.char.decode(yb) if yb.dtype.kind == "S" else yb.astype(str)
    codes = np.searchsorted(ref, text)
    codes = np.minimum(codes, len(ref) - 1)
    if len(text) and not (ref[codes] == text).all():  # pragma: no cover - names are complete
        raise DKernelError(f"label {text[ref[codes] != text][0]!r} is not among {list(ref)}")
    return codes.astype(np.int64)


def code_labels(*ys) -> tuple[list[Any], tuple[str, ...] | None]:
    """NumPy labels (``y`` and, from an ``.npz``, ``y_test``; None entries kept) as the
    store keeps them: names as their indices in the sorted names of all of them, and the
    names; numeric labels as they are (names None)."""
    arrays = [None if y is None else _column(as_labels(y)) for y in ys]
    named = [a for a in arrays if a is not None]
    if not any(are_names(a) for a in named) or any(a.ndim != 1 for a in named):
        # numbers; anything else as given, for the callers' checks to name
        return [
            a if a is not None and a.dtype.kind in "biuf" else y for y, a in zip(ys, arrays)
        ], None
    found: set[str] = set()
    for y, a in zip(("y", "y_test"), arrays):
        if a is not None:
            found |= distinct_names(a, name=y)
    names = check_name_count(found)
    return [None if a is None else code_names(a, names) for a in arrays], names


def code_dask_labels(y) -> tuple[Any, tuple[str, ...]]:
    """Dask labels that are names: their indices in the sorted names (lazily, per chunk)
    and the names, found in one pass over the labels."""
    starts = np.cumsum((0, *y.chunks[0]))[:-1]
    parts = [
        dask.delayed(distinct_names)(b, row_offset=int(s))
        for b, s in zip(y.to_delayed().ravel(), starts)
    ]
    names = check_name_count(set().union(*dask.compute(*parts)))
    codes = y.map_blocks(code_names, names, dtype=np.int64, meta=np.empty(0, np.int64))
    return codes, names


def decode(y, names) -> Any:
    """Stored label indices as the names they stand for: lazily, per chunk, for a dask
    array (an index outside ``names`` raises, named)."""
    ref = np.asarray(list(names))
    if not is_dask_array(y):
        return _names_of(np.asarray(y), ref)
    return y.map_blocks(_names_of, ref, dtype=ref.dtype, meta=np.empty(0, ref.dtype))


def _names_of(codes: np.ndarray, ref: np.ndarray) -> np.ndarray:
    codes = np.asarray(codes)
    if codes.size and (codes.min() < 0 or codes.max() >= len(ref)):
        bad = codes[(codes < 0) | (codes >= len(ref))][0]
        raise DKernelError(f"stored label {bad} is not an index of label_names {list(ref)}")
    return ref[codes]
