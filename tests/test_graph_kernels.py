"""Graph kernels (kNN and heat) against dense NumPy/SciPy references on small n."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg
import scipy.sparse as sp

from dkernel import DKernelError
from dkernel.kernels import GraphKernel, heat_kernel, knn_kernel


def numpy_knn_adjacency(X, k):
    """Symmetrised 0/1 adjacency: i ~ j if j is among i's k nearest others, or vice versa."""
    D = ((X[:, None, :] - X[None, :, :]) ** 2).sum(-1)
    np.fill_diagonal(D, np.inf)
    A = np.zeros_like(D)
    nearest = np.argsort(D, axis=1)[:, :k]
    A[np.repeat(np.arange(len(X)), k), nearest.ravel()] = 1.0
    return np.maximum(A, A.T)


def numpy_knn_kernel(X, k):
    A = numpy_knn_adjacency(X, k)
    Dinv = np.diag(1.0 / A.sum(1))
    return Dinv @ A @ Dinv


def numpy_heat_kernel(X, k, t):
    A = numpy_knn_adjacency(X, k)
    d = 1.0 / np.sqrt(A.sum(1))
    S = d[:, None] * A * d[None, :]
    return scipy.linalg.expm(-t * (np.eye(len(A)) - S))


@pytest.fixture
def X(rng):
    return rng.normal(size=(60, 3))


@pytest.mark.parametrize("k", [1, 4, 10])
def test_knn_kernel_matches_dense_reference(X, k):
    K = knn_kernel(X, n_neighbors=k)
    assert isinstance(K, GraphKernel) and K.n_samples == 60
    ref = numpy_knn_kernel(X, k)
    full = K.block(np.arange(60), np.arange(60))
    np.testing.assert_allclose(full, ref, rtol=1e-12, atol=1e-15)
    np.testing.assert_array_equal(full, full.T)
    rows, cols = [5, 0, 59, 5], [3, 3, 17]
    np.testing.assert_allclose(K.block(rows, cols), ref[np.ix_(rows, cols)], rtol=1e-12)
    np.testing.assert_allclose(K.diag([4, 2, 4]), np.diag(ref)[[4, 2, 4]])


@pytest.mark.parametrize("k", [3, 8])
def test_knn_kernel_is_sparse_with_O_nk_nonzeros(rng, k):
    X = rng.normal(size=(300, 2))
    K = knn_kernel(X, n_neighbors=k)
    assert sp.issparse(K.matrix)
    assert K.matrix.nnz <= 2 * 300 * k  # symmetrised kNN graph: at most 2 n k edges
    assert K.matrix.nnz >= 300 * k
    assert abs(K.matrix - K.matrix.T).max() == 0
    assert (K.matrix.diagonal() == 0).all()  # no self loops: the graph excludes i ~ i


@pytest.mark.parametrize("t", [0.5, 2.0])
def test_heat_kernel_matches_expm(X, t):
    K = heat_kernel(X, n_neighbors=5, t=t)
    assert K.matrix is None  # dense: never formed
    ref = numpy_heat_kernel(X, 5, t)
    full = K.block(np.arange(60), np.arange(60))
    np.testing.assert_allclose(full, ref, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(full, full.T, rtol=1e-8, atol=1e-10)
    rows, cols = [7, 1, 7], [2, 40, 2]
    np.testing.assert_allclose(K.block(rows, cols), ref[np.ix_(rows, cols)], rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(K.diag([0, 33]), np.diag(ref)[[0, 33]], rtol=1e-8)
    # symmetric PSD: exp of a symmetric matrix
    assert np.linalg.eigvalsh((full + full.T) / 2).min() > 0


def test_heat_kernel_cache_is_bounded(X):
    K = heat_kernel(X, n_neighbors=5, t=1.0)
    K._cache_columns = 10
    ref = numpy_heat_kernel(X, 5, 1.0)
    for start in range(0, 60, 8):
        cols = np.arange(start, min(60, start + 8))
        np.testing.assert_allclose(
            K.block([0, 1], cols), ref[np.ix_([0, 1], cols)], rtol=1e-8, atol=1e-10
        )
        assert len(K._cache) <= 10


def test_graph_kernels_accept_float32_and_ints(rng):
    X = rng.integers(0, 50, size=(40, 2)) + rng.uniform(0, 1e-3, size=(40, 2))
    K32 = knn_kernel(X.astype(np.float32), n_neighbors=3)
    K64 = knn_kernel(X, n_neighbors=3)
    np.testing.assert_allclose(
        K32.block(range(40), range(40)), K64.block(range(40), range(40)), rtol=1e-12
    )


@pytest.mark.parametrize("make", [knn_kernel, heat_kernel])
def test_out_of_range_indices(X, make):
    K = make(X, n_neighbors=4)
    with pytest.raises(DKernelError, match=r"row indices must lie in \[0, 60\)"):
        K.block([0, 60], [1])
    with pytest.raises(DKernelError, match=r"row indices must lie in \[0, 60\)"):
        K.block([0], [-1])
    with pytest.raises(DKernelError, match=r"row indices must lie in \[0, 60\)"):
        K.diag([61])


def test_bad_input(X):
    with pytest.raises(DKernelError, match="n_neighbors must be <= 59"):
        knn_kernel(X, n_neighbors=60)
    with pytest.raises(DKernelError, match="n_neighbors must be >= 1"):
        heat_kernel(X, n_neighbors=0)
    with pytest.raises(DKernelError, match="n_neighbors must be int"):
        knn_kernel(X, n_neighbors=2.5)
    with pytest.raises(DKernelError, match="t must be > 0"):
        heat_kernel(X, n_neighbors=3, t=0.0)
    bad = X.copy()
    bad[7, 2] = np.nan
    with pytest.raises(DKernelError, match="X contains NaN at row 7, column 2"):
        knn_kernel(bad, n_neighbors=3)
    with pytest.raises(DKernelError, match="X must be 2-D"):
        heat_kernel(X[:, 0], n_neighbors=3)
    with pytest.raises(DKernelError, match="X is empty"):
        knn_kernel(np.zeros((0, 2)), n_neighbors=1)


def test_heat_kernel_scores_graph_neighbours_above_the_rest(X):
    """Diffusion: a row's graph neighbours get more heat than the rows it is not joined to."""
    K = heat_kernel(X, n_neighbors=5, t=1.0)
    A = numpy_knn_adjacency(X, 5)
    n = len(X)
    block = K.block(np.arange(n), np.arange(n))
    off = ~np.eye(n, dtype=bool)
    assert block[(A > 0) & off].mean() > 5 * block[(A == 0) & off].mean()
    assert (block >= -1e-12).all()
