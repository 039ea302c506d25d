"""Seeded mini-batch sampling from NumPy, zarr or chunked dask arrays.

Indices are drawn on the client from one seeded generator, so a seed gives the same rows
whatever the chunking or the number of workers. Rows are then gathered with one task per
touched chunk (never a dask fancy-index with thousands of positions, whose graph grows
with the chunk count).
"""

from __future__ import annotations

import numpy as np
from sklearn.utils import check_random_state

from .._validation import DKernelError, check_scalar


def _n_rows(X) -> int:
    shape = getattr(X, "shape", None)
    if shape is None or len(shape) == 0:
        raise DKernelError("X must be an array with rows")
    return int(shape[0])


def draw_indices(n: int, size: int, random_state=None, *, replace: bool = True) -> np.ndarray:
    """``size`` row indices in ``[0, n)`` from a seeded generator (the client side)."""
    check_scalar(size, "size", kind=(int, np.integer), low=1)
    if n < 1:
        raise DKernelError("cannot sample from an empty array")
    if not replace and size > n:
        raise DKernelError(f"size={size} exceeds the {n} rows available without replacement")
    rng = check_random_state(random_state)
    if replace:
        return rng.randint(0, n, size=size).astype(np.int64)
    return rng.choice(n, size=size, replace=False).astype(np.int64)


def sample_rows(X, size: int, random_state=None, *, replace: bool = True,
                return_indices: bool = False):
    """Draw ``size`` random rows of ``X`` (NumPy, zarr or dask array) as a NumPy array.

    Parameters
    ----------
    X : ndarray, zarr.Array or dask.array.Array of shape (n, ...)
    size : int
        Number of rows.
    random_state : int, RandomState or None
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
    idx = draw_indices(_n_rows(X), size, random_state, replace=replace)
    rows = take_rows(X, idx)
    return (rows, idx) if return_indices else rows


def take_rows(X, indices) -> np.ndarray:
    """Rows ``X[indices]`` as NumPy, gathered with one task per touched chunk for dask input."""
    idx = np.asarray(indices, dtype=np.int64).ravel()
    n = _n_rows(X)
    if idx.size and (idx.min() < 0 or idx.max() >= n):
        raise DKernelError(f"row indices must lie in [0, {n})")
    if isinstance(X, np.ndarray):
        return X[idx]
    uniq, inverse = np.unique(idx, return_inverse=True)
    if _is_dask(X):
        got = _take_dask(X, uniq)
    elif hasattr(X, "get_orthogonal_selection"):  # zarr.Array
        sel = (uniq,) + (slice(None),) * (len(X.shape) - 1)
        got = X.get_orthogonal_selection(sel)
    else:
        got = np.asarray(X)[uniq]
    return got[inverse]


def _is_dask(X) -> bool:
    return hasattr(X, "dask") and hasattr(X, "chunks") and hasattr(X, "to_delayed")


def _take_local(block, local):
    return np.asarray(block)[local]


def chunk_bounds(X) -> np.ndarray:
    """Row offsets ``[0, c0, c0 + c1, ..., n]`` of a dask array's row chunks."""
    return np.concatenate([[0], np.cumsum(X.chunks[0])]).astype(np.int64)


def _take_dask(X, uniq: np.ndarray) -> np.ndarray:
    import dask
    from dask import delayed

    if X.ndim > 1 and X.numblocks[1] > 1:
        X = X.rechunk({i: -1 for i in range(1, X.ndim)})
    bounds = chunk_bounds(X)
    owner = np.searchsorted(bounds, uniq, side="right") - 1
    blocks = X.to_delayed().reshape(X.numblocks[0], -1)[:, 0]
    parts = []
    for c in np.unique(owner):
        local = uniq[owner == c] - bounds[c]
        parts.append(delayed(_take_local, pure=True)(blocks[c], local))
    got = dask.compute(*parts)
    return np.concatenate(got, axis=0)
