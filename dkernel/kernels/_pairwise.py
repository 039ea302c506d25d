"""Kernel functions on NumPy input: validation here, numba in ``_kernels.py``."""

from __future__ import annotations

from typing import Callable, NamedTuple

import numpy as np

from .._validation import DKernelError, check_finite_2d, check_scalar
from . import _kernels as _nb

#: Kernel names and their aliases (scikit-learn's vocabulary, plus "gaussian").
KERNEL_ALIASES = {
    "rbf": "rbf",
    "gaussian": "rbf",
    "laplacian": "laplacian",
    "polynomial": "polynomial",
    "poly": "polynomial",
    "linear": "linear",
    "sigmoid": "sigmoid",
    "cosine": "cosine",
    "precomputed": "precomputed",
}
#: Kernels with k(x, y) = f(||x - y||): the ones BSGD merging accepts.
RADIAL_KERNELS = frozenset({"rbf", "laplacian"})

# Rows per tile: the BLAS product of one tile and its transform stay in cache together.
_TILE_BYTES = 1 << 20


class KernelSpec(NamedTuple):
    """A validated kernel: name (or callable) and resolved parameters."""

    kernel: str | Callable
    gamma: float | None
    degree: float
    coef0: float
    params: dict

    @property
    def is_radial(self) -> bool:
        return isinstance(self.kernel, str) and self.kernel in RADIAL_KERNELS


def resolve_kernel(kernel="rbf", gamma=None, degree=3, coef0=1.0, kernel_params=None,
                   n_features: int | None = None) -> KernelSpec:
    """Validate kernel parameters; ``gamma=None`` means ``1 / n_features`` (scikit-learn)."""
    params = dict(kernel_params or {})
    if callable(kernel):
        return KernelSpec(kernel, gamma, degree, coef0, params)
    if not isinstance(kernel, str) or kernel.lower() not in KERNEL_ALIASES:
        names = ", ".join(sorted(KERNEL_ALIASES))
        raise DKernelError(f"unknown kernel {kernel!r}; choose one of {names} or a callable")
    name = KERNEL_ALIASES[kernel.lower()]
    if gamma is None and n_features is not None and name not in ("linear", "cosine", "precomputed"):
        gamma = 1.0 / n_features
    if gamma is not None:
        check_scalar(gamma, "gamma", low=0.0, low_inclusive=False)
        gamma = float(gamma)
    check_scalar(degree, "degree", low=0)
    check_scalar(coef0, "coef0")
    return KernelSpec(name, gamma, degree, float(coef0), params)


def _as_pair(X, Y, spec: KernelSpec):
    """Validate X and Y; return float arrays of one common dtype (float32 stays float32)."""
    X = check_finite_2d(X, name="X")
    if Y is None:
        return X, None
    Y = check_finite_2d(Y, name="Y")
    if spec.kernel != "precomputed" and X.shape[1] != Y.shape[1]:
        raise DKernelError(
            f"X has {X.shape[1]} features but Y has {Y.shape[1]}: the widths must match"
        )
    dt = np.result_type(X.dtype, Y.dtype)
    return X.astype(dt, copy=False), Y.astype(dt, copy=False)


def pairwise_kernels(X, Y=None, *, kernel="rbf", gamma=None, degree=3, coef0=1.0,
                     kernel_params=None, out=None) -> np.ndarray:
    """Kernel matrix ``K[i, j] = k(X[i], Y[j])`` on NumPy input.

    The BLAS product ``X @ Y.T`` is computed tile by tile straight into the output and
    turned into kernel values by a numba pass while the tile is in cache: no temporary
    of the output's size is made. float32 input gives float32 output.

    Parameters
    ----------
    X : array of shape (m, d)
    Y : array of shape (n, d), default=None
        ``None`` means ``Y = X``.
    kernel : {"rbf", "gaussian", "laplacian", "polynomial", "linear", "sigmoid", "cosine", \
"precomputed"} or callable
        RBF is ``exp(-gamma ||x - y||^2)``: the papers' ``exp(-||x - y||^2 / kappa)`` is
        ``gamma = 1 / kappa``. Laplacian is ``exp(-gamma ||x - y||_1)``; polynomial
        ``(gamma <x, y> + coef0) ** degree``; sigmoid ``tanh(gamma <x, y> + coef0)``;
        cosine ``<x, y> / (||x|| ||y||)``. ``"precomputed"`` returns X (already a kernel
        matrix). A callable is called as ``kernel(X, Y, **kernel_params)`` and must return
        the (m, n) matrix, as scikit-learn's ``SVC`` expects.
    gamma : float, default=None
        ``None`` means ``1 / n_features``.
    degree, coef0 : float
        Polynomial and sigmoid parameters.
    kernel_params : dict, default=None
        Extra keyword arguments of a callable kernel.
    out : ndarray of shape (m, n), default=None
        Where to write the result (C-contiguous, the result's dtype).

    Returns
    -------
    K : ndarray of shape (m, n)

    Examples
    --------
    >>> import numpy as np
    >>> from dkernel.kernels import pairwise_kernels
    >>> X = np.array([[0.0, 0.0], [1.0, 0.0]])
    >>> pairwise_kernels(X, kernel="rbf", gamma=1.0).round(4)
    array([[1.    , 0.3679],
           [0.3679, 1.    ]])
    """
    spec = resolve_kernel(kernel, gamma, degree, coef0, kernel_params)
    X, Y = _as_pair(X, Y, spec)
    if spec.gamma is None and isinstance(spec.kernel, str):
        spec = spec._replace(gamma=1.0 / X.shape[1])
    return _pairwise_kernels(X, Y, spec, out=out)


def _pairwise_kernels(X: np.ndarray, Y: np.ndarray | None, spec: KernelSpec,
                      out: np.ndarray | None = None) -> np.ndarray:
    """Trusting core of :func:`pairwise_kernels` (validated, same-dtype inputs)."""
    k = spec.kernel
    if callable(k):
        K = np.asarray(k(X, X if Y is None else Y, **spec.params))
        return K
    if k == "precomputed":
        return X
    symmetric = Y is None
    if symmetric:
        Y = X
    m, n = X.shape[0], Y.shape[0]
    dt = X.dtype
    if out is None:
        out = np.empty((m, n), dtype=dt)
    elif out.shape != (m, n) or out.dtype != dt or not out.flags.c_contiguous:
        raise DKernelError(f"out must be a C-contiguous {dt} array of shape {(m, n)}")
    tile = max(1, min(m, _TILE_BYTES // max(1, n * dt.itemsize)))
    if k == "laplacian":
        Xc = np.ascontiguousarray(X)
        Yc = np.ascontiguousarray(Y)
        _nb.laplacian_block(Xc, Yc, spec.gamma, out, 0, m)
        return out
    YT = Y.T
    if k == "rbf":
        xx = _nb.row_sq_norms(np.ascontiguousarray(X))
        yy = xx if symmetric else _nb.row_sq_norms(np.ascontiguousarray(Y))
    elif k == "cosine":
        xx = np.sqrt(_nb.row_sq_norms(np.ascontiguousarray(X)))
        yy = xx if symmetric else np.sqrt(_nb.row_sq_norms(np.ascontiguousarray(Y)))
    for r0 in range(0, m, tile):
        r1 = min(m, r0 + tile)
        np.matmul(X[r0:r1], YT, out=out[r0:r1])
        if k == "rbf":
            _nb.rbf_from_gram(out, xx, yy, spec.gamma, r0, r1)
        elif k == "polynomial":
            _nb.poly_from_gram(out, spec.gamma, spec.coef0, float(spec.degree), r0, r1)
        elif k == "sigmoid":
            _nb.sigmoid_from_gram(out, spec.gamma, spec.coef0, r0, r1)
        elif k == "cosine":
            _nb.cosine_from_gram(out, xx, yy, r0, r1)
    if symmetric and k == "rbf":
        np.fill_diagonal(out, 1.0)
    return out


def kernel_diag(X, *, kernel="rbf", gamma=None, degree=3, coef0=1.0, kernel_params=None):
    """The diagonal ``k(x_i, x_i)`` without forming the matrix: O(n d).

    Examples
    --------
    >>> import numpy as np
    >>> from dkernel.kernels import kernel_diag
    >>> kernel_diag(np.array([[1.0, 2.0]]), kernel="linear")
    array([5.])
    """
    spec = resolve_kernel(kernel, gamma, degree, coef0, kernel_params)
    X = check_finite_2d(X, name="X")
    if spec.gamma is None and isinstance(spec.kernel, str):
        spec = spec._replace(gamma=1.0 / X.shape[1])
    return _kernel_diag(X, spec)


def _kernel_diag(X: np.ndarray, spec: KernelSpec) -> np.ndarray:
    k = spec.kernel
    if callable(k):
        return np.array([np.asarray(k(X[i:i + 1], X[i:i + 1], **spec.params)).ravel()[0]
                         for i in range(X.shape[0])], dtype=X.dtype)
    if k == "precomputed":
        if X.shape[0] != X.shape[1]:
            raise DKernelError(f"a precomputed kernel must be square, got shape {X.shape}")
        return np.ascontiguousarray(np.diag(X))
    if k in ("rbf", "laplacian"):
        return np.ones(X.shape[0], dtype=X.dtype)
    if k == "cosine":
        return (_nb.row_sq_norms(np.ascontiguousarray(X)) > 0).astype(X.dtype)
    xx = _nb.row_sq_norms(np.ascontiguousarray(X))
    if k == "linear":
        return xx
    if k == "polynomial":
        return ((spec.gamma * xx + spec.coef0) ** spec.degree).astype(X.dtype, copy=False)
    if k == "sigmoid":
        return np.tanh(spec.gamma * xx + spec.coef0).astype(X.dtype, copy=False)
    raise AssertionError(k)

