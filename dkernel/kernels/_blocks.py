"""Lazy kernel matrices: one partition-level task per block, nothing n x n held."""

from __future__ import annotations

import numpy as np

from .._validation import DKernelError, report_nonfinite
from ._pairwise import KernelSpec, pairwise_from_spec, resolve_kernel


def _kernel_block(Xb, Yb, x0, y0, spec: KernelSpec, y_name: str = "Y"):
    """Block (i, j): check both row blocks (naming global rows: x0, y0 are the blocks'
    first rows, as 1-element arrays) and compute with the trusting core."""
    Xb = np.asarray(Xb)
    Yb = np.asarray(Yb)
    x0 = int(np.asarray(x0).ravel()[0])
    y0 = int(np.asarray(y0).ravel()[0])
    report_nonfinite(Xb, name="X", row_offset=x0)
    dt = np.result_type(Xb.dtype, Yb.dtype, np.float32)
    if y_name == "X" and x0 == y0 and Xb.shape == Yb.shape:
        # a diagonal block of K(X, X): the symmetric path (exactly symmetric, unit RBF diagonal)
        return pairwise_from_spec(Xb.astype(dt, copy=False), None, spec)
    report_nonfinite(Yb, name=y_name, row_offset=y0)
    return pairwise_from_spec(Xb.astype(dt, copy=False), Yb.astype(dt, copy=False), spec)


def kernel_matrix(
    X, Y=None, *, kernel="rbf", gamma=None, degree=3, coef0=1.0, kernel_params=None, chunks=None
):
    """The kernel matrix as a lazy dask array: block (i, j) is one task on row chunks i, j.

    Parameters
    ----------
    X : dask array or ndarray of shape (m, d)
    Y : dask array or ndarray of shape (n, d), default=None (Y = X)
    kernel, gamma, degree, coef0, kernel_params
        As :func:`pairwise_kernels`; ``"precomputed"`` is not meaningful here.
    chunks : int, optional
        Row chunk size for NumPy input (dask input keeps its row chunks).

    Returns
    -------
    K : dask.array.Array of shape (m, n), blocks ``(X.chunks[0], Y.chunks[0])``
        Nothing is computed until the caller asks; computing a slab of rows holds only
        that slab.

    Examples
    --------
    >>> import numpy as np
    >>> from dkernel.kernels import kernel_matrix, pairwise_kernels
    >>> X = np.random.default_rng(0).normal(size=(100, 3))
    >>> K = kernel_matrix(X, chunks=32, gamma=0.5)
    >>> K.numblocks
    (4, 4)
    >>> bool(np.allclose(K.compute(), pairwise_kernels(X, gamma=0.5)))
    True
    """
    import dask.array as da

    from ..data import as_array_input

    X = as_array_input(X)
    y_name = "X" if Y is None else "Y"
    Y = X if Y is None else as_array_input(Y)
    if len(X.shape) != 2 or len(Y.shape) != 2:
        raise DKernelError(f"X and Y must be 2-D, got shapes {X.shape} and {Y.shape}")
    if X.shape[1] != Y.shape[1]:
        raise DKernelError(
            f"X has {X.shape[1]} features but Y has {Y.shape[1]}: the widths must match"
        )
    if 0 in X.shape or 0 in Y.shape:
        raise DKernelError("X and Y must be non-empty")
    spec = resolve_kernel(kernel, gamma, degree, coef0, kernel_params, n_features=X.shape[1])
    if spec.kernel == "precomputed":
        raise DKernelError("kernel_matrix needs a kernel function, not 'precomputed'")
    rows = chunks or "auto"
    X = X if isinstance(X, da.Array) else da.from_array(np.asarray(X), chunks=(rows, -1))
    Y = Y if isinstance(Y, da.Array) else da.from_array(np.asarray(Y), chunks=(rows, -1))
    X = X.rechunk({1: -1})
    Y = Y.rechunk({1: -1})
    dt = np.result_type(X.dtype, Y.dtype, np.float32)
    # align_arrays=False: the row-start arrays have one chunk per row chunk of X / Y
    return da.blockwise(
        _kernel_block,
        "ij",
        X,
        "ik",
        Y,
        "jk",
        _row_starts(X),
        "i",
        _row_starts(Y),
        "j",
        concatenate=True,
        dtype=dt,
        spec=spec,
        y_name=y_name,
        align_arrays=False,
        meta=np.empty((0, 0), dtype=dt),
    )


def _row_starts(X):
    """First row of each row chunk, as a dask array with one 1-element chunk per chunk."""
    import dask.array as da

    starts = np.cumsum((0,) + X.chunks[0][:-1]).astype(np.int64)
    return da.from_array(starts, chunks=1)
