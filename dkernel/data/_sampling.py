"""Seeded mini-batch sampling from NumPy, zarr or chunked dask arrays.

Indices are drawn on the client from one seeded generator, so a seed gives the same rows
whatever the chunking or the number of workers. Rows are then gathered with one task per
touched chunk (never a dask fancy-index with thousands of positions, whose graph grows
with the chunk count).
"""

from __future__ import annotations

import itertools

import dask
import numpy as np
from dask.base import tokenize
from dask.core import flatten

from .._validation import DKernelError, check_scalar, is_dask_array
from ..runtime import distributed_client
from ._store import as_array_input, check_allocation
from ._verify import RowSource, join_rows, pass_groups, row_bytes


def _n_rows(X) -> int:
    shape = getattr(X, "shape", None)
    if shape is None or len(shape) == 0:
        raise DKernelError("X must be an array with rows")
    return int(shape[0])


def draw_indices(n: int, size: int, random_state=None, *, replace: bool = True) -> np.ndarray:
    """``size`` row indices in ``[0, n)`` from a seeded generator (the client side)."""
    check_scalar(size, "size", kind=(int, np.integer), low=1)
    check_allocation(8 * int(size), f"drawing size={size} row indices")
    if n < 1:
        raise DKernelError("cannot sample from an empty array")
    if not replace and size > n:
        raise DKernelError(f"size={size} exceeds the {n} rows available without replacement")
    if isinstance(random_state, np.random.Generator):
        if replace:
            return random_state.integers(0, n, size=size, dtype=np.int64)
        return random_state.choice(n, size=size, replace=False).astype(np.int64)
    from sklearn.utils import check_random_state  # not at import: workers unpickle this module

    try:
        rng = check_random_state(random_state)
    except ValueError:
        raise DKernelError(
            f"random_state must be None, an int, a RandomState or a Generator, got {random_state!r}"
        ) from None
    if replace:
        return rng.randint(0, n, size=size).astype(np.int64)
    if n > _PERMUTE_MAX_ROWS and size <= n // 16:
        return _distinct_draws(rng, n, int(size))
    return rng.choice(n, size=size, replace=False).astype(np.int64)


#: Above this many rows a draw without replacement of at most n / 16 indices from a
#: RandomState does not permute all n (``choice(replace=False)`` does: an n-row array here,
#: 8 GB at 10^9 rows).
_PERMUTE_MAX_ROWS = 1 << 16


def _distinct_draws(rng: np.random.RandomState, n: int, size: int) -> np.ndarray:
    """``size`` distinct indices in ``[0, n)``, uniform, in O(size) memory: draws with
    replacement, the repeats dropped (first draws kept, in order), until there are enough."""
    out = np.empty(0, dtype=np.int64)
    while len(out) < size:
        more = rng.randint(0, n, size=size - len(out) + 16).astype(np.int64)
        both = np.concatenate([out, more])
        _, first = np.unique(both, return_index=True)
        out = both[np.sort(first)][:size]
    return out


def sample_rows(
    X, size: int, random_state=None, *, replace: bool = True, return_indices: bool = False
):
    """Draw ``size`` random rows of ``X`` (NumPy, zarr or dask array) as a NumPy array.

    Parameters
    ----------
    X : ndarray, zarr.Array, dask.array.Array of shape (n, ...), Dataset or store path
    size : int
        Number of rows.
    random_state : int, RandomState, Generator or None
        Seed of the index draw: the same seed gives the same rows for any chunking.
    replace : bool, default=True
        Sample with replacement (the mini-batch algorithms' uniform sampling).
    return_indices : bool, default=False
        Also return the drawn row indices.

    Returns
    -------
    rows : ndarray of shape (size, ...)
    indices : ndarray of shape (size,), only if ``return_indices``

    Examples
    --------
    >>> import numpy as np, dask.array as da
    >>> from dkernel.data import sample_rows
    >>> X = np.arange(20.0).reshape(10, 2)
    >>> a = sample_rows(X, 4, random_state=0)
    >>> b = sample_rows(da.from_array(X, chunks=(3, 2)), 4, random_state=0)
    >>> bool((a == b).all())
    True
    """
    X = as_array_input(X)
    n = _n_rows(X)
    check_scalar(size, "size", kind=(int, np.integer), low=1)
    _check_result_bytes(X, int(size))
    idx = draw_indices(n, size, random_state, replace=replace)
    rows = take_rows(X, idx)
    return (rows, idx) if return_indices else rows


def take_rows(X, indices, *, name: str = "take-rows") -> np.ndarray:
    """Rows ``X[indices]`` as NumPy, each touched chunk read once for dask input.

    Parameters
    ----------
    X : ndarray, zarr.Array, dask.array.Array, Dataset or store path
    indices : array-like of int
        Row positions in ``[0, n)``; repeats are allowed and kept in order.
    name : str, default="take-rows"
        Prefix of the tasks' keys (what the dashboard shows), e.g. ``"kkmeans-batch"``.

    Returns
    -------
    ndarray of shape (len(indices), ...)

    Notes
    -----
    Dask input: the indices are sorted and grouped by row chunk; each touched chunk gets one
    task that takes its rows, built directly from the array's chunk keys (no whole-graph
    ``to_delayed``). A store's row source reads its chunks in those tasks, and adjacent
    touched chunks share one (:func:`~dkernel.data.pass_groups`). When the chunks are held
    by a distributed client (``persist()``), the tasks are submitted on those futures, so
    each runs where its chunk lives.

    Examples
    --------
    >>> import numpy as np, dask.array as da
    >>> from dkernel.data import take_rows
    >>> X = da.from_array(np.arange(12.0).reshape(6, 2), chunks=(4, 2))
    >>> take_rows(X, [5, 0, 5]).tolist()
    [[10.0, 11.0], [0.0, 1.0], [10.0, 11.0]]
    """
    X = as_array_input(X)
    n = _n_rows(X)
    idx = np.asarray(indices)
    if idx.size and not np.issubdtype(idx.dtype, np.integer):
        raise DKernelError(f"row indices must be integers, got dtype {idx.dtype}")
    idx = idx.astype(np.int64, copy=False).ravel()
    if idx.size and (idx.min() < 0 or idx.max() >= n):
        bad = idx[(idx < 0) | (idx >= n)][0]
        raise DKernelError(f"row index {int(bad)} is outside [0, {n})")
    _check_result_bytes(X, idx.size)
    if isinstance(X, np.ndarray):
        return X[idx]
    if idx.size == 0:
        return np.empty((0,) + tuple(X.shape[1:]), dtype=X.dtype)
    uniq, inverse = np.unique(idx, return_inverse=True)
    if is_dask_array(X):
        got = _take_dask(X, uniq, name)
    elif hasattr(X, "get_orthogonal_selection"):  # zarr.Array
        sel = (uniq,) + (slice(None),) * (len(X.shape) - 1)
        got = X.get_orthogonal_selection(sel)
    else:
        got = np.asarray(X)[uniq]
    return got[inverse]


def _check_result_bytes(X, rows: int) -> None:
    """Refuse a gather of ``rows`` rows that cannot fit in memory (``size=10**9`` typos)."""
    row = int(np.prod(X.shape[1:], dtype=np.float64)) * np.dtype(X.dtype).itemsize
    check_allocation(float(rows) * row, f"{rows} rows of {tuple(X.shape[1:])} {X.dtype}")


def _take_local(block, local):
    return np.asarray(block)[local]


def _take_reads(reader, touched: tuple):
    """The rows ``local`` of each stored chunk ``c`` of ``touched`` (``(c, local)`` pairs,
    chunks in order), each chunk read once, joined."""
    return join_rows([reader.read(c)[local] for c, local in touched])


def chunk_bounds(X) -> np.ndarray:
    """Row offsets ``[0, c0, c0 + c1, ..., n]`` of a dask array's row chunks."""
    return np.concatenate([[0], np.cumsum(X.chunks[0])]).astype(np.int64)


def group_by_chunk(X, uniq: np.ndarray) -> list[tuple[int, np.ndarray]]:
    """``(chunk, local row positions)`` for each row chunk of ``X`` that ``uniq`` touches."""
    return _group_by_bounds(chunk_bounds(X), uniq)


def _group_by_bounds(bounds: np.ndarray, uniq: np.ndarray) -> list[tuple[int, np.ndarray]]:
    """``(block, positions in it)`` for each block ``bounds[i]:bounds[i + 1]`` that the
    sorted rows ``uniq`` touch."""
    owner = np.searchsorted(bounds, uniq, side="right") - 1
    cuts = np.flatnonzero(np.diff(owner)) + 1  # uniq is sorted, so owners are too
    starts = np.concatenate([[0], cuts])
    return [
        (int(owner[s]), uniq[s:e] - bounds[owner[s]])
        for s, e in zip(starts, np.concatenate([cuts, [uniq.size]]))
    ]


def row_chunked(X):
    """``X`` with its columns in one chunk (row chunks only), as the row passes read it."""
    if X.ndim > 1 and X.numblocks[1] > 1:
        return X.rechunk({i: -1 for i in range(1, X.ndim)})
    return X


def row_chunk_keys(X) -> list:
    """The key of row chunk ``i`` (columns in one chunk) for every ``i``."""
    tail = (0,) * (X.ndim - 1)
    return [(X.name, i) + tail for i in range(X.numblocks[0])]


def take_graph(X, uniq: np.ndarray, prefix: str = "take-rows"):
    """A dask array of the rows ``uniq`` (sorted, unique): one task per touched chunk, or,
    over a :class:`RowSource`, per group of adjacent touched chunks (:func:`pass_groups`).

    The graph is built from the chunk keys of ``X`` and culled to what those keys need,
    so it holds no task for an untouched chunk and runs without a whole-graph optimisation
    (``compute(optimize_graph=False)``). Over a :class:`RowSource`, each task reads its
    stored chunks itself (no read task beside it).
    """
    import dask.array as da
    from dask.highlevelgraph import HighLevelGraph

    X = row_chunked(X)
    name = f"{prefix}-{tokenize(X.name, uniq)}"
    tail = (0,) * (X.ndim - 1)
    layer: dict = {}
    if isinstance(X, RowSource):
        # group by stored chunk (not by the source's blocks): each touched chunk read once;
        # adjacent touched chunks share a task (pass_groups, sized by the chunks read)
        reader, rows = X.reader, uniq + X.bounds[0]
        starts = np.asarray(reader.starts, dtype=np.int64)
        touched = _group_by_bounds(starts, rows)
        sizes = [starts[c + 1] - starts[c] for c, _ in touched]
        cuts = pass_groups(sizes, row_bytes(X))
        groups = [touched[a:b] for a, b in itertools.pairwise(cuts)]
        for j, group in enumerate(groups):
            # the task carries the reader of its own chunks only
            lo, hi = int(starts[group[0][0]]), int(starts[group[-1][0] + 1])
            layer[(name, j) + tail] = (_take_reads, reader.covering(lo, hi), tuple(group))
        lengths = tuple(sum(len(local) for _, local in group) for group in groups)
        graph = HighLevelGraph.from_collections(name, layer, dependencies=())
    else:
        keys = row_chunk_keys(X)
        touched = group_by_chunk(X, uniq)
        for j, (c, local) in enumerate(touched):
            layer[(name, j) + tail] = (_take_local, keys[c], local)
        lengths = tuple(len(local) for _, local in touched)
        graph = HighLevelGraph.from_collections(name, layer, dependencies=[X]).cull(set(layer))
    chunks = (lengths,) + tuple((s,) for s in X.shape[1:])
    return da.Array(graph, name, chunks=chunks, meta=X._meta)


def _persisted_futures(X, keys: list) -> list | None:
    """The distributed futures holding ``keys`` of ``X``, or None if any is not one."""
    try:
        from distributed import Future
    except ImportError:  # pragma: no cover - distributed is a dependency
        return None
    graph = X.__dask_graph__()
    futs = []
    for k in keys:
        v = graph.get(k)
        if not isinstance(v, Future):
            return None
        futs.append(v)
    return futs


def _take_dask(X, uniq: np.ndarray, prefix: str) -> np.ndarray:
    X = row_chunked(X)
    # a row source holds no futures (and looking would build its whole layer)
    futs = None
    if not isinstance(X, RowSource):
        groups = group_by_chunk(X, uniq)
        futs = _persisted_futures(X, [row_chunk_keys(X)[c] for c, _ in groups])
    if futs:  # chunks held by a client: submit next to them, no graph at all
        client = distributed_client(holding=futs)
        token = tokenize(X.name, uniq)
        keys = [f"{prefix}-{token}-{j}" for j in range(len(futs))]
        parts = client.gather(
            client.map(_take_local, futs, [local for _, local in groups], key=keys)
        )
        return np.concatenate(parts, axis=0)
    # each touched chunk's rows come straight to this process and are joined here (a dask
    # array's compute would first gather every part on one worker to concatenate them)
    arr = take_graph(X, uniq, prefix)
    keys = list(flatten(arr.__dask_keys__()))  # row-chunk order
    get = dask.base.get_scheduler(collections=[arr])
    return np.concatenate(get(dict(arr.__dask_graph__()), keys), axis=0)
