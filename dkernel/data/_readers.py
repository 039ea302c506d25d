"""Streaming readers for CSV and LIBSVM/svmlight text, with line-precise errors.

Each reader makes a validating first pass (row count, width, labels) and then yields row
blocks, so a file larger than memory is ingested chunk by chunk.
"""

from __future__ import annotations

import itertools
import os
import warnings
from collections.abc import Iterator
from typing import NamedTuple

import numpy as np

from .._validation import DKernelError
from ..runtime._progress import progress


class TextLayout(NamedTuple):
    n_rows: int
    n_features: int
    has_header: bool
    integral_labels: bool = True


def _unquote(tok: str) -> str:
    """``"1.5"`` -> ``1.5``: spreadsheet exports quote every field."""
    tok = tok.strip()
    if len(tok) >= 2 and tok[0] == tok[-1] and tok[0] in "\"'":
        return tok[1:-1]
    return tok


def _floats(tokens, path, lineno) -> list[float]:
    out = []
    for col, tok in enumerate(tokens):
        try:
            v = float(_unquote(tok))
        except ValueError:
            raise DKernelError(
                f"{path}: line {lineno}, column {col}: cannot read {tok.strip()!r} as a number"
            ) from None
        if not np.isfinite(v):
            raise DKernelError(
                f"{path}: line {lineno}, column {col}: value {tok.strip()} is not finite"
            )
        out.append(v)
    return out


def scan_csv(path: str, *, delimiter: str = ",", label_column: int | None = None) -> TextLayout:
    """First pass over a CSV: header detection, row count, width and the label kind.

    Cheap string work only: the values (and equal row lengths) are checked by
    :func:`iter_csv` as it parses them with NumPy's C parser. A label that is not a
    number is reported here with its line and column.
    """
    width = 0
    n = 0
    header = False
    integral = True
    lab: int | None = None
    for lineno, line in _numbered_lines(path):
        if line[0] in _BLANK_START and not line.strip():
            continue
        if not width:
            tokens = line.rstrip("\n").split(delimiter)
            width = len(tokens)
            if label_column is not None and -width <= label_column < width:
                lab = label_column % width
            if lineno == 1 and not _all_numeric(tokens):
                header = True
                continue
            _floats(tokens, path, lineno)  # the first row: a precise error early
        n += 1
        if lab is None or not integral:
            continue
        if lab == width - 1:
            tok = line.rpartition(delimiter)[2]
        elif lab == 0:
            tok = line.partition(delimiter)[0]
        else:
            tok = line.split(delimiter)[lab]
        try:
            integral = float(tok).is_integer()
        except ValueError:  # quoted, or not a number: the slow path decides
            try:
                integral = float(_unquote(tok)).is_integer()
            except ValueError:
                _floats(line.rstrip("\n").split(delimiter), path, lineno)
                raise DKernelError(  # pragma: no cover - _floats names it first
                    f"{path}: line {lineno}: cannot read label {tok.strip()!r}"
                ) from None
    if n == 0:
        raise DKernelError(f"{path}: no data rows")
    return TextLayout(n, width, header, integral)


#: Characters of a scan batch (``readlines`` hint) and the first characters of blank lines.
_SCAN_HINT = 1 << 22
_BLANK_START = frozenset(" \t\r\n\f\v")


def _numbered_lines(path: str) -> Iterator[tuple[int, str]]:
    """``(line number, line)`` of a text file read in batches, with a scan progress bar."""
    size = os.path.getsize(path)
    with (
        progress(size, f"scan {os.path.basename(path)}", unit="B", unit_scale=True) as bar,
        open(path, encoding="utf-8-sig") as fh,
    ):
        done = 0  # lines before this batch
        while True:
            lines = fh.readlines(_SCAN_HINT)
            if not lines:
                break
            first, done = done + 1, done + len(lines)
            yield from enumerate(lines, start=first)
            if bar.enabled:
                bar.update(sum(len(line) for line in lines))


def _all_numeric(tokens) -> bool:
    try:
        [float(_unquote(t)) for t in tokens]
    except ValueError:
        return False
    return True


def _parse_lines(
    lines: list[str], first_lineno: int, path: str, delimiter: str, width: int
) -> np.ndarray:
    """Parse a run of CSV lines with NumPy's C parser; fall back to Python for exact errors.

    The fast path handles plain and double-quoted numbers and skips empty lines. Anything
    it rejects (or a NaN/inf it accepts) is parsed again line by line, which either reads
    it (``'1'``, ``1_000``, blank lines with spaces) or names the line and column at fault.
    """
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "input contained no data" for blank-only runs
            B = np.loadtxt(
                lines,
                delimiter=delimiter,
                comments=None,
                quotechar='"',
                dtype=np.float64,
                ndmin=2,
            )
        if B.shape[1] == width or B.shape[0] == 0:
            if np.isfinite(B).all():
                return B
    except ValueError:
        pass
    rows = []
    for lineno, line in enumerate(lines, start=first_lineno):
        if not line.strip():
            continue
        tokens = line.rstrip("\n").split(delimiter)
        if len(tokens) != width:
            raise DKernelError(
                f"{path}: line {lineno} has {len(tokens)} columns, expected {width} (ragged CSV)"
            )
        rows.append(_floats(tokens, path, lineno))
    return np.asarray(rows, dtype=np.float64).reshape(len(rows), width)


def iter_csv(
    path: str, layout: TextLayout, block_rows: int, *, delimiter: str = ","
) -> Iterator[np.ndarray]:
    """Yield float64 blocks of at most ``block_rows`` rows (after :func:`scan_csv`).

    Streams: reads ``block_rows`` lines at a time and parses them with ``np.loadtxt``'s C
    parser, so memory stays at one block whatever the file size. Shows a progress bar of
    rows when ``dkernel.progress`` is set (the CLI's ``--progress``).
    """
    name = os.path.basename(path)
    with (
        progress(layout.n_rows, f"ingest {name}", unit="rows", unit_scale=True) as bar,
        open(path, encoding="utf-8-sig") as fh,
    ):
        lineno = 1
        if layout.has_header:
            fh.readline()
            lineno = 2
        while True:
            lines = list(itertools.islice(fh, block_rows))
            if not lines:
                break
            B = _parse_lines(lines, lineno, path, delimiter, layout.n_features)
            lineno += len(lines)
            if B.shape[0]:
                bar.update(B.shape[0])
                yield B


def _parse_svmlight_line(line: str, path: str, lineno: int, zero_based: bool):
    body = line.split("#", 1)[0].split()
    if not body:
        return None
    try:
        label = float(body[0])
    except ValueError:
        raise DKernelError(f"{path}: line {lineno}: cannot read label {body[0]!r}") from None
    if not np.isfinite(label):
        raise DKernelError(f"{path}: line {lineno}: label {body[0]!r} is not finite")
    idx, val = [], []
    last = -1
    for tok in body[1:]:
        if tok.startswith("qid:"):
            continue
        k, sep, v = tok.partition(":")
        if not sep:
            raise DKernelError(f"{path}: line {lineno}: expected index:value, got {tok!r}")
        try:
            j = int(k)
        except ValueError:
            raise DKernelError(f"{path}: line {lineno}: bad feature index {k!r}") from None
        if not zero_based:
            j -= 1
        if j < 0:
            if zero_based:
                raise DKernelError(
                    f"{path}: line {lineno}: bad feature index {k!r} (indices are 0-based)"
                )
            hint = (
                "; a zero-based file needs zero_based=True (--zero-based in the CLI)"
                if j == -1
                else ""
            )
            raise DKernelError(
                f"{path}: line {lineno}: bad feature index {k!r} (indices are 1-based){hint}"
            )
        if j <= last:
            raise DKernelError(
                f"{path}: line {lineno}: feature index {k} is not larger than the one before it"
            )
        last = j
        try:
            x = float(v)
        except ValueError:
            raise DKernelError(
                f"{path}: line {lineno}: cannot read value {v!r} of feature {k}"
            ) from None
        if not np.isfinite(x):
            raise DKernelError(f"{path}: line {lineno}: value of feature {k} is not finite")
        idx.append(j)
        val.append(x)
    return label, idx, val


def scan_svmlight(
    path: str, *, zero_based: bool = False, n_features: int | None = None
) -> TextLayout:
    """First pass over LIBSVM text: validates every line, finds the width."""
    n = 0
    width = 0
    integral = True
    for lineno, line in _numbered_lines(path):
        parsed = _parse_svmlight_line(line, path, lineno, zero_based)
        if parsed is None:
            continue
        label, idx, _ = parsed
        integral = integral and float(label).is_integer()
        if idx:
            width = max(width, idx[-1] + 1)
        n += 1
    if n == 0:
        raise DKernelError(f"{path}: no data rows")
    if n_features is not None:
        if width > n_features:
            raise DKernelError(f"{path}: a feature index exceeds n_features={n_features}")
        width = n_features
    return TextLayout(n, width, False, integral)


def iter_svmlight(
    path: str, layout: TextLayout, block_rows: int, *, zero_based: bool = False
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Yield dense (X, y) float64 blocks of at most ``block_rows`` rows."""
    X = np.zeros((block_rows, layout.n_features))
    y = np.empty(block_rows)
    r = 0
    name = os.path.basename(path)
    with (
        progress(layout.n_rows, f"ingest {name}", unit="rows", unit_scale=True) as bar,
        open(path, encoding="utf-8-sig") as fh,
    ):
        for lineno, line in enumerate(fh, start=1):
            parsed = _parse_svmlight_line(line, path, lineno, zero_based)
            if parsed is None:
                continue
            label, idx, val = parsed
            y[r] = label
            X[r, idx] = val
            r += 1
            if r == block_rows:
                bar.update(r)
                yield X.copy(), y.copy()
                X[:] = 0.0
                r = 0
        if r:
            bar.update(r)
            yield X[:r].copy(), y[:r].copy()


def guess_format(path: str) -> str:
    ext = os.path.splitext(path)[1].lower()
    if ext == ".npz":
        return "npz"
    if ext in (".csv", ".tsv"):
        return "csv"
    if ext in (".svm", ".svmlight", ".libsvm", ".txt", ".t", ".scale", ""):
        return "svmlight"
    raise DKernelError(f"cannot tell the format of {path!r}; pass format='npz'|'csv'|'svmlight'")
