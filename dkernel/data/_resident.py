"""Row parts resident on the workers: read once per call, each pinned to one worker.

What xgboost's ``DaskDMatrix`` and ``map_worker_partitions`` are to its trainer, this is to
dkernel's passes: :meth:`ResidentRows.load` reads row ranges of X, y and w (NumPy, dask
arrays or store row sources) into the memory of the workers, one part per range, placed
round-robin over the sorted worker addresses; :meth:`~ResidentRows.map` runs a function on
every part where it lives, :meth:`~ResidentRows.reduce` sums or merges the results up a
fixed tree, :meth:`~ResidentRows.collect` brings the (small) results to the client in one
round trip, :meth:`~ResidentRows.apply` keeps n-row results on the workers as parts of
their own and :meth:`~ResidentRows.as_dask_array` hands them on as a dask array. The BSGD
shards and the refit's parts, the coreset's blocks and the k-means labels pass run on it
(the labels pass loads each chunk with its assignment as the load function: the rows
themselves never stay resident).

Without a distributed client the same calls run here, in order, on parts held as values:
the results are the same (every task is a pure function of its part and arguments, and
placement never enters a result).

Ranges are cut from the number of rows alone (never from the worker count), so a result
does not depend on the cluster. Every stored chunk is read once: a chunk only one range
overlaps by that range's load task itself, a chunk two ranges share by one task that reads
its rows of every stored array of the load (X's and y's together), on which both loads
depend (the ranges' loads are one graph); a chunk of any other dask array is its own
chunk task.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, NamedTuple

import dask
import numpy as np
from dask.delayed import Delayed

from .._validation import is_dask_array
from ..runtime import add_in_order, distributed_client, tree_reduce, worker_addresses
from ._sampling import chunk_bounds, row_chunk_keys, row_chunked
from ._verify import RowSource, RowSpan, join_rows


def range_workers(client: Any, n_ranges: int) -> list[str]:
    """The worker of each of ``n_ranges`` row ranges: round-robin over the sorted
    addresses (placement never changes a result, only where the work runs)."""
    addrs = worker_addresses(client)
    return [addrs[k % len(addrs)] for k in range(n_ranges)]


class _Chunks(NamedTuple):
    """Rows ``lo:hi`` of the joined chunks ``keys`` of a dask array (the task's inputs)."""

    keys: tuple
    lo: int
    hi: int


class _SharedRows(NamedTuple):
    """Rows ``lo:hi`` of the stored rows ``start:stop`` (one stored chunk, global rows)
    that two ranges overlap: one task per chunk reads them for both ranges and for every
    stored array of the load at once (:func:`_read_shared`)."""

    reader: Any
    start: int
    stop: int
    lo: int
    hi: int


class _Picked(NamedTuple):
    """Rows ``lo:hi`` of item ``item`` of the shared read ``key`` (a load task's argument)."""

    key: str
    item: int
    lo: int
    hi: int


class _Joined(NamedTuple):
    """A range's rows as segments joined in order: chunks of the array's graph
    (:class:`_Chunks`) or rows its load task reads from the store itself
    (:class:`~dkernel.data._verify.RowSpan`)."""

    segments: tuple


def _range_pieces(a, ranges) -> list:
    """Each range of ``a``: a slice of an in-memory array; of a store's row source, the
    rows of the stored chunks no other range overlaps, read by the load task itself (the
    read and the work are one task), and the chunks it shares with another range as shared
    reads (:func:`_stored_pieces`); of any other dask array, the keys of the
    chunks it overlaps (keyed as in ``a``'s own graph, so ranges loaded together share a
    chunk's read) and the cut into their rows. Either way every chunk is read once."""
    if a is None or not is_dask_array(a):
        return [None if a is None else a[s:e] for s, e in ranges]
    if isinstance(a, RowSource):
        stored = _stored_pieces(a, ranges)
        if stored is not None:
            return stored
        if all(_within_a_block(a.bounds, s, e) for s, e in ranges):
            g0 = a.bounds[0]
            return [RowSpan(a.reader, g0 + s, g0 + e).narrowed() for s, e in ranges]
    keys, bounds = row_chunk_keys(a), chunk_bounds(a)
    out = []
    for s, e in ranges:
        c0, c1 = np.searchsorted(bounds, [s, e - 1], side="right") - 1
        cut = _Chunks(tuple(keys[c0 : c1 + 1]), int(s - bounds[c0]), int(e - bounds[c0]))
        out.append(_Joined((cut,)))
    return out


def _stored_pieces(a: RowSource, ranges) -> list | None:
    """:func:`_range_pieces` of a store's row source whose blocks are its stored chunks
    (else None: a source whose blocks regroup them): per range, each run of chunks that
    only this range overlaps is read by its load task, each chunk another range also
    overlaps by a shared read (:class:`_SharedRows`), once for both."""
    g0 = a.bounds[0]
    starts = np.asarray(a.reader.starts)
    inner = starts[(starts > g0) & (starts < a.bounds[-1])]
    if not np.array_equal(inner, np.asarray(a.bounds[1:-1])):
        return None
    bounds = chunk_bounds(a)
    spans = [np.searchsorted(bounds, [s, e - 1], side="right") - 1 for s, e in ranges]
    users = np.zeros(len(bounds) - 1, dtype=np.int64)
    for c0, c1 in spans:
        users[c0 : c1 + 1] += 1
    out = []
    for (s, e), (c0, c1) in zip(ranges, spans):
        segments: list = []
        for c in range(int(c0), int(c1) + 1):
            lo, hi = max(s, int(bounds[c])), min(e, int(bounds[c + 1]))
            if users[c] > 1:
                r0, r1 = g0 + int(bounds[c]), g0 + int(bounds[c + 1])
                segments.append(_SharedRows(a.reader, r0, r1, g0 + lo - r0, g0 + hi - r0))
            elif segments and isinstance(segments[-1], RowSpan):
                segments[-1] = segments[-1]._replace(hi=g0 + hi)
            else:
                segments.append(RowSpan(a.reader, g0 + lo, g0 + hi))
        # each span as its task carries it: the reader of its own chunks only
        out.append(_Joined(tuple(g.narrowed() if isinstance(g, RowSpan) else g for g in segments)))
    return out


def _within_a_block(bounds, s: int, e: int) -> bool:
    g0 = bounds[0]
    j = int(np.searchsorted(bounds, g0 + s, side="right")) - 1
    return 0 <= j < len(bounds) - 1 and g0 + e <= bounds[j + 1]


class _Pieces:
    """A load task's pieces, one per array: the task's trailing arguments are the chunks
    of their :class:`_Chunks` segments and the shared reads of their :class:`_Picked`
    segments, in order. An opaque object in the graph, so that only those trailing keys are
    read as dependencies."""

    def __init__(self, pieces: tuple) -> None:
        self.pieces = pieces

    def joined(self, chunks: tuple) -> list:
        it = iter(chunks)
        return [_rows_of(p, it) for p in self.pieces]


def _rows_of(piece, chunks: Iterator):
    """A piece's rows (:class:`_Pieces`), its chunks taken from ``chunks`` in order."""
    if isinstance(piece, RowSpan):
        return piece.read()
    if isinstance(piece, _Chunks):
        these = [next(chunks) for _ in piece.keys]
        return join_rows(these)[piece.lo : piece.hi]
    if isinstance(piece, _Picked):
        return next(chunks)[piece.item][piece.lo : piece.hi]
    if isinstance(piece, _Joined):
        return join_rows([_rows_of(g, chunks) for g in piece.segments])
    return piece


def _load_piece(load: Callable, start: int, pieces: _Pieces, *chunks):
    return load(*pieces.joined(chunks), start)


def _read_shared(spans: tuple) -> tuple:
    """The rows of each :class:`~dkernel.data._verify.RowSpan`: one stored chunk of each
    array that two ranges share, read (and checksummed) in one task."""
    return tuple(span.read() for span in spans)


def _share_reads(per_range: list, name: str) -> tuple[list, dict]:
    """``per_range`` with each :class:`_SharedRows` segment replaced by a :class:`_Picked`
    of one shared read per stored row span (``{name}-read-{j}``, shown on the dashboard
    under the loads' name: X's chunk and y's of the same rows are one task, not two), and
    those reads ``{key: (span, ...)}`` (one :class:`~dkernel.data._verify.RowSpan` per
    array, its reader narrowed to the chunk)."""
    sources: dict[str, list[RowSpan]] = {}
    span_keys: dict[tuple[int, int], str] = {}

    def pick(g):
        if not isinstance(g, _SharedRows):
            return g
        key = span_keys.setdefault((g.start, g.stop), f"{name}-read-{len(span_keys)}")
        spans = sources.setdefault(key, [])
        item = next((j for j, s in enumerate(spans) if s.reader is g.reader), len(spans))
        if item == len(spans):
            spans.append(RowSpan(g.reader, g.start, g.stop))
        return _Picked(key, item, g.lo, g.hi)

    out = [
        tuple(_Joined(tuple(map(pick, p.segments))) if isinstance(p, _Joined) else p
              for p in rows)
        for rows in per_range
    ]  # fmt: skip
    return out, {key: tuple(s.narrowed() for s in spans) for key, spans in sources.items()}


def _per_part(n: int, each: Sequence | None, args: tuple) -> list[tuple]:
    """Each part's positional arguments after its index: its own of ``each``, then
    ``args``."""
    return [(*(() if each is None else (each[k],)), *args) for k in range(n)]


def _call(part, index: int, args: tuple, *, fn: Callable, kw: dict):
    return fn(part, index, *args, **kw)


def _pick(part, k: int, positions: np.ndarray, *, pick: Callable):
    return pick(part, positions)


def _call_group(
    parts: list, indices: list, args: list, *, fn: Callable, kw: dict, stack: bool, summed: bool
):
    out = [fn(part, k, *a, **kw) for part, k, a in zip(parts, indices, args)]
    if summed:  # pairs (value, exact-sum array): the arrays added here, in part order
        out, extra = (list(v) for v in zip(*out))
        total = add_in_order(extra)
    values = np.stack(out) if stack else out
    return (values, total) if summed else values


def collect_parts(
    client: Any, parts: list, owners: Sequence, func: Callable, each: list, *, name: str,
    stack: bool = False, summed: bool = False, **kwargs: Any,
) -> Any:  # fmt: skip
    """``func(part, k, *each[k], **kwargs)`` of every part (futures on ``client``), here,
    in part order, in one round trip: one task per worker over the parts ``owners`` placed
    on it (keys ``{name}-{g}``), not one per part, so a pass of small results costs the
    scheduler and each worker a dispatch per worker rather than per part. Each result is
    its part's own: the grouping never enters a result. ``stack``: the results are arrays
    of one shape, sent as one array per worker (a list of small arrays costs a
    serialisation each: 76 of 24 KB took 18 ms a round trip against 14 ms stacked).
    ``summed``: each result is a pair (value, array) whose arrays add exactly (values on
    one grid, so the order of the sum never enters it): the arrays are added on each
    worker and the call returns (the values in part order, one total per worker)."""
    groups = _by_owner(owners)
    futures = client.map(
        _call_group,
        [[parts[k] for k in idx] for idx in groups],
        groups,
        [[each[k] for k in idx] for idx in groups],
        key=[f"{name}-{g}" for g in range(len(groups))], fn=func, kw=kwargs, stack=stack,
        summed=summed,
    )  # fmt: skip
    out: list = [None] * len(parts)
    results = client.gather(futures)
    totals = [r[1] for r in results] if summed else []
    for idx, values in zip(groups, [r[0] for r in results] if summed else results):
        for k, v in zip(idx, values):
            out[k] = v
    return (out, totals) if summed else out


def _by_owner(owners: Sequence) -> list[list[int]]:
    """The part indices of each owner, in order of first appearance."""
    groups: dict = {}
    for k, who in enumerate(owners):
        groups.setdefault(who, []).append(k)
    return list(groups.values())


def _arg_keys(segment) -> tuple:
    """The keys a segment's rows come from, as its load task's trailing arguments."""
    if isinstance(segment, _Chunks):
        return segment.keys
    return (segment.key,) if isinstance(segment, _Picked) else ()


def _load_graph(arrays: Sequence[Any], load: Callable, per_range: list, ranges, name: str,
                owners: list):  # fmt: skip
    """``(graph, keys)``: one graph of the loads (task ``keys[i] = {name}-{i}``: ``load``
    of range i, placed on ``owners[i]`` when there is one) and of their shared reads
    (``{name}-read-{j}``, on the worker of their first range), over the dask arrays' own
    graphs: built once, not once per range (a ``dask.delayed`` call per range merged the
    arrays' graphs each time)."""
    from dask.highlevelgraph import HighLevelGraph, MaterializedLayer

    keys = [f"{name}-{i}" for i in range(len(ranges))]
    per_range, sources = _share_reads(per_range, name)
    layer: dict = {key: (_read_shared, src) for key, src in sources.items()}
    where = {}
    for key, (s, _), rows, who in zip(keys, ranges, per_range, owners):
        chunk_keys = [
            k for p in rows if isinstance(p, _Joined) for g in p.segments for k in _arg_keys(g)
        ]
        layer[key] = (_load_piece, load, s, _Pieces(rows), *chunk_keys)
        where[key] = [who]
        for k in chunk_keys:  # a shared read runs on the worker of its first range
            if k in sources:
                where.setdefault(k, [who])
    annotations = None
    if owners[0] is not None:
        annotations = {"workers": where.__getitem__, "allow_other_workers": True}
    deps = [a for a in arrays if is_dask_array(a)]
    graph = HighLevelGraph.from_collections(
        keys[0], MaterializedLayer(layer, annotations=annotations), dependencies=deps
    )
    return graph, keys


class ResidentRows:
    """Row parts held by the workers (futures) or here (values); see the module docstring.

    ``ranges``: the ``(start, stop)`` rows of each part; ``workers``: each part's worker
    (None without a client); ``name``: the prefix of the parts' task keys.
    """

    def __init__(self, parts: list, ranges: list[tuple[int, int]], workers: list, client: Any,
                 name: str) -> None:  # fmt: skip
        self.parts, self.ranges, self.workers = parts, ranges, workers
        self.client, self.name = client, name

    def __len__(self) -> int:
        return len(self.parts)

    @property
    def indices(self) -> range:
        return range(len(self.parts))

    @property
    def n_rows(self) -> int:
        return int(self.ranges[-1][1]) if self.ranges else 0

    @classmethod
    def load(
        cls,
        arrays: Sequence[Any],
        ranges: Iterable[tuple[int, int]],
        load: Callable,
        *,
        client: Any = "current",
        name: str | None = None,
    ) -> ResidentRows:
        """``load(*rows, start)`` of every range of ``arrays`` (aligned on rows; None
        entries pass None), as parts on the workers of ``client`` (default: the current
        distributed client, if any), else here. Nothing is waited for: the parts are
        futures the first pass on them waits on."""
        if isinstance(client, str):
            client = distributed_client()
        name = name or f"rows-{uuid.uuid4().hex}"
        ranges = [(int(s), int(e)) for s, e in ranges]
        arrays = [row_chunked(a) if is_dask_array(a) else a for a in arrays]
        pieces = [_range_pieces(a, ranges) for a in arrays]
        per_range = list(zip(*pieces)) if pieces else [() for _ in ranges]
        if client is None and not any(is_dask_array(a) for a in arrays):
            parts = [load(*rows, s) for (s, _), rows in zip(ranges, per_range)]
            return cls(parts, ranges, [None] * len(ranges), None, name)
        owners = range_workers(client, len(ranges)) if client is not None else [None] * len(ranges)
        graph, keys = _load_graph(arrays, load, per_range, ranges, name, owners)
        loads = [Delayed(key, graph, layer=keys[0]) for key in keys]
        if client is not None:
            parts = client.compute(loads, optimize_graph=False)
        else:
            parts = list(dask.compute(*loads, scheduler="sync", optimize_graph=False))
        return cls(parts, ranges, owners, client, name)

    # ------------------------------------------------------------------ passes
    def map(
        self, func: Callable, *args: Any, name: str, each: Sequence | None = None, **kwargs: Any
    ) -> list:
        """``func(part, index, *args, **kwargs)`` on every part, where it lives: futures
        (keys ``(name, index)``, as a dask array's) or values. ``each``: one more argument
        per part, passed after ``index`` (a part's own slice of something, sent with its
        task only). Large
        arguments shared by all should be futures (:meth:`scatter`), not values sent with
        every task."""
        extra = _per_part(len(self.parts), each, args)
        if self.client is None:
            return [func(p, k, *e, **kwargs) for k, (p, e) in enumerate(zip(self.parts, extra))]
        # one message for the whole pass (a submit per part costs the client ~3x the CPU);
        # each task runs where its part lives, which the scheduler sees from the part
        keys = [(name, k) for k in range(len(self.parts))]
        return self.client.map(
            _call, self.parts, range(len(self.parts)), extra, key=keys, fn=func, kw=kwargs
        )

    def reduce(
        self,
        func: Callable,
        combine: Callable,
        *args: Any,
        name: str,
        split_every: int = 4,
        seed: int = 0,
        tree_name: str | None = None,
        **kwargs: Any,
    ) -> Any:
        """:meth:`map`, then ``combine(children, node)`` up a tree of fan-in
        ``split_every`` (:func:`~dkernel.runtime.tree_reduce`, its task keys prefixed
        ``tree_name``, default ``{name}-sum``): the root, a future under a client (nothing
        waited for) or the value."""
        leaves = self.map(func, *args, name=name, **kwargs)
        key = tree_name or f"{name}-sum"
        return tree_reduce(
            self.client, leaves, combine, split_every=split_every, seed=seed, key=key
        )

    def collect(
        self, func: Callable, *args: Any, name: str, each: Sequence | None = None, **kwargs: Any
    ) -> list:
        """:meth:`map`'s results, here, in part order (:func:`collect_parts`: one task per
        worker, one round trip)."""
        if self.client is None:
            return self.map(func, *args, name=name, each=each, **kwargs)
        extra = _per_part(len(self.parts), each, args)
        return collect_parts(
            self.client, self.parts, self.workers, func, extra, name=name, **kwargs
        )

    def take(self, rows: np.ndarray, pick: Callable, *, name: str) -> list:
        """``pick(part, positions)`` of every part that the sorted global ``rows`` touch,
        with the positions of those rows in it: the touched parts' picks, here, in row
        order (one round trip, one task per worker: :func:`collect_parts`; each part sends
        only its picked rows)."""
        rows = np.asarray(rows, dtype=np.int64)
        starts = np.array([s for s, _ in self.ranges], dtype=np.int64)
        owner = np.searchsorted(starts, rows, side="right") - 1
        touched = np.unique(owner)
        local = [rows[owner == k] - starts[k] for k in touched]
        if self.client is None:
            return [pick(self.parts[k], pos) for k, pos in zip(touched, local)]
        return collect_parts(
            self.client, [self.parts[k] for k in touched], [self.workers[k] for k in touched],
            _pick, [(pos,) for pos in local], name=name, pick=pick,
        )  # fmt: skip

    def join(self, func: Callable, *args: Any, name: str) -> Any:
        """``func(parts, *args)`` in one task, the parts brought together on one worker (a
        future), or here without a client (the value): for work that needs every row at
        once and is small enough for one worker."""
        if self.client is None:
            return func(self.parts, *args)
        return self.client.submit(func, self.parts, *args, key=name)

    def apply(self, func: Callable, *args: Any, name: str, **kwargs: Any) -> ResidentRows:
        """:meth:`map`'s results as resident parts of their own (same rows, same workers):
        a pass whose per-row output stays on the cluster for the next pass."""
        out = self.map(func, *args, name=name, **kwargs)
        return ResidentRows(out, self.ranges, self.workers, self.client, name)

    def as_dask_array(self, *, dtype, each: Callable | None = None, name: str | None = None):
        """The parts (each the values of its range's rows, 1-D) as one dask array whose
        chunks are the parts: held by the workers, nothing brought here. Without ``each``
        the parts must come from :meth:`apply` (their futures are the array's own keys);
        with it, chunk k is ``each(part k)``, a task that runs only when the array is
        computed (a pass needs no task per part to hand on a column of its parts), its
        keys prefixed ``name`` (default: the parts' name and ``each``'s)."""
        import dask.array as da

        chunks = (tuple(e - s for s, e in self.ranges),)
        meta = np.empty((0,), dtype=dtype)
        if self.client is None:
            values = self.parts if each is None else [each(p) for p in self.parts]
            return da.from_array(np.concatenate(values).astype(dtype), chunks=chunks)
        if each is None:
            name, graph = self.name, {(self.name, k): f for k, f in enumerate(self.parts)}
        else:
            name = name or f"{self.name}-{each.__name__.strip('_').replace('_', '-')}"
            graph = {(name, k): (each, f) for k, f in enumerate(self.parts)}
        return da.Array(graph, name, chunks, dtype=dtype, meta=meta)

    def scatter(self, value: Any, *, name: str) -> Any:
        """``value`` sent once to every worker (a future), or itself without a client."""
        if self.client is None:
            return value
        key = f"{name}-{uuid.uuid4().hex}"
        return self.client.scatter({key: value}, broadcast=True)[key]
