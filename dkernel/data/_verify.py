"""Stores that prove they are whole: per-chunk checksums written with the data, checked on read.

zarr fills a missing chunk with the array's fill value (zeros) without a word, and a damaged
chunk fails in the decompressor naming nothing. Every array dkernel writes therefore carries a
manifest in its own attributes (so it moves with the array in every atomic rename)::

    "dkernel_manifest": {"chunk_rows": 4096, "n_chunks": 12, "crc32": [..one per chunk..]}

where each CRC-32 is of the decoded chunk's bytes (C order, the array's dtype). Opening a
store checks that every chunk file is present (a directory listing, no reads); the dask arrays
a store opens into check each chunk's checksum as they read it (one task per chunk, no extra
pass). A missing or damaged chunk is a :class:`DKernelError` naming store, array and chunk.
"""

from __future__ import annotations

import bisect
import functools
import os
import sys
import uuid
import zlib
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import dask.array as da
import dask.config
import numpy as np
import zarr
import zarr.errors
from dask.base import tokenize
from dask.blockwise import BlockwiseDep
from numcodecs import Zstd
from zarr.codecs import BytesCodec, ZstdCodec

from .._defaults import setting
from .._validation import DKernelError, report_nonfinite
from ._location import Location, describe_error

#: The zstd decoder of plain-layout chunks (any level; stateless).
_ZSTD = Zstd()
#: Attribute key of an array's manifest.
MANIFEST_KEY = "dkernel_manifest"
#: zarr config of every array dkernel writes: all-zero chunks are written too, so an absent
#: chunk file always means a lost one.
WRITE_CONFIG: Any = {"write_empty_chunks": True}


def checksum(block: np.ndarray) -> int:
    """CRC-32 of a decoded chunk (its bytes in C order)."""
    return zlib.crc32(np.ascontiguousarray(block).view(np.uint8).reshape(-1))


def make_manifest(chunk_rows: int, crcs: Sequence[int]) -> dict[str, Any]:
    """The manifest of one write of an array (``write_id`` tells writes apart)."""
    return {
        "chunk_rows": int(chunk_rows),
        "n_chunks": len(crcs),
        "crc32": [int(c) for c in crcs],
        "write_id": uuid.uuid4().hex,
    }


def read_manifest(arr, *, store: str, name: str) -> dict[str, Any] | None:
    """The manifest of ``arr`` after a shape check, or None for an array written without one."""
    man = arr.attrs.get(MANIFEST_KEY)
    if man is None:
        return None
    rows = int(man.get("chunk_rows", 0))
    n = int(arr.shape[0])
    expected = -(-n // rows) if rows > 0 else -1
    crcs = man.get("crc32") or []
    if rows != arr.chunks[0] or expected != man.get("n_chunks") or len(crcs) != expected:
        raise DKernelError(
            f"store {store!r}: array {name!r} does not match its manifest "
            f"({n} rows in chunks of {arr.chunks[0]}, manifest: {man.get('n_chunks')} chunks "
            f"of {rows}); the store was modified outside dkernel"
        )
    return man


def chunk_key(arr, index: int) -> str:
    """Store key (relative to the array) of row chunk ``index`` (all other axes in one chunk)."""
    return arr.metadata.encode_chunk_key((index,) + (0,) * (arr.ndim - 1))


def check_present(arr, *, folder: str, store: str, name: str, n_chunks: int) -> None:
    """Raise naming the first row chunk whose file is missing from the array's folder."""
    expected = {chunk_key(arr, i): i for i in range(n_chunks)}
    present = set()
    for root, _dirs, files in os.walk(folder):
        rel = os.path.relpath(root, folder)
        for f in files:
            present.add(f if rel == "." else f"{rel}/{f}".replace(os.sep, "/"))
    missing = [i for key, i in expected.items() if key not in present]
    if missing:
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        raise DKernelError(
            f"store {store!r}: array {name!r} is missing chunk {missing[0]}{more} "
            f"(file {chunk_key(arr, missing[0])!r}); the store is incomplete"
        )


@functools.lru_cache(maxsize=32)
def open_for_read(where: Location, token: str):
    """``(array, plain)``: a read-only zarr array that raises on a missing chunk, and whether
    its chunks can be read without zarr (:func:`plain_layout`); cached per process and write
    (one metadata request per array and process on object storage)."""
    fmt: Any = {} if where.is_local else {"zarr_format": 3}  # no zarr 2 probes remotely
    arr = zarr.open_array(
        where.zarr_store(read_only=True), mode="r", config={"read_missing_chunks": False}, **fmt
    )
    return arr, plain_layout(arr)


def plain_layout(arr) -> bool:
    """True for the layout dkernel writes: zarr 3, the bytes codec in this machine's byte
    order then optionally zstd (no filters, transposes or sharding), '/'-separated chunk
    keys, a native-order dtype."""
    meta = arr.metadata
    if getattr(meta, "zarr_format", None) != 3 or sys.byteorder != "little":
        return False
    codecs = list(meta.codecs)
    if not codecs or not isinstance(codecs[0], BytesCodec):
        return False
    if getattr(codecs[0].endian, "value", codecs[0].endian) not in (None, "little"):
        return False
    if len(codecs) > 2 or (len(codecs) == 2 and not isinstance(codecs[1], ZstdCodec)):
        return False
    enc = meta.chunk_key_encoding
    return getattr(enc, "separator", None) == "/" and np.dtype(arr.dtype).isnative


def _zstd_content_size(raw: bytes) -> int | None:
    """The decoded size a zstd frame declares in its header (RFC 8878), or None."""
    if len(raw) < 6 or raw[:4] != b"\x28\xb5\x2f\xfd":
        return None
    fhd = raw[4]
    single = (fhd >> 5) & 1
    width = (1 if single else 0, 2, 4, 8)[fhd >> 6]
    if width == 0:
        return None
    pos = 5 + (0 if single else 1) + (0, 1, 2, 4)[fhd & 3]
    size = int.from_bytes(raw[pos : pos + width], "little")
    return size + 256 if width == 2 else size


class StorageReadError(Exception):
    """A chunk could not be fetched from object storage (not a damaged chunk)."""


def _fetch(where: Location, key: str) -> bytes:
    """The stored bytes of chunk ``key`` of the array at ``where``: one GET."""
    try:
        return where.fs.cat_file(where.child(key).path)
    except FileNotFoundError:
        raise
    except Exception as exc:
        raise StorageReadError(describe_error(exc)) from None


def read_plain(arr, where: Location, index: int, start: int, stop: int) -> np.ndarray:
    """Row chunk ``index`` of a plain-layout array, read and decoded in this thread.

    zarr's own read goes through its event loop and codec thread pool (two thread hops per
    chunk): in a Dask worker, whose threads share the GIL and the cores with the task, that
    doubled the time of a chunk read. The chunk is decoded into a buffer of its stored size
    (the last chunk is stored whole too) and the rows ``start:stop`` are returned. A local
    chunk is read from its file; a remote one with a single GET of its key.
    """
    key = arr.metadata.encode_chunk_key((index,) + (0,) * (arr.ndim - 1))
    full = np.empty((int(arr.chunks[0]), *arr.shape[1:]), dtype=arr.dtype)
    flat = full.reshape(-1).view(np.uint8)
    bytes_only = len(arr.metadata.codecs) == 1
    if not where.is_local:
        raw = _fetch(where, key)
        if bytes_only:
            if len(raw) != full.nbytes:
                raise ValueError(f"the chunk holds {len(raw)} bytes, {full.nbytes} expected")
            flat[:] = np.frombuffer(raw, dtype=np.uint8)
            return full[: stop - start]
    else:
        with open(os.path.join(where.url, *key.split("/")), "rb") as fh:
            if bytes_only:  # straight into the chunk's buffer
                got = fh.readinto(flat)
                if got != full.nbytes or fh.read(1):
                    raise ValueError(f"the chunk file does not hold {full.nbytes} bytes")
                return full[: stop - start]
            raw = fh.read()
    size = _zstd_content_size(raw)
    if size is None:  # no declared size: decode, then check the length
        dec = _ZSTD.decode(raw)
        if len(dec) != full.nbytes:
            raise ValueError(f"{len(dec)} bytes decoded, {full.nbytes} expected")
        flat[:] = np.frombuffer(dec, dtype=np.uint8)
    elif size != full.nbytes:
        raise ValueError(f"the zstd frame holds {size} bytes, {full.nbytes} expected")
    else:
        _ZSTD.decode(raw, out=full)
    return full[: stop - start]


#: A chunk that is not there (zarr >= 3.2 names it; older zarr raises FileNotFoundError).
_CHUNK_MISSING = (getattr(zarr.errors, "ChunkNotFoundError", FileNotFoundError), FileNotFoundError)


def _read_chunk(
    loc: Location,
    token: str,
    store: str,
    name: str,
    index: int,
    start: int,
    stop: int,
    crc,
    strict: bool = True,
) -> np.ndarray:
    """Row chunk ``index`` of an array, its checksum verified; every failure names it.

    ``strict``: the array has a manifest, so every chunk was written and an absent one is
    lost. An array written by plain zarr has none, and zarr leaves out chunks that hold only
    the fill value: such a chunk reads as the fill value, as zarr reads it.
    """
    where = f"store {store!r}: array {name!r}, chunk {index} (rows {start}-{stop - 1})"
    try:
        arr, plain = open_for_read(loc, token)
        block = read_plain(arr, loc, index, start, stop) if plain else arr[start:stop]
    except _CHUNK_MISSING:
        if not strict:
            fill = arr.metadata.fill_value
            return np.full((stop - start, *arr.shape[1:]), fill, dtype=arr.dtype)
        raise DKernelError(f"{where} is missing; the store is incomplete") from None
    except StorageReadError as exc:
        raise DKernelError(f"{where} cannot be read ({exc})") from None
    except Exception as exc:  # the codec's own error: Zstd decompression error ...
        raise DKernelError(f"{where} is corrupt ({type(exc).__name__}: {exc})") from None
    if crc is not None and checksum(block) != crc:
        raise DKernelError(f"{where} is corrupt (its checksum differs from the manifest)")
    return block


class ChunkReader:
    """The verified reads of one stored array's row chunks (a task argument, no key).

    ``read(i)`` is row chunk ``i`` checked against the manifest (:func:`_read_chunk`);
    ``starts[i - first]`` its first row; ``rows(lo, hi)`` the global rows ``lo:hi``, read
    from the chunks they overlap. The reader a store opens covers every chunk (``first``
    0); a task carries :meth:`covering` of its own rows, so that what each task is sent
    grows with the chunks it reads, not with the array's (15,258 chunks at 10^9 rows: a
    whole reader in every task sent gigabytes of checksums to the workers per pass).
    """

    __slots__ = ("crcs", "first", "location", "name", "starts", "store", "strict", "token")

    def __init__(
        self, location: Location, token: str, store: str, name: str, starts, crcs, strict=True,
        first: int = 0,
    ):  # fmt: skip
        self.location, self.token, self.store, self.name = location, token, store, name
        self.strict = bool(strict)
        self.starts = tuple(int(s) for s in starts)
        self.crcs = None if crcs is None else tuple(int(c) for c in crcs)
        self.first = int(first)

    def read(self, i: int) -> np.ndarray:
        k = i - self.first
        if not 0 <= k < len(self.starts) - 1:
            raise IndexError(f"chunk {i} is not among this reader's chunks")
        crc = None if self.crcs is None else self.crcs[k]
        start, stop = self.starts[k], self.starts[k + 1]
        return _read_chunk(
            self.location, self.token, self.store, self.name, i, start, stop, crc, self.strict
        )

    def chunk_of(self, row: int) -> int:
        """The row chunk holding the global row ``row`` (a bisection of the tuple: no copy
        of it per call, which a reader built per block of a long store would pay per block)."""
        return bisect.bisect_right(self.starts, row) - 1 + self.first

    def rows(self, lo: int, hi: int) -> np.ndarray:
        """Global rows ``lo:hi`` (one read of each chunk they overlap)."""
        first, last = self.chunk_of(lo), self.chunk_of(hi - 1)
        parts = []
        for c in range(first, last + 1):
            block = self.read(c)
            s, e = self.starts[c - self.first], self.starts[c + 1 - self.first]
            parts.append(block[max(lo, s) - s : min(hi, e) - s])
        return join_rows(parts)

    def covering(self, lo: int, hi: int) -> ChunkReader:
        """The reader of only the chunks that rows ``lo:hi`` overlap (what a task reading
        those rows carries)."""
        c0 = self.chunk_of(lo) - self.first
        c1 = max(c0, self.chunk_of(hi - 1) - self.first)
        crcs = None if self.crcs is None else self.crcs[c0 : c1 + 1]
        return ChunkReader(
            self.location, self.token, self.store, self.name, self.starts[c0 : c1 + 2], crcs,
            self.strict, self.first + c0,
        )  # fmt: skip

    def __dask_tokenize__(self):
        return (type(self).__name__, self.token, self.first, self.starts, self.crcs, self.strict)


class RowSpan(NamedTuple):
    """Global rows ``lo:hi`` of a stored array, read (and checked) by the task that carries
    them."""

    reader: ChunkReader
    lo: int
    hi: int

    def read(self) -> np.ndarray:
        return self.reader.rows(self.lo, self.hi)

    def narrowed(self) -> RowSpan:
        """The same rows with the reader of only their chunks (:meth:`ChunkReader.covering`):
        a span as a task argument."""
        return self._replace(reader=self.reader.covering(self.lo, self.hi))


def _read_span(span: RowSpan) -> np.ndarray:
    return span.read()


class _PerBlock(BlockwiseDep):
    """Row block j's own argument, ``make(j)``, made when the graph is materialised (for
    the blocks it keeps) rather than for every block when the array is built."""

    produces_tasks = False

    def __init__(self, make, numblocks: tuple[int, ...]) -> None:
        self.make, self.numblocks = make, numblocks

    def __getitem__(self, idx: tuple[int, ...]):
        return self.make(idx[0])


def _per_block(name: str, func, make, args: tuple, chunks, dtype) -> da.Array:
    """A dask array of blocks ``func(make(j), *args)`` (row block j; the other axes whole):
    one Blockwise layer with no dependencies, each task carrying only its own argument
    (and ``args``), that fuses with the blockwise operations applied to it."""
    from dask.blockwise import blockwise as core_blockwise
    from dask.highlevelgraph import HighLevelGraph

    nd = len(chunks)
    dep = _PerBlock(make, (len(chunks[0]),) + (1,) * (nd - 1))
    ind = tuple(range(nd))
    consts = [x for a in args for x in (a, None)]
    layer = core_blockwise(func, name, ind, dep, ind, *consts, numblocks={}, _data_producer=True)
    graph = HighLevelGraph.from_collections(name, layer, dependencies=())
    return da.Array(graph, name, chunks, meta=np.empty((0,) * nd, dtype=dtype))


def _block_span(j: int, reader: ChunkReader, bounds) -> RowSpan:
    """Block j's rows as its task carries them."""
    return RowSpan(reader, bounds[j], bounds[j + 1]).narrowed()


def _group_spans(j: int, reader: ChunkReader, bounds, cuts) -> tuple:
    """The blocks of group j (``cuts[j]:cuts[j + 1]``) as its task carries them."""
    return tuple(_block_span(i, reader, bounds) for i in range(cuts[j], cuts[j + 1]))


def _read_checked_blocks(spans: tuple, func, *args):
    """``func(rows, *args)`` on each block of a group of a row source (its
    :class:`RowSpan` s), one after the other: the read, its checksums, the value check
    (NaN/inf named by global row) and ``func`` in one task; the results joined."""
    out = []
    for span in spans:
        Xb = span.read()
        report_nonfinite(Xb, name="X", row_offset=span.lo)
        out.append(func(Xb, *args))
    return join_rows(out)


def join_rows(parts: list) -> np.ndarray:
    """Consecutive row pieces as one array: the piece itself when there is one (no copy)."""
    return parts[0] if len(parts) == 1 else np.concatenate(parts, axis=0)


def row_blocks(a, rows):
    """``a`` in row blocks of ``rows`` (an int: blocks of that many rows, the last shorter;
    a sequence: each block's rows), the other axes whole. A store's row source is
    regrouped (:meth:`RowSource.blocks_at`), so each block's task reads and checks its
    chunks itself; any other dask array is rechunked."""
    if isinstance(a, RowSource):
        return a.blocks_of(rows) if np.isscalar(rows) else a.blocks_at(rows)
    return a.rechunk({0: rows, **{i: -1 for i in range(1, a.ndim)}})


def _rows_key(key, shape) -> tuple[int, int] | None:
    """``(lo, hi)`` when ``key`` selects the rows ``lo:hi`` (step 1) and every column."""
    if not isinstance(key, tuple):
        key = (key,)
    if len(key) == 2 and key[1] is Ellipsis:
        key = key[:1]
    if not key or len(key) > len(shape) or not isinstance(key[0], slice):
        return None
    if any(not (isinstance(k, slice) and k == slice(None)) for k in key[1:]):
        return None
    lo, hi, step = key[0].indices(int(shape[0]))
    return (lo, hi) if step == 1 and hi > lo else None


class RowSource(da.Array):
    """Rows of one stored array, read and checked by the tasks that use them.

    The typed row source of a store: ``Dataset.X``, ``Dataset.y`` and ``Dataset.read(name)``
    are row sources. It is a dask array (every estimator, pass and dask operation takes it),
    and it carries what a task needs to read its rows itself: the array's
    :class:`ChunkReader` (location, manifest checksums) and the global row ``bounds`` of its
    blocks. The library's passes over a row source (the estimators' row passes, row
    gathers, the SGD stream, the coreset leaves) read each chunk in the task that works on
    it: the read, its CRC-32 against the manifest, the NaN/inf check naming the global row,
    and the work are one task.

    - ``source[a:b]`` (rows ``a:b``, every column) is a row source of those rows: its
      blocks are the source's blocks cut to the range, and each reads the chunks it
      overlaps.
    - ``source.blocks_of(rows)`` regroups it into blocks of ``rows`` rows (a chunk that
      straddles two blocks is read by both; blocks that are whole chunks, or unions of
      them, read each chunk once).
    - Every other operation (fancy indexing, a column slice, ``rechunk``, ``persist``,
      arithmetic) is dask's own and gives a plain dask array: its reads stay checked
      (checksums and missing chunks), but they are tasks of their own and values are
      checked by the pass that uses them.

    ``recorded_classes``: on a store's whole ``y`` (in any blocks), the sorted classes it
    recorded at ingest (those of ``y`` and of a test split), the ones a fit on the store
    uses, so that a fit on ``ds.y`` needs no pass to find them either; None for other rows
    (a cut may lack a class) and other arrays.
    """

    reader: ChunkReader
    bounds: tuple[int, ...]
    recorded_classes: np.ndarray | None = None

    @classmethod
    def _from(cls, reader: ChunkReader, bounds, tail, dtype, name: str) -> RowSource:
        bounds = tuple(int(b) for b in bounds)
        chunks = (tuple(np.diff(bounds).tolist()),) + tuple((int(s),) for s in tail)
        spans = functools.partial(_block_span, reader=reader, bounds=bounds)
        arr = _per_block(name, _read_span, spans, (), chunks, dtype)
        self = cls(arr.dask, arr.name, arr.chunks, meta=arr._meta)
        self.reader, self.bounds = reader, bounds
        return self

    def _derive(self, bounds) -> RowSource:
        """The same rows source over other block bounds (its own task names); the same
        rows in other blocks keep their recorded classes."""
        bounds = tuple(int(b) for b in bounds)
        name = f"{self.reader.token}-{tokenize(self.reader, bounds)}"
        out = RowSource._from(self.reader, bounds, self.shape[1:], self.dtype, name)
        if (bounds[0], bounds[-1]) == (self.bounds[0], self.bounds[-1]):
            out.recorded_classes = self.recorded_classes
        return out

    def __getitem__(self, key):
        rows = _rows_key(key, self.shape)
        if rows is None:
            return da.Array.__getitem__(self, key)
        lo, hi = rows
        if (lo, hi) == (0, int(self.shape[0])):
            return self
        g0 = self.bounds[0]
        inner = [b for b in self.bounds if g0 + lo < b < g0 + hi]
        return self._derive((g0 + lo, *inner, g0 + hi))

    def blocks_of(self, rows: int) -> RowSource:
        """The same rows in blocks of ``rows`` rows (the last one shorter)."""
        g0, g1 = self.bounds[0], self.bounds[-1]
        return self.blocks_at(np.diff((*range(g0, g1, int(rows)), g1)))

    def blocks_at(self, chunks) -> RowSource:
        """The same rows in consecutive blocks of ``chunks`` rows each (their sum: the
        source's rows); a stored chunk that two blocks share is read by both."""
        g0 = self.bounds[0]
        bounds = (g0, *(g0 + np.cumsum(np.asarray(chunks, dtype=np.int64))).tolist())
        if bounds[-1] != self.bounds[-1]:
            raise DKernelError(f"blocks of {sum(chunks)} rows for a source of {self.shape[0]}")
        return self if bounds == self.bounds else self._derive(bounds)

    def map_rows(self, func, *args, n_out: int | None, dtype=np.float64, token=None):
        """``func(rows, *args)`` on every block: a lazy dask array of shape (n,)
        (``n_out=None``) or (n, n_out).

        Adjacent blocks share a task (:func:`pass_groups`): each task reads its blocks one
        after the other, checks them and calls ``func`` on each, so a value never depends
        on the grouping; the array's row chunks are the tasks' rows."""
        cuts = pass_groups(np.diff(self.bounds), row_bytes(self))
        rows = tuple(np.diff(np.asarray(self.bounds)[cuts]).tolist())
        chunks = (rows,) if n_out is None else (rows, (n_out,))
        groups = functools.partial(
            _group_spans, reader=self.reader, bounds=self.bounds, cuts=tuple(cuts.tolist())
        )
        name = f"{token or 'map-rows'}-{tokenize(self.reader, self.bounds, cuts, func, *args)}"
        return _per_block(name, _read_checked_blocks, groups, (func, *args), chunks, dtype)


def row_bytes(X) -> int:
    """Bytes of one row of the array ``X``."""
    return int(np.prod(X.shape[1:], dtype=np.int64)) * np.dtype(X.dtype).itemsize


def pass_slots() -> int:
    """The tasks a pass runs at once: the current distributed client's worker threads
    (asked of the scheduler now), else Dask's local pool (``num_workers`` or the cores)."""
    from ..runtime import distributed_client

    client = distributed_client()
    if client is not None:
        return max(1, sum(client.nthreads().values()))
    return max(1, int(dask.config.get("num_workers", None) or os.cpu_count() or 1))


class ChunkGrid(NamedTuple):
    """Row chunks of ``step`` rows each after a first one that ends at row ``first`` (the
    last may be shorter): the chunk bounds inside any row range, from two numbers."""

    first: int
    step: int

    def cuts(self, lo: int, hi: int) -> np.ndarray:
        """``[lo, the chunk bounds strictly inside (lo, hi), hi]``."""
        k0 = max(0, (lo - self.first) // self.step + 1)
        inner = np.arange(self.first + k0 * self.step, hi, self.step, dtype=np.int64)
        inner = inner[inner > lo]
        return np.concatenate([[lo], inner, [hi]]).astype(np.int64)


def chunk_grid(bounds) -> ChunkGrid | None:
    """The :class:`ChunkGrid` of row chunk ``bounds`` (``[0, c0, c0 + c1, ..., n]``), None
    when the chunks between the first and the last differ in size or the last is longer."""
    sizes = np.diff(np.asarray(bounds, dtype=np.int64))
    if len(sizes) == 1:
        return ChunkGrid(int(bounds[-1]), 1)
    step = int(sizes[1])
    if len(sizes) > 2 and ((sizes[1:-1] != step).any() or sizes[-1] > step):
        return None
    return ChunkGrid(int(bounds[1]), max(step, 1))


def pass_groups(sizes, row_bytes: int, slots: int | None = None) -> np.ndarray:
    """Cuts ``[0, i1, ..., nb]`` that group ``nb`` adjacent blocks of ``sizes`` rows (of
    ``row_bytes`` each) into the tasks of one pass over them.

    A task costs the scheduler a fixed time (1.5-2 ms of its event loop on a 2-core host:
    ``benchmarks/task_overhead.py``), as much as a short block's work, so adjacent blocks
    share a task: one task per slot (``slots``: default :func:`pass_slots`) when that keeps
    each within ``dkernel.data.task-bytes`` of rows. Otherwise several a slot, rounded up
    to a multiple of the slots and at least :data:`TASKS_PER_SLOT` of them: Dask may queue
    a slot's last two tasks on one worker while another waits, and that wait is one task,
    a small share of a slot's work only when its tasks are many. Never more tasks than
    blocks; block counts differ by at most one between tasks.
    """
    nb = len(sizes)
    if nb == 0:
        return np.zeros(1, dtype=np.int64)
    cap = int(setting("data.task-bytes"))
    per = max(1, cap // max(1, int(np.max(sizes)) * int(row_bytes)))  # blocks a task
    slots = max(1, pass_slots() if slots is None else int(slots))
    if -(-nb // slots) <= per:
        tasks = min(nb, slots)
    else:
        tasks = max(-(-nb // per), TASKS_PER_SLOT * slots)
        tasks = min(nb, -(-tasks // slots) * slots)
    counts = [len(g) for g in np.array_split(np.arange(nb), tasks)]
    return np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)


#: The fewest tasks a slot runs in a pass that cannot give it one task (:func:`pass_groups`).
TASKS_PER_SLOT = 8


def verified_view(
    arr, *, location: Location, store: str, name: str, dask_name: str, manifest: Mapping | None
) -> RowSource:
    """The :class:`RowSource` of ``arr`` (row chunks, other axes whole): every read checked.

    One task per row chunk, no dependencies: the task opens the array (once per process),
    reads the chunk, and compares its checksum with the manifest's. The checksum costs about
    a quarter of a zstd chunk's decoding time; ``dkernel.data.verify-reads: false`` in the
    Dask config skips it (a missing chunk is still an error).
    """
    n = int(arr.shape[0])
    rows = int(arr.chunks[0])
    verify = bool(dask.config.get("dkernel.data.verify-reads", True))
    crcs = manifest["crc32"] if manifest is not None and verify else None
    starts = (*range(0, n, rows), n)
    # the token is unique per store write and array: the cache key of the opened array
    reader = ChunkReader(location, dask_name, store, name, starts, crcs, manifest is not None)
    return RowSource._from(
        reader, starts, arr.shape[1:], arr.dtype, dask_name + ("" if verify else "-unverified")
    )
