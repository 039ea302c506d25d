"""Streaming readers for CSV and LIBSVM/svmlight text, with line-precise errors.

Each reader makes a validating first pass (row count, width, labels) and then yields row
blocks, so a file larger than memory is ingested chunk by chunk. Files compressed with gzip
or bzip2 (found by their first bytes, whatever their name) are read as they decompress.
"""

from __future__ import annotations

import bz2
import contextlib
import gzip
import io
import itertools
import logging
import math
import os
import warnings
from collections.abc import Callable, Iterator
from typing import IO, Any, NamedTuple

import numpy as np

from .._validation import DKernelError
from ..runtime import progress
from ._labels import check_name_limit, name_limit

logger = logging.getLogger(__name__)

#: The end of the message for a CSV label column with too many distinct text values.
_LABEL_COLUMN_HINT = " (choose the label column with label_column=, --label-column in the CLI)"


class TextLayout(NamedTuple):
    n_rows: int
    n_features: int
    has_header: bool
    integral_labels: bool = True
    #: CSV labels that are text: the sorted class names (label i is ``label_names[i]``)
    label_names: tuple[str, ...] | None = None
    #: the label column (0-based) of a CSV with text labels
    label_index: int | None = None


_GZIP, _BZIP2 = b"\x1f\x8b", b"BZh"


@contextlib.contextmanager
def open_text(path: str) -> Iterator[tuple[IO[str], IO[bytes]]]:
    """``(text, raw)`` of a UTF-8 text file, plain or gzip/bzip2-compressed (found by its
    first bytes); ``raw.tell()`` is the position in the file as stored, for progress."""
    with open(path, "rb") as raw:
        head = raw.read(3)
        raw.seek(0)
        stream: Any = raw  # a raw file, GzipFile or BZ2File
        if head.startswith(_GZIP):
            stream = gzip.GzipFile(fileobj=raw, mode="rb")
        elif head.startswith(_BZIP2):
            stream = bz2.BZ2File(raw)
        with io.TextIOWrapper(stream, encoding="utf-8-sig", newline=None) as text:
            yield text, raw


def _not_text(path: str, lineno: int) -> DKernelError:
    return DKernelError(
        f"{path} is not a text file (bytes near line {lineno} are not UTF-8 text); CSV and "
        "LIBSVM input must be text, plain or gzip/bzip2-compressed"
    )


@contextlib.contextmanager
def _decoding(path: str, where: int | Callable[[], int]) -> Iterator[None]:
    """A file that is not text (or a corrupt compressed one) is one clear error naming the
    line (``where``, or a function that gives it once the error happens)."""
    try:
        yield
    except UnicodeDecodeError:
        raise _not_text(path, where if isinstance(where, int) else where()) from None
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        if isinstance(exc, FileNotFoundError | PermissionError):
            raise
        line = where if isinstance(where, int) else where()
        raise DKernelError(
            f"{path}: cannot decompress it near line {line} ({type(exc).__name__}: {exc})"
        ) from None


def _unquote(tok: str) -> str:
    """``"1.5"`` -> ``1.5``: spreadsheet exports quote every field."""
    tok = tok.strip()
    if len(tok) >= 2 and tok[0] == tok[-1] and tok[0] in "\"'":
        return tok[1:-1]
    return tok


def _floats(tokens, path, lineno) -> list[float]:
    """The values of one CSV line; an error names its line and column (both from 1)."""
    out = []
    for col, tok in enumerate(tokens, start=1):
        try:
            v = float(_unquote(tok))
        except ValueError:
            raise DKernelError(
                f"{path}: line {lineno}, column {col}: cannot read {tok.strip()!r} as a number"
            ) from None
        if not np.isfinite(v):
            text = _unquote(tok)
            if text.lower().lstrip("+-") not in ("nan", "inf", "infinity"):
                raise DKernelError(
                    f"{path}: line {lineno}, column {col}: value {text} is beyond the range "
                    "of a float (about 1.8e308)"
                )
            raise DKernelError(
                f"{path}: line {lineno}, column {col}: value {tok.strip()} is not finite"
            )
        out.append(v)
    return out


def scan_csv(path: str, *, delimiter: str = ",", label_column: int | None = None) -> TextLayout:
    """First pass over a CSV: header detection, row count, width and the label kind.

    Cheap string work only: the values (and equal row lengths) are checked by
    :func:`iter_csv` as it parses them with NumPy's C parser. Labels that are text
    (``cat``, ``dog``) are class names: they are collected (a second pass over the label
    column) and :func:`iter_csv` writes each as its index in the sorted names. A first
    line is a header when a feature column of it is not a number.
    """
    lines: Iterator[tuple[int, str]] = _numbered_lines(path)
    first = next(((i, t) for i, t in lines if not (t[0] in _BLANK_START and not t.strip())), None)
    if first is None:
        raise DKernelError(f"{path}: no data rows")
    lineno, line = first
    tokens = line.rstrip("\n").split(delimiter)
    width = len(tokens)
    lab = None
    if label_column is not None and -width <= label_column < width:
        lab = label_column % width
    features = [t for i, t in enumerate(tokens) if i != lab]
    header = lineno == 1 and not _all_numeric(features)
    if not header:
        _floats(features if lab is not None else tokens, path, lineno)
        lines = itertools.chain([first], lines)
    n, integral, text_labels = _count_rows(lines, path, delimiter, lab, width)
    if n == 0:
        raise DKernelError(f"{path}: no data rows")
    if text_labels and lab is not None:
        names = _label_names(path, lab, delimiter, header)
        return TextLayout(n, width, header, True, names, lab)
    return TextLayout(n, width, header, integral)


def _count_rows(
    lines: Iterator[tuple[int, str]], path: str, delimiter: str, lab: int | None, width: int
) -> tuple[int, bool, bool]:
    """The data rows among ``lines`` (blank ones skipped), whether the labels in column
    ``lab`` are all whole numbers, and whether they are text (class names).

    Only the label column is cut out of each line; once the labels are known to be
    real-valued or text, the rest of the file is only counted.
    """
    n = 0
    integral = True
    text_labels = False
    for lineno, line in lines:
        if line[0] in _BLANK_START and not line.strip():
            continue
        n += 1
        if lab is None or not integral or text_labels:
            continue
        if lab == width - 1:
            tok = line.rpartition(delimiter)[2]
        elif lab == 0:
            tok = line.partition(delimiter)[0]
        else:
            tok = line.split(delimiter)[lab]
        try:
            integral = float(tok).is_integer()
        except ValueError:  # quoted, or not a number
            integral, text_labels = _label_kind(tok, path, lineno, lab)
    return n, integral, text_labels


def _label_kind(tok: str, path: str, lineno: int, lab: int) -> tuple[bool, bool]:
    """``(whole number, text)`` of a label token that ``float`` does not read as it is:
    a quoted number, or text (a class name)."""
    try:
        return float(_unquote(tok)).is_integer(), False
    except ValueError:
        if not _unquote(tok):
            raise DKernelError(
                f"{path}: line {lineno}, column {lab + 1}: the label is empty"
            ) from None
        return True, True


def _label_names(path: str, lab: int, delimiter: str, header: bool) -> tuple[str, ...]:
    """The distinct labels of a CSV whose labels are text (a pass over the label column)."""
    names: set[str] = set()
    most, column = name_limit(), f"{path}: column {lab + 1}"
    for lineno, line in _numbered_lines(path):
        if (header and lineno == 1) or not line.strip():
            continue
        tokens = line.rstrip("\n").split(delimiter)
        if lab >= len(tokens):
            raise DKernelError(
                f"{path}: line {lineno} has {len(tokens)} columns, expected more (ragged CSV)"
            )
        name = _unquote(tokens[lab])
        if not name:
            raise DKernelError(f"{path}: line {lineno}, column {lab + 1}: the label is empty")
        names.add(name)
        check_name_limit(len(names), most, name=column, hint=_LABEL_COLUMN_HINT)
    return tuple(sorted(names))


#: Characters of a scan batch (``readlines`` hint) and the first characters of blank lines.
_SCAN_HINT = 1 << 22
_BLANK_START = frozenset(" \t\r\n\f\v")


def _numbered_lines(path: str) -> Iterator[tuple[int, str]]:
    """``(line number, line)`` of a text file read in batches, with a scan progress bar."""
    size = os.path.getsize(path)
    done = 0  # lines before this batch
    with (
        progress(size, f"scan {os.path.basename(path)}", unit="B", unit_scale=True) as bar,
        open_text(path) as (fh, raw),
    ):
        at = 0
        while True:
            with _decoding(path, done + 1):
                lines = fh.readlines(_SCAN_HINT)
            if not lines:
                break
            first, done = done + 1, done + len(lines)
            yield from enumerate(lines, start=first)
            if bar.enabled:
                pos = raw.tell()
                bar.update(pos - at)
                at = pos


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
    logger.debug(
        "%s: lines %d-%d read line by line (NumPy's parser rejected them)",
        path,
        first_lineno,
        first_lineno + len(lines) - 1,
    )
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
    lineno = 1
    with (
        progress(layout.n_rows, f"ingest {name}", unit="rows", unit_scale=True) as bar,
        open_text(path) as (fh, _),
    ):
        if layout.has_header:
            fh.readline()
            lineno = 2
        while True:
            with _decoding(path, lineno):
                lines = list(itertools.islice(fh, block_rows))
            if not lines:
                break
            if layout.label_names is not None:
                lines = _label_indices(lines, lineno, path, delimiter, layout)
            B = _parse_lines(lines, lineno, path, delimiter, layout.n_features)
            lineno += len(lines)
            if B.shape[0]:
                bar.update(B.shape[0])
                yield B


def _label_indices(
    lines: list[str], first_lineno: int, path: str, delimiter: str, layout: TextLayout
) -> list[str]:
    """Lines with their text label replaced by its index in ``layout.label_names``."""
    assert layout.label_names is not None and layout.label_index is not None
    index = {name: str(i) for i, name in enumerate(layout.label_names)}
    lab = layout.label_index
    out = []
    for lineno, line in enumerate(lines, start=first_lineno):
        if not line.strip():
            continue
        tokens = line.rstrip("\n").split(delimiter)
        if lab < len(tokens):
            name = _unquote(tokens[lab])
            if name not in index:  # pragma: no cover - the scan collected every label
                raise DKernelError(f"{path}: line {lineno}: unknown label {name!r}")
            tokens[lab] = index[name]
        out.append(delimiter.join(tokens) + "\n")
    return out


def _parse_svmlight_line(line: str, path: str, lineno: int, zero_based: bool):
    """``(label, indices, values)`` of one LIBSVM line (indices 0-based), None if blank.

    The loop does only the reads every token needs; a token that fails any check is
    examined again by :func:`_token_error`, which names the fault.
    """
    body = line.split("#", 1)[0].split()
    if not body:
        return None
    try:
        label = float(body[0])
    except ValueError:
        raise DKernelError(f"{path}: line {lineno}: cannot read label {body[0]!r}") from None
    if not math.isfinite(label):
        raise DKernelError(f"{path}: line {lineno}: label {body[0]!r} is not finite")
    shift = 0 if zero_based else 1
    idx, val = [], []
    last = -1
    for tok in body[1:]:
        if tok.startswith("qid:"):
            continue
        k, sep, v = tok.partition(":")
        try:
            j = int(k) - shift
            x = float(v)
        except ValueError:
            raise _token_error(tok, path, lineno, zero_based, last) from None
        if j <= last or not sep or not math.isfinite(x):
            raise _token_error(tok, path, lineno, zero_based, last)
        last = j
        idx.append(j)
        val.append(x)
    return label, idx, val


def _token_error(tok: str, path: str, lineno: int, zero_based: bool, last: int) -> DKernelError:
    """The error of a LIBSVM ``index:value`` token that is malformed, out of order or not
    finite, ``last`` being the (0-based) index before it on the line."""
    k, sep, v = tok.partition(":")
    if not sep:
        return DKernelError(f"{path}: line {lineno}: expected index:value, got {tok!r}")
    try:
        j = int(k) - (0 if zero_based else 1)
    except ValueError:
        return DKernelError(f"{path}: line {lineno}: bad feature index {k!r}")
    if j < 0 and zero_based:
        return DKernelError(f"{path}: line {lineno}: bad feature index {k!r} (indices are 0-based)")
    if j < 0:
        hint = "; a zero-based file needs zero_based=True (--zero-based in the CLI)"
        return DKernelError(
            f"{path}: line {lineno}: bad feature index {k!r} (indices are 1-based)"
            + (hint if j == -1 else "")
        )
    if j <= last:
        return DKernelError(
            f"{path}: line {lineno}: feature index {k} is not larger than the one before it"
        )
    try:
        float(v)
    except ValueError:
        return DKernelError(f"{path}: line {lineno}: cannot read value {v!r} of feature {k}")
    return DKernelError(f"{path}: line {lineno}: value of feature {k} is not finite")


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
    lineno = 0
    with (
        progress(layout.n_rows, f"ingest {name}", unit="rows", unit_scale=True) as bar,
        open_text(path) as (fh, _),
        _decoding(path, lambda: lineno + 1),
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
    """The format a file name says (``.gz``/``.bz2`` looked through)."""
    base, ext = os.path.splitext(path)
    if ext.lower() in (".gz", ".bz2"):
        ext = os.path.splitext(base)[1]
    ext = ext.lower()
    if ext == ".npz":
        return "npz"
    if ext in (".csv", ".tsv"):
        return "csv"
    if ext in (".svm", ".svmlight", ".libsvm", ".txt", ".t", ".scale", ""):
        return "svmlight"
    raise DKernelError(f"cannot tell the format of {path!r}; pass format='npz'|'csv'|'svmlight'")
