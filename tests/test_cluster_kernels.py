"""numba kernels of dkernel.cluster against plain NumPy references."""

from __future__ import annotations

import numpy as np
import pytest

from dkernel.cluster import _numba as nb


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_center_inner_matches_segment_sums(rng, dtype):
    K = rng.normal(size=(7, 12)).astype(dtype)
    ptr = np.array([0, 3, 3, 8, 12])
    coef = rng.uniform(size=12)
    out = np.empty((7, 4))
    nb.center_inner(K, ptr, coef, out)
    ref = np.stack(
        [
            K[:, ptr[j] : ptr[j + 1]].astype(np.float64) @ coef[ptr[j] : ptr[j + 1]]
            for j in range(4)
        ],
        axis=1,
    )
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-6)
    assert np.all(out[:, 1] == 0.0)  # an empty segment gives zero


def test_assign_nearest_matches_argmin(rng):
    diag = rng.uniform(1, 2, size=50)
    inner = rng.normal(size=(50, 4))
    norms = rng.uniform(0, 1, size=4)
    labels = np.empty(50, dtype=np.int64)
    dist = np.empty(50)
    nb.assign_nearest(diag, inner, norms, labels, dist)
    D = diag[:, None] - 2 * inner + norms[None, :]
    np.testing.assert_array_equal(labels, D.argmin(axis=1))
    np.testing.assert_allclose(dist, np.maximum(D.min(axis=1), 0.0))


def test_assign_nearest_ties_go_to_lowest_index():
    labels = np.empty(1, dtype=np.int64)
    dist = np.empty(1)
    nb.assign_nearest(np.ones(1), np.zeros((1, 3)), np.ones(3), labels, dist)
    assert labels[0] == 0 and dist[0] == 2.0


def test_batch_center_terms_matches_numpy(rng):
    b, k = 30, 4
    X = rng.normal(size=(b, 3))
    Kbb = X @ X.T
    inner = rng.normal(size=(b, k))
    labels = rng.integers(0, k - 1, size=b)  # center k-1 stays empty
    w = rng.uniform(0.5, 2.0, size=b)
    W, cross, selfk, count = nb.batch_center_terms(Kbb, inner, labels, w, k)
    for j in range(k):
        m = labels == j
        assert W[j] == pytest.approx(w[m].sum())
        assert cross[j] == pytest.approx(np.dot(w[m], inner[m, j]))
        assert selfk[j] == pytest.approx(w[m] @ Kbb[np.ix_(m, m)] @ w[m])
        assert count[j] == m.sum()
    assert count[k - 1] == 0 and W[k - 1] == 0.0


def test_bilinear_matches_numpy(rng):
    K = rng.normal(size=(5, 8))
    u, v = rng.normal(size=5), rng.normal(size=8)
    assert nb.bilinear(K, u, v) == pytest.approx(u @ K @ v)
