"""Streaming readers for CSV and LIBSVM/svmlight text, with line-precise errors.

Each reader makes a validating first pass (row count, width, labels) and then yields row
blocks, so a file larger than memory is ingested chunk by chunk.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import NamedTuple

import numpy as np

from .._validation import DKernelError


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
    """First pass over a CSV: header detection, equal row lengths, numeric values."""
    width = None
    n = 0
    header = False
    integral = True
    with open(path, encoding="utf-8-sig") as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            tokens = line.rstrip("\n").split(delimiter)
            if lineno == 1 and not _all_numeric(tokens):
                header = True
                width = len(tokens)
                continue
            if width is None:
                width = len(tokens)
            elif len(tokens) != width:
                raise DKernelError(
                    f"{path}: line {lineno} has {len(tokens)} columns, expected {width} "
                    "(ragged CSV)"
                )
            row = _floats(tokens, path, lineno)
            if label_column is not None and -width <= label_column < width:
                integral = integral and float(row[label_column]).is_integer()
            n += 1
    if n == 0:
        raise DKernelError(f"{path}: no data rows")
    return TextLayout(n, width, header, integral)


def _all_numeric(tokens) -> bool:
    try:
        [float(_unquote(t)) for t in tokens]
    except ValueError:
        return False
    return True


def iter_csv(
    path: str, layout: TextLayout, block_rows: int, *, delimiter: str = ","
) -> Iterator[np.ndarray]:
    """Yield float64 blocks of at most ``block_rows`` rows (after :func:`scan_csv`)."""
    buf: list[list[float]] = []
    with open(path, encoding="utf-8-sig") as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip() or (lineno == 1 and layout.has_header):
                continue
            buf.append(_floats(line.rstrip("\n").split(delimiter), path, lineno))
            if len(buf) == block_rows:
                yield np.asarray(buf, dtype=np.float64)
                buf = []
    if buf:
        yield np.asarray(buf, dtype=np.float64)


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
            base = "0-based" if zero_based else "1-based"
            raise DKernelError(
                f"{path}: line {lineno}: bad feature index {k!r} (indices are {base})"
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
    with open(path, encoding="utf-8-sig") as fh:
        for lineno, line in enumerate(fh, start=1):
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
    with open(path, encoding="utf-8-sig") as fh:
        for lineno, line in enumerate(fh, start=1):
            parsed = _parse_svmlight_line(line, path, lineno, zero_based)
            if parsed is None:
                continue
            label, idx, val = parsed
            y[r] = label
            X[r, idx] = val
            r += 1
            if r == block_rows:
                yield X.copy(), y.copy()
                X[:] = 0.0
                r = 0
    if r:
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
