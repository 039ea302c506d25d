"""The numba BSGD kernels against plain NumPy references."""

from __future__ import annotations

import _bsgd
import numpy as np
import pytest

from dkernel.kernels import KERNEL_CODES, pair_matrix, pairwise_kernels
from dkernel.svm import _budget as nb

RBF = KERNEL_CODES["rbf"]


def _maintain(st, maint, gamma=0.5, search=nb.GOLDEN):
    B = st.SV.shape[0] - 1
    cfg = _bsgd.config(B, nb.AVG_OFF, 0, maint=maint, gamma=gamma)._replace(search=search)
    return nb.maintain(st, cfg, False)


def _wnorm_diff(X0, A0, X1, A1, gamma):
    """||sum a0 phi(x0) - sum a1 phi(x1)||^2 through explicit kernel matrices."""
    Z = np.vstack([X0, X1])
    C = np.vstack([A0, -A1])
    return float(np.einsum("ic,ij,jc->", C, _bsgd.rbf(Z, Z, gamma), C))


def test_kernel_values_match_pairwise(rng):
    X = rng.normal(size=(7, 3))
    Y = rng.normal(size=(5, 3))
    for name, code in KERNEL_CODES.items():
        got = pair_matrix(X, Y, code, 0.3, 3.0, 1.0)
        ref = pairwise_kernels(X, Y, kernel=name, gamma=0.3, degree=3, coef0=1.0)
        np.testing.assert_allclose(got, ref, rtol=1e-10, atol=1e-12, err_msg=name)


@pytest.mark.parametrize("c", [1, 3])
def test_removal_drops_smallest_norm(rng, c):
    st = _bsgd.state(rng, 9, 3, c, nb.REMOVE)
    A0, X0 = st[2].copy(), st[0].copy()
    norms = (A0**2).sum(1) * np.diag(st[3])
    p = int(np.argmin(norms))
    d2 = _maintain(st, nb.REMOVE)
    s = st[6][nb.FS_SCALE]
    assert st[7][nb.IS_NSV] == 9
    assert d2 == pytest.approx(norms[p] * s * s)
    keep = np.delete(np.arange(10), p)
    got = {tuple(x) for x in st[0][:9]}
    assert got == {tuple(x) for x in X0[keep]}
    # the true degradation equals ||a_p phi_p||^2
    ref = _wnorm_diff(X0, s * A0, st[0][:9], s * st[2][:9], 0.5)
    assert d2 == pytest.approx(ref, rel=1e-9)


@pytest.mark.parametrize("c", [1, 4])
def test_projection_is_least_squares(rng, c):
    st = _bsgd.state(rng, 12, 4, c, nb.PROJECT)
    A0, X0, K0 = st[2].copy(), st[0].copy(), st[3].copy()
    norms = (A0**2).sum(1)
    p = int(np.argmin(norms))
    keep = np.delete(np.arange(13), p)
    Kp = K0[np.ix_(keep, keep)]
    kp = K0[keep, p]
    d_ridge = np.linalg.solve(Kp + nb.PROJECT_RIDGE * np.eye(12), kp)
    d_lsq = np.linalg.lstsq(Kp, kp, rcond=None)[0]
    d2 = _maintain(st, nb.PROJECT)
    s = st[6][nb.FS_SCALE]
    assert st[7][nb.IS_NSV] == 12
    # map the new slots back to the old rows (swap-remove moved the last row into p)
    rows = [int(np.flatnonzero((X0 == x).all(1))[0]) for x in st[0][:12]]
    expect = A0[rows] + np.outer(d_ridge[[list(keep).index(r) for r in rows]], A0[p])
    np.testing.assert_allclose(st[2][:12], expect, rtol=1e-7, atol=1e-9)
    expect_lsq = A0[rows] + np.outer(d_lsq[[list(keep).index(r) for r in rows]], A0[p])
    np.testing.assert_allclose(st[2][:12], expect_lsq, rtol=1e-3, atol=1e-4)
    ref = _wnorm_diff(X0, s * A0, st[0][:12], s * st[2][:12], 0.5)
    assert d2 == pytest.approx(ref, rel=1e-5, abs=1e-10)
    # the inverse kept in M is still (K + rI)^-1 of the remaining SVs
    np.testing.assert_allclose(
        st[4][:12, :12],
        np.linalg.inv(st[3][:12, :12] + nb.PROJECT_RIDGE * np.eye(12)),
        rtol=1e-6,
        atol=1e-6,
    )


def _grid_merge(A, K, m, n, pw=2):
    h = np.linspace(0.0, 1.0, 100001)
    L = np.log(K[m, n])
    e1 = np.exp(np.abs(1 - h) ** pw * L)
    e2 = np.exp(np.abs(h) ** pw * L)
    az = np.outer(e1, A[m]) + np.outer(e2, A[n])
    F = (az**2).sum(1)
    base = (A[m] ** 2).sum() + (A[n] ** 2).sum() + 2 * K[m, n] * (A[m] @ A[n])
    j = int(np.argmax(F))
    return h[j], base - F[j]


@pytest.mark.parametrize("c,signs", [(1, "positive"), (1, "mixed"), (3, "mixed")])
def test_merge_h_matches_dense_grid(rng, c, signs):
    for _trial in range(5):
        st = _bsgd.state(rng, 15, 2, c, nb.MERGE, signs=signs)
        A, K = st[2], st[3]
        m = int(np.argmin((A**2).sum(1)))
        n, h, dg = nb.merge_partner(A, K, 16, m, 2, nb.GOLDEN, np.zeros((2, 2)))
        h_ref, dg_ref = _grid_merge(A, K, m, n)
        assert abs(h - h_ref) < 1e-4
        assert dg == pytest.approx(dg_ref, rel=1e-6, abs=1e-12)
        # the chosen partner is the best one over all partners (grid reference)
        best = min(_grid_merge(A, K, m, j)[1] for j in range(16) if j != m)
        assert dg <= best * (1 + 1e-3) + 1e-9


def test_merge_lookup_refines_to_grid(rng):
    T = nb.build_lookup(2)
    for _trial in range(5):
        st = _bsgd.state(rng, 15, 2, 1, nb.MERGE, signs="positive")
        A, K = st[2], st[3]
        m = int(np.argmin((A**2).sum(1)))
        n, h, dg = nb.merge_partner(A, K, 16, m, 2, nb.LOOKUP, T)
        h_ref, dg_ref = _grid_merge(A, K, m, n)
        assert abs(h - h_ref) < 1e-4
        assert dg == pytest.approx(dg_ref, rel=1e-6, abs=1e-12)


@pytest.mark.parametrize("c", [1, 3])
def test_merge_degradation_exact_and_never_worse_than_removal(rng, c):
    for _trial in range(10):
        st = _bsgd.state(rng, 10, 2, c, nb.MERGE, gamma=0.5)
        st_rm = st.copy()
        X0, A0 = st[0].copy(), st[2].copy()
        s = st[6][nb.FS_SCALE]
        d2 = _maintain(st, nb.MERGE)
        d2_rm = _maintain(st_rm, nb.REMOVE)
        assert st[7][nb.IS_NSV] == 10
        assert d2 <= d2_rm * (1 + 1e-12)
        ref = _wnorm_diff(X0, s * A0, st[0][:10], s * st[2][:10], 0.5)
        assert d2 == pytest.approx(ref, rel=1e-6, abs=1e-10)
        # K kept for the SVs is their kernel matrix
        np.testing.assert_allclose(
            st[3][:10, :10], _bsgd.rbf(st[0][:10], st[0][:10], 0.5), atol=1e-12
        )


def _run(X, yi, c, lam, maint, B=8):
    st = nb.new_state(B, X.shape[1], c, maint)
    T = np.zeros((2, 2))
    nb.sgd_chunk(
        X,
        yi,
        np.ones(len(X)),
        st,
        nb.BSGDConfig(
            RBF,
            1.0,
            3.0,
            1.0,
            nb.PEGASOS,
            lam,
            1.0,
            0.0,
            maint,
            1.0,
            nb.PROJECT_RIDGE,
            2,
            nb.GOLDEN,
            T,
            B,
            nb.AVG_OFF,
            0,
        ),
    )
    return nb.decision(X, st, _bsgd.config(B, nb.AVG_OFF, 0, gamma=1.0)), st


@pytest.mark.parametrize("maint", [nb.REMOVE, nb.PROJECT, nb.MERGE])
def test_multiclass_on_two_classes_equals_binary(rng, maint):
    """Crammer-Singer with 2 columns and lam == the binary hinge with lam / 2:
    f_1 - f_0 equals the binary score (see the module docstring of _budget)."""
    X = rng.normal(size=(300, 2))
    yi = (X[:, 0] * X[:, 1] > 0).astype(np.int64)
    f2, st2 = _run(X, yi, 2, 1e-2, maint)
    f1, st1 = _run(X, yi, 1, 0.5e-2, maint)
    assert st1[7][nb.IS_NMAINT] > 0
    assert st1[7][nb.IS_NMAINT] == st2[7][nb.IS_NMAINT]
    np.testing.assert_allclose(f2[:, 1] - f2[:, 0], f1[:, 0], rtol=1e-6, atol=1e-8)


def test_sgd_step_matches_numpy_reference(rng):
    """Unbounded budget: the model equals plain Pegasos kernel SGD written in NumPy."""
    X = rng.normal(size=(60, 3))
    y = np.where(rng.random(60) < 0.5, -1.0, 1.0)
    lam, gamma = 0.05, 0.7
    w = rng.uniform(0.5, 2.0, size=60)
    # reference: explicit alphas over all rows, bias as a constant feature
    alpha = np.zeros(60)
    bias = 0.0
    K = _bsgd.rbf(X, X, gamma)
    for t in range(1, 61):
        i = t - 1
        f = alpha @ K[:, i] + bias
        eta = 1.0 / (lam * t)
        alpha *= 1 - eta * lam
        bias *= 1 - eta * lam
        if y[i] * f < 1:
            alpha[i] += eta * w[i] * y[i]
            bias += eta * w[i] * y[i]
    st = nb.new_state(100, 3, 1, nb.MERGE)
    nb.sgd_chunk(
        X,
        (y > 0).astype(np.int64),
        w,
        st,
        nb.BSGDConfig(
            RBF,
            gamma,
            3.0,
            1.0,
            nb.PEGASOS,
            lam,
            1.0,
            0.0,
            nb.MERGE,
            1.0,
            nb.PROJECT_RIDGE,
            2,
            nb.GOLDEN,
            np.zeros((2, 2)),
            100,
            nb.AVG_OFF,
            0,
        ),
    )
    ist = st.ist
    got = nb.decision(X, st, _bsgd.config(100, nb.AVG_OFF, 0, gamma=gamma))[:, 0]
    np.testing.assert_allclose(got, K @ alpha + bias, rtol=1e-9, atol=1e-9)
    assert ist[nb.IS_NMAINT] == 0


def test_radius_projection_bounds_norm(rng):
    X = rng.normal(size=(400, 2))
    yi = (X[:, 0] > 0).astype(np.int64)
    B = 20
    st = nb.new_state(B, 2, 1, nb.MERGE)
    nb.sgd_chunk(
        X,
        yi,
        np.ones(400),
        st,
        nb.BSGDConfig(
            RBF,
            1.0,
            3.0,
            1.0,
            nb.PERCEPTRON,
            0.0,
            1.0,
            2.0,
            nb.MERGE,
            1.0,
            nb.PROJECT_RIDGE,
            2,
            nb.GOLDEN,
            np.zeros((2, 2)),
            B,
            nb.AVG_OFF,
            0,
        ),
    )
    SV, A, b, fs, ist = st.SV, st.A, st.b, st.fs, st.ist
    n = ist[nb.IS_NSV]
    a = fs[0] * A[:n, 0]
    norm2 = a @ _bsgd.rbf(SV[:n], SV[:n], 1.0) @ a + (fs[0] * b[0]) ** 2
    assert norm2 <= 4.0 * (1 + 1e-6)


@pytest.mark.parametrize("mode", [nb.AVG_UNIFORM, nb.AVG_LINEAR])
def test_lazy_average_equals_explicit_average(rng, mode):
    """No maintenance: the lazily kept sums equal sum_t omega_t (s_t A_t, s_t b_t) taken
    explicitly after every step, from step 50 on (rescales of the global scale included)."""
    X = rng.normal(size=(300, 3))
    yi = (X[:, 0] * X[:, 1] > 0).astype(np.int64)
    B = 400
    st = nb.new_state(B, 3, 1, nb.MERGE)
    # norma's shrink (1 - 0.9 / sqrt(t)) takes s below the rescale threshold along the way
    cfg = _bsgd.config(B, mode, 50, alpha=0.9, algo=nb.NORMA)
    ref, refb, W = np.zeros((B + 1, 1)), np.zeros(1), 0.0
    rescaled = False
    for i in range(300):
        before = st.fs[nb.FS_SCALE]
        nb.sgd_chunk(X[i : i + 1], yi[i : i + 1], np.ones(1), st, cfg)
        rescaled |= st.fs[nb.FS_SCALE] > before
        t = st.ist[nb.IS_T]
        if t >= 50:
            om = 1.0 if mode == nb.AVG_UNIFORM else t - 50 + 1
            ref += om * st.fs[nb.FS_SCALE] * st.A
            refb += om * st.fs[nb.FS_SCALE] * st.b
            W += om
    assert rescaled and st.ist[nb.IS_NMAINT] == 0
    nb.flush_average(st.A, st.Abar, st.sref, st.fs, st.n_sv)
    np.testing.assert_allclose(st.Abar, ref, rtol=1e-9, atol=1e-9 * np.abs(ref).max())
    np.testing.assert_allclose(st.bbar, refb, rtol=1e-9)
    assert st.fs[nb.FS_WSUM] == W


@pytest.mark.parametrize("maint", [nb.REMOVE, nb.MERGE])
def test_maintenance_edits_the_average_like_the_iterate(rng, maint):
    """A maintenance step applies the same edit to the averaged sums: with Abar = A (after a
    flush at S = 1), merging/removal leaves Abar equal to A."""
    st = _bsgd.state(rng, 12, 2, 2, maint)
    st.fs[nb.FS_SCALE] = 1.0
    st.Abar[:] = st.A
    st.fs[nb.FS_WSUM] = 1.0
    nb.maintain(st, _bsgd.config(12, nb.AVG_OFF, 0, maint=maint), True)
    assert st.n_sv == 12
    np.testing.assert_allclose(st.Abar[:12], st.A[:12], rtol=1e-12)
    assert not st.Abar[12:].any()


def test_reduce_to_keeps_kernel_matrix_and_budget(rng):
    st = _bsgd.state(rng, 29, 2, 1, nb.MERGE)  # 30 SVs
    K, M = st.K.copy(), st.M
    dg, dg2 = nb.reduce_to(st._replace(K=K, M=M), _bsgd.config(10, nb.AVG_OFF, 0))
    assert st.n_sv == 10 and dg > 0 and dg2 > 0
    np.testing.assert_allclose(K[:10, :10], _bsgd.rbf(st.SV[:10], st.SV[:10], 0.5), atol=1e-12)


def test_nearest_partners_are_the_largest_kernel_values(rng):
    """The NEAR screen's candidates: the k largest K[m, j], j != m (a partition, not a sort),
    ties at the k-th value broken by index."""
    X = rng.normal(size=(60, 3))
    K = _bsgd.rbf(X, X, 0.5)
    for m in (0, 17, 59):
        got = nb._nearest(K, m, 60, 8)
        row = K[m].copy()
        row[m] = -np.inf
        assert sorted(got) == sorted(np.argsort(-row)[:8])
        assert m not in got
    K2 = np.ones((10, 10))  # all tied: the first k indices other than m
    assert list(nb._nearest(K2, 2, 10, 4)) == [0, 1, 3, 4]
