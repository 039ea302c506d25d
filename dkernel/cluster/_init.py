"""Initial centers in the feature space of a kernel: the one seeding loop of the package."""

from __future__ import annotations

import numpy as np
from sklearn.utils import check_random_state

from .._validation import DKernelError, check_finite_2d, check_sample_weight, check_scalar
from ..kernels import resolve_kernel
from ._blocks import NumericOracle


def kernel_kmeans_plusplus(
    X,
    n_clusters,
    *,
    kernel="rbf",
    gamma=None,
    degree=3,
    coef0=1.0,
    kernel_params=None,
    sample_weight=None,
    n_local_trials=None,
    random_state=None,
):
    """Choose initial centers by k-means++ in the feature space of a kernel.

    The squared feature-space distance needs kernel values only,
    ``||phi(x) - phi(c)||^2 = k(x, x) - 2 k(x, c) + k(c, c)``, so the greedy k-means++ of
    Arthur & Vassilvitskii runs unchanged: each new center is the best of
    ``n_local_trials`` candidates drawn with probability proportional to
    ``w(x) D(x)^2``. Every center is a single data point, i.e. a (trivial) convex
    combination of points, as the mini-batch analysis requires.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
    n_clusters : int
    kernel, gamma, degree, coef0, kernel_params
        As :func:`dkernel.kernels.pairwise_kernels` (``gamma=None``: ``1 / n_features``).
    sample_weight : array-like of shape (n_samples,), default=None
    n_local_trials : int, default=None
        Candidates per step; ``None`` means ``2 + int(log(n_clusters))`` (scikit-learn).
    random_state : int, RandomState or None

    Returns
    -------
    centers : ndarray of shape (n_clusters, n_features)
    indices : ndarray of shape (n_clusters,)
        Rows of X chosen as centers.

    Notes
    -----
    O(n k t) kernel evaluations for t local trials, O(n t) memory.

    References
    ----------
    D. Arthur and S. Vassilvitskii, "k-means++: the advantages of careful seeding", SODA 2007.
    B. Jourdan and G. Schwartzman, "Mini-batch kernel k-means", arXiv:2410.05902, 2024.

    Examples
    --------
    >>> import numpy as np
    >>> from dkernel.cluster import kernel_kmeans_plusplus
    >>> X = np.array([[0.0, 0.0], [0.1, 0.0], [5.0, 5.0], [5.1, 5.0]])
    >>> centers, idx = kernel_kmeans_plusplus(X, 2, gamma=0.5, random_state=0)
    >>> sorted(set((idx // 2).tolist()))
    [0, 1]
    """
    X = check_finite_2d(X, name="X")
    n = X.shape[0]
    check_scalar(n_clusters, "n_clusters", kind=(int, np.integer), low=1, high=n)
    if n_local_trials is not None:
        check_scalar(n_local_trials, "n_local_trials", kind=(int, np.integer), low=1)
    spec = resolve_kernel(kernel, gamma, degree, coef0, kernel_params, n_features=X.shape[1])
    if spec.kernel == "precomputed":
        raise DKernelError("kernel_kmeans_plusplus needs a kernel function, not 'precomputed'")
    w = check_sample_weight(sample_weight, n)
    rng = check_random_state(random_state)
    oracle = NumericOracle(spec)
    idx, _ = kmeans_plusplus_oracle(
        oracle, X, oracle.diag(X), w, int(n_clusters), rng, n_local_trials
    )
    return X[idx].copy(), idx


def _init_centers(oracle, P, w, n_clusters, rng, *, init="k-means++", n_init=1, diag=None):
    """Indices into the points ``P`` of the initial centers: the package's one seeding loop.

    ``"k-means++"``: the best (lowest potential) of ``n_init`` seedings by
    :func:`kmeans_plusplus_oracle`. ``"random"``: distinct points drawn among those of
    positive weight (a zero-weight point is taken only when fewer than ``n_clusters``
    points weigh anything). All-zero weights count as equal weights. ``P`` are rows (the
    numeric kernels) or row indices (graph and precomputed kernels).
    """
    w = np.asarray(w, dtype=np.float64)
    if not (w > 0).any():
        w = np.ones_like(w)
    if init == "random":
        pos = np.flatnonzero(w > 0)
        if pos.size >= n_clusters:
            return np.sort(rng.choice(pos, n_clusters, replace=False))
        rest = rng.choice(np.flatnonzero(w <= 0), n_clusters - pos.size, replace=False)
        return np.sort(np.concatenate([pos, rest]))
    if diag is None:
        diag = oracle.diag(P)
    best, best_pot = None, np.inf
    for _ in range(n_init):
        chosen, pot = kmeans_plusplus_oracle(oracle, P, diag, w, n_clusters, rng)
        if best is None or pot < best_pot:
            best, best_pot = chosen, pot
    return best


def kmeans_plusplus_oracle(oracle, P, diag, w, n_clusters, rng, n_local_trials=None):
    """Trusting core: indices into the points ``P`` and the final potential."""
    n = len(P)
    if n_local_trials is None:
        n_local_trials = 2 + int(np.log(n_clusters))
    p = w / w.sum()
    first = int(rng.choice(n, p=p))
    chosen = [first]
    Kc = oracle.kernel(P, P[[first]])[:, 0]
    closest = np.maximum(diag - 2.0 * Kc + diag[first], 0.0)
    pot = float(np.dot(w, closest))
    for _ in range(1, n_clusters):
        if pot <= 0.0:  # every point sits on a center: take any unused row
            rest = np.setdiff1d(np.arange(n), chosen)
            cand = int(rng.choice(rest)) if rest.size else int(rng.randint(n))
            chosen.append(cand)
            continue
        cum = np.cumsum(w * closest)
        r = rng.uniform(size=n_local_trials) * cum[-1]
        cand = np.minimum(np.searchsorted(cum, r), n - 1)
        Kt = oracle.kernel(P, P[cand])
        dist = np.maximum(diag[:, None] - 2.0 * Kt + diag[cand][None, :], 0.0)
        new = np.minimum(closest[:, None], dist)
        pots = w @ new
        best = int(np.argmin(pots))
        chosen.append(int(cand[best]))
        closest = new[:, best]
        pot = float(pots[best])
    return np.asarray(chosen, dtype=np.int64), pot
