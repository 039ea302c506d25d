"""zarr 3 dataset stores: atomic writes, verified chunked dask views."""

from __future__ import annotations

import concurrent.futures
import contextlib
import functools
import logging
import os
import re
import shutil
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import dask
import numpy as np
import psutil
import zarr

from .._validation import DKernelError, check_scalar, is_dask_array, report_nonfinite
from .._version import __version__
from ..runtime import distributed_client
from . import _atomic, _remote
from ._labels import code_dask_labels, code_labels, decode
from ._location import Location, as_location
from ._verify import (
    MANIFEST_KEY,
    WRITE_CONFIG,
    check_present,
    checksum,
    make_manifest,
    read_manifest,
    verified_view,
)

logger = logging.getLogger(__name__)

#: Version of the on-disk layout written into every store's attributes (2: every array
#: carries a checksum manifest; stores of format 1 are read without verification).
STORE_FORMAT = 2
#: The arrays of a dataset store proper (never replaced by :func:`write_array`).
RESERVED_NAMES = frozenset({"X", "y", "X_test", "y_test", "zarr.json"})
#: Target bytes of one row chunk when ``chunk_rows`` is not given.
_CHUNK_BYTES = 8 << 20
#: Default chunks divide this many rows: the SGD stream's virtual blocks and the coreset's
#: default leaves are multiples of it, so their reads of a default store touch whole chunks.
ALIGN_ROWS = 1 << 16


def default_chunk_rows(n_features: int, itemsize: int = 4) -> int:
    """Rows per chunk by default: a power of two of at most about 8 MiB (at least 1024
    rows), and at most :data:`ALIGN_ROWS`, which it divides."""
    rows = max(1024, _CHUNK_BYTES // max(1, n_features * itemsize))
    return int(min(ALIGN_ROWS, 1 << (int(rows).bit_length() - 1)))


@dataclass(frozen=True)
class Dataset:
    """An opened store: ``X`` (and ``y``) as row sources, plus attributes.

    Attributes
    ----------
    path : str
        Absolute path of the zarr group, or its URL on object storage.
    X : RowSource of shape (n, d)
        A dask array whose tasks read and check their own chunks (see
        :class:`~dkernel.data.RowSource`; ``X[a:b]`` keeps that).
    y : RowSource of shape (n,) or None
    attrs : dict
        ``n``, ``d``, ``classes``, ``source``, ``dtype``, ``chunk_rows``, ``format``.
    X_test, y_test : RowSource or None
        The source's test split, when it had one.
    """

    path: str
    X: Any
    y: Any = None
    attrs: Mapping[str, Any] = field(default_factory=dict)
    X_test: Any = None
    y_test: Any = None
    location: Location | None = field(default=None, repr=False, compare=False)
    arrays: Mapping[str, str] = field(default_factory=dict, repr=False, compare=False)

    @property
    def n_samples(self) -> int:
        return int(self.X.shape[0])

    @property
    def n_features(self) -> int:
        return int(self.X.shape[1])

    def array(self, name: str = "X"):
        """The underlying read-only ``zarr.Array`` (raw chunk access, no verification)."""
        loc = self.location or as_location(self.path)
        where = _array_location(loc, name, self.arrays)
        return zarr.open_array(where.zarr_store(read_only=True), mode="r", **_format(where))

    def read(self, name: str):
        """Array ``name`` of the store (``X``, ``labels``, ...) as a :class:`RowSource`.

        Its chunks are checked against the array's manifest as they are read, like ``X``.
        """
        if name in ("X", "y", "X_test", "y_test") and getattr(self, name) is not None:
            return getattr(self, name)
        if not _PLAIN_NAME.fullmatch(name) or name == "zarr.json":
            raise DKernelError(f"{name!r} is not an array name")
        loc = self.location or as_location(self.path)
        arrays = self.arrays
        if not loc.is_local:  # another writer may have added the array since
            head = _remote.read_head(loc)
            arrays = (head or {}).get("arrays", {})
        view = _open_view(loc, name, self.attrs, arrays)
        if view is None:
            raise DKernelError(f"store {self.path!r} has no array {name!r}")
        return view

    def labels(self, name: str = "y"):
        """Labels ``name`` (``y``, ``y_test`` or another array of the store) as the user
        named them: a store of names (a ``label_names`` attribute, see
        :mod:`dkernel.data._labels`) keeps their indices, and this gives the names back,
        lazily, per chunk; other labels as stored. None when the store has no ``y``/``y_test``."""
        if name in ("y", "y_test"):
            arr, names = getattr(self, name), self.attrs.get("label_names")
        else:  # an array written with its own names (``dkernel svm predict``)
            arr = self.read(name)
            names = ((self.attrs.get("arrays") or {}).get(name) or {}).get("label_names")
        return arr if arr is None or names is None else decode(arr, names)

    def label_classes(self) -> np.ndarray | None:
        """The sorted classes recorded at ingest, as the user named them (None if not
        recorded)."""
        recorded = self.attrs.get("classes")
        if recorded is None:
            return None
        classes = np.asarray(sorted(recorded))
        names = self.attrs.get("label_names")
        return classes if names is None else np.asarray(list(names))[classes]

    def __repr__(self) -> str:
        return (
            f"Dataset(path={self.path!r}, X={self.X.shape} {self.X.dtype}, "
            f"chunks={self.X.chunksize}, y={'yes' if self.y is not None else 'no'}, "
            f"classes={self.attrs.get('classes')})"
        )


_PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*")


@contextlib.contextmanager
def _storage_errors(loc: Location, what: str):
    """An object-storage client's failure becomes a :class:`DKernelError` naming the URL
    (and no secret); local stores keep their own errors."""
    try:
        yield
    except DKernelError:
        raise
    except Exception as exc:
        if loc.is_local:
            raise
        raise _remote.storage_error(loc, what, exc) from None


def _format(where: Location) -> dict[str, Any]:
    """Arrays on object storage are dkernel's own (zarr 3): no probe for zarr 2 metadata."""
    return {} if where.is_local else {"zarr_format": 3}


def _array_location(loc: Location, name: str, arrays: Mapping[str, str]) -> Location:
    """Where array ``name`` lives: its folder in a local store, its prefix in a remote one."""
    if loc.is_local:
        return loc.child(name)
    if name not in arrays:
        raise DKernelError(f"store {loc.url!r} has no array {name!r}")
    return loc.child(arrays[name])


def _open_view(loc: Location, name: str, attrs: Mapping[str, Any], arrays: Mapping[str, str]):
    """A verified dask view of array ``name`` of the store at ``loc`` (None if absent).

    Stores of format 2 and later must carry a manifest for every array. In a local store a
    chunk file that is missing raises here (a listing, no reads); on object storage, where a
    listing costs a request per thousand chunks, the head only names complete arrays and a
    missing chunk is reported when it is read. A damaged chunk raises when it is read.
    """
    path = loc.url
    if loc.is_local:
        folder = os.path.join(path, name)
        _atomic.recover(folder)  # an interrupted write_array of this name
        if not os.path.isfile(os.path.join(folder, "zarr.json")):
            return None
    elif name not in arrays:
        return None
    where = _array_location(loc, name, arrays)
    try:
        arr = zarr.open_array(where.zarr_store(read_only=True), mode="r", **_format(where))
    except Exception as exc:  # unreadable metadata
        raise DKernelError(f"store {path!r}: array {name!r} cannot be opened ({exc})") from None
    man = read_manifest(arr, store=path, name=name)
    if man is None and int(attrs.get("format", 1)) >= 2:
        raise DKernelError(
            f"store {path!r}: array {name!r} has no checksum manifest; it was not written "
            "by dkernel (rewrite it with dkernel.data.write_array)"
        )
    if man is not None and loc.is_local:
        check_present(arr, folder=where.url, store=path, name=name, n_chunks=man["n_chunks"])
    if arr.ndim > 1 and tuple(arr.chunks[1:]) != tuple(arr.shape[1:]):
        raise DKernelError(f"store {path!r}: array {name!r} is chunked along its columns")
    # the name identifies this write of the array, not just its path: a store overwritten in
    # place must not share task keys (or cached readers) with its old contents
    write_id = (man or {}).get("write_id") or attrs.get("store_id", "")
    ident = f"{path}|{name}|{attrs.get('store_id', '')}|{write_id}"
    return verified_view(
        arr,
        location=where,
        store=path,
        name=name,
        dask_name=f"dkernel-{name}-{uuid.uuid5(uuid.NAMESPACE_URL, ident).hex}",
        manifest=man,
    )


def open_dataset(store, *, storage_options: Mapping[str, Any] | None = None) -> Dataset:
    """Open a store written by :func:`ingest`, :func:`write_arrays` or a generator.

    Parameters
    ----------
    store : str, os.PathLike or Dataset
        Path or URL of the store (``~`` expanded; ``file://``, ``s3://``, ``gs://``,
        ``az://``/``abfs://``, ``memory://``); a ``Dataset`` is returned as it is.
    storage_options : dict, optional
        Options of the object-storage client (``endpoint_url``, ``key``/``secret``,
        ``client_kwargs``...); by default its usual environment variables and profiles.

    Returns
    -------
    Dataset
        ``X``, ``y`` (and the test split) as row sources (dask arrays whose chunk reads
        are verified; see :class:`~dkernel.data.RowSource`).

    Raises
    ------
    DKernelError
        No store there; a chunk file missing from an array (checked by listing the
        folders, nothing is read); and, when a chunk is read, a chunk whose bytes do not
        match its checksum or cannot be decoded. Each error names store, array and chunk.

    Notes
    -----
    An interrupted write of the store is finished first: if a previous ``overwrite`` died
    after its new version was complete, the new version is moved into place (rolled
    forward); if only the replaced version is left, it is moved back (rolled back); stale
    temporary folders of dead writers are removed. See :mod:`dkernel.data._atomic`.
    """
    if isinstance(store, Dataset):
        return store
    # absolute: workers of a cluster may run in another working directory
    loc = as_location(store, storage_options)
    if not loc.is_local:
        return _open_remote(loc)
    path = loc.url
    _atomic.recover(path)
    if not os.path.isdir(path):
        raise DKernelError(f"no dataset store at {path!r}")
    if not os.path.isfile(os.path.join(path, "zarr.json")) and os.path.isfile(
        os.path.join(path, ".zgroup")
    ):
        raise DKernelError(
            f"{path!r} is a zarr 2 store; dkernel reads zarr 3 stores: convert it with "
            "dkernel.data.ingest(dask.array.from_zarr(...), ...) or dkernel ingest"
        )
    try:
        group = zarr.open_group(path, mode="r")
    except Exception as exc:  # zarr raises several types for foreign folders
        raise DKernelError(f"{path!r} is not a zarr dataset store ({exc})") from None
    attrs = dict(group.attrs)
    _check_format(path, attrs)
    views = {name: _open_view(loc, name, attrs, {}) for name in ("X", "y", "X_test", "y_test")}
    return _dataset(loc, attrs, views, {})


def _check_format(path: str, attrs: Mapping[str, Any]) -> None:
    """Refuse a store written by a newer dkernel (a layout this version cannot check)."""
    fmt = attrs.get("format", 1)
    if not isinstance(fmt, int) or fmt > STORE_FORMAT:
        raise DKernelError(
            f"store {path!r} has format {fmt!r}; this dkernel reads formats up to "
            f"{STORE_FORMAT}: upgrade dkernel"
        )


def _dataset(loc: Location, attrs, views, arrays) -> Dataset:
    """The opened store, after checking that its arrays are row-aligned."""
    if views["X"] is None:
        raise DKernelError(f"store {loc.url!r} has no array 'X'")
    for x, y in (("X", "y"), ("X_test", "y_test")):
        if views[y] is not None and (views[x] is None or views[y].shape[0] != views[x].shape[0]):
            rows = None if views[x] is None else views[x].shape[0]
            raise DKernelError(
                f"store {loc.url!r}: array {y!r} has {views[y].shape[0]} rows but {x!r} has "
                f"{rows}; the store was modified outside dkernel"
            )
    recorded = attrs.get("classes")
    if views["y"] is not None and recorded is not None:
        # y as stored (a store of names keeps indices, as its recorded classes are)
        views["y"].recorded_classes = np.asarray(sorted(recorded)).astype(views["y"].dtype)
    return Dataset(path=loc.url, attrs=attrs, location=loc, arrays=arrays, **views)


def _open_remote(loc: Location) -> Dataset:
    """Open a store on object storage from its head (see :mod:`dkernel.data._remote`)."""
    head = _remote.read_head(loc)
    if head is None:
        raise DKernelError(f"no dataset store at {loc.url!r}")
    attrs = dict(head.get("attrs") or {})
    _check_format(loc.url, attrs)
    arrays = dict(head["arrays"])
    views = {n: _open_view(loc, n, attrs, arrays) for n in ("X", "y", "X_test", "y_test")}
    return _dataset(loc, attrs, views, arrays)


def as_array_input(X):
    """A path, URL or Dataset becomes its dask ``X``; arrays pass through."""
    if isinstance(X, (str, os.PathLike, Location)):
        return open_dataset(X).X
    if isinstance(X, Dataset):
        return X.X
    return X


class _ArrayWriter:
    """Appends row blocks to one zarr array, writing whole chunks only, with their checksums."""

    def __init__(self, where: Location, *, n, tail_shape, dtype, chunk_rows, compressors):
        kwargs = {} if compressors == "default" else {"compressors": compressors}
        self.arr = zarr.create_array(
            where.zarr_store(read_only=False),
            shape=(n,) + tuple(tail_shape),
            dtype=dtype,
            chunks=(chunk_rows,) + tuple(tail_shape),
            config=WRITE_CONFIG,
            **kwargs,
        )
        self.n, self.chunk_rows, self.dtype = n, chunk_rows, np.dtype(dtype)
        self.pos = 0
        self.buf: list[np.ndarray] = []
        self.buffered = 0
        self.crcs: list[int] = []

    def append(self, block: np.ndarray) -> None:
        self.buf.append(block)
        self.buffered += len(block)
        while self.buffered >= self.chunk_rows:
            self._flush(self.chunk_rows)

    def _flush(self, rows: int) -> None:
        data = np.concatenate(self.buf) if len(self.buf) > 1 else self.buf[0]
        head, rest = data[:rows], data[rows:]
        if self.pos + rows > self.n:
            raise DKernelError(f"more rows than the {self.n} announced")
        self.arr[self.pos : self.pos + rows] = head
        self.crcs.append(checksum(head))
        self.pos += rows
        self.buf = [rest] if len(rest) else []
        self.buffered = len(rest)

    def close(self) -> None:
        if self.buffered:
            self._flush(self.buffered)
        if self.pos != self.n:
            raise DKernelError(f"wrote {self.pos} rows, expected {self.n}")
        man = make_manifest(self.chunk_rows, self.crcs)
        self.arr.attrs.update({MANIFEST_KEY: man})


class StoreWriter:
    """Write a dataset store whole or not at all.

    A local store is written into a hidden sibling folder swapped in at the end: a failure,
    Ctrl-C or SIGTERM removes the partial folder; the target name only ever points at a
    complete store, and an ``overwrite`` interrupted by a crash is finished or undone by the
    next :func:`open_dataset` (see :mod:`dkernel.data._atomic`). Temporary folders that
    earlier, killed runs left beside the target are removed on start. On object storage the
    arrays go to fresh prefixes published by one final PUT of the store's head (see
    :mod:`dkernel.data._remote`). Used by :func:`ingest`, :func:`write_arrays` and the
    ``make_*`` generators.
    """

    def __init__(self, store, *, overwrite: bool = False, storage_options=None):
        self.loc = as_location(store, storage_options)
        self.path = self.loc.url
        self.old_head = _check_target(self.loc, overwrite)
        if self.loc.is_local:
            parent = os.path.dirname(self.path) or "."
            if not os.path.isdir(parent):
                raise DKernelError(f"folder {parent!r} does not exist")
            self.tmp = _atomic.sibling(self.path, "tmp")
        self.prefixes: dict[str, str] = {}
        self.group: Any = None
        self.writers: dict[str, _ArrayWriter] = {}
        self.classes: set | None = set()
        self.committed = False
        self._signals = _atomic.terminate_as_interrupt()

    def __enter__(self) -> StoreWriter:
        self._signals.__enter__()
        try:
            if self.loc.is_local:
                self.group = zarr.open_group(zarr.storage.LocalStore(self.tmp), mode="w")
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _array_target(self, name: str) -> Location:
        if self.loc.is_local:
            return Location(os.path.join(self.tmp, name), "file")
        self.prefixes[name] = _remote.new_prefix(name)
        return self.loc.child(self.prefixes[name])

    def add(self, name, *, n, tail_shape=(), dtype, chunk_rows, compressors="default"):
        _check_chunk_bytes(name, chunk_rows, tail_shape, dtype)
        self.writers[name] = _ArrayWriter(
            self._array_target(name),
            n=n,
            tail_shape=tail_shape,
            dtype=dtype,
            chunk_rows=chunk_rows,
            compressors=compressors,
        )

    def append(self, name: str, block: np.ndarray, *, check_finite: bool = True) -> None:
        w = self.writers[name]
        raw = np.asarray(block)
        if not (np.issubdtype(raw.dtype, np.number) or raw.dtype == np.bool_):
            raise DKernelError(f"{name} must be numeric, got dtype {raw.dtype}")
        if np.issubdtype(raw.dtype, np.complexfloating):
            raise DKernelError(f"{name} must be real, got dtype {raw.dtype}")
        offset = w.pos + w.buffered
        if check_finite:
            report_nonfinite(raw, name=name, row_offset=offset)
        with np.errstate(over="ignore", invalid="ignore"):
            data = raw.astype(w.dtype, copy=False)
        if check_finite and data is not raw and np.issubdtype(w.dtype, np.floating):
            try:  # finite values that overflow the storage dtype (1e300 as float32)
                report_nonfinite(data, name=name, row_offset=offset)
            except DKernelError as exc:
                raise DKernelError(f"{exc} after conversion to {w.dtype}") from None
        if name in ("y", "y_test") and self.classes is not None:
            if np.issubdtype(w.dtype, np.integer):
                self.classes.update(np.unique(data).tolist())
            else:  # real-valued targets: no class list
                self.classes = None
        w.append(data)

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            if exc_type is not None or not self.committed:
                if self.loc.is_local:
                    shutil.rmtree(self.tmp, ignore_errors=True)
                else:
                    for prefix in self.prefixes.values():
                        _remote.remove_prefix(self.loc.child(prefix))
        finally:
            self._signals.__exit__(None, None, None)

    def commit(self, attrs: Mapping[str, Any]) -> None:
        """Close every array, set attributes and put the store in place."""
        for w in self.writers.values():
            w.close()
        X = self.writers["X"]
        classes = sorted(self.classes) if self.classes is not None else None
        meta = {
            "format": STORE_FORMAT,
            "store_id": uuid.uuid4().hex,
            "dkernel_version": __version__,
            "n": X.n,
            "d": int(X.arr.shape[1]),
            "dtype": str(X.dtype),
            "chunk_rows": X.chunk_rows,
            "classes": classes if "y" in self.writers else None,
        }
        meta.update(attrs)
        if self.loc.is_local:
            self.group.attrs.update(meta)
            _atomic.commit(self.tmp, self.path)
        else:
            _remote.publish(self.loc, self.prefixes, meta, self.old_head)
        self.committed = True


def _check_target(loc: Location, overwrite: bool):
    """A store may be written at ``loc``: absent, or (with ``overwrite``) a store to replace.

    An interrupted earlier write of ``loc`` is finished or undone first. Returns the head
    of the remote store replaced (None for local stores).
    """
    if not loc.is_local:
        return _remote.check_target(loc, overwrite)
    path = loc.url
    _atomic.recover(path)
    if not os.path.lexists(path):
        return None
    if not overwrite:
        raise DKernelError(f"{path!r} already exists; pass overwrite=True to replace it")
    if not _replaceable(path):
        raise DKernelError(
            f"refusing to replace {path!r}: it is not a dkernel dataset store "
            "(overwrite only replaces stores, or empty folders)"
        )
    return None


def _replaceable(path: str) -> bool:
    """True for an empty folder or a dkernel store (a zarr group with a ``format``)."""
    if os.path.isdir(path) and not os.listdir(path):
        return True
    try:
        return "format" in zarr.open_group(path, mode="r").attrs
    except Exception:  # a file, a foreign folder, unreadable metadata
        return False


def _check_chunk_bytes(name: str, chunk_rows: int, tail_shape, dtype) -> None:
    """Refuse a chunk whose dense buffer cannot fit in memory (a typo, or a huge LIBSVM index)."""
    nbytes = int(chunk_rows) * int(np.prod(tail_shape, dtype=np.float64)) * np.dtype(dtype).itemsize
    check_allocation(
        nbytes,
        f"one chunk of {name} ({chunk_rows} rows x {int(np.prod(tail_shape))} columns)",
    )


def check_allocation(nbytes: float, what: str) -> None:
    """Raise a ``DKernelError`` when ``nbytes`` exceeds half the memory available now.

    Used before allocating buffers whose size comes from user input, so a typo
    (``size=10**12``, a LIBSVM feature index of ``10**8``) is refused instead of ending in a
    ``MemoryError`` or the out-of-memory killer. Requests under 16 MiB pass without
    asking the OS (a mini-batch's indices are checked once per iteration).
    """
    if nbytes < 2**24:
        return
    free = psutil.virtual_memory().available
    if nbytes > free / 2:
        raise DKernelError(
            f"{what} needs {_fmt_bytes(nbytes)}, more than half the {_fmt_bytes(free)} of "
            "memory available; refusing to allocate it"
        )


def _fmt_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.3g} {unit}"
        n /= 1024
    return f"{n:.3g} PiB"  # pragma: no cover


def _label_dtype(y: np.ndarray) -> np.dtype:
    if not np.issubdtype(y.dtype, np.number) and y.dtype != np.bool_:
        raise DKernelError(f"labels must be numeric to be stored, got dtype {y.dtype}")
    if np.issubdtype(y.dtype, np.integer) or y.dtype == np.bool_:
        return np.dtype(np.int64)
    if np.all(np.isfinite(y)) and np.all(y == np.round(y)):
        return np.dtype(np.int64)
    return np.dtype(np.float64)


def write_arrays(
    store,
    blocks: Iterable[tuple[np.ndarray, np.ndarray | None]],
    *,
    n: int,
    n_features: int,
    dtype,
    chunk_rows: int | None,
    has_y: bool,
    y_dtype=np.int64,
    attrs: Mapping[str, Any],
    overwrite: bool = False,
    compressors="default",
    extra: Mapping[str, np.ndarray] | None = None,
    storage_options: Mapping[str, Any] | None = None,
    test_size: float | None = None,
    random_state=None,
    verbose: int = 0,
):
    """Stream ``(X_block, y_block)`` pairs into a new store; returns the opened Dataset.

    ``test_size``: hold out about that share of the rows as ``X_test``/``y_test`` (see
    :func:`ingest`); ``verbose`` > 0: a progress bar of the rows written."""
    blocks = _rows_bar(blocks, n, verbose)
    dtype = np.dtype(dtype)
    chunk_rows = chunk_rows or default_chunk_rows(n_features, dtype.itemsize)
    check_scalar(chunk_rows, "chunk_rows", kind=(int, np.integer), low=1)
    split = None if test_size is None else _HeldOut.plan(n, test_size, random_state, extra)
    loc = as_location(store, storage_options)
    with _storage_errors(loc, "cannot write store"), StoreWriter(loc, overwrite=overwrite) as w:
        sizes = {"X": n} if split is None else {"X": n - split.n_test, "X_test": split.n_test}
        for xname, rows in sizes.items():
            w.add(xname, n=rows, tail_shape=(n_features,), dtype=dtype, chunk_rows=chunk_rows,
                  compressors=compressors)  # fmt: skip
            if has_y:
                w.add(_LABELS[xname], n=rows, dtype=y_dtype, chunk_rows=chunk_rows,
                      compressors=compressors)  # fmt: skip
        start = 0
        for Xb, yb in blocks:
            Xb = np.asarray(Xb)
            if Xb.ndim != 2 or Xb.shape[1] != n_features:
                raise DKernelError(f"a block has shape {Xb.shape}, expected (*, {n_features})")
            if has_y and (yb is None or np.ndim(yb) != 1 or len(yb) != len(Xb)):
                raise DKernelError(
                    f"a label block has shape {yb if yb is None else np.shape(yb)}, "
                    f"expected ({len(Xb)},)"
                )
            sides: dict[str, Any]
            if split is None:
                sides = {"X": slice(None)}
            else:  # values checked with the source's row numbers, then split
                report_nonfinite(Xb, name="X", row_offset=start)
                held = split.mask(start, start + len(Xb))
                sides = {"X": ~held, "X_test": held}
            for xname, sel in sides.items():
                part = Xb[sel]
                if len(part):
                    w.append(xname, part)
                    if has_y:
                        w.append(_LABELS[xname], np.asarray(yb)[sel])
            start += len(Xb)
        for name, arr in (extra or {}).items():
            arr = np.asarray(arr)
            dt = dtype if arr.ndim == 2 else _label_dtype(arr)
            w.add(
                name,
                n=arr.shape[0],
                tail_shape=arr.shape[1:],
                dtype=dt,
                chunk_rows=chunk_rows,
                compressors=compressors,
            )
            w.append(name, arr)
        w.commit(dict(attrs) | ({} if split is None else {"split": split.record()}))
    return open_dataset(loc)


class _HeldOut(NamedTuple):
    """A held-out split: row ``i`` goes to the test arrays when the uniform number drawn for
    it is below ``test_size``, the numbers of rows ``b * 65536 ...`` being one stream from
    ``SeedSequence([seed, b])``. A row's side depends on its index, the seed and test_size
    only (not on how the source is read), so the split is reproducible from the store's
    ``split`` attribute."""

    test_size: float
    seed: int
    n_test: int

    @classmethod
    def plan(cls, n: int, test_size, random_state, extra) -> _HeldOut:
        if isinstance(test_size, bool) or not isinstance(test_size, (float, np.floating)):
            raise DKernelError(f"test_size must be a float in (0, 1), got {test_size!r}")
        if not 0.0 < float(test_size) < 1.0:
            raise DKernelError(f"test_size must be in (0, 1), got {test_size!r}")
        if extra and "X_test" in extra:
            raise DKernelError("the source has its own X_test; do not pass test_size")
        if random_state is None:
            seed = int(np.random.SeedSequence().generate_state(2, np.uint64)[0] >> 1)
        elif isinstance(random_state, (int, np.integer)) and not isinstance(random_state, bool):
            seed = int(random_state)
        else:
            raise DKernelError(f"random_state must be an int or None, got {random_state!r}")
        split = cls(float(test_size), seed, 0)
        n_test = sum(
            int(split.mask(a, min(n, a + _SPLIT_ROWS)).sum()) for a in range(0, n, _SPLIT_ROWS)
        )
        if n_test in (0, n):
            side = "test" if n_test == 0 else "training"
            raise DKernelError(
                f"test_size={test_size} leaves no {side} rows among {n}; choose another"
            )
        return split._replace(n_test=n_test)

    def mask(self, start: int, stop: int) -> np.ndarray:
        """True for the held-out rows among the global rows ``start:stop``."""
        out = []
        for b in range(start // _SPLIT_ROWS, (stop - 1) // _SPLIT_ROWS + 1):
            u = _split_uniforms(self.seed, b)
            base = b * _SPLIT_ROWS
            out.append(u[max(start, base) - base : min(stop, base + _SPLIT_ROWS) - base])
        return np.concatenate(out) < self.test_size

    def record(self) -> dict[str, Any]:
        return {"test_size": self.test_size, "seed": self.seed, "n_test": self.n_test}


@functools.lru_cache(maxsize=2)
def _split_uniforms(seed: int, block: int) -> np.ndarray:
    """The uniform numbers of the split's rows ``block * 65536 ...``: drawn once, though the
    source's read blocks (16384 rows of a CSV) cut a draw block several times."""
    return np.random.default_rng(np.random.SeedSequence([seed, block])).random(_SPLIT_ROWS)


#: The labels array of each feature array of a store.
_LABELS = {"X": "y", "X_test": "y_test"}
#: Rows of one draw of the held-out split.
_SPLIT_ROWS = 1 << 16


def _iter_array_blocks(X, y, rows: int) -> Iterator[tuple[np.ndarray, Any]]:
    """Row blocks of X (NumPy, or a SciPy sparse matrix densified block by block) and y."""
    for r in range(0, X.shape[0], rows):
        Xb = X[r : r + rows]
        if _is_sparse(Xb):
            Xb = Xb.toarray()
        yield Xb, (None if y is None else y[r : r + rows])


def _is_sparse(a) -> bool:
    return hasattr(a, "toarray") and hasattr(a, "tocsr") and hasattr(a, "nnz")


def check_array_name(name: str, *, what: str = "name") -> None:
    """Raise unless ``name`` is a plain array name other than the store's own arrays."""
    if not isinstance(name, str) or not _PLAIN_NAME.fullmatch(name) or name in RESERVED_NAMES:
        raise DKernelError(
            f"{what} {name!r} is not allowed (a plain name such as 'labels', other than "
            f"{', '.join(sorted(RESERVED_NAMES - {'zarr.json'}))})"
        )


def _write_block(block: np.ndarray, where: Location, start: int) -> int:
    """Write one row chunk into the (pre-created) zarr array at ``where``; its checksum."""
    # a local path, not a LocalStore: opening a LocalStore for writing creates its folder
    target = where.url if where.is_local else where.zarr_store(read_only=False)
    block = np.asarray(block)
    # zarr < 3.2 ignores open_array's config: the array's own config keeps a chunk of fill
    # values (the manifest lists every chunk)
    arr = zarr.open_array(target, mode="r+", config=WRITE_CONFIG).with_config(WRITE_CONFIG)
    arr[start : start + block.shape[0]] = block
    return checksum(block.astype(arr.dtype, copy=False))


def _compute_all(tasks: list) -> tuple:
    """``dask.compute(*tasks)``, except that a failure is raised only once every task that
    had started has ended: the caller then removes what they wrote, and no write still under
    way brings it back (a pool of our own for the threaded scheduler, whose shutdown waits;
    the futures for a distributed client)."""
    import dask.threaded
    from dask.base import get_scheduler

    client = distributed_client()
    if client is not None:
        from distributed import wait

        futures = client.compute(tasks)
        try:
            return tuple(client.gather(futures))
        except BaseException:
            wait(futures)
            raise
    if get_scheduler(collections=tasks) is dask.threaded.get:
        workers = dask.config.get("num_workers", None) or os.cpu_count() or 1
        with concurrent.futures.ThreadPoolExecutor(workers) as pool:
            return dask.compute(*tasks, pool=pool)
    return dask.compute(*tasks)


def _rows_bar(blocks: Iterable, n: int, verbose) -> Iterator:
    """``blocks`` as they are, with a bar of the rows written when ``verbose`` asks for one."""
    from ..runtime import progress, progress_enabled

    with progress(
        n, "ingest", enabled=progress_enabled(verbose), unit="rows", unit_scale=True
    ) as bar:
        for Xb, yb in blocks:
            yield Xb, yb
            bar.update(len(Xb))


def write_array(
    store,
    name: str,
    array,
    *,
    chunk_rows: int | None = None,
    attrs: Mapping[str, Any] | None = None,
    overwrite: bool = False,
    storage_options: Mapping[str, Any] | None = None,
):
    """Write a NumPy or dask array into an existing store as array ``name``, atomically.

    The array (labels, predictions, scores: anything with rows) is written into a hidden
    temporary folder inside the store (on object storage: a fresh prefix, published by
    rewriting the store's head), each chunk with its checksum (the manifest
    :func:`open_dataset` verifies), and swapped into place only when complete. An existing
    array of that name is replaced by the same recoverable swap, so a reader sees the old
    array or the new one, never a partial one, and a failure or interruption (Ctrl-C,
    SIGTERM) leaves the store as it was. Dask input is written chunk by chunk on the
    workers (one ``compute``), never gathered whole.

    Parameters
    ----------
    store : str, os.PathLike or Dataset
        An existing dataset store (path or URL).
    name : str
        Plain array name (letters, digits, ``_.-``); not ``X``, ``y``, ``X_test``, ``y_test``.
    array : ndarray or dask array of shape (n, ...)
        Numeric or boolean values.
    chunk_rows : int, optional
        Rows per chunk (default: the store's ``chunk_rows``).
    attrs : mapping, optional
        JSON-serialisable attributes stored on the array (and listed in the store's
        ``arrays`` attribute).
    overwrite : bool, default=False
        Replace an existing array of that name.

    Returns
    -------
    dask.array.Array
        The written array as the store now holds it (verified reads).

    Examples
    --------
    >>> import os, tempfile, numpy as np
    >>> from dkernel.data import ingest, write_array
    >>> ds = ingest(np.eye(4), os.path.join(tempfile.mkdtemp(), "d.zarr"), chunk_rows=2)
    >>> write_array(ds, "labels", np.array([0, 1, 1, 0])).compute().tolist()
    [0, 1, 1, 0]
    """
    if isinstance(store, Dataset):
        loc = store.location or as_location(store.path)
    else:
        loc = as_location(store, storage_options)
    check_array_name(name)
    ds = open_dataset(loc)
    path = loc.url
    # a remote store's head as it stands (the array table, the attributes and the prefixes
    # it retired, whose deletion ``clean_debris`` finishes)
    head: dict[str, Any] = {"arrays": dict(ds.arrays), "attrs": dict(ds.attrs)}
    if not loc.is_local:
        head = _remote.read_head(loc) or head
    exists = os.path.lexists(os.path.join(path, name)) if loc.is_local else name in head["arrays"]
    if exists and not overwrite:
        raise DKernelError(f"store {path!r} already has an array {name!r}; pass overwrite=True")
    a = _rows_of(name, array, ds.n_samples)
    tail = tuple(int(s) for s in a.shape[1:])
    rows = chunk_rows or int(ds.attrs.get("chunk_rows") or default_chunk_rows(int(np.prod(tail))))
    check_scalar(rows, "chunk_rows", kind=(int, np.integer), low=1)
    rows = int(min(rows, a.shape[0]))
    _check_chunk_bytes(name, rows, tail, a.dtype)
    prefix = None
    if loc.is_local:
        target = Location(_atomic.sibling(os.path.join(path, name), "tmp"), "file")
    else:
        _remote.clean_debris(loc, head)
        prefix = _remote.new_prefix(name)
        target = loc.child(prefix)
    published = False
    with _atomic.terminate_as_interrupt(), _storage_errors(loc, "cannot write to store"):
        try:
            _write_chunks(a, target, rows, attrs)
            listed: Any = dict(ds.attrs.get("arrays") or {})
            listed[name] = {"shape": list(a.shape), "dtype": str(a.dtype), **dict(attrs or {})}
            if loc.is_local:
                _atomic.commit(target.url, os.path.join(path, name))
            else:
                head = _remote.read_head(loc) or head
                arrays = {**head["arrays"], name: prefix}
                _remote.publish(loc, arrays, {**head["attrs"], "arrays": listed}, head)
                published = True
        finally:
            if loc.is_local:
                shutil.rmtree(target.url, ignore_errors=True)
            elif not published:
                _remote.remove_prefix(target)
    if loc.is_local:
        _list_array(path, listed)
    return open_dataset(loc).read(name)


def _rows_of(name: str, array, n: int):
    """``array`` (NumPy, or dask with its chunk sizes known) checked to hold one numeric
    value or row per row of a store's ``n``."""
    a: Any = array if is_dask_array(array) else np.asarray(array)
    if a.ndim < 1 or a.shape[0] == 0:
        raise DKernelError(f"{name} must have at least one row, got shape {a.shape}")
    if not (np.issubdtype(a.dtype, np.number) or a.dtype == np.bool_):
        raise DKernelError(f"{name} must be numeric, got dtype {a.dtype}")
    if is_dask_array(a) and any(np.isnan(c) for c in a.shape):
        a = a.compute_chunk_sizes()
    if a.shape[0] != n:
        raise DKernelError(
            f"{name} has {a.shape[0]} rows but the store's X has {n}: an array "
            "written into a store holds one value (or row) per row of X"
        )
    return a


def _write_chunks(a, target: Location, rows: int, attrs: Mapping[str, Any] | None) -> None:
    """Create the array at ``target`` and write ``a`` into it in chunks of ``rows`` rows,
    then its attributes and manifest; dask input is written on the workers (one compute)."""
    tail = tuple(int(s) for s in a.shape[1:])
    z = zarr.create_array(
        target.zarr_store(read_only=False),
        shape=a.shape,
        dtype=a.dtype,
        chunks=(rows,) + tail,
        config=WRITE_CONFIG,
    )
    starts = range(0, int(a.shape[0]), rows)
    if is_dask_array(a):
        blocks = a.rechunk((rows,) + tail).to_delayed().ravel()
        write = dask.delayed(_write_block, pure=True)
        crcs = _compute_all([write(b, target, s) for b, s in zip(blocks, starts)])
    else:
        crcs = tuple(_write_block(a[s : s + rows], target, s) for s in starts)
    man = make_manifest(rows, crcs)
    z.attrs.update({**dict(attrs or {}), MANIFEST_KEY: man})


def _list_array(path: str, listed: Mapping[str, Any]) -> None:
    """Record the arrays of a local store in its attributes (informative only)."""
    try:  # the array's own folder is the record
        group = zarr.open_group(path, mode="r+")
        group.attrs.update({"arrays": dict(listed)})
    except Exception as exc:  # a read-only store keeps its arrays; only the listing lags
        logger.warning("could not list the arrays in the attributes of %s (%s)", path, exc)


def ingest(
    source,
    store,
    *,
    y=None,
    chunk_rows: int | None = None,
    dtype=None,
    format: str | None = None,
    label_column: int | None = -1,
    delimiter: str = ",",
    zero_based: bool = False,
    n_features: int | None = None,
    overwrite: bool = False,
    compressors="default",
    storage_options: Mapping[str, Any] | None = None,
    test_size: float | None = None,
    random_state=None,
    verbose: int = 0,
):
    """Write a dataset into a zarr 3 store and open it.

    Parameters
    ----------
    source : ndarray, DataFrame, dask array, or path of a ``.npz``, CSV or LIBSVM/svmlight file
        (CSV and LIBSVM may be gzip- or bzip2-compressed). A pandas DataFrame's columns
        must be numeric (but a label column named by ``label_column``).
        An ``.npz`` holds ``X``, optional ``y`` and optional ``X_test``/``y_test``. A dask
        array is written row block by row block (never whole in memory).
    store : str or os.PathLike
        Path or URL (``s3://bucket/name.zarr``, ``gs://``, ``az://``, ``file://``) of the
        new store: a folder holding a zarr group (``X``, optional ``y``, attributes ``n``, ``d``,
        ``classes``, ``source``, ``dtype``, ``chunk_rows``). Every array records a CRC-32
        per chunk (its manifest), which :func:`open_dataset` and every read check. The
        write is atomic: it goes to a hidden sibling folder ``.NAME.tmp-*`` that becomes
        the store only when complete; Ctrl-C, SIGTERM or an error removes it, and the
        temporary folders of earlier runs that were killed (dead process, or older than a
        day) are removed when the next write of ``NAME`` starts.
    y : array, optional
        Labels when ``source`` is an array (NumPy, dask, a pandas Series). Labels that are
        names (text, object or categorical) are stored as a CSV's text labels are: their
        indices in the sorted names, the names in ``label_names`` (see ``label_column``).
    chunk_rows : int, optional
        Rows per zarr chunk (default: about 8 MiB per chunk).
    dtype : {"float32", "float64"}, optional
        Storage dtype of X; default keeps float32/float64 and stores other input as float32.
    format : {"npz", "csv", "svmlight"}, optional
        Guessed from the file extension when omitted.
    label_column : int or None, default=-1
        CSV column holding the label (``None``: no labels); for a pandas DataFrame
        ``source``, a column name makes that column ``y`` and the others X. Labels that
        are text are class names: ``y`` holds their indices in the sorted names, and the
        store's ``label_names`` attribute the names (label ``i`` is ``label_names[i]``).
        Fits on the store see the names (:meth:`Dataset.labels`): a model's ``classes_``
        and predictions are the names, as when the labels are passed directly.
    delimiter : str, default=","
        CSV field separator.
    zero_based : bool, default=False
        LIBSVM feature indices start at 0 (default: at 1, as LIBSVM writes them).
    n_features : int, optional
        LIBSVM width when the file does not reach the last feature.
    overwrite : bool, default=False
        Replace an existing store (never a folder that is not one). The swap never leaves
        ``NAME`` missing for good: the complete new store is first renamed
        ``.NAME.new-*`` (from then on the write counts as done), the old one moved to
        ``.NAME.old-*``, the new one to ``NAME``, and the old one deleted. If the process
        dies in between, the next :func:`open_dataset` (or write) of ``NAME`` completes
        the swap; a lone ``.NAME.old-*`` without ``NAME`` is moved back.
    compressors : "default", None or zarr codecs
        ``None`` stores chunks uncompressed (fastest random batch reads).
    storage_options : dict, optional
        Options of the object-storage client for a URL ``store`` (``endpoint_url``,
        ``key``/``secret``, ...); by default its usual environment variables and profiles.
        On object storage, where nothing can be renamed, the arrays are written under fresh
        prefixes and published by one final write of the store's head object: an
        interrupted write leaves the previous store as it was (see
        :mod:`dkernel.data._remote`).
    test_size : float in (0, 1), optional
        Hold out about this share of the rows as ``X_test``/``y_test`` (each row
        independently, drawn from ``random_state`` and its row index, so the split does not
        depend on how the source is read); the store's ``split`` attribute records
        ``test_size``, ``seed`` and ``n_test``. Not with a source that has its own test set.
    random_state : int, optional
        Seed of the split (default: a fresh one, recorded in ``split``).
    verbose : int, default=0
        > 0: a progress bar of the rows written (terminal or notebook), as the estimators'.

    Returns
    -------
    Dataset
    """
    if format is not None and format not in ("npz", "csv", "svmlight"):
        raise DKernelError(f"unknown format {format!r}; use 'npz', 'csv' or 'svmlight'")
    dest = as_location(store, storage_options)
    _check_ingest_options(dest, chunk_rows, n_features, dtype, overwrite)
    common = dict(
        chunk_rows=chunk_rows,
        overwrite=overwrite,
        compressors=compressors,
        test_size=test_size,
        random_state=random_state,
        verbose=verbose,
    )
    if isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        if not os.path.isfile(path):
            raise DKernelError(f"cannot read {path!r}: no such file")
        if y is not None:
            raise DKernelError("y= is only for array input; a file brings its own labels")
        text = dict(
            label_column=label_column,
            delimiter=delimiter,
            zero_based=zero_based,
            n_features=n_features,
        )
        return _ingest_file(path, dest, format, dtype=dtype, text=text, common=common)
    if isinstance(label_column, str):
        source, y = _frame_labels(source, y, label_column)
    if is_dask_array(source):
        return _ingest_dask(source, y, dest, dtype=dtype, **common)
    return _ingest_arrays(source, y, dest, dtype=dtype, source="array", extra={}, **common)


def _frame_labels(source, y, label_column: str):
    """A pandas DataFrame's label column, named by ``label_column``, as ``y``; the other
    columns are X."""
    columns = getattr(source, "columns", None)
    if columns is None or not hasattr(source, "drop"):
        raise DKernelError(
            f"label_column={label_column!r} is a column name: the source must be a pandas "
            "DataFrame (a CSV's label column is given by its position)"
        )
    if y is not None:
        raise DKernelError(
            "pass the labels as y= or name their column with label_column=, not both"
        )
    if label_column not in columns:
        raise DKernelError(
            f"label_column={label_column!r} is not a column of the DataFrame "
            f"(columns: {list(columns)})"
        )
    return source.drop(columns=[label_column]), source[label_column]


def _check_ingest_options(dest: Location, chunk_rows, n_features, dtype, overwrite) -> None:
    """The target of :func:`ingest` and its options that need no reading of the source."""
    _check_target(dest, overwrite)
    if chunk_rows is not None:
        check_scalar(chunk_rows, "chunk_rows", kind=(int, np.integer), low=1)
    check_scalar(n_features, "n_features", kind=(int, np.integer), low=1, allow_none=True)
    if dtype is not None and np.dtype(dtype) not in (np.float32, np.float64):
        raise DKernelError(f"dtype must be float32 or float64, got {dtype!r}")


def _ingest_file(path: str, dest: Location, format, *, dtype, text, common):
    """Ingest a file: ``format`` (or the one its name says) picks the reader; ``text``
    holds the options of the text readers."""
    from ._readers import guess_format

    fmt = format or guess_format(path)
    if fmt == "npz":
        arrays = _load_npz(path)
        X, y = arrays.pop("X"), arrays.pop("y", None)
        return _ingest_arrays(
            X, y, dest, dtype=dtype, source=os.path.basename(path), extra=arrays, **common
        )
    src = _TEXT_READERS[fmt](path, **text)  # ingest and guess_format allow no other format
    return write_arrays(
        dest,
        src.blocks,
        n=src.n,
        n_features=src.n_features,
        dtype=dtype or np.float32,
        has_y=src.has_y,
        y_dtype=src.y_dtype,
        attrs={"source": os.path.basename(path)} | src.attrs,
        **common,
    )


class _TextSource(NamedTuple):
    """A text file after its first pass: its ``(X, y)`` blocks and what they hold."""

    blocks: Iterator[tuple[np.ndarray, np.ndarray | None]]
    n: int
    n_features: int
    has_y: bool
    y_dtype: type
    attrs: dict[str, Any]


#: Rows of one block parsed by the text readers.
_TEXT_BLOCK_ROWS = 1 << 14


def _csv_source(path: str, *, label_column, delimiter, **_) -> _TextSource:
    """A CSV file (a ``.tsv`` one with tabs unless told otherwise), its label column cut
    out of each block; text labels become their index in the store's ``label_names``."""
    from ._readers import iter_csv, scan_csv

    tsv = path.lower().removesuffix(".gz").removesuffix(".bz2").endswith(".tsv")
    delim = "\t" if tsv and delimiter == "," else delimiter
    layout = scan_csv(path, delimiter=delim, label_column=label_column)
    if label_column is not None and not -layout.n_features <= label_column < layout.n_features:
        raise DKernelError(
            f"label_column={label_column} is outside the {layout.n_features} columns"
        )
    d = layout.n_features - (label_column is not None)
    if d < 1:
        raise DKernelError(f"{path}: no feature columns besides the label column")
    lab = None if label_column is None else label_column % layout.n_features

    def blocks():
        for B in iter_csv(path, layout, _TEXT_BLOCK_ROWS, delimiter=delim):
            if lab is None:
                yield B, None
            else:
                yield np.delete(B, lab, axis=1), B[:, lab]

    return _TextSource(
        blocks(),
        n=layout.n_rows,
        n_features=d,
        has_y=lab is not None,
        y_dtype=np.int64 if layout.integral_labels else np.float64,
        attrs={} if layout.label_names is None else {"label_names": layout.label_names},
    )


def _svmlight_source(path: str, *, zero_based, n_features, **_) -> _TextSource:
    """A LIBSVM/svmlight file, densified block by block."""
    from ._readers import iter_svmlight, scan_svmlight

    layout = scan_svmlight(path, zero_based=zero_based, n_features=n_features)
    return _TextSource(
        iter_svmlight(path, layout, _TEXT_BLOCK_ROWS, zero_based=zero_based),
        n=layout.n_rows,
        n_features=layout.n_features,
        has_y=True,
        y_dtype=np.int64 if layout.integral_labels else np.float64,
        attrs={},
    )


#: The reader of each text format :func:`ingest` reads.
_TEXT_READERS: dict[str, Callable[..., _TextSource]] = {
    "csv": _csv_source,
    "svmlight": _svmlight_source,
}


def _ingest_dask(X, y, dest, *, dtype, **common):
    """Stream a dask array (and labels) into a store, one row block in memory at a time."""
    if X.ndim != 2 or 0 in X.shape or any(np.isnan(c) for c in X.shape):
        raise DKernelError(f"X must be a non-empty 2-D array of known shape, got shape {X.shape}")
    if not np.issubdtype(X.dtype, np.number) or np.issubdtype(X.dtype, np.complexfloating):
        raise DKernelError(f"X must be real and numeric, got dtype {X.dtype}")
    n, d = (int(s) for s in X.shape)
    X = X.rechunk({1: -1})
    y, yd, names = _dask_labels(y, n, X.chunks[0])
    if dtype is None:
        dtype = X.dtype if X.dtype in (np.float32, np.float64) else np.float32
    return write_arrays(
        dest,
        _dask_blocks(X, y),
        n=n,
        n_features=d,
        dtype=dtype,
        has_y=y is not None,
        y_dtype=yd,
        attrs={"source": "dask array"} | ({} if names is None else {"label_names": names}),
        **common,
    )


def _dask_labels(y, n: int, row_chunks: tuple[int, ...]):
    """Labels that go with a dask ``X`` of ``n`` rows in ``row_chunks``, checked, their
    storage dtype (int64 when they are whole numbers) and their names (None unless they
    are names, stored as indices): ``(None, None, None)`` without labels."""
    if y is None:
        return None, None, None
    names = None
    if not is_dask_array(y):
        # code_labels gives labels it does not code (complex, dates) back as given
        (y,), names = code_labels(np.asarray(y))
        y = y.ravel() if y.ndim > 1 and y.size == y.shape[0] else y
    if y.ndim != 1 or y.shape[0] != n:
        raise DKernelError(f"y must have shape ({n},) to match X, got {y.shape}")
    if is_dask_array(y) and y.dtype.kind in "OUS":
        y, names = code_dask_labels(y)
    if not np.issubdtype(y.dtype, np.number) and y.dtype != np.bool_:
        raise DKernelError(f"labels must be numeric to be stored, got dtype {y.dtype}")
    if np.issubdtype(y.dtype, np.floating):  # one pass over the labels: whole numbers?
        # (NaN/inf are reported with their row when the block is written)
        integral = bool(((y == np.round(y)) | ~np.isfinite(y)).all())
        yd = np.dtype(np.int64 if integral else np.float64)
    else:
        yd = np.dtype(np.int64)
    if is_dask_array(y):
        y = y.rechunk((row_chunks,))
    return y, yd, names


def _dask_blocks(X, y) -> Iterator[tuple[np.ndarray, Any]]:
    """The row blocks of a dask ``X`` (one computed at a time) with their labels."""
    bounds = np.concatenate([[0], np.cumsum(X.chunks[0])])
    for i in range(X.numblocks[0]):
        Xb = np.asarray(X.blocks[i].compute())
        if y is None:
            yield Xb, None
        elif is_dask_array(y):
            yield Xb, np.asarray(y.blocks[i].compute())
        else:
            yield Xb, y[bounds[i] : bounds[i + 1]]


def _load_npz(path: str) -> dict[str, np.ndarray]:
    """The arrays ``X``, ``y``, ``X_test``, ``y_test`` of an ``.npz`` file (others ignored)."""
    try:
        with np.load(path, allow_pickle=False) as data:
            if "X" not in data.files:
                raise DKernelError(f"{path!r} has no array 'X' (found {sorted(data.files)})")
            return {k: data[k] for k in ("X", "y", "X_test", "y_test") if k in data.files}
    except DKernelError:
        raise
    except Exception as exc:  # not a zip, object arrays, truncated file ...
        raise DKernelError(f"cannot read {path!r} as .npz ({exc})") from None


def _check_xy(X, y, *, name: str = "X", yname: str = "y"):
    """Shape, dtype and finiteness checks of an (X, y) pair, naming row and column.

    A SciPy sparse ``X`` stays sparse (CSR): it is densified one row block at a time.
    """
    X = _check_features(X, name)
    if y is not None:
        y = _check_labels(y, X.shape[0], name=name, yname=yname)
    return X, y


def _check_features(X, name: str):
    """``X`` as a NumPy array (or CSR matrix), checked: 2-D, non-empty, real, finite."""
    X = X.tocsr() if _is_sparse(X) else np.asarray(X)
    if X.ndim != 2 or 0 in X.shape:
        raise DKernelError(f"{name} must be a non-empty 2-D array, got shape {X.shape}")
    if not np.issubdtype(X.dtype, np.number) or np.issubdtype(X.dtype, np.complexfloating):
        raise DKernelError(f"{name} must be real and numeric, got dtype {X.dtype}")
    if _is_sparse(X):
        if np.issubdtype(X.dtype, np.floating) and not np.isfinite(X.data).all():
            row = int(np.searchsorted(X.indptr, np.flatnonzero(~np.isfinite(X.data))[0], "right"))
            raise DKernelError(f"{name} contains NaN or inf at row {row - 1}")
    elif np.issubdtype(X.dtype, np.floating):
        report_nonfinite(X, name=name)
    return X


def _check_labels(y, n: int, *, name: str, yname: str) -> np.ndarray:
    """``y`` as a 1-D NumPy array of ``n`` finite numeric labels (a column is flattened)."""
    if _is_sparse(y):
        raise DKernelError(f"{yname} must be a dense 1-D array, got a sparse matrix")
    y = np.asarray(y)
    if y.ndim > 1 and y.size == y.shape[0]:
        y = y.ravel()
    if y.ndim != 1:
        raise DKernelError(f"{yname} must be 1-D, got shape {y.shape}")
    if y.shape[0] != n:
        raise DKernelError(f"{yname} has {y.shape[0]} labels but {name} has {n} rows")
    if np.issubdtype(y.dtype, np.floating):
        report_nonfinite(y, name=yname)
    _label_dtype(y)
    return y


def _ingest_arrays(X, y, dest, *, dtype, source, extra, chunk_rows, **common):
    (y, y_test), names = code_labels(y, extra.get("y_test"))
    if y_test is not None:
        extra = {**extra, "y_test": y_test}
    X, y = _check_xy(X, y)
    if "y_test" in extra and "X_test" not in extra:
        raise DKernelError("y_test given without X_test")
    if "X_test" in extra:
        Xt, yt = _check_xy(extra["X_test"], extra.get("y_test"), name="X_test", yname="y_test")
        if Xt.shape[1] != X.shape[1]:
            raise DKernelError(f"X_test has {Xt.shape[1]} columns but X has {X.shape[1]}")
        if yt is not None and y is None:
            raise DKernelError("y_test given but the training set has no y")
        if _is_sparse(Xt):
            check_allocation(Xt.shape[0] * Xt.shape[1] * Xt.dtype.itemsize, "X_test densified")
            Xt = Xt.toarray()
        extra = {"X_test": Xt} if yt is None else {"X_test": Xt, "y_test": yt}
    if dtype is None:
        dtype = X.dtype if X.dtype in (np.float32, np.float64) else np.float32
    yd = _label_dtype(y) if y is not None else None
    rows = chunk_rows or default_chunk_rows(X.shape[1], np.dtype(dtype).itemsize)
    return write_arrays(
        dest,
        _iter_array_blocks(X, y, rows),
        n=X.shape[0],
        n_features=X.shape[1],
        dtype=dtype,
        chunk_rows=chunk_rows,
        has_y=y is not None,
        y_dtype=yd,
        attrs={"source": source} | ({} if names is None else {"label_names": names}),
        extra=extra,
        **common,
    )
