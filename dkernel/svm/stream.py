"""Seeded one-pass visiting order over row blocks, read with a bounded prefetch.

The order never depends on how the data is stored: rows are grouped in fixed *virtual
blocks* of ``block_rows`` consecutive rows (independent of the zarr/dask chunks); an epoch
visits the virtual blocks in an order drawn from ``SeedSequence([seed, epoch])`` and the rows
of block ``i`` in an order drawn from ``SeedSequence([seed, epoch, i])``. So NumPy input, a
dask array under any chunking and any number of workers, and a zarr store all give the same
sequence of examples, hence the same model. A virtual block is a contiguous row range, so
reading it touches one or two storage chunks.

Reading runs in one background thread that keeps at most ``depth`` blocks ahead of the
learner (the numba loop releases the GIL, so reading overlaps learning; memory stays
bounded by ``depth + 1`` blocks).
"""

from __future__ import annotations

import collections
import concurrent.futures
import contextvars
import functools
import itertools
import math
import uuid
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import dask
import numpy as np

from .._validation import DKernelError, is_dask_array, report_nonfinite
from ..data import ALIGN_ROWS, ResidentRows

#: Rows of one virtual block (the unit of shuffling and of reading): a multiple of a
#: default store's chunk rows, so a block of such a store reads whole chunks, each once.
BLOCK_ROWS = ALIGN_ROWS


class BlockTask(NamedTuple):
    """One virtual block to read: rows ``start:stop`` visited in ``order`` (None: as stored)."""

    start: int
    stop: int
    order: np.ndarray | None


def block_plan(
    n: int, *, seed: int, epoch: int, shuffle: bool, block_rows: int = BLOCK_ROWS
) -> list[BlockTask]:
    """The visiting order of one epoch over ``n`` rows (see the module docstring)."""
    n_blocks = max(1, -(-n // block_rows))
    blocks = np.arange(n_blocks)
    if shuffle:
        blocks = np.random.default_rng(np.random.SeedSequence([seed, epoch])).permutation(n_blocks)
    plan = []
    for i in blocks.tolist():
        start, stop = i * block_rows, min(n, (i + 1) * block_rows)
        order = None
        if shuffle:
            rng = np.random.default_rng(np.random.SeedSequence([seed, epoch, i]))
            order = rng.permutation(stop - start)
        plan.append(BlockTask(start, stop, order))
    return plan


def visit_order(
    n: int, *, seed: int, epoch: int = 0, shuffle: bool = True, block_rows: int = BLOCK_ROWS
) -> np.ndarray:
    """Global row indices in the order one epoch visits them (for tests and tools)."""
    parts = [
        np.arange(t.start, t.stop) if t.order is None else t.start + t.order
        for t in block_plan(n, seed=seed, epoch=epoch, shuffle=shuffle, block_rows=block_rows)
    ]
    return np.concatenate(parts)


def class_indices(yb: np.ndarray, start: int, *, classes: np.ndarray) -> np.ndarray:
    """Labels as indices into the sorted ``classes`` (int64); an unknown label raises,
    named by its global row ``start + i``."""
    try:
        idx = np.searchsorted(classes, yb)
    except TypeError:
        raise DKernelError(
            f"labels of type {yb.dtype} do not match the classes {classes.tolist()}"
        ) from None
    idx = np.clip(idx, 0, len(classes) - 1)
    bad = classes[idx] != yb
    if np.any(bad):
        i = int(np.argmax(bad))
        bad_label = yb[i].item() if isinstance(yb[i], np.generic) else yb[i]
        raise DKernelError(
            f"y has label {bad_label!r} at row {start + i}, which is "
            f"not one of the classes {classes.tolist()}"
        )
    return idx.astype(np.int64)


class Standardizer(NamedTuple):
    """Per-feature ``(x - mean) / scale`` (``BudgetedSVC(standardize=True)``)."""

    mean: np.ndarray
    scale: np.ndarray

    def apply(self, Xb: np.ndarray) -> np.ndarray:
        """A new standardised float64 array (the input is never modified)."""
        return np.ascontiguousarray((np.asarray(Xb, dtype=np.float64) - self.mean) / self.scale)


def checked_rows(
    Xb,
    yb,
    wb,
    start: int,
    *,
    y_map: Callable[[np.ndarray, int], np.ndarray],
    standardize: Standardizer | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One row range as the learner wants it: X float64 C-ordered with NaN/inf reported by
    global row (then standardised if asked), class indices, float64 weights; lengths
    checked."""
    if hasattr(Xb, "toarray") and not isinstance(Xb, np.ndarray):
        raise DKernelError(
            f"X has sparse chunks ({type(Xb).__name__}): sparse input is not supported; make "
            "the chunks dense (X.map_blocks(lambda b: b.toarray(), dtype=X.dtype))"
        )
    Xb = np.asarray(Xb)
    if not np.issubdtype(Xb.dtype, np.number):
        raise DKernelError(f"X must be numeric, got dtype {Xb.dtype}")
    Xb = np.ascontiguousarray(Xb, dtype=np.float64)
    report_nonfinite(Xb, name="X", row_offset=start)
    if standardize is not None:
        Xb = standardize.apply(Xb)
    yi = y_map(np.asarray(yb).ravel(), start)
    wb = np.asarray(wb, dtype=np.float64).ravel()
    if len(yi) != len(Xb) or len(wb) != len(Xb):
        raise DKernelError(
            f"rows {start}:{start + len(Xb)}: y or sample_weight length differs "
            f"from X ({len(yi)}, {len(wb)} vs {len(Xb)})"
        )
    return Xb, np.ascontiguousarray(yi), np.ascontiguousarray(wb)


def read_block(
    X,
    y,
    w,
    task: BlockTask,
    *,
    y_map: Callable[[np.ndarray, int], np.ndarray],
    standardize: Standardizer | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows ``task.start:task.stop`` of X (float64, C order), class indices and weights,
    in the task's order. NaN/inf are reported with the global row number."""
    sl = slice(task.start, task.stop)
    parts = [a[sl] for a in (X, y, w)]
    lazy = [i for i, a in enumerate(parts) if is_dask_array(a)]
    if lazy:
        got = dask.compute(*[parts[i] for i in lazy])
        for i, v in zip(lazy, got):
            parts[i] = v
    Xb, yi, wb = checked_rows(
        parts[0], parts[1], parts[2], task.start, y_map=y_map, standardize=standardize
    )
    if task.order is not None:
        Xb, yi, wb = Xb[task.order], yi[task.order], wb[task.order]
    return np.ascontiguousarray(Xb), yi, wb


def load_rows(Xs, ys, ws, start: int, classes, scaler: Standardizer | None = None):
    """One row range as the learner wants it (:func:`checked_rows`: values checked and
    standardised, class indices, weights; ``ws=None``: unit weights, made here rather than
    shipped). Runs where the range is loaded."""
    if ws is None:
        ws = np.ones(len(ys))
    y_map = functools.partial(class_indices, classes=classes)
    return checked_rows(Xs, ys, ws, start, y_map=y_map, standardize=scaler)


def load_ranges(
    X,
    y,
    w,
    ranges,
    *,
    classes,
    scaler: Standardizer | None = None,
    client: Any = None,
    name: str | None = None,
) -> ResidentRows:
    """:func:`load_rows` of every ``(start, stop)`` range of X, y and w (NumPy or dask), as
    :class:`~dkernel.data.ResidentRows` on the workers of ``client`` (or here without
    one). ``name``: the tasks' keys are ``{name}-{i}`` (unique per call: the caller's step
    and its id, the dashboard's name for it); default ``svm-rows-`` and a fresh id."""
    load = functools.partial(_load_part, classes=classes, scaler=scaler)
    return ResidentRows.load(
        (X, y, w), ranges, load, client=client, name=name or f"svm-rows-{uuid.uuid4().hex}"
    )


def _load_part(Xs, ys, ws, start: int, *, classes, scaler):
    return load_rows(Xs, ys, ws, start, classes, scaler)


def prefetch(reader: Callable[[Any], Any], tasks: list, depth: int = 2) -> Iterator[Any]:
    """Yield ``reader(task)`` for each task in order, reading up to ``depth`` ahead in one
    background thread (bounded: never more than ``depth`` results waiting).

    The reads run in the caller's context (``contextvars``), so a client made current with
    ``client.as_current()`` serves them too."""
    ctx = contextvars.copy_context()

    def read(task):
        return ctx.copy().run(reader, task)

    pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="dkernel-read")
    pending: collections.deque = collections.deque()
    it = iter(tasks)
    try:
        for task in it:
            pending.append(pool.submit(read, task))
            if len(pending) >= depth:
                break
        while pending:
            result = pending.popleft().result()
            nxt = next(it, None)
            if nxt is not None:
                pending.append(pool.submit(read, nxt))
            yield result
    finally:
        for fut in pending:
            fut.cancel()
        pool.shutdown(wait=True, cancel_futures=True)


#: Row parts of a pass over all rows (the refit's parts): at least this many, so that
#: every worker of a small cluster gets one, else one per ``PART_ROWS`` rows.
MIN_PARTS = 8
PART_ROWS = 1 << 16


def row_parts(n: int, n_parts: int | None = None) -> list[tuple[int, int]]:
    """``[start, stop)`` of about equal row counts: ``n_parts`` of them, by default at least
    ``MIN_PARTS`` and one per ``PART_ROWS`` rows (never more than n). Depends on n only."""
    k = n_parts if n_parts is not None else max(MIN_PARTS, math.ceil(n / PART_ROWS))
    k = max(1, min(int(k), n))
    bounds = [i * n // k for i in range(k + 1)]
    return list(itertools.pairwise(bounds))
