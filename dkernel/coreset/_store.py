"""Coresets and dataset stores: a uniform baseline drawn from a store, a coreset written as one."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from .._validation import DKernelError, check_scalar
from ..data import (
    Dataset,
    code_labels,
    decode,
    draw_indices,
    open_dataset,
    take_rows,
    write_arrays,
)
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
    X = take_rows(ds.X, uniq, name="coreset-uniform")
    y = take_rows(ds.y, uniq, name="coreset-uniform")
    if ds.attrs.get("label_names") is not None:  # a store of names keeps their indices
        y = decode(y, ds.attrs["label_names"])
    classes = _classes(ds, y)
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


def _classes(ds, y) -> list:
    """The store's recorded label classes, else the distinct labels of ``y``."""
    recorded = ds.label_classes()
    return np.unique(y).tolist() if recorded is None else recorded.tolist()


def write_coreset(coreset, store, *, source: str = "coreset", overwrite: bool = False):
    """Write a coreset atomically as a dataset store: ``X``, ``y``, ``weight``, ``sensitivity``.

    The store's ``coreset`` attribute records ``source_size``, ``C``, ``total_sensitivity``
    and the build method; ``open_dataset(store).read("weight")`` gives the weights back.

    Parameters
    ----------
    coreset : Coreset or dict of label -> Coreset
        A coreset, or the one-vs-rest coresets of ``distributed_coreset(...,
        multiclass="ovr")``: then the store holds the rows of every class's coreset, ``y``
        their -1/+1 labels within it and ``ovr_class`` the class whose coreset holds them
        (the rows with ``ovr_class == c``, with their ``weight``, stand for the whole data
        set in the binary problem "c against the rest").
    store : str, os.PathLike
        Path or URL of the new store.

    Returns
    -------
    Dataset
    """
    ovr = isinstance(coreset, Mapping)
    parts = list(coreset.items()) if ovr else [(None, coreset)]
    cores = [c for _, c in parts]
    X = np.concatenate([np.asarray(c.X) for c in cores])
    meta: dict = {
        "source_size": int(cores[0].source_size),
        "C": float(cores[0].C),
        "method": cores[0].info.get("method"),
    }
    extra = {
        "weight": np.concatenate([np.asarray(c.weight, dtype=np.float64) for c in cores]),
        "sensitivity": np.concatenate([np.asarray(c.sensitivity, dtype=np.float64) for c in cores]),
    }
    if ovr:
        y = np.concatenate([c.signs.astype(np.int64) for c in cores])
        meta["multiclass"] = "ovr"
        meta["classes"] = [label for label, _ in parts]
        meta["total_sensitivity"] = {str(label): float(c.total_sensitivity) for label, c in parts}
        owner = np.concatenate([np.full(len(c), label) for label, c in parts])
        (extra["ovr_class"],), names = code_labels(owner)  # names: as a store keeps them
        if names is not None:
            meta["ovr_class_names"] = list(names)
        names = None  # y: the signs within each class's coreset
    else:
        (y,), names = code_labels(np.asarray(coreset.y))
        meta["total_sensitivity"] = float(coreset.total_sensitivity)
    attrs = {"source": source, "coreset": meta}
    return write_arrays(
        store,
        [(X, y)],
        n=X.shape[0],
        n_features=X.shape[1],
        dtype=X.dtype,
        chunk_rows=max(1, X.shape[0]),
        has_y=True,
        attrs=attrs if names is None else {**attrs, "label_names": list(names)},
        extra=extra,
        overwrite=overwrite,
    )


def read_coreset(store):
    """The coreset a store written by :func:`write_coreset` (or ``dkernel coreset``) holds.

    Parameters
    ----------
    store : str, os.PathLike or Dataset

    Returns
    -------
    Coreset, or dict of label -> Coreset
        The rows with their ``weight`` and ``sensitivity``, and the build's ``source_size``,
        ``C``, ``total_sensitivity`` and method; for a store of one-vs-rest coresets, one
        coreset per class (its rows, labels -1/+1 within it), as
        ``distributed_coreset(..., multiclass="ovr")`` returned them.

    Examples
    --------
    >>> import os, tempfile
    >>> import numpy as np
    >>> from dkernel.coreset import read_coreset, svm_coreset, write_coreset
    >>> from dkernel.data import make_checkerboard
    >>> X, y = make_checkerboard(2000, random_state=0)
    >>> core = svm_coreset(X, y, 200, random_state=0)
    >>> ds = write_coreset(core, os.path.join(tempfile.mkdtemp(), "core.zarr"))
    >>> back = read_coreset(ds)
    >>> bool(np.array_equal(back.weight, core.weight)), back.source_size == core.source_size
    (True, True)
    """
    ds = store if isinstance(store, Dataset) else open_dataset(store)
    meta = ds.attrs.get("coreset")
    if meta is None or ds.y is None:
        raise DKernelError(f"store {ds.path!r} holds no coreset (no 'coreset' record)")
    X, y = np.asarray(ds.X), np.asarray(ds.labels("y"))
    weight = np.asarray(ds.read("weight"), dtype=np.float64)
    sens = np.asarray(ds.read("sensitivity"), dtype=np.float64)
    info = {"method": meta.get("method")}

    def one(rows, total, classes) -> Coreset:
        return Coreset(
            X=X[rows], y=y[rows], weight=weight[rows], sensitivity=sens[rows],
            total_sensitivity=float(total), source_size=int(meta["source_size"]),
            C=float(meta.get("C", 1.0)), classes=tuple(classes), info=dict(info),
        )  # fmt: skip

    if meta.get("multiclass") != "ovr":
        return one(slice(None), meta["total_sensitivity"], sorted(_classes(ds, y)))
    owner = np.asarray(ds.read("ovr_class"))
    if meta.get("ovr_class_names") is not None:
        owner = decode(owner, meta["ovr_class_names"])
    return {
        label: one(owner == label, meta["total_sensitivity"][str(label)], (-1, 1))
        for label in meta["classes"]
    }
