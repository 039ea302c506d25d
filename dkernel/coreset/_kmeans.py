"""Coresets for kernel k-means: sensitivity sampling from a kernel k-means++ clustering."""

from __future__ import annotations

import dataclasses
import functools
import logging
import numbers
from typing import NamedTuple

import dask
import numpy as np
from dask.base import tokenize
from sklearn.utils import check_random_state

from .._base import as_dask_or_numpy, check_dask_2d
from .._validation import (
    DKernelError,
    check_finite_2d,
    check_sample_weight,
    check_scalar,
    is_dask_array,
    report_nonfinite,
)
from ..cluster import NumericOracle, kmeans_plusplus_oracle
from ..kernels import resolve_kernel
from ..runtime import TreeNode, timer, tree_reduce
from ._coreset import BETA, Coreset, _check_m, _exact, merge
from ._distributed import (
    _LEAF,
    _NODE,
    _leaves,
    _node_rng,
    _node_rows,
    _step,
    _tree_shape,
    default_leaf_size,
)

logger = logging.getLogger(__name__)


def kernel_kmeans_sensitivity(X, centers_idx, u, oracle):
    """Sensitivity upper bounds for the kernel k-means cost from seeds ``X[centers_idx]``.

    gamma(p) = u(p) D(p)^2 / cost + u(p) / U(cluster of p), with D the feature-space
    distance to the nearest seed and cost = sum u D^2 (the bound of Feldman & Langberg for
    an approximate solution, up to its constant; t = 1 + number of clusters).
    Returns ``(gamma, labels)``.
    """
    gamma, labels, _ = _sensitivity_parts(X, centers_idx, u, oracle)
    return gamma, labels


def _sensitivity_parts(X, centers_idx, u, oracle, diag=None):
    """``kernel_kmeans_sensitivity`` and its cost part ``u D^2 / cost`` apart (``diag``:
    k(x, x) of the rows, when the caller has it)."""
    if diag is None:
        diag = oracle.diag(X)
    K = oracle.kernel(X, X[centers_idx])
    d2 = np.maximum(diag[:, None] - 2.0 * K + diag[centers_idx][None, :], 0.0)
    labels = np.argmin(d2, axis=1)
    dmin = d2[np.arange(X.shape[0]), labels]
    cluster_u = np.bincount(labels, weights=u, minlength=len(centers_idx))
    cost = float(u @ dmin)
    gamma = u / cluster_u[labels]
    share = u * dmin / cost if cost > 0.0 else np.zeros_like(gamma)
    return gamma + share, labels, share


def kernel_kmeans_coreset(
    X,
    m,
    n_clusters,
    *,
    kernel="rbf",
    gamma=None,
    degree=3,
    coef0=1.0,
    kernel_params=None,
    sample_weight=None,
    beta=BETA,
    leaf_size=None,
    split_every=2,
    random_state=None,
):
    """Sensitivity-sampling coreset for the kernel k-means cost.

    The kernel k-means++ seeding of ``n_clusters`` centres (an O(log k) approximation in
    expectation) gives every point a sensitivity bound: its share of the seeding's cost
    plus one over its cluster's weight. The coreset is ``m`` distinct rows drawn from a
    mixture of three parts: weight-proportional (share ``beta``), the cost shares and the
    clusters (each cluster the same mass, spread by weight), ``(1 - beta) / 2`` each.
    Sampling in proportion to the bound itself would give the cost part only
    ``1 / (1 + k)`` of the draws: the clusters' part alone is then close to a uniform
    sample on balanced data and misses the far points that carry the cost of other
    centres. The m rows are drawn without replacement by systematic sampling along the
    rows listed cluster by cluster and, within a cluster, by distance to its seed: each
    row is drawn with probability ``pi = min(1, c q)`` for its share q of the mixture
    (``sum pi = m``), and every cluster and distance band gets its share of the m rows up
    to one (a stratified sample, where i.i.d. draws leave those counts to chance). The
    weights ``u / pi`` (Horvitz-Thompson) count replicated rows, so
    ``KernelKMeans`` and ``MiniBatchKernelKMeans`` fitted with ``sample_weight=weight``
    (:meth:`Coreset.fit`) minimise an unbiased estimate of the full-data cost.

    On a dask array or a store (path, URL or :class:`dkernel.data.Dataset`) the coreset is
    built by merge-and-reduce on the workers: each leaf of ``leaf_size`` rows (its task
    reads its chunks) gets its own coreset, and each node of the tree (fan-in
    ``split_every``, :func:`dkernel.runtime.tree_reduce`) resamples the union of its
    children's weighted rows the same way, with their weights as ``sample_weight``; inner
    nodes keep ``3 m L`` rows (L levels), the root ``m``. Coresets compose (a coreset of
    coresets is a coreset of the union, its error the sum of the levels'), so the result
    stands for all rows while no task holds more than a leaf. Leaves and seeds are a
    function of the rows, not of the storage chunks or the workers: the same
    ``random_state`` gives the same coreset for any chunking and cluster.

    Parameters
    ----------
    X : array-like, dask array, or store (path, URL or Dataset), shape (n_samples, n_features)
    m : int
        Rows of the coreset (all rows of positive weight when there are no more).
    n_clusters : int
        Clusters of the seeding (the k the coreset is built for).
    kernel, gamma, degree, coef0, kernel_params
        As :func:`dkernel.kernels.pairwise_kernels` (``gamma=None``: ``1 / n_features``);
        pass the estimator's kernel.
    sample_weight : array-like of shape (n_samples,), optional
    beta : float in [0, 1], default=0.3
        Share of weight-proportional sampling in the mixture.
    leaf_size : int, default=None
        Rows per leaf of the tree (dask and store input); ``None``: the power of two at
        or above ``max(16 m, 65536)``.
    split_every : int, default=2
        Fan-in of the tree.
    random_state : int, RandomState or None

    Returns
    -------
    Coreset
        ``y`` is None; ``info["method"]`` is ``"kernel-kmeans"``, or ``"kernel-kmeans
        merge-reduce"`` for dask or store input.

    Notes
    -----
    O(n k t) kernel evaluations for the seeding (t local trials) plus O(n k) for the
    distances; O(n log n) to list the rows for the systematic draw.

    References
    ----------
    D. Feldman and M. Langberg, "A unified framework for approximating and clustering
    data", STOC 2011; O. Bachem, M. Lucic and A. Krause, "Practical coreset constructions
    for machine learning", arXiv:1703.06476, 2017; C.-E. Särndal, B. Swensson and
    J. Wretman, "Model Assisted Survey Sampling", Springer, 1992 (systematic pi-ps
    sampling and the Horvitz-Thompson estimator).

    Examples
    --------
    >>> import numpy as np
    >>> from dkernel.coreset import kernel_kmeans_coreset
    >>> X = np.random.default_rng(0).normal(size=(1000, 2))
    >>> S = kernel_kmeans_coreset(X, 100, 5, gamma=0.5, random_state=0)
    >>> len(S) <= 100, S.source_size
    (True, 1000)
    """
    X = as_dask_or_numpy(X)  # a store or zarr array: a row-chunked dask array
    if is_dask_array(X):
        return _merge_reduce(
            X,
            m,
            n_clusters,
            kernel=(kernel, gamma, degree, coef0, kernel_params),
            sample_weight=sample_weight,
            beta=beta,
            leaf_size=leaf_size,
            split_every=split_every,
            random_state=random_state,
        )
    X = check_finite_2d(X)
    n = X.shape[0]
    m = _check_m(m, n)
    check_scalar(n_clusters, "n_clusters", kind=numbers.Integral, low=1, high=n)
    beta = float(check_scalar(beta, "beta", kind=numbers.Real, low=0.0, high=1.0))
    spec = _spec(kernel, gamma, degree, coef0, kernel_params, X.shape[1])
    u = check_sample_weight(sample_weight, n)
    with timer("kernel k-means coreset", logger):
        return _sample(X, u, m, int(n_clusters), spec, beta, check_random_state(random_state))


def _spec(kernel, gamma, degree, coef0, kernel_params, d):
    spec = resolve_kernel(kernel, gamma, degree, coef0, kernel_params, n_features=d)
    if spec.kernel == "precomputed":
        raise DKernelError("kernel_kmeans_coreset needs a kernel function, not 'precomputed'")
    return spec


def _sample(X, u, m, k, spec, beta, rng, source_size=None) -> Coreset:
    """The coreset of rows ``X`` with weights ``u`` (trusted input): k-means++ seeds,
    sensitivities, m rows drawn from the mixture, stratified by cluster and distance."""
    oracle = NumericOracle(spec)
    diag = oracle.diag(X)
    seeds, _ = kmeans_plusplus_oracle(oracle, X, diag, u, k, rng)
    gam, labels, share = _sensitivity_parts(X, seeds, u, oracle, diag)
    q = _mixture(gam - share, share, u, float(u.sum()), beta)
    # the rows listed cluster by cluster, each from its seed outwards (share / u ~ D^2)
    dist = np.divide(share, u, out=np.zeros_like(share), where=u > 0)
    order = np.lexsort((dist, labels))
    gen = np.random.default_rng(rng.randint(0, 2**31 - 1))
    idx, weight = draw_systematic(q, u, m, order, gen)
    return Coreset(
        X=X[idx],
        y=None,
        weight=weight,
        sensitivity=gam[idx],
        total_sensitivity=float(gam.sum()),
        source_size=X.shape[0] if source_size is None else source_size,
        classes=(),
        info={"method": "kernel-kmeans", "n_clusters": k, "beta": beta},
    )


def inclusion(q, m):
    """Inclusion probabilities ``pi = min(1, c q)`` with ``sum pi = m``, for ``q`` with at
    least m positive entries: the rows that reach one are taken for sure and the others
    share the rest of m in proportion to q."""
    pi = np.zeros_like(q)
    free = q > 0
    while True:
        left = m - np.count_nonzero(pi == 1.0)
        pi[free] = left * q[free] / q[free].sum()
        over = free & (pi >= 1.0)
        if not over.any():
            return pi
        pi[over] = 1.0
        free &= ~over


def draw_systematic(q, u, m, order, rng):
    """m distinct rows, row i with probability ``pi_i = min(1, c q_i)`` (:func:`inclusion`),
    by systematic sampling along ``order``; returns (sorted indices, weights u / pi).

    The rows are laid end to end in ``order``, row i an interval of length pi_i (m in
    all), and the sample is the rows under the m points ``r, r + 1, ..., r + m - 1`` for
    one uniform r in [0, 1): each row is drawn with probability exactly pi_i whatever the
    order, so the Horvitz-Thompson weights make every cost estimate unbiased. Listing the
    rows by cluster and by distance to their seed makes the sample a stratified one: each
    cluster, and each distance band within it, gets its share of the m rows up to one,
    where i.i.d. draws leave the counts to chance.
    """
    pos = np.flatnonzero(q > 0)
    if len(pos) <= m:  # every row that can be drawn, each standing for itself
        return pos, u[pos].astype(np.float64)
    pi = inclusion(q, m)
    cum = np.cumsum(pi[order])
    points = (rng.random() + np.arange(m)) * (cum[-1] / m)  # cum[-1] is m up to rounding
    hit = np.minimum(np.searchsorted(cum, points, side="right"), len(q) - 1)
    idx = np.unique(order[hit])
    return idx, u[idx] / pi[idx]


def _mixture(cluster, share, u, U, beta):
    """Sampling distribution: ``beta`` weight-proportional, the rest split equally between
    the clusters' part and the cost part (a part that is all zero gives its mass to the
    other)."""
    parts = [p / p.sum() for p in (cluster, share) if p.sum() > 0.0]
    return beta * u / U + (1.0 - beta) * sum(parts) / len(parts)


# ------------------------------------------------------------------------- merge-reduce
def _merge_reduce(X, m, k, *, kernel, sample_weight, beta, leaf_size, split_every, random_state):
    """The tree build of :func:`kernel_kmeans_coreset` for dask and store input."""
    check_dask_2d(X)
    n = int(X.shape[0])
    m = _check_m(m, n)
    check_scalar(k, "n_clusters", kind=numbers.Integral, low=1, high=m)
    beta = float(check_scalar(beta, "beta", kind=numbers.Real, low=0.0, high=1.0))
    check_scalar(split_every, "split_every", kind=numbers.Integral, low=2)
    leaf = default_leaf_size(n, m) if leaf_size is None else leaf_size
    check_scalar(leaf, "leaf_size", kind=numbers.Integral, low=1)
    spec = _spec(*kernel, int(X.shape[1]))
    if sample_weight is not None:
        raise DKernelError("sample_weight is not supported for dask or store input")
    seed = int(check_random_state(random_state).randint(0, 2**31 - 1))
    blocks, bounds, levels, inner = _tree_shape(_leaves(X, int(leaf)), m, split_every)
    cfg = _TreeConfig(m, inner, int(k), spec, beta, seed, bounds, split_every)
    leaves = [
        _step(_kkm_leaf, "kkm-leaf")(
            b, cfg, *_node_rows(TreeNode(0, i, seed), bounds, split_every, m, inner)
        )
        for i, b in enumerate(blocks)
    ]
    with timer("kernel k-means coreset tree", logger):
        tree = tree_reduce(
            None,
            leaves,
            functools.partial(_kkm_combine, cfg=cfg),
            split_every=split_every,
            key=f"coreset-kkm-merge-{tokenize(leaves)}",
        )
        (root,) = dask.compute(tree)
    info = {
        **root.info,
        "method": "kernel-kmeans merge-reduce",
        "tree_levels": levels,
        "n_leaves": len(blocks),
        "split_every": split_every,
        "inner_draws": inner,
    }
    return dataclasses.replace(root, source_size=n, info=info)


class _TreeConfig(NamedTuple):
    """What every task of the tree needs: draws at the root and inner nodes, the
    clusters, the kernel, the mixture's beta, the seed, the leaves' row bounds and the
    fan-in."""

    m: int
    inner: int
    k: int
    spec: object
    beta: float
    seed: int
    bounds: np.ndarray
    split_every: int


def _resample(X, u, draws, cfg: _TreeConfig, start, stop, tag) -> Coreset:
    """Rows ``X`` (weights ``u``, rows ``start:stop`` of the source) resampled to
    ``draws``, seeded by their row range and the node's kind."""
    rng = np.random.RandomState(_node_rng(cfg.seed, start, stop, tag).integers(2**31 - 1))
    return _sample(X, u, draws, cfg.k, cfg.spec, cfg.beta, rng, source_size=stop - start)


def _kkm_leaf(Xb, cfg: _TreeConfig, start, stop, draws) -> Coreset:
    Xb = np.asarray(Xb)
    report_nonfinite(Xb, name="X", row_offset=start)
    if Xb.shape[0] <= draws:  # nothing to reduce: the rows themselves, unit weights
        return _exact(Xb, None, C=1.0, classes=())
    return _resample(Xb, np.ones(Xb.shape[0]), draws, cfg, start, stop, _LEAF)


def _kkm_combine(children, node: TreeNode, *, cfg: _TreeConfig) -> Coreset:
    """The union of a node's children, resampled to its draws (:func:`_node_rows`) when it
    holds more rows."""
    start, stop, draws = _node_rows(node, cfg.bounds, cfg.split_every, cfg.m, cfg.inner)
    union = functools.reduce(merge, children)
    if len(union) <= draws:
        return union
    return _resample(union.X, union.weight, draws, cfg, start, stop, _NODE)
