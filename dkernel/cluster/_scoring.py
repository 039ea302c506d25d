"""A kernel k-means score that is comparable across kernel widths (for model selection)."""

from __future__ import annotations

import numbers

import numpy as np
from sklearn.utils.validation import check_is_fitted

from .._validation import DKernelError, check_scalar
from ..data import as_array_input, sample_rows


def kernel_alignment_score(estimator, X, y=None, *, sample_size=1000, random_state=0):
    """Centred alignment between a fitted model's kernel and its clustering of X.

    A scorer for :class:`~sklearn.model_selection.GridSearchCV` (``scoring=`` takes it
    as is): on a seeded sample S of at most ``sample_size`` rows of X, with K the
    model's kernel on S (its fitted ``gamma_``) and Y the one-hot matrix of
    ``estimator.predict(S)``,

    ``A = <K_c, L_c>_F / (||K_c||_F ||L_c||_F)``, ``K_c = H K H``, ``L_c = H Y Y^T H``,
    ``H = I - 11^T / m``,

    in [-1, 1], higher is better. It is scale-free, so it compares widths: a kernel
    that is block-diagonal along the clusters scores near 1, while a too-narrow kernel
    (K near the identity) and a too-wide one (K near its linear limit, whose rank is at
    most ``n_features``) both score lower. The estimators' own ``score`` (the negative
    objective) is not comparable across widths: it tends to 0 as gamma does, so a grid
    search over gamma with it always picks the smallest gamma.

    Parameters
    ----------
    estimator : fitted MiniBatchKernelKMeans or KernelKMeans (numeric kernel)
    X : ndarray, dask array, zarr array or store path of shape (n, n_features)
    y : ignored
    sample_size : int, default=1000
        Rows scored (O(m^2) kernel values and memory).
    random_state : int, RandomState or None, default=0
        Seeds the row sample (fixed by default, so every candidate sees the same rows).

    Returns
    -------
    float
        The alignment; 0.0 when the model puts every sampled row in one cluster.

    Notes
    -----
    O(m^2 d + m^2 k) time and O(m^2) memory for m = min(n, sample_size) rows, whatever
    n is. Unsupervised: no labels are used.

    References
    ----------
    N. Cristianini, J. Shawe-Taylor, A. Elisseeff and J. Kandola, "On kernel-target
    alignment", NIPS 2001. C. Cortes, M. Mohri and A. Rostamizadeh, "Algorithms for
    learning kernels based on centered alignment", JMLR 13, 2012.

    Examples
    --------
    A grid search over gamma for kernel k-means, scored without labels:

    >>> from sklearn.datasets import make_blobs
    >>> from sklearn.model_selection import GridSearchCV
    >>> from dkernel.cluster import MiniBatchKernelKMeans, kernel_alignment_score
    >>> X, _ = make_blobs(600, centers=4, random_state=0)
    >>> km = MiniBatchKernelKMeans(4, batch_size=128, max_iter=30, random_state=0)
    >>> search = GridSearchCV(km, {"gamma": [0.001, 0.01, 0.1, 1.0, 10.0]},
    ...                       scoring=kernel_alignment_score, cv=3).fit(X)
    >>> search.best_params_
    {'gamma': 0.1}
    """
    check_is_fitted(estimator, "center_coef_")
    if getattr(estimator, "_spec", None) is None:
        raise DKernelError("kernel_alignment_score needs a numeric kernel (not 'knn'/'heat')")
    check_scalar(sample_size, "sample_size", kind=numbers.Integral, low=2)
    X = as_array_input(X)
    m = min(int(X.shape[0]), sample_size)
    S = sample_rows(X, m, random_state, replace=False)
    S = np.ascontiguousarray(S, dtype=estimator.center_support_.dtype)
    labels = np.asarray(estimator.predict(S))
    K = np.asarray(estimator._kernel(S, None, estimator._spec), dtype=np.float64)
    return _centred_alignment(K, labels, estimator.center_coef_.shape[0])


def _centred_alignment(K: np.ndarray, labels: np.ndarray, k: int) -> float:
    """``<HKH, H Y Y^T H> / (||HKH|| ||H Y Y^T H||)`` for the one-hot Y of ``labels``."""
    Y = np.zeros((len(labels), k))
    Y[np.arange(len(labels)), labels] = 1.0
    Yc = Y - Y.mean(axis=0)
    Kc = K - K.mean(axis=0) - K.mean(axis=1)[:, None] + K.mean()
    den_l = np.linalg.norm(Yc.T @ Yc)  # ||Yc Yc^T||_F
    den_k = np.linalg.norm(Kc)
    if den_l == 0.0 or den_k == 0.0:
        return 0.0
    return float(np.sum((Kc @ Yc) * Yc) / (den_k * den_l))
