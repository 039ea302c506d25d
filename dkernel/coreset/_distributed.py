"""Coresets of dask arrays and zarr stores: a merge-and-reduce tree and a two-pass build.

Every task is deterministic (seeds come from ``SeedSequence([seed, level, index])`` of the
node, the coarse solver uses no randomness and sums are reduced in a fixed order on the
client), so a task recomputed after a lost worker gives the identical coreset.
"""

from __future__ import annotations

import logging
import numbers

import numpy as np

from .._validation import DKernelError, check_scalar, report_nonfinite
from ..runtime import _timer
from ._coreset import Coreset, _check_beta, _check_m, merge
from ._sensitivity import _base_seed, _cluster_bound, check_C, default_k
from ._solver import _SMOOTHING, _dual_bound, _huber_fun, _local_aggregates, coarse_svm

logger = logging.getLogger(__name__)

_METHODS = ("two-pass", "merge-reduce")
#: Rows of the uniform sample whose solution warm-starts the distributed coarse solve.
_WARM_ROWS = 20000


def _node_rng(seed: int, level: int, index: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence([seed, level, index]))


def _signs(yb, pos) -> np.ndarray:
    return np.where(np.asarray(yb) == pos, 1.0, -1.0)


def _block(Xb, yb, pos, offset):
    """A block as (X1 float64 with bias column, signs), NaN/inf reported with global rows."""
    Xb = np.asarray(Xb)
    report_nonfinite(Xb, name="X", row_offset=offset)
    X1 = np.empty((Xb.shape[0], Xb.shape[1] + 1))
    X1[:, :-1] = Xb
    X1[:, -1] = 1.0
    return X1, _signs(yb, pos)


# ----------------------------------------------------------------------------- two-pass
def _block_fun(Xb, yb, pos, w, C, h):
    X1 = np.empty((Xb.shape[0], Xb.shape[1] + 1))
    X1[:, :-1] = Xb
    X1[:, -1] = 1.0
    ys = _signs(yb, pos)
    f, g = _huber_fun(w, X1, ys, np.ones(len(ys)), C, h)
    # remove the regulariser: the client adds it once
    f -= 0.5 * float(w[:-1] @ w[:-1])
    g[:-1] -= w[:-1]
    return f, g


def _block_stats(Xb, yb, pos, w, C, h, offset):
    X1, ys = _block(Xb, yb, pos, offset)
    u = np.ones(len(ys))
    hinge = float(np.maximum(1.0 - ys * (X1 @ w), 0.0).sum())
    return (
        hinge,
        _local_aggregates(X1, ys, u, C, w, h),
        np.array([float((ys < 0).sum()), float((ys > 0).sum())]),
    )


def _block_gamma(Xb, yb, pos, C, opt, U_total, k, seed, index, offset):
    X1, ys = _block(Xb, yb, pos, offset)
    rng = _node_rng(seed, 0, index)
    gamma, _ = _cluster_bound(
        X1, ys, np.ones(len(ys)), C=C, opt=opt, U_total=U_total, k=k, rng=rng
    )
    return gamma


def _two_pass(X, y, m, *, C, k, beta, seed, pos, neg, max_iter, tol):
    import dask
    from dask import delayed
    from scipy.optimize import minimize

    n, d = int(X.shape[0]), int(X.shape[1])
    X, y = dask.persist(X, y)
    xb = X.to_delayed().ravel()
    yb = y.to_delayed().ravel()
    offsets = np.r_[0, np.cumsum(X.chunks[0])[:-1]]
    U = float(n)

    # coarse solve on all rows, warm-started from a uniform sample's solution
    with _timer("two-pass: coarse solve", logger) as tm:
        from ..data import take_rows

        rng0 = _node_rng(seed, 2, 0)
        take = np.sort(rng0.choice(n, size=min(n, _WARM_ROWS), replace=False))
        Xs, ys_ = take_rows(X, take), _signs(take_rows(y, take), pos)
        Xs1 = np.hstack([np.asarray(Xs, dtype=np.float64), np.ones((len(take), 1))])
        w = np.zeros(d + 1)
        if np.unique(ys_).size == 2:
            w = coarse_svm(
                Xs1, ys_, np.ones(len(take)), C * n / len(take), tol=0.05, max_iter=200
            ).w

        def fun(wv, h):
            parts = dask.compute(
                *[delayed(_block_fun)(a, b, pos, wv, C, h) for a, b in zip(xb, yb)]
            )
            f = 0.5 * float(wv[:-1] @ wv[:-1]) + sum(p[0] for p in parts)
            g = np.sum([p[1] for p in parts], axis=0)
            g[:-1] += wv[:-1]
            return f, g

        h = _SMOOTHING[-1]
        used = 0
        while True:
            # certify first: the warm start alone may already be within tol
            stats = dask.compute(
                *[
                    delayed(_block_stats)(a, b, pos, w, C, h, int(o))
                    for a, b, o in zip(xb, yb, offsets)
                ]
            )
            upper = 0.5 * float(w[:-1] @ w[:-1]) + C * sum(s[0] for s in stats)
            lower = min(_dual_bound(np.sum([s[1] for s in stats], axis=0)), upper)
            if upper <= (1.0 + tol) * lower or used >= max_iter:
                break
            res = minimize(
                fun,
                w,
                args=(h,),
                jac=True,
                method="L-BFGS-B",
                options={"maxiter": 25, "gtol": 1e-12, "ftol": 1e-14},
            )
            w, used = res.x, used + 25
    class_counts = np.sum([s[2] for s in stats], axis=0)
    if (class_counts == 0).any():
        raise DKernelError(
            f"y has one class only ({pos if class_counts[0] == 0 else neg}); "
            "an SVM coreset needs two"
        )
    if not lower > 0:
        raise DKernelError("the coarse SVM solve found no positive lower bound")
    logger.info(
        "two-pass coarse solve: cost %.6g, certified bound %.6g (%d iterations, %.1f s)",
        upper,
        lower,
        used,
        tm.get("seconds", 0.0),
    )

    # pass 1: sensitivities with the global totals, one task per block
    with _timer("two-pass: sensitivities", logger):
        gammas = [
            delayed(_block_gamma)(a, b, pos, C, lower, U, k, seed, i, int(o))
            for i, (a, b, o) in enumerate(zip(xb, yb, offsets))
        ]
        gammas = dask.persist(*gammas)
        tb = np.array(dask.compute(*[delayed(np.sum)(g) for g in gammas]), dtype=np.float64)
    t = float(tb.sum())
    Ub = np.asarray(X.chunks[0], dtype=np.float64)
    mass = (1.0 - beta) * tb / t + beta * Ub / U
    counts = _node_rng(seed, 1, -1 % (2**32)).multinomial(m, mass / mass.sum())

    # pass 2: the draws, one task per block with draws
    with _timer("two-pass: draw", logger):
        parts = dask.compute(
            *[
                delayed(_block_sample)(a, b, g, int(c), m, t, U, beta, seed, i)
                for i, (a, b, g, c) in enumerate(zip(xb, yb, gammas, counts))
                if c > 0
            ]
        )
    Xc = np.concatenate([p[0] for p in parts])
    yc = np.concatenate([p[1] for p in parts])
    wc = np.concatenate([p[2] for p in parts])
    gc = np.concatenate([p[3] for p in parts])
    return Coreset(
        X=Xc,
        y=yc,
        weight=wc,
        sensitivity=gc,
        total_sensitivity=t,
        source_size=n,
        C=C,
        classes=(neg, pos),
        info={
            "method": "two-pass",
            "opt": lower,
            "coarse_cost": upper,
            "coarse_iterations": used,
            "n_blocks": len(xb),
            "levels": 1,
            "beta": beta,
        },
    )


def _block_sample(Xb, yb, gamma, count, m, t, U, beta, seed, index):
    """``count`` draws inside one block from the global q restricted to it; weights use the
    global q (so the union over blocks is one i.i.d. draw of m from the whole set)."""
    Xb, yb = np.asarray(Xb), np.asarray(yb)
    u = np.ones(len(yb))
    q = (1.0 - beta) * gamma / t + beta * u / U
    rng = _node_rng(seed, 1, index)
    cum = np.cumsum(q)
    idx = np.minimum(np.searchsorted(cum, rng.random(count) * cum[-1], side="right"), len(q) - 1)
    uniq, c = np.unique(idx, return_counts=True)
    return Xb[uniq], yb[uniq], c / (m * q[uniq]), gamma[uniq]


# ------------------------------------------------------------------------- merge-reduce
def _leaf(Xb, yb, m, C, k, U_total, classes, beta, seed, index, offset) -> Coreset:
    from ._coreset import _build

    Xb, yb = np.asarray(Xb), np.asarray(yb)
    report_nonfinite(Xb, name="X", row_offset=offset)
    neg, pos = classes
    n = Xb.shape[0]
    if n <= m:  # nothing to reduce: the rows themselves, unit weights
        return Coreset(
            X=Xb,
            y=yb,
            weight=np.ones(n),
            sensitivity=np.ones(n),
            total_sensitivity=float(n),
            source_size=n,
            C=C,
            classes=classes,
            info={"method": "exact", "levels": 0},
        )
    ys = _signs(yb, pos)
    C_node = C * U_total / n
    out = _build(
        Xb, ys, np.ones(n), m, C=C_node, k=k, rng=_node_rng(seed, 0, index), beta=beta, tol=0.05
    )
    return Coreset(
        X=out.X,
        y=np.where(out.y > 0, pos, neg),
        weight=out.weight,
        sensitivity=out.sensitivity,
        total_sensitivity=out.total_sensitivity,
        source_size=n,
        C=C,
        classes=classes,
        info={**out.info, "levels": 1},
    )


def _node(children, m, k, U_total, beta, seed, level, index) -> Coreset:
    merged = children[0]
    for c in children[1:]:
        merged = merge(merged, c)
    out = merged.reduce(
        m, random_state=_node_rng(seed, level, index), total_weight=U_total, k=k, beta=beta
    )
    if out is merged:
        return merged
    return out


def _merge_reduce(X, y, m, *, C, k, beta, seed, pos, neg, split_every):
    import dask
    from dask import delayed

    n = int(X.shape[0])
    xb = X.to_delayed().ravel()
    yb = y.to_delayed().ravel()
    offsets = np.r_[0, np.cumsum(X.chunks[0])[:-1]]
    kk = k
    level_nodes = [
        delayed(_leaf)(a, b, m, C, kk, float(n), (neg, pos), beta, seed, i, int(o))
        for i, (a, b, o) in enumerate(zip(xb, yb, offsets))
    ]
    level = 0
    while len(level_nodes) > 1:
        level += 1
        level_nodes = [
            delayed(_node)(
                level_nodes[j : j + split_every],
                m,
                kk,
                float(n),
                beta,
                seed,
                level,
                j // split_every,
            )
            for j in range(0, len(level_nodes), split_every)
        ]
    with _timer("merge-reduce tree", logger):
        (root,) = dask.compute(level_nodes[0])
    info = {
        **root.info,
        "method": "merge-reduce",
        "tree_levels": level,
        "n_leaves": len(xb),
        "split_every": split_every,
    }
    return Coreset(
        X=root.X,
        y=root.y,
        weight=root.weight,
        sensitivity=root.sensitivity,
        total_sensitivity=root.total_sensitivity,
        source_size=n,
        C=C,
        classes=(neg, pos),
        info=info,
    )


# ------------------------------------------------------------------------------ public
def _inputs(X, y):
    import dask.array as da

    from ..data import Dataset, open_dataset

    if isinstance(X, (str, bytes)) or hasattr(X, "__fspath__") or isinstance(X, Dataset):
        ds = open_dataset(X)
        X = ds.X
        if y is None:
            y = ds.y
    if y is None:
        raise DKernelError("y is required (the store has no labels)")
    if not isinstance(X, da.Array):
        Xa = np.asarray(X)
        if Xa.ndim != 2:
            raise DKernelError(f"X must be 2-D (n_samples, n_features), got shape {Xa.shape}")
        X = da.from_array(Xa, chunks=(max(1, min(len(Xa), 65536)), Xa.shape[1]))
    if X.ndim != 2:
        raise DKernelError(f"X must be 2-D (n_samples, n_features), got shape {X.shape}")
    if not (np.issubdtype(X.dtype, np.number) or X.dtype == np.bool_):
        raise DKernelError(f"X must be numeric, got dtype {X.dtype}")
    if not isinstance(y, da.Array):
        y = np.asarray(y)
    if y.ndim != 1 or y.shape[0] != X.shape[0]:
        raise DKernelError(
            f"y has shape {y.shape}, expected ({X.shape[0]},) to match the rows of X"
        )
    if not isinstance(y, da.Array):
        y = da.from_array(y, chunks=(X.chunks[0],))
    if X.chunks[1] != (X.shape[1],):
        X = X.rechunk({1: -1})
    if y.chunks[0] != X.chunks[0]:
        y = y.rechunk((X.chunks[0],))
    return X, y


def distributed_coreset(
    X,
    y=None,
    m=1000,
    *,
    method="two-pass",
    C=1.0,
    k=None,
    beta=0.0,
    split_every=2,
    leaf_size=None,
    classes=None,
    random_state=None,
    max_iter=400,
    tol=0.005,
):
    """SVM coreset of a dask array or zarr store, built across the workers.

    Parameters
    ----------
    X : dask.array.Array, zarr store path, Dataset or ndarray of shape (n_samples, n_features)
        Row-chunked; every chunk is one partition (see ``leaf_size``).
    y : dask.array.Array or array-like of shape (n_samples,), optional
        Two classes; taken from the store when ``X`` is a path or Dataset.
    m : int, default=1000
        Draws of the coreset (at most m distinct rows).
    method : {"two-pass", "merge-reduce"}, default="two-pass"
        ``"two-pass"``: one coarse solve on all rows (distributed L-BFGS), pass 1 computes
        every block's sensitivities with the global totals, pass 2 draws the m samples
        across blocks in proportion to their sensitivity mass (one resampling level: the
        single-machine coreset's error). ``"merge-reduce"``: every leaf gets its own coreset
        of m draws (node hinge weight C * n / n_leaf), a tree with fan-in
        ``split_every`` merges and reduces them up to the root (one resampling level more
        per tree level).
    C : float, default=1.0
    k : int, optional
        k-means++ clusters per label and block (default ``ceil(ln n)``).
    beta : float in [0, 1], default=0.0
        Mixture with uniform sampling (see :func:`svm_coreset`).
    split_every : int, default=2
        Fan-in of the merge-reduce tree.
    leaf_size : int, optional
        Rows per leaf / partition (the array is re-chunked); default: the array's chunks.
        Must be at least ``m`` (several times m is best).
    classes : sequence of two labels, optional
        (negative, positive); read from the store's attributes or computed from ``y``.
    random_state : int, SeedSequence, Generator or None
        Base seed; node (level, index) draws from ``SeedSequence([seed, level, index])``.
    max_iter, tol : int, float
        Iteration cap and certified-gap target of the two-pass coarse solve.

    Returns
    -------
    Coreset

    Notes
    -----
    Two-pass: a few dozen distributed L-BFGS passes (one small task per block each) for the
    coarse solve, then two tasks per block; O(n d k) work in all. Merge-reduce: one task per
    leaf and one per tree node; O(n d k) at the leaves plus O(m d k) per node; no global
    pass. NaN/inf are reported by the block that holds them, with the global row.

    References
    ----------
    M. Tukan, C. Baykal, D. Feldman, D. Rus, "On coresets for support vector machines",
    TAMC 2020 / Theoretical Computer Science 2021, Algorithms 1 and 2.

    Examples
    --------
    >>> import numpy as np, dask, dask.array as da
    >>> from dkernel.coreset import distributed_coreset
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(2000, 2)); y = np.where(X[:, 0] > 0, 1, -1)
    >>> with dask.config.set(scheduler="sync"):
    ...     S = distributed_coreset(da.from_array(X, chunks=500), y, 100,
    ...                             method="merge-reduce", random_state=0)
    >>> S.source_size, len(S) <= 100
    (2000, True)
    """
    import dask
    import dask.array as da

    if method not in _METHODS:
        raise DKernelError(f"method must be one of {_METHODS}, got {method!r}")
    C = check_C(C)
    beta = _check_beta(beta)
    check_scalar(split_every, "split_every", kind=numbers.Integral, low=2)
    check_scalar(max_iter, "max_iter", kind=numbers.Integral, low=1)
    check_scalar(tol, "tol", low=0.0)
    store_classes = None
    if isinstance(X, (str, bytes)) or hasattr(X, "__fspath__"):
        from ..data import open_dataset

        X = open_dataset(X)
    from ..data import Dataset

    if isinstance(X, Dataset):
        store_classes = X.attrs.get("classes")
    X, y = _inputs(X, y)
    n = int(X.shape[0])
    m = _check_m(m, n)
    if leaf_size is not None:
        check_scalar(leaf_size, "leaf_size", kind=numbers.Integral, low=1)
        if leaf_size < m:
            raise DKernelError(f"leaf_size={leaf_size} is smaller than the coreset size m={m}")
        X = X.rechunk({0: int(leaf_size)})
        y = y.rechunk((X.chunks[0],))
    elif method == "merge-reduce" and n > m and max(X.chunks[0]) < m:
        raise DKernelError(
            f"the chunks hold {max(X.chunks[0])} rows, fewer than the coreset "
            f"size m={m}; pass leaf_size >= m"
        )
    k = (
        default_k(max(X.chunks[0]))
        if k is None
        else int(check_scalar(k, "k", kind=numbers.Integral, low=1))
    )
    if classes is None:
        classes = store_classes
    if classes is None:
        with _timer("labels", logger):
            (classes,) = dask.compute(da.unique(y))
    classes = sorted(np.asarray(classes).tolist())
    if len(classes) < 2:
        raise DKernelError(f"y has one class only ({classes}); an SVM coreset needs two")
    if len(classes) > 2:
        raise DKernelError(
            f"y has {len(classes)} classes; distributed coresets are binary "
            "(build one per class on relabelled y for one-vs-rest)"
        )
    neg, pos = classes
    seed = _base_seed(random_state)
    with _timer(f"distributed coreset ({method})", logger):
        if method == "two-pass":
            return _two_pass(
                X,
                y,
                m,
                C=C,
                k=k,
                beta=beta,
                seed=seed,
                pos=pos,
                neg=neg,
                max_iter=int(max_iter),
                tol=float(tol),
            )
        return _merge_reduce(
            X,
            y,
            m,
            C=C,
            k=k,
            beta=beta,
            seed=seed,
            pos=pos,
            neg=neg,
            split_every=int(split_every),
        )
