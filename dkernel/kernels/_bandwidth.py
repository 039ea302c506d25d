"""Bandwidth heuristics from a bounded random sample."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.spatial.distance import pdist

from .._validation import DKernelError, check_finite_2d, check_scalar
from ._table import kernel_info, width_kernels


def estimate_gamma(X, *, method="median", kernel="rbf", sample_size=1000, random_state=None):
    """Kernel width from the pairwise distances of a random sample.

    ``gamma = 1 / median(||x - x'||^2)`` (``method="median"``) or ``1 / mean(...)``
    over distinct pairs of at most ``sample_size`` rows drawn with the data layer's seeded
    sampler; the distance is the kernel's own (:class:`~dkernel.kernels.KernelInfo`
    ``distance``: the L1 distance for ``kernel="laplacian"``). Costs
    O(sample_size^2 d) whatever n is.

    Parameters
    ----------
    X : ndarray, scipy.sparse matrix, dask array, zarr store path or Dataset
        Sparse input: only the sampled rows are made dense.
    method : {"median", "mean"}
    kernel : str, default="rbf"
        A kernel whose gamma is a width (``rbf``, ``laplacian``, ...: a ``distance`` in
        its row of the kernel table).
    sample_size : int, default=1000
    random_state : int, RandomState or None

    Returns
    -------
    gamma : float

    Examples
    --------
    >>> import numpy as np
    >>> from dkernel.kernels import estimate_gamma
    >>> X = np.random.default_rng(0).normal(size=(500, 2))
    >>> 0.1 < estimate_gamma(X, random_state=0) < 1.0
    True
    """
    from ..data import as_array_input

    if method not in ("median", "mean"):
        raise DKernelError(f"method must be 'median' or 'mean', got {method!r}")
    if kernel_info(kernel).distance is None:
        raise DKernelError(f"estimate_gamma supports {width_kernels()}, got {kernel!r}")
    check_scalar(sample_size, "sample_size", kind=(int, np.integer), low=2)
    X = as_array_input(X)
    n = int(X.shape[0])
    if n < 2:
        raise DKernelError("estimate_gamma needs at least 2 rows")
    size = min(sample_size, n)
    S = sample_dense(X, size, random_state)
    return gamma_from_rows(check_finite_2d(S, name="X"), kernel=kernel, method=method)


def sample_dense(X, size: int, random_state=None) -> np.ndarray:
    """:func:`~dkernel.data.sample_rows` without replacement, for scipy.sparse input too
    (the same rows, made dense; the matrix itself stays sparse)."""
    from ..data import draw_indices, sample_rows  # dkernel.data imports this package

    if not sp.issparse(X):
        return sample_rows(X, size, random_state, replace=False)
    if X.ndim != 2:
        raise DKernelError(f"X must be 2-D, got a sparse array of shape {X.shape}")
    idx = draw_indices(int(X.shape[0]), size, random_state, replace=False)
    return np.asarray(sp.csr_matrix(X)[idx].toarray())


def gamma_from_rows(S: np.ndarray, *, kernel: str = "rbf", method: str = "median") -> float:
    """Trusting core of :func:`estimate_gamma` on rows already sampled (and checked).

    Callers that fetch a row sample for another purpose (an estimator's initialisation)
    pass it here, so the width costs no second read of the data.
    """
    metric = kernel_info(kernel).distance
    assert metric is not None, kernel
    D = pdist(np.asarray(S, dtype=np.float64), metric)
    if np.isinf(D).any():
        raise DKernelError(
            f"X is finite but too large: the {'' if metric == 'cityblock' else 'squared '}"
            f"distances of its rows overflow float64 (values up to {np.abs(S).max():.3g}); "
            "rescale X, e.g. divide it by a constant"
        )
    D = D[D > 0]
    if D.size == 0:
        spread = float(np.ptp(np.asarray(S, dtype=np.float64), axis=0).max())
        if spread > 0:  # the rows differ, but their distances are below the float range
            raise DKernelError(
                f"X's sampled rows differ by at most {spread:.3g}: their "
                f"{'' if kernel == 'laplacian' else 'squared '}distances underflow to 0 in "
                "float64; rescale X, e.g. multiply it by a constant"
            )
        raise DKernelError("all sampled rows are identical: no bandwidth can be estimated")
    scale = np.median(D) if method == "median" else D.mean()
    return float(1.0 / scale)
