"""The private base of every dkernel estimator.

One place for what the estimators share:

- the kernel parameters (``kernel``, ``gamma``, ``degree``, ``coef0``, ``kernel_params``)
  and their resolution into a :class:`~dkernel.kernels.KernelSpec`, ``gamma`` included;
- one validation path for X, whatever it is: NumPy (checked now), a dask array, a
  ``zarr.Array``, a store path or a :class:`~dkernel.data.Dataset` (shape and dtype checked
  now; values checked in the pass that reads them, so each chunk is read once per pass);
- blockwise passes over the rows (:meth:`_BaseKernelEstimator._row_pass`): one
  ``map_blocks`` task per row chunk on the workers for dask input, returning a lazy dask
  array; a direct call for NumPy input.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import dask.array as da
import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils.validation import validate_data

from ._validation import (
    DKernelError,
    check_dense_chunks,
    checked_block,
    is_dask_array,
    report_nonfinite,
)
from .data import Dataset, RowSource, as_array_input, sample_rows
from .kernels import KernelSpec, gamma_from_rows, pairwise_from_spec, resolve_kernel

#: gamma=None rules: 1/n_features; the median heuristic (rbf/laplacian); "scale",
#: 1 / (n_features * X.var()) for rbf (scikit-learn's SVC default; the L1 median heuristic for
#: laplacian), the best label-free rule measured (benchmarks/results/defaults.md).
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
    if not (np.issubdtype(X.dtype, np.number) or X.dtype == np.bool_) or np.issubdtype(
        X.dtype, np.complexfloating
    ):
        raise DKernelError(f"{name} must be real and numeric, got dtype {X.dtype}")
    if 0 in X.shape:
        raise DKernelError(f"{name} is empty (shape {X.shape})")


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

        ``"scale"``: rbf takes ``1 / (n_features * X.var())`` on a row sample, laplacian the
        L1 median heuristic, other kernels ``1 / n_features``. ``"median"``: the median
        heuristic (rbf/laplacian). ``"inverse_dim"``: ``1 / n_features``. The sample is
        ``sample`` (rows the caller already fetched, e.g. for its initialisation; nothing is
        read then) or 1000 rows drawn with ``rng`` (seed 0 without one: a function of the
        data alone). All rows equal: ``1 / n_features``.
        """
        spec = self._kernel_spec(None)
        if spec.gamma is not None or not isinstance(spec.kernel, str):
            return spec
        d = int(X.shape[1])
        rule = self._gamma_rule
        if rule == "scale" and spec.kernel == "laplacian":
            rule = "median"
        if rule == "inverse_dim" or spec.kernel not in ("rbf", "laplacian") or X.shape[0] < 2:
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
        """Return ``(X, is_dask)``: the one validation path for X.

        NumPy-like input is checked now (``validate_data``, then NaN/inf named by row and
        column) and converted to one of ``dtype``. Dask input, and the zarr arrays, store
        paths and Datasets that become dask arrays, are checked for shape and dtype only:
        their values are checked by :func:`checked_block` in the pass that reads them.
        ``reset=True`` records ``n_features_in_``; otherwise the width must match it.
        """
        X = as_dask_or_numpy(X)
        if is_dask_array(X):
            check_dask_2d(X)
            self._check_n_features(int(X.shape[1]), reset=reset)
            if X.chunks[1] != (X.shape[1],):
                X = X.rechunk({1: -1})
            return X, True
        if hasattr(X, "toarray") and not isinstance(X, np.ndarray):
            raise DKernelError("X: sparse input is not supported; pass a dense array")
        try:
            X = validate_data(self, X, reset=reset, dtype=list(dtype), ensure_all_finite=False)
        except DKernelError:
            raise
        except ValueError as exc:
            raise DKernelError(str(exc)) from None
        report_nonfinite(X, name="X")
        return X, False

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
        NumPy input: one call, NumPy result. Dask input: one task per row chunk, the read
        of the chunk and the value check included, a lazy dask array; nothing is pulled
        to the client. ``token`` names the pass's tasks on the dashboard (``kkmeans-labels``,
        ``svm-predict``) instead of the reading function's name.
        """
        if not is_dask:
            return func(X, *args)
        if isinstance(X, RowSource):
            # the pass reads its rows itself, one task per block (mapped over the source,
            # a pass that drops the column axis does not fuse with the read blockwise, and
            # Dask's linear fusion leaves an alias task beside each fused one)
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
