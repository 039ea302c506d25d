"""Coresets and dataset stores: a uniform baseline drawn from a store, a coreset written as one."""

from __future__ import annotations

import os

import numpy as np

from .._validation import DKernelError, check_scalar
from ..data import Dataset, draw_indices, open_dataset, take_rows, write_arrays
from ._coreset import Coreset


def uniform_store_coreset(store, m: int, *, random_state=None) -> Coreset:
    """Uniform baseline on a store: ``m`` seeded draws, one task per touched chunk.

    Parameters
    ----------
    store : str, os.PathLike or Dataset
        A labelled dataset store.
    m : int
        Number of draws (with replacement); repeated rows are merged and weighted.
    random_state : int, RandomState, Generator or None
        Seed of the draw (the same rows for any chunking).

    Returns
    -------
    Coreset
        Rows with weight ``count * n / m`` (total weight ``n``), sensitivity 1 each.

    Examples
    --------
    >>> import os, tempfile
    >>> from dkernel.coreset import uniform_store_coreset
    >>> from dkernel.data import make_gauss
    >>> ds = make_gauss(1000, random_state=0, store=os.path.join(tempfile.mkdtemp(), "g.zarr"))
    >>> c = uniform_store_coreset(ds, 100, random_state=0)
    >>> float(c.weight.sum())
    1000.0
    """
    ds = store if isinstance(store, Dataset) else open_dataset(store)
    if ds.y is None:
        raise DKernelError(f"store {ds.path!r} has no labels; an SVM coreset needs y")
    n = ds.n_samples
    check_scalar(m, "m", kind=(int, np.integer), low=1, high=n)
    idx = draw_indices(n, int(m), random_state=random_state)
    uniq, counts = np.unique(idx, return_counts=True)
    X = take_rows(ds.X, uniq)
    y = take_rows(ds.y, uniq)
    classes = sorted(ds.attrs.get("classes") or np.unique(y).tolist())
    return Coreset(
        X=X,
        y=y,
        weight=counts * (n / m),
        sensitivity=np.ones(len(uniq)),
        total_sensitivity=float(n),
        source_size=n,
        classes=tuple(classes),
        info={"method": "uniform", "levels": 1},
    )


def write_coreset(coreset: Coreset, store, *, source: str = "coreset", overwrite: bool = False):
    """Write a coreset atomically as a dataset store: ``X``, ``y``, ``weight``, ``sensitivity``.

    The store's ``coreset`` attribute records ``source_size``, ``C``, ``total_sensitivity``
    and the build method; ``open_dataset(store).read("weight")`` gives the weights back.

    Returns
    -------
    Dataset
    """
    X = np.asarray(coreset.X)
    return write_arrays(
        os.fspath(store),
        [(X, np.asarray(coreset.y))],
        n=X.shape[0],
        n_features=X.shape[1],
        dtype=X.dtype,
        chunk_rows=max(1, X.shape[0]),
        has_y=True,
        attrs={
            "source": source,
            "coreset": {
                "source_size": int(coreset.source_size),
                "C": float(coreset.C),
                "total_sensitivity": float(coreset.total_sensitivity),
                "method": coreset.info.get("method"),
            },
        },
        extra={
            "weight": np.asarray(coreset.weight, dtype=np.float64),
            "sensitivity": np.asarray(coreset.sensitivity, dtype=np.float64),
        },
        overwrite=overwrite,
    )
