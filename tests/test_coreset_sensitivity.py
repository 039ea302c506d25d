"""Sensitivity bounds, the numba kernels and the certified coarse solve."""

from __future__ import annotations

import numpy as np
import pytest

from dkernel import DKernelError
from dkernel.coreset import (
    cluster_bound,
    coarse_svm,
    kmeanspp_partitions,
    sensitivity_bound,
    svm_cost,
    svm_sensitivity,
    weighted_kmeanspp,
    weighted_means,
    with_bias,
)


def _problem(rng, n=60, noise=0.7):
    X = rng.normal(size=(n, 2)) * rng.uniform(0.3, 3.0)
    y = np.where(X[:, 0] + noise * rng.normal(size=n) > 0, 1, -1)
    return X, y


def _brute_ratio(X, y, u, C, rng, n_w=20000):
    """sup over random w of u(p) f(p, w) / F(P, w) (f includes the regulariser share)."""
    X1 = with_bias(X)
    U = u.sum()
    W = rng.normal(size=(n_w, X1.shape[1])) * rng.choice([0.01, 0.1, 1.0, 10.0], size=(n_w, 1))
    Z = 1.0 - y * (X1 @ W.T).T
    f = (W[:, :-1] ** 2).sum(1)[:, None] / (2 * U) + C * np.maximum(Z, 0.0)
    F = (u * f).sum(1)
    return (u * f / F[:, None]).max(0)


@pytest.mark.parametrize("C", [0.1, 1.0, 10.0])
def test_bound_dominates_brute_force_sup(rng, C):
    X, y = _problem(rng)
    u = rng.uniform(0.2, 3.0, size=len(y))
    gamma = svm_sensitivity(X, y, C=C, sample_weight=u, k=3, random_state=0)
    ratio = _brute_ratio(X, y, u, C, rng)
    assert (ratio <= gamma).all(), (ratio / gamma).max()


def test_bound_with_global_totals_dominates_on_a_part(rng):
    # the two-pass build: sensitivities of a part with clusters inside the part and the
    # whole set's U(P) and opt bound the point's share of the whole cost
    X, y = _problem(rng, n=80)
    u = np.ones(len(y))
    C = 1.0
    X1 = with_bias(X)
    ys = y.astype(float)
    opt = coarse_svm(X1, ys, u, C).lower
    gamma = np.empty(len(y))
    for part in (slice(0, 40), slice(40, 80)):
        gamma[part], _ = cluster_bound(
            X1[part],
            ys[part],
            u[part],
            C=C,
            opt=opt,
            U_total=u.sum(),
            k=2,
            rng=np.random.default_rng(0),
        )
    assert (_brute_ratio(X, y, u, C, rng) <= gamma).all()


def test_coarse_solve_is_certified_and_deterministic(rng):
    X, y = _problem(rng, n=400)
    X1, ys, u = with_bias(X), y.astype(float), rng.uniform(0.5, 2.0, 400)
    a = coarse_svm(X1, ys, u, 1.0)
    b = coarse_svm(X1, ys, u, 1.0)
    assert np.array_equal(a.w, b.w)
    assert 0 < a.lower <= a.upper <= 1.005 * a.lower
    assert a.upper == pytest.approx(svm_cost(X1, ys, u, 1.0, a.w))
    # the lower bound is below the optimum found by a much longer solve
    best = coarse_svm(X1, ys, u, 1.0, tol=1e-7, max_iter=5000)
    assert a.lower <= best.upper


def test_kmeanspp_reference(rng):
    X = rng.normal(size=(50, 3))
    u = rng.uniform(0.1, 1.0, 50)
    uni = np.array([0.3, 0.7, 0.1])
    seeds = weighted_kmeanspp(X, u, 3, uni)
    # plain NumPy reference of D^2 * u sampling with the same uniforms
    ref = [int(np.searchsorted(np.cumsum(u), uni[0] * u.sum(), side="right"))]
    d2 = ((X - X[ref[0]]) ** 2).sum(1)
    for j in (1, 2):
        p = u * d2
        ref.append(int(np.searchsorted(np.cumsum(p), uni[j] * p.sum(), side="right")))
        d2 = np.minimum(d2, ((X - X[ref[-1]]) ** 2).sum(1))
    assert seeds.tolist() == ref


def test_kmeans_means_and_bound_reference(rng):
    Z = rng.normal(size=(40, 2))
    u = rng.uniform(0.1, 1.0, 40)
    seeds, parts = kmeanspp_partitions(Z, u, np.array([2, 3]), np.array([0.2, 0.5, 0.9]))
    assert seeds.tolist() == weighted_kmeanspp(Z, u, 3, np.array([0.2, 0.5, 0.9])).tolist()
    for kk, labels in zip((2, 3), parts):  # each partition: nearest of the first kk seeds
        d = ((Z[:, None, :] - Z[seeds[:kk]][None, :, :]) ** 2).sum(-1)
        np.testing.assert_array_equal(labels, d.argmin(1))
    labels = parts[1]
    centers, cu = Z[seeds].copy(), np.zeros(3)
    weighted_means(Z, u, labels, centers, cu)
    for c in range(centers.shape[0]):
        sel = labels == c
        assert cu[c] == pytest.approx(u[sel].sum())
        np.testing.assert_allclose(centers[c], (u[sel, None] * Z[sel]).sum(0) / u[sel].sum())
    out = np.empty(40)
    C, opt, U = 2.0, 5.0, 60.0
    total = sensitivity_bound(Z, u, labels, centers, cu, C, opt, U, out)
    a = ((U - cu) / (2 * C * U * cu))[labels]
    dd = ((centers[labels] - Z) ** 2).sum(1)
    paper = 4.5 * np.maximum(4 / 9 * a, np.sqrt(4 * a * a + 2 * dd / (9 * opt)) - 2 * a)
    direct = np.sqrt(2 * dd / opt)
    ref = np.minimum(1.0, u / cu[labels] + C * u * np.minimum(paper, direct))
    np.testing.assert_allclose(out, ref)
    assert total == pytest.approx(ref.sum())
    # both bounds matter: each is the smaller one for some rows
    assert (paper < direct).any() and (direct < paper).any()


def test_sensitivity_errors(rng):
    X, y = _problem(rng)
    with pytest.raises(DKernelError, match="one class only"):
        svm_sensitivity(X, np.ones(len(y)))
    with pytest.raises(DKernelError, match="multiclass='ovr'"):
        svm_sensitivity(X, np.arange(len(y)) % 3)
    with pytest.raises(DKernelError, match="C must be > 0"):
        svm_sensitivity(X, y, C=0.0)
    with pytest.raises(DKernelError, match="opt must be > 0"):
        svm_sensitivity(X, y, opt=-1.0)


def test_coarse_solve_stops_on_separable_data(rng):
    # a wide margin: the certificate closes slowly, the stall criterion stops the solve
    X = rng.normal(size=(2000, 3))
    y = np.where(X[:, 0] > 0, 1.0, -1.0)
    X[:, 0] += 3 * y
    X1 = with_bias(X)
    sol = coarse_svm(X1, y, np.ones(2000), 10.0, tol=1e-9, max_iter=5000)
    assert sol.n_iter < 5000
    best = coarse_svm(X1, y, np.ones(2000), 10.0, tol=1e-9, max_iter=20000)
    assert 0 < sol.lower <= best.upper and sol.upper <= 1.01 * best.upper
