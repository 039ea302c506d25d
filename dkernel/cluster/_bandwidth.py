"""Label-free kernel width selection for kernel k-means."""

from __future__ import annotations

import numbers

import numpy as np
from sklearn.metrics import silhouette_score
from sklearn.utils import check_random_state

from .._validation import DKernelError, check_finite_2d, check_scalar
from ..data import as_array_input
from ..kernels import estimate_gamma, kernel_info, pairwise_kernels, sample_dense, width_kernels
from ._common import _PrecomputedOracle
from ._full import _best_lloyd, _DenseProduct

#: Default candidates, as multiples of the median-heuristic gamma.
DEFAULT_FACTORS = (0.25, 0.5, 1.0, 2.0, 4.0)


def select_gamma(
    X,
    n_clusters,
    *,
    kernel="rbf",
    candidates=DEFAULT_FACTORS,
    sample_size=2000,
    n_init=3,
    max_iter=50,
    random_state=None,
    return_scores=False,
):
    """Pick an RBF/Laplacian width without labels, by feature-space silhouette.

    On a seeded subsample, for each candidate ``gamma = factor * gamma_median``
    (:func:`dkernel.kernels.estimate_gamma`), run full kernel k-means (best of
    ``n_init`` k-means++ seedings) on the in-memory kernel of the sample and score the
    clustering by its silhouette computed with the feature-space distances
    ``||phi(x) - phi(y)|| = sqrt(k(x, x) + k(y, y) - 2 k(x, y))`` of that same kernel.
    The largest silhouette wins (ties: the candidate closest to the median heuristic).

    The silhouette is used rather than the kernel k-means objective because the objective
    is not comparable across widths: it tends to 1 - k/n per point as gamma grows, for
    any clustering.

    Parameters
    ----------
    X : ndarray, scipy.sparse matrix, dask array or zarr store path of shape (n, d)
        Sparse input: only the sampled rows are made dense.
    n_clusters : int
    kernel : str, default="rbf"
        A kernel whose gamma is a width (``rbf``, ``laplacian``, ...: a ``distance`` in
        its row of the kernel table).
    candidates : sequence of float, default=(0.25, 0.5, 1, 2, 4)
        Multiples of the median-heuristic gamma.
    sample_size : int, default=2000
    n_init, max_iter : int
        Seedings and Lloyd iterations per candidate.
    random_state : int, RandomState or None
    return_scores : bool, default=False
        Also return ``{gamma: silhouette}``.

    Returns
    -------
    gamma : float
    scores : dict, only if ``return_scores``

    Notes
    -----
    O(c (m^2 d + n_init * max_iter * m^2 k)) for c candidates and m = sample_size rows,
    whatever n is; memory O(m^2).

    References
    ----------
    P. J. Rousseeuw, "Silhouettes: a graphical aid to the interpretation and validation of
    cluster analysis", J. Comput. Appl. Math. 20, 1987.

    Examples
    --------
    >>> from dkernel.cluster import select_gamma
    >>> from dkernel.data import make_rings
    >>> X, _ = make_rings(400, n_rings=2, noise=0.05, random_state=0)
    >>> g = select_gamma(X, 2, sample_size=200, random_state=0)
    >>> g > 0
    True
    """
    if kernel_info(kernel).distance is None:
        raise DKernelError(f"select_gamma supports {width_kernels()}, got {kernel!r}")
    check_scalar(n_clusters, "n_clusters", kind=numbers.Integral, low=2)
    check_scalar(sample_size, "sample_size", kind=numbers.Integral, low=2)
    check_scalar(n_init, "n_init", kind=numbers.Integral, low=1)
    check_scalar(max_iter, "max_iter", kind=numbers.Integral, low=1)
    factors = np.asarray(list(candidates), dtype=np.float64)
    if factors.size == 0 or not np.all(np.isfinite(factors)) or (factors <= 0).any():
        raise DKernelError("candidates must be a non-empty list of positive numbers")
    rng = check_random_state(random_state)
    X = as_array_input(X)
    n = int(X.shape[0])
    m = min(n, sample_size)
    if n_clusters >= m:
        raise DKernelError(f"n_clusters={n_clusters} must be < the {m} sampled rows")
    S = check_finite_2d(sample_dense(X, m, int(rng.randint(2**31 - 1))), name="X")
    S = S.astype(np.float64)
    g0 = estimate_gamma(S, kernel=kernel, random_state=int(rng.randint(2**31 - 1)))
    scores = {}
    for f in factors:
        g = float(f * g0)
        K = pairwise_kernels(S, kernel=kernel, gamma=g)
        labels = _dense_kernel_kmeans(K, n_clusters, rng, n_init, max_iter)
        scores[g] = _feature_silhouette(K, labels)
    best = max(scores, key=lambda g: (scores[g], -abs(np.log(g / g0))))
    return (best, scores) if return_scores else best


def _dense_kernel_kmeans(K, k, rng, n_init, max_iter):
    """Kernel k-means on an in-memory kernel matrix: the estimators' own seeding and Lloyd
    loop (:func:`~dkernel.cluster._full._best_lloyd`), best of ``n_init`` runs."""
    m = K.shape[0]
    diag = np.diag(K).astype(np.float64)
    ones = np.ones(m)
    best = _best_lloyd(
        _PrecomputedOracle(K),
        _DenseProduct(K),
        np.arange(m),
        ones,
        diag,
        ones,
        n_clusters=k,
        init="k-means++",
        n_init=n_init,
        rng=rng,
        max_iter=max_iter,
        tol=0.0,
    )
    return best["labels"]


def _feature_silhouette(K, labels):
    if np.unique(labels).size < 2:
        return -1.0
    d = np.diag(K)
    D = np.sqrt(np.maximum(d[:, None] + d[None, :] - 2.0 * K, 0.0))
    np.fill_diagonal(D, 0.0)
    return float(silhouette_score(D, labels, metric="precomputed"))
