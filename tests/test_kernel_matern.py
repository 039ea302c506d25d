"""The Matérn nu = 3/2 kernel (``kernel="matern"``): a row of the kernel table, checked
against NumPy, through kernel k-means, BSGD with the exact refit, and the coreset; BSGD
merging refuses it by name."""

from __future__ import annotations

import numpy as np
import pytest

from dkernel import DKernelError
from dkernel.cluster import KernelKMeans, MiniBatchKernelKMeans
from dkernel.coreset import kernel_kmeans_coreset
from dkernel.data import make_checkerboard
from dkernel.kernels import (
    KERNEL_CODES,
    kernel_diag,
    kernel_info,
    pair_matrix,
    pairwise_kernels,
)
from dkernel.svm import BudgetedSVC

GAMMA = 0.3


def blobs(n):
    """Three Gaussian blobs in the plane."""
    r = np.random.default_rng(0)
    centres = np.array([[0.0, 0.0], [3.0, 0.0], [0.0, 3.0]])
    return centres[np.arange(n) % 3] + r.normal(size=(n, 2))


def numpy_matern(X, Y, gamma=GAMMA):
    """(1 + sqrt(3) r / l) exp(-sqrt(3) r / l), r = ||x - y||, l = 1 / sqrt(2 gamma)."""
    X = np.asarray(X, dtype=np.float64)
    Y = np.asarray(Y, dtype=np.float64)
    r = np.sqrt(((X[:, None, :] - Y[None, :, :]) ** 2).sum(-1))
    length = 1.0 / np.sqrt(2.0 * gamma)
    s = np.sqrt(3.0) * r / length
    return (1.0 + s) * np.exp(-s)


def test_the_table_row():
    info = kernel_info("Matern32")
    assert info.name == "matern" and info.radial and info.unit_diagonal
    assert info.merge_power is None  # k(x, z) is not exp(-gamma ||x - z||^p)
    assert info.distance == "sqeuclidean" and info.scale_rule == kernel_info("rbf").scale_rule


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("shape", [(37, 5), (300, 70)])
def test_blocks_match_numpy(rng, dtype, shape):
    X = rng.normal(size=shape).astype(dtype)
    Y = rng.normal(size=(23, shape[1])).astype(dtype)
    tol = {"rtol": 2e-4, "atol": 2e-5} if dtype == np.float32 else {"rtol": 1e-11, "atol": 1e-12}
    g = GAMMA / shape[1]
    for K, ref in (
        (pairwise_kernels(X, Y, kernel="matern", gamma=g), numpy_matern(X, Y, g)),
        (pairwise_kernels(X, kernel="matern", gamma=g), numpy_matern(X, X, g)),
    ):
        assert K.dtype == dtype
        np.testing.assert_allclose(K, ref, **tol)
    K = pairwise_kernels(X, kernel="matern", gamma=g)
    np.testing.assert_array_equal(K, K.T)
    np.testing.assert_array_equal(np.diag(K), 1.0)
    np.testing.assert_array_equal(kernel_diag(X, kernel="matern", gamma=g), np.ones(len(X)))


def test_pair_kernels_match_numpy(rng):
    X, Y = rng.normal(size=(9, 4)), rng.normal(size=(6, 4))
    K = pair_matrix(X, Y, KERNEL_CODES["matern"], GAMMA, 3.0, 0.5)
    np.testing.assert_allclose(K, numpy_matern(X, Y), rtol=1e-12, atol=1e-14)


def test_gamma_none_follows_rbf(rng):
    """gamma means what it means for rbf, so gamma=None resolves as rbf's does."""
    X = rng.normal(size=(200, 3))
    kw = dict(n_clusters=3, max_iter=2, batch_size=64, random_state=0)
    rbf = MiniBatchKernelKMeans(kernel="rbf", **kw).fit(X)
    matern = MiniBatchKernelKMeans(kernel="matern", **kw).fit(X)
    assert matern.gamma_ == rbf.gamma_
    np.testing.assert_allclose(
        pairwise_kernels(X[:5], kernel="matern"), numpy_matern(X[:5], X[:5], 1.0 / 3)
    )


def test_kernel_kmeans_equals_the_numpy_kernel(rng):
    """Full kernel k-means with kernel="matern" and with the NumPy reference as a callable
    find the same clustering."""
    X = blobs(300)
    kw = dict(n_clusters=3, n_init=1, random_state=0)
    a = KernelKMeans(kernel="matern", gamma=GAMMA, **kw).fit(X)
    b = KernelKMeans(kernel=lambda A, B: numpy_matern(A, B), **kw).fit(X)
    np.testing.assert_array_equal(a.labels_, b.labels_)
    assert a.inertia_ == pytest.approx(b.inertia_, rel=1e-9)
    m = MiniBatchKernelKMeans(3, kernel="matern", gamma=GAMMA, max_iter=5, random_state=0)
    labels = m.fit(X).predict(X)
    assert labels.shape == (len(X),) and np.isfinite(m.inertia_)


def test_bsgd_with_the_exact_refit(rng):
    """BudgetedSVC trains with removal and refits exactly; its scores are the model's SVs
    and coefficients under the NumPy kernel."""
    X, y = make_checkerboard(600, random_state=0)
    clf = BudgetedSVC(
        kernel="matern", gamma=2.0, maintenance="remove", budget=60, random_state=0
    ).fit(X, y)
    assert clf.refit_alpha_ is not None
    K = numpy_matern(X[:50], clf.support_vectors_, clf.gamma_)
    ref = K @ clf.dual_coef_[:, 0] + clf.intercept_[0]
    np.testing.assert_allclose(clf.decision_function(X[:50]), ref, rtol=1e-9, atol=1e-9)
    assert clf.score(X, y) > 0.7


def test_bsgd_merging_refuses_matern_by_name(rng):
    X, y = make_checkerboard(100, random_state=0)
    with pytest.raises(DKernelError, match=r"cannot merge support vectors of kernel 'matern'"):
        BudgetedSVC(kernel="matern", maintenance="merge").fit(X, y)


def test_coreset_equals_the_numpy_kernel():
    X = blobs(400)
    a = kernel_kmeans_coreset(X, 60, 3, kernel="matern", gamma=GAMMA, random_state=0)
    b = kernel_kmeans_coreset(X, 60, 3, kernel=lambda A, B: numpy_matern(A, B), random_state=0)
    np.testing.assert_array_equal(a.X, b.X)
    np.testing.assert_allclose(a.weight, b.weight, rtol=1e-9)
    assert a.weight.sum() == pytest.approx(len(X), rel=0.1)
