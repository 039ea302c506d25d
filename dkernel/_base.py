"""The private base of every dkernel estimator.

One place for what the estimators share:

- the kernel parameters (``kernel``, ``gamma``, ``degree``, ``coef0``, ``kernel_params``)
  and their resolution into a :class:`~dkernel.kernels.KernelSpec`, ``gamma`` included;
- one reader of X, y and sample weights (:func:`read_inputs`), for estimators and coreset
  functions alike, so a bad input gets one error text everywhere: X whatever it is, NumPy
  (checked now), a dask array, a ``zarr.Array``, a store path or a
  :class:`~dkernel.data.Dataset` (shape and dtype checked now; values checked in the pass
  that reads them, so each chunk is read once per pass), y (a store's own labels when X is
  a store) and the weights (dask weights checked in one pass over them);
- blockwise passes over the rows (:meth:`_BaseKernelEstimator._row_pass`): one
  ``map_blocks`` task per row chunk on the workers for dask input, returning a lazy dask
  array; a direct call for NumPy input.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable
from typing import Any, NamedTuple

import dask
import dask.array as da
import numpy as np
from dask.base import tokenize
from sklearn.base import BaseEstimator
from sklearn.exceptions import DataConversionWarning
from sklearn.utils import check_array
from sklearn.utils.multiclass import check_classification_targets, type_of_target
from sklearn.utils.validation import validate_data

from ._validation import (
    DKernelError,
    check_dense_chunks,
    check_sample_weight,
    checked_block,
    is_dask_array,
    report_nonfinite,
    unique_labels,
)
from .data import Dataset, Location, RowSource, as_array_input, open_dataset, sample_rows
from .kernels import KERNELS, KernelSpec, gamma_from_rows, pairwise_from_spec, resolve_kernel

#: gamma=None rules: 1/n_features; the median heuristic (kernels whose gamma is a width);
#: "scale", each kernel's ``scale_rule`` in the kernel table: 1 / (n_features * X.var()) for
#: rbf (scikit-learn's SVC default), the L1 median heuristic for laplacian, the
#: best label-free rule measured (benchmarks/results/defaults.md).
GAMMA_RULES = ("inverse_dim", "median", "scale")
#: Rows of a caller's sample used by the median heuristic (as estimate_gamma's default).
_GAMMA_SAMPLE = 1000


def as_dask_or_numpy(X) -> Any:
    """A store path, :class:`~dkernel.data.Dataset` or ``zarr.Array`` becomes a dask array
    chunked by rows (one task per stored chunk); anything else is returned as it is."""
    if isinstance(X, (str, os.PathLike, Dataset)):
        return as_array_input(X)
    if type(X).__module__.startswith("zarr"):
        return da.from_zarr(X, chunks=(X.chunks[0], *X.shape[1:]))
    return X


def check_dask_2d(X, *, name: str = "X") -> None:
    """Shape and dtype checks of a dask array that read no values."""
    check_dense_chunks(X, name=name)
    if any(np.isnan(s) for s in X.shape):
        raise DKernelError(
            f"{name} has unknown chunk sizes (shape {X.shape}), as after boolean indexing "
            f"such as X[X[:, 0] > 0]: call {name}.compute_chunk_sizes() first"
        )
    if X.ndim != 2:
        raise DKernelError(f"{name} must be 2-D (n_samples, n_features), got shape {X.shape}")
    if np.issubdtype(X.dtype, np.complexfloating):
        raise DKernelError(_complex(name, X.dtype))
    if not (np.issubdtype(X.dtype, np.number) or X.dtype == np.bool_):
        raise DKernelError(f"{name} must be real and numeric, got dtype {X.dtype}")
    if 0 in X.shape:
        raise DKernelError(f"{name} is empty (shape {X.shape})")


def _complex(name: str, dtype) -> str:
    return (
        f"{name} has complex dtype {dtype}: Complex data not supported "
        "(take .real, .imag or abs() explicitly)"
    )


# ---------------------------------------------------------------------- the one reader
class Inputs(NamedTuple):
    """What :func:`read_inputs` read: ``X`` (NumPy, checked; or dask, shape and dtype
    checked), whether it is dask, ``y`` (None when not asked for), the sample weights
    (None when not asked for) and the classes a store recorded at ingest (or None)."""

    X: Any
    is_dask: bool
    y: Any
    sample_weight: Any
    classes: np.ndarray | None


def read_inputs(
    X,
    y=None,
    sample_weight=None,
    *,
    needs_y: bool = False,
    weights: str | None = None,
    estimator: BaseEstimator | None = None,
    reset: bool = True,
    dtype=(np.float64, np.float32),
) -> Inputs:
    """The one reader of X, y and sample weights, for estimators and functions alike.

    ``X``: as :func:`read_X`; a store path or Dataset supplies its labels as ``y`` when
    ``needs_y`` and ``y`` is None. ``y`` (``needs_y``): as :func:`read_y`. ``weights``:
    None (not read), ``"numpy"`` (checked, as NumPy; dask weights are computed) or
    ``"lazy"`` (dask weights stay dask, checked in one pass over them; no weights for
    dask X: unit weights as a dask array of X's row chunks). ``estimator``:
    records or checks ``n_features_in_`` (``reset``) and feature names.
    """
    X, y, classes = open_labelled(X, y, needs_y=needs_y)
    X, is_dask = read_X(X, estimator=estimator, reset=reset, dtype=dtype)
    n = int(X.shape[0])
    if needs_y:
        y = read_y(y, n)
    w = None
    if weights == "lazy" and sample_weight is None and is_dask:
        # unit weights, never an array of n rows here (named for the dashboard)
        w = da.ones(n, chunks=X.chunks[0], name=f"svm-unit-weights-{tokenize(n, X.chunks[0])}")
    elif weights is not None:
        w = read_weights(sample_weight, n, lazy=weights == "lazy")
    return Inputs(X, is_dask, y, w, classes)


def open_labelled(X, y, *, needs_y: bool = True):
    """``(X, y, classes)``: a store path or Dataset becomes its X, and (``needs_y``) its
    labels when ``y`` is None; ``classes``: the store's recorded classes then, or when
    ``y`` is a store's whole ``y`` (``ds.y``: :attr:`RowSource.recorded_classes`), else
    None (or unrecorded). Labels that are names (text from a CSV, an array, a pandas
    Series or a DataFrame column) are the names here, as a store's labels are: one rule,
    so ``classes_`` and predictions are the user's names whichever way the rows came."""
    classes = None
    if isinstance(X, (str, bytes, os.PathLike, Location)):
        X = open_dataset(X)
    if isinstance(X, Dataset):
        ds, X = X, X.X
        if needs_y and y is None:
            if ds.y is None:
                raise DKernelError(f"store {ds.path!r} has no labels 'y'; pass y")
            # the labels as the user named them (a store of names keeps their indices);
            # the classes recorded at ingest with y: no pass over y to find them (a
            # label that is not one of them is still named when the rows are read)
            y, classes = ds.labels("y"), ds.label_classes()
    if classes is None and needs_y:
        # a store's own labels passed as y: no pass over them to find the classes
        classes = getattr(y, "recorded_classes", None)
    return X, y, classes


def read_X(X, *, estimator=None, reset: bool = True, dtype=(np.float64, np.float32)):
    """Return ``(X, is_dask)``: the one validation path for X.

    NumPy-like input is checked now (scikit-learn's ``check_array``, the same text for
    every caller, then NaN/inf named by row and column) and converted to one of ``dtype``.
    Dask input, and the zarr arrays, store paths and Datasets that become dask arrays, are
    checked for shape and dtype only: their values are checked by :func:`checked_block` in
    the pass that reads them. With an ``estimator``, ``reset=True`` records its
    ``n_features_in_`` (and feature names); otherwise the width must match it.
    """
    X = as_dask_or_numpy(X)
    if is_dask_array(X):
        check_dask_2d(X)
        if estimator is not None:
            estimator._check_n_features(int(X.shape[1]), reset=reset)
        if X.chunks[1] != (X.shape[1],):
            X = X.rechunk({1: -1})
        return X, True
    if hasattr(X, "toarray") and not isinstance(X, np.ndarray):
        raise DKernelError(
            "X: sparse input is not supported; pass a dense array (X.toarray()) or a dask array"
        )
    if np.issubdtype(getattr(X, "dtype", np.float64), np.complexfloating):
        raise DKernelError(_complex("X", X.dtype))
    try:
        Xc = check_array(X, dtype=list(dtype), ensure_all_finite=False)
        if estimator is not None:
            validate_data(estimator, X, reset=reset, skip_check_array=True)
    except DKernelError:
        raise
    except ValueError as exc:
        raise DKernelError(str(exc)) from None
    report_nonfinite(Xc, name="X")
    return Xc, False


def read_y(y, n: int):
    """Labels for ``n`` rows: 1-D (a column vector is raveled, with scikit-learn's
    warning), as long as X, finite; NumPy or dask (its values checked as they are read)."""
    if y is None:
        raise DKernelError("this fit requires y to be passed, but the target y is None")
    if not is_dask_array(y):
        y = np.asarray(y)
    elif any(np.isnan(s) for s in y.shape):
        raise DKernelError(
            f"y has unknown chunk sizes (shape {y.shape}), as after boolean indexing: "
            "call y.compute_chunk_sizes() first"
        )
    if y.ndim == 2 and y.shape[1] == 1:
        if not is_dask_array(y):
            warnings.warn(
                "A column-vector y was passed when a 1d array was expected; it is raveled",
                DataConversionWarning,
                stacklevel=4,
            )
        y = y.reshape(-1)
    if y.ndim != 1:
        raise DKernelError(f"y must be 1-D, got shape {y.shape}")
    if int(y.shape[0]) != n:
        raise DKernelError(f"y has {y.shape[0]} labels but X has {n} rows")
    if not is_dask_array(y) and y.dtype.kind == "f" and not np.isfinite(y).all():
        raise DKernelError("y contains NaN or inf")
    return y


def read_classes(y, *, token: str) -> np.ndarray:
    """The sorted labels of ``y``; labels that cannot be classes (continuous values, NaN,
    mixed types) raise here, named, for NumPy and dask y alike (dask: from the unique
    values, one pass over y, tasks named ``token``)."""
    try:
        classes = unique_labels(y, token=token) if is_dask_array(y) else np.unique(y)
    except TypeError:  # sorting mixed types
        kinds = sorted({type(v).__name__ for v in np.asarray(y[:1000]).ravel()})
        raise DKernelError(
            f"y mixes label types ({', '.join(kinds)}): convert the labels to one type"
        ) from None
    if classes.dtype.kind == "f" and np.isnan(classes).any():
        raise DKernelError("y contains NaN: every row needs a label")
    if classes.dtype == object and len({type(v) for v in classes}) > 1:
        kinds = sorted({type(v).__name__ for v in classes})
        raise DKernelError(
            f"y mixes label types ({', '.join(kinds)}): convert the labels to one type"
        )
    try:
        with warnings.catch_warnings():
            # classes holds each label once: "more unique classes than half the samples"
            # is always true of it from 20 classes on, and says nothing about y
            warnings.filterwarnings("ignore", message="The number of unique classes")
            check_classification_targets(classes)
    except ValueError as exc:
        if type_of_target(classes) != "continuous":
            raise DKernelError(str(exc)) from None
        raise DKernelError(
            f"y holds {len(classes)} distinct values such as {classes[:3].tolist()}, "
            "which look continuous: an SVM needs class labels"
        ) from None
    return classes


def read_weights(sample_weight, n: int, *, lazy: bool):
    """Weights for ``n`` rows: finite, non-negative, not all zero, the first bad row named
    (:func:`~dkernel._validation.check_sample_weight`'s texts). Dask weights: with ``lazy``
    kept dask and checked in one pass, one named task per chunk; else computed."""
    if not is_dask_array(sample_weight):
        return check_sample_weight(sample_weight, n)
    if sample_weight.shape != (n,):
        raise DKernelError(
            f"sample_weight has shape {sample_weight.shape}, expected ({n},) to match the rows of X"
        )
    if not lazy:
        return check_sample_weight(np.asarray(sample_weight.compute()), n)
    if not np.issubdtype(sample_weight.dtype, np.number):
        raise DKernelError(f"sample_weight must be numeric, got dtype {sample_weight.dtype}")
    stats = sample_weight.map_blocks(
        _weight_stats, chunks=((1,) * sample_weight.numblocks[0], (5,)), new_axis=1,
        dtype=np.float64, token="svm-weights",  # the lazy reader is BudgetedSVC's
    )  # fmt: skip
    (stats,) = dask.compute(stats)
    starts = np.cumsum((0, *sample_weight.chunks[0]))[:-1]
    for col, what in ((0, "bad"), (2, "negative")):
        hit = np.flatnonzero(stats[:, col] >= 0)
        if hit.size:
            k = hit[0]
            row, value = int(starts[k] + stats[k, col]), float(stats[k, col + 1])
            if what == "negative":
                raise DKernelError(f"sample_weight is negative at row {row} ({value})")
            kind = "NaN" if np.isnan(value) else "inf"
            raise DKernelError(f"sample_weight contains {kind} at row {row}")
    if not stats[:, 4].any():
        raise DKernelError("sample_weight is zero everywhere: nothing to fit")
    return sample_weight


def _weight_stats(wb: np.ndarray) -> np.ndarray:
    """One chunk of weights: [first non-finite row or -1, its value, first negative row or
    -1, its value, any positive]."""
    wb = np.asarray(wb, dtype=np.float64)
    out = np.array([[-1.0, 0.0, -1.0, 0.0, float((wb > 0).any())]])
    bad = np.flatnonzero(~np.isfinite(wb))
    if bad.size:
        out[0, :2] = bad[0], wb[bad[0]]
    neg = np.flatnonzero(wb < 0)
    if neg.size:
        out[0, 2:4] = neg[0], wb[neg[0]]
    return out


class _BaseKernelEstimator(BaseEstimator):
    """Kernel parameters, input validation and blockwise row passes for every estimator.

    Subclasses set ``_supported_kernels`` (None: every name of
    :data:`~dkernel.kernels.KERNEL_ALIASES`) and ``_gamma_rule`` (how ``gamma=None`` is
    resolved, one of :data:`GAMMA_RULES`).
    """

    #: Kernel names a subclass accepts (None: all).
    _supported_kernels: frozenset | None = None
    #: How ``gamma=None`` is resolved by :meth:`_resolve_gamma`.
    _gamma_rule = "inverse_dim"

    # ----------------------------------------------------------------- kernel
    def _kernel_spec(self, X=None, *, gamma=None) -> KernelSpec:
        """The kernel as a spec; unknown or unsupported names raise here.

        With ``X`` given and ``gamma`` still None, gamma becomes ``1 / n_features``.
        """
        spec = resolve_kernel(
            self.kernel,
            self.gamma if gamma is None else gamma,
            self.degree,
            self.coef0,
            self.kernel_params,
        )
        if (
            self._supported_kernels is not None
            and not callable(spec.kernel)
            and spec.kernel not in self._supported_kernels
        ):
            names = ", ".join(sorted(self._supported_kernels))
            raise DKernelError(
                f"{type(self).__name__} does not support kernel {self.kernel!r}; use one of {names}"
            )
        if spec.gamma is None and X is not None and isinstance(spec.kernel, str):
            spec = spec._replace(gamma=1.0 / X.shape[1])
        return spec

    def _resolve_gamma(self, X, rng=None, *, sample=None) -> KernelSpec:
        """The kernel with ``gamma=None`` resolved once, by the estimator's ``_gamma_rule``.

        ``"scale"``: the kernel's ``scale_rule`` (:class:`~dkernel.kernels.KernelInfo`): rbf
        takes ``1 / (n_features * X.var())`` on a row sample, laplacian the L1 median
        heuristic, other kernels ``1 / n_features``. ``"median"``: the median heuristic
        (kernels with a width ``distance``). ``"inverse_dim"``: ``1 / n_features``. The sample is
        ``sample`` (rows the caller already fetched, e.g. for its initialisation; nothing is
        read then) or 1000 rows drawn with ``rng`` (seed 0 without one: a function of the
        data alone). All rows equal: ``1 / n_features``.
        """
        spec = self._kernel_spec(None)
        if spec.gamma is not None or not isinstance(spec.kernel, str):
            return spec
        d = int(X.shape[1])
        info = KERNELS[spec.kernel]
        rule = info.scale_rule if self._gamma_rule == "scale" else self._gamma_rule
        if rule == "inverse_dim" or info.distance is None or X.shape[0] < 2:
            return spec._replace(gamma=1.0 / d)
        seed = 0 if rng is None else int(rng.randint(0, 2**31 - 1))
        if sample is None or len(sample) < 2:
            size = min(int(X.shape[0]), _GAMMA_SAMPLE)
            sample = sample_rows(X, size, seed, replace=False)
        sample = np.asarray(sample)
        if rule == "scale":  # the variance of every sampled row (O(size d))
            with np.errstate(over="ignore", invalid="ignore"):  # inf: handled below
                var = float(np.var(sample, dtype=np.float64))
            g = 1.0 / (d * var) if var > 0 and np.isfinite(var) else 1.0 / d
        else:  # pairwise distances: a seeded subset of at most 1000 rows, in any row order
            if len(sample) > _GAMMA_SAMPLE:
                pick = np.random.RandomState(seed).choice(len(sample), _GAMMA_SAMPLE, False)
                sample = sample[np.sort(pick)]
            try:
                g = gamma_from_rows(sample, kernel=spec.kernel)
            except DKernelError:  # all sampled rows equal: any width treats them the same
                g = 1.0 / d
        return spec._replace(gamma=float(g))

    @staticmethod
    def _kernel(X: np.ndarray, Y: np.ndarray | None, spec: KernelSpec) -> np.ndarray:
        return pairwise_from_spec(X, Y, spec)

    # ------------------------------------------------------------------ input
    def _validate_X(self, X, *, reset: bool, dtype=(np.float64, np.float32)):
        """Return ``(X, is_dask)``: :func:`read_X` with this estimator's feature count."""
        return read_X(X, estimator=self, reset=reset, dtype=dtype)

    def _check_n_features(self, d: int, *, reset: bool) -> None:
        if reset:
            self.n_features_in_ = int(d)
            if hasattr(self, "feature_names_in_"):
                del self.feature_names_in_
        elif d != self.n_features_in_:
            raise DKernelError(
                f"X has {d} features, but {type(self).__name__} is expecting "
                f"{self.n_features_in_} features as input"
            )

    # ------------------------------------------------------------- row passes
    @staticmethod
    def _row_pass(
        X,
        is_dask: bool,
        func: Callable,
        *args,
        n_out: int | None,
        dtype=np.float64,
        token: str | None = None,
    ):
        """``func(rows, *args)`` over every row of X, blockwise.

        ``func`` maps an (r, d) NumPy block to (r,) (``n_out=None``) or (r, n_out) output.
        NumPy input: one call, NumPy result. Dask input: one task per row chunk, the value
        check included, a lazy dask array; nothing is pulled to the client. A store's row
        source: adjacent chunks share a task (one per worker thread, at most
        ``dkernel.data.task-bytes`` of rows; :meth:`~dkernel.data.RowSource.map_rows`),
        each read and passed to ``func`` on its own. ``token`` names the pass's tasks on
        the dashboard (``kkmeans-labels``, ``svm-predict``) instead of the reading
        function's name.
        """
        if not is_dask:
            return func(X, *args)
        if isinstance(X, RowSource):
            # the pass reads its rows itself, in tasks of adjacent blocks (mapped over the
            # source, a pass that drops the column axis does not fuse with the read
            # blockwise, and Dask's linear fusion leaves an alias task beside each fused one)
            return X.map_rows(func, *args, n_out=n_out, dtype=dtype, token=token)
        chunks = (X.chunks[0],) if n_out is None else (X.chunks[0], (n_out,))
        meta = np.empty((0,) * len(chunks), dtype=dtype)
        if n_out is None:
            return X.map_blocks(
                checked_block, func, *args, drop_axis=1, dtype=dtype, meta=meta, token=token
            )
        return X.map_blocks(
            checked_block, func, *args, chunks=chunks, dtype=dtype, meta=meta, token=token
        )
