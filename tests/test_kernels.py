"""dkernel.kernels: kernel values against plain NumPy, the numba kernels, Dask blocks,
bandwidth heuristics, threading, and bad input."""

from __future__ import annotations

import threading

import dask
import dask.array as da
import numpy as np
import pytest

from dkernel import DKernelError
from dkernel.kernels import (
    KERNEL_CODES,
    ONE_BLAS_THREAD,
    cosine_from_gram,
    effective_n_jobs,
    estimate_gamma,
    fast_exp_array,
    kernel_diag,
    kernel_matrix,
    kval,
    laplacian_block,
    laplacian_tile,
    mirror_tile,
    pair_matrix,
    pairwise_from_spec,
    pairwise_kernels,
    poly_from_gram,
    rbf_from_gram,
    resolve_kernel,
    row_sq_norms,
    row_tiles,
    sigmoid_from_gram,
)

KERNELS = ["rbf", "laplacian", "matern", "polynomial", "linear", "sigmoid", "cosine"]
PSD_KERNELS = ["rbf", "laplacian", "matern", "linear", "polynomial", "cosine"]
PARAMS = {"gamma": 0.3, "degree": 3, "coef0": 0.5}


def numpy_kernel(X, Y, kernel, gamma=0.3, degree=3, coef0=0.5):
    """Plain-NumPy float64 reference of every named kernel."""
    X = np.asarray(X, dtype=np.float64)
    Y = np.asarray(Y, dtype=np.float64)
    diff = X[:, None, :] - Y[None, :, :]
    if kernel == "rbf":
        return np.exp(-gamma * (diff**2).sum(-1))
    if kernel == "laplacian":
        return np.exp(-gamma * np.abs(diff).sum(-1))
    if kernel == "matern":  # nu = 3/2, length scale 1 / sqrt(2 gamma)
        s = np.sqrt(3.0) * np.sqrt((diff**2).sum(-1)) * np.sqrt(2.0 * gamma)
        return (1.0 + s) * np.exp(-s)
    G = X @ Y.T
    if kernel == "linear":
        return G
    if kernel == "polynomial":
        return (gamma * G + coef0) ** degree
    if kernel == "sigmoid":
        return np.tanh(gamma * G + coef0)
    if kernel == "cosine":
        nx = np.linalg.norm(X, axis=1)
        ny = np.linalg.norm(Y, axis=1)
        den = np.outer(nx, ny)
        return np.divide(G, den, out=np.zeros_like(G), where=den > 0)
    raise AssertionError(kernel)


@pytest.mark.parametrize("kernel", KERNELS)
def test_pair_kernels_match_numpy(rng, kernel):
    """The numba pair kernels (one value at a time: BSGD's loop) against the reference."""
    X, Y = rng.normal(size=(9, 4)), rng.normal(size=(6, 4))
    code = KERNEL_CODES[kernel]
    ref = numpy_kernel(X, Y, kernel, **PARAMS)
    args = (code, PARAMS["gamma"], float(PARAMS["degree"]), PARAMS["coef0"])
    np.testing.assert_allclose(pair_matrix(X, Y, *args), ref, rtol=1e-12, atol=1e-14)
    one = kval(args[0], *args[1:], X[2], X[2] @ X[2], Y[4], Y[4] @ Y[4])
    assert one == pytest.approx(ref[2, 4], rel=1e-12, abs=1e-14)


def _tol(dtype):
    return {"rtol": 2e-4, "atol": 2e-5} if dtype == np.float32 else {"rtol": 1e-11, "atol": 1e-12}


@pytest.fixture
def XY(rng):
    return rng.normal(size=(37, 5)), rng.normal(size=(23, 5))


# --- values, dtypes, layouts -------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kernel", KERNELS)
def test_values_and_dtype(XY, kernel, dtype):
    X, Y = XY
    K = pairwise_kernels(X.astype(dtype), Y.astype(dtype), kernel=kernel, **PARAMS)
    assert K.dtype == dtype
    assert K.shape == (37, 23)
    ref = numpy_kernel(X.astype(dtype), Y.astype(dtype), kernel)
    np.testing.assert_allclose(K, ref, **_tol(dtype))


@pytest.mark.parametrize("kernel", KERNELS)
def test_mixed_dtypes_give_float64(XY, kernel):
    X, Y = XY
    K = pairwise_kernels(X.astype(np.float32), Y, kernel=kernel, **PARAMS)
    assert K.dtype == np.float64
    np.testing.assert_allclose(
        K, numpy_kernel(X.astype(np.float32), Y, kernel), rtol=1e-10, atol=1e-12
    )


@pytest.mark.parametrize("kernel", KERNELS)
def test_int_input_is_accepted(rng, kernel):
    X = rng.integers(-3, 4, size=(12, 4))
    K = pairwise_kernels(X, kernel=kernel, gamma=0.1, coef0=1.0, degree=2)
    assert K.dtype == np.float64
    np.testing.assert_allclose(
        K, numpy_kernel(X, X, kernel, gamma=0.1, degree=2, coef0=1.0), rtol=1e-11, atol=1e-12
    )


@pytest.mark.parametrize("kernel", KERNELS)
def test_layouts_and_read_only(XY, kernel):
    X, Y = XY
    ref = pairwise_kernels(X, Y, kernel=kernel, **PARAMS)
    Xf, Yf = np.asfortranarray(X), np.asfortranarray(Y)
    Xr, Yr = X.copy(), Y.copy()
    Xr.flags.writeable = False
    Yr.flags.writeable = False
    for A, B in [(Xf, Yf), (Xr, Yr), (Xf, Yr), (X[:, ::-1][:, ::-1], Y)]:
        np.testing.assert_allclose(
            pairwise_kernels(A, B, kernel=kernel, **PARAMS), ref, rtol=1e-12, atol=1e-13
        )
    assert not Xr.flags.writeable  # untouched


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kernel", KERNELS)
def test_symmetric_k_xx(rng, kernel, dtype):
    # d * itemsize >= 512 takes the upper-triangle-and-mirror path; small d the full one
    for d in (3, 140):
        X = rng.normal(size=(50, d)).astype(dtype)
        gamma = 0.3 / d
        K = pairwise_kernels(X, kernel=kernel, gamma=gamma, degree=3, coef0=0.5)
        np.testing.assert_allclose(
            K,
            K.T,
            rtol=1e-6 if dtype == np.float32 else 1e-13,
            atol=1e-7 if dtype == np.float32 else 1e-14,
        )
        ref = numpy_kernel(X, X, kernel, gamma=gamma)
        np.testing.assert_allclose(K, ref, **_tol(dtype))
        np.testing.assert_allclose(
            K,
            pairwise_kernels(X, X, kernel=kernel, gamma=gamma, degree=3, coef0=0.5),
            **_tol(dtype),
        )
        if kernel in ("rbf", "laplacian"):
            assert (np.diag(K) == 1).all()
        if d == 140 or kernel == "laplacian":
            assert (K == K.T).all()  # mirrored: exactly symmetric


@pytest.mark.parametrize("kernel", PSD_KERNELS)
def test_psd_on_small_samples(rng, kernel):
    X = rng.normal(size=(40, 3))
    K = pairwise_kernels(X, kernel=kernel, gamma=0.5, degree=2, coef0=1.0)
    eig = np.linalg.eigvalsh((K + K.T) / 2)
    assert eig.min() >= -1e-10 * max(1.0, eig.max())


def test_gamma_default_is_one_over_features(XY):
    X, Y = XY
    np.testing.assert_allclose(
        pairwise_kernels(X, Y), numpy_kernel(X, Y, "rbf", gamma=1 / 5), rtol=1e-12
    )


def test_aliases(XY):
    X, Y = XY
    np.testing.assert_array_equal(
        pairwise_kernels(X, Y, kernel="gaussian", gamma=0.2),
        pairwise_kernels(X, Y, kernel="rbf", gamma=0.2),
    )
    np.testing.assert_array_equal(
        pairwise_kernels(X, Y, kernel="poly", gamma=0.2),
        pairwise_kernels(X, Y, kernel="polynomial", gamma=0.2),
    )


def test_fractional_degree_polynomial(rng):
    X = rng.uniform(size=(9, 3))
    K = pairwise_kernels(X, kernel="polynomial", gamma=1.0, degree=2.5, coef0=1.0)
    np.testing.assert_allclose(
        K, numpy_kernel(X, X, "polynomial", gamma=1.0, degree=2.5, coef0=1.0), rtol=1e-12
    )


def test_cosine_zero_rows_give_zero(rng):
    X = rng.normal(size=(5, 3))
    X[2] = 0
    K = pairwise_kernels(X, kernel="cosine")
    assert (K[2] == 0).all() and (K[:, 2] == 0).all()


def test_rbf_far_points_underflow_to_zero():
    X = np.array([[0.0], [40.0]])
    for dtype in (np.float32, np.float64):
        K = pairwise_kernels(X.astype(dtype), kernel="rbf", gamma=1.0)
        assert K[0, 1] == 0.0 and K[1, 0] == 0.0 and K[0, 0] == 1.0


def test_float32_rbf_far_from_origin_is_accurate(rng):
    # norms ~ 2.5e4 next to squared distances ~ 0.2: without centring float32's
    # ||x||^2 + ||y||^2 - 2 <x, y> would be off by ~1e-3
    X = (rng.normal(size=(64, 10)) * 0.1 + 50).astype(np.float32)
    Y = (rng.normal(size=(40, 10)) * 0.1 + 50).astype(np.float32)
    for A, B in [(X, Y), (X, None)]:
        K = pairwise_kernels(A, B, gamma=1.0)
        ref = numpy_kernel(A, A if B is None else B, "rbf", gamma=1.0)
        assert np.abs(K - ref).max() < 1e-5


def test_out_argument(XY):
    X, Y = XY
    out = np.empty((37, 23))
    K = pairwise_kernels(X, Y, gamma=0.3, out=out)
    assert K is out
    np.testing.assert_allclose(out, numpy_kernel(X, Y, "rbf"), rtol=1e-12)
    with pytest.raises(DKernelError, match="out must be a C-contiguous float64 array"):
        pairwise_kernels(X, Y, out=np.empty((23, 37)))


# --- tiles and threads ------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kernel", KERNELS)
def test_many_tiles_and_threads_agree(rng, dkernel_config, kernel, dtype):
    dkernel_config({"kernels.tile-bytes": 1, "kernels.min-parallel-work": 0})  # 8-row tiles
    X = rng.normal(size=(61, 70)).astype(dtype)
    Y = rng.normal(size=(45, 70)).astype(dtype)
    kw = dict(kernel=kernel, gamma=0.01, degree=2, coef0=1.0)
    one = pairwise_kernels(X, Y, n_jobs=1, **kw)
    two = pairwise_kernels(X, Y, n_jobs=2, **kw)
    np.testing.assert_array_equal(one, two)
    np.testing.assert_allclose(
        one, numpy_kernel(X, Y, kernel, gamma=0.01, degree=2, coef0=1.0), **_tol(dtype)
    )
    sym1 = pairwise_kernels(X, n_jobs=1, **kw)
    sym2 = pairwise_kernels(X, n_jobs=-1, **kw)
    np.testing.assert_array_equal(sym1, sym2)
    np.testing.assert_allclose(
        sym1, numpy_kernel(X, X, kernel, gamma=0.01, degree=2, coef0=1.0), **_tol(dtype)
    )


def _blas_counts():
    return [lib.get_num_threads() for lib in ONE_BLAS_THREAD.libs()]


@pytest.fixture
def two_blas_threads():
    """BLAS at 2 threads for the test (whatever the machine has), put back afterwards."""
    from threadpoolctl import threadpool_limits

    libs = ONE_BLAS_THREAD.libs()
    if not libs:
        pytest.skip("no BLAS controllable through threadpoolctl")
    with threadpool_limits(2, user_api="blas"):
        yield


def test_blas_limit_restored_when_the_last_exit_is_refused(two_blas_threads):
    """OpenBLAS ignores a raise of its thread count made from a non-main thread while
    another thread is inside BLAS: the last exit of the one-thread limit happens in such a
    thread here. The restore is kept pending, retried, and the count is back at 2."""
    stop = threading.Event()
    in_blas = threading.Event()

    def busy():  # BLAS outside the limit, in another thread
        a = np.random.default_rng(0).random((300, 300))
        while not stop.is_set():
            a @ a
            in_blas.set()

    def limited():
        with ONE_BLAS_THREAD:
            np.ones((50, 50)) @ np.ones((50, 50))

    t = threading.Thread(target=busy)
    t.start()
    try:
        in_blas.wait(5)
        worker = threading.Thread(target=limited)
        worker.start()
        worker.join()
        # the restore may or may not have taken (OpenBLAS only refuses it while the other
        # thread is inside a call); either way the policy sees the caller's count
        assert ONE_BLAS_THREAD.outer_counts() == [2] * len(_blas_counts())
    finally:
        stop.set()
        t.join()
    ONE_BLAS_THREAD.settle()
    assert _blas_counts() == [2] * len(_blas_counts())


def test_n_jobs_rules(dkernel_config):
    from threadpoolctl import threadpool_limits

    dkernel_config({"kernels.cores": 4})
    big = 1 << 30
    with threadpool_limits(limits=4, user_api="blas"):
        assert effective_n_jobs(None, 100, big) == 4
        assert effective_n_jobs(None, 3, big) == 3  # never more threads than tiles
        assert effective_n_jobs(None, 100, 10) == 1  # small work: one thread
        assert effective_n_jobs(2, 100, 10) == 2  # explicit n_jobs wins
        assert effective_n_jobs(-1, 100, 10) == 4
        assert effective_n_jobs(-2, 100, 10) == 3
    with threadpool_limits(limits=2, user_api="blas"):
        assert effective_n_jobs(None, 100, big) == 2  # the caller's BLAS limit caps the default
        assert effective_n_jobs(-1, 100, big) == 4  # explicit n_jobs wins
        seen = []
        t = threading.Thread(target=lambda: seen.append(effective_n_jobs(None, 100, big)))
        t.start()
        t.join()
    assert seen == [1]  # a non-main thread (Dask's threaded scheduler, a worker's pool)


def test_row_tiles_cut_for_threads_only_where_threads_run(dkernel_config):
    """A block too small for threads is tiled by cache size alone, however many cores the
    machine has; a large one gives every core at least two tiles."""
    dkernel_config({"kernels.cores": 16})
    assert row_tiles(256, 256, 21, 4) == [(0, 256)]  # a k-means batch against its windows
    assert row_tiles(85, 85, 21, 8) == [(0, 85)]
    # the cache bound still holds for small work: 2 MiB of output per tile
    dkernel_config({"kernels.tile-bytes": 1 << 16, "kernels.min-parallel-work": 1 << 40})
    assert row_tiles(256, 1024, 2, 4) == [(r, r + 16) for r in range(0, 256, 16)]
    dkernel_config({"kernels.tile-bytes": 1 << 21, "kernels.min-parallel-work": 1 << 24})
    big = row_tiles(65536, 64, 21, 4)  # 155 M flops: threads run, two tiles a core
    assert len(big) == 32 and big[0] == (0, 2048) and big[-1] == (63488, 65536)
    # a task tiles as the client does, but never below 1024 rows for threads (a labels
    # pass block: 128-row tiles made it 1.4x slower)
    assert row_tiles(4096, 256, 21, 4) == [(r, r + 1024) for r in range(0, 4096, 1024)]
    dkernel_config({"kernels.cores": 2})
    assert row_tiles(256, 256, 21, 4) == [(0, 256)]
    assert len(row_tiles(65536, 64, 21, 4)) == 8  # the 2 MiB cache bound: 8192 rows
    assert row_tiles(4096, 256, 21, 4) == [(r, r + 1024) for r in range(0, 4096, 1024)]


@pytest.mark.parametrize("kernel", ["rbf", "linear", "polynomial", "sigmoid", "cosine"])
def test_a_small_block_is_the_same_on_any_core_count(rng, dkernel_config, kernel):
    """Small work runs on one thread everywhere, and is tiled the same everywhere, so its
    float64 products round the same on 1 core and on 64."""
    X = rng.normal(size=(97, 7))
    Y = rng.normal(size=(1000, 7))
    kw = dict(kernel=kernel, gamma=0.1, degree=3, coef0=1.0)
    ref = pairwise_kernels(X, Y, **kw)
    for cores in (1, 2, 16, 64):
        dkernel_config({"kernels.cores": cores})
        np.testing.assert_array_equal(pairwise_kernels(X, Y, **kw), ref)
        np.testing.assert_array_equal(pairwise_kernels(X, Y, n_jobs=cores, **kw), ref)


def test_threadpool_limits_are_respected(dkernel_config):
    from threadpoolctl import threadpool_limits

    dkernel_config({"kernels.cores": 4})
    with threadpool_limits(limits=1, user_api="blas"):
        assert effective_n_jobs(None, 100, 1 << 30) == 1
    with threadpool_limits(limits=3, user_api="blas"):
        assert effective_n_jobs(None, 100, 1 << 30) == 3


def test_cores_setting_is_read_at_call_time(dkernel_config):
    with dask.config.set({"dkernel.kernels.cores": 3}):
        assert effective_n_jobs(-1, 100, 10) == 3
    dkernel_config({"kernels.cores": 5})
    assert effective_n_jobs(-1, 100, 10) == 5
    assert effective_n_jobs(-2, 100, 10) == 4


def test_precomputed_norms_match(rng):
    X = rng.normal(size=(50, 7)).astype(np.float32)
    Y = rng.normal(size=(40, 7)).astype(np.float32)
    spec = resolve_kernel("rbf", 0.1)
    mu = X.mean(axis=0)
    Xc, Yc = X - mu, Y - mu
    got = pairwise_from_spec(
        Xc, Yc, spec, x_sq=(Xc.astype(np.float64) ** 2).sum(1), y_sq=(Yc**2).sum(1)
    )
    np.testing.assert_allclose(got, pairwise_from_spec(X, Y, spec), rtol=1e-5, atol=1e-6)
    cos = resolve_kernel("cosine")
    got = pairwise_from_spec(X, Y, cos, x_sq=(X**2).sum(1), y_sq=(Y**2).sum(1))
    np.testing.assert_allclose(got, pairwise_from_spec(X, Y, cos), rtol=1e-5, atol=1e-6)


def test_one_thread_inside_dask_tasks(scheduler, dkernel_config):
    from threadpoolctl import threadpool_limits

    dkernel_config({"kernels.cores": 4})

    def probe(block):
        return np.array([effective_n_jobs(None, 100, 1 << 30)])

    x = da.zeros(4, chunks=2)
    with threadpool_limits(limits=4, user_api="blas"):
        assert effective_n_jobs(None, 100, 1 << 30) == 4  # here, outside the tasks
        assert x.map_blocks(probe, chunks=(1,)).compute().tolist() == [1, 1]


def test_blas_thread_count_is_restored(rng):
    from threadpoolctl import threadpool_info

    before = [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]
    pairwise_kernels(rng.normal(size=(300, 30)), n_jobs=2)
    after = [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]
    assert before == after


def test_n_jobs_validation(XY):
    with pytest.raises(DKernelError, match="n_jobs must be a positive or negative int, got 0"):
        pairwise_kernels(XY[0], n_jobs=0)
    with pytest.raises(DKernelError, match="n_jobs must be int"):
        pairwise_kernels(XY[0], n_jobs=1.5)


# --- numba kernels ------------------------------------------------------------------------


def _ulps(y, ref):
    ref = ref.astype(y.dtype)
    return np.abs(y.astype(np.float64) - ref.astype(np.float64)) / np.spacing(np.abs(ref))


@pytest.mark.parametrize("dtype,lo,max_ulp", [(np.float64, -708.0, 2), (np.float32, -87.0, 2)])
def test_fast_exp_against_numpy(rng, dtype, lo, max_ulp):
    a = np.concatenate(
        [
            rng.uniform(lo, 0, 20000),
            np.linspace(-3, 0, 5001),
            -np.logspace(-30, 0, 200),
            rng.uniform(0, 5, 100),
        ]
    ).astype(dtype)
    out = np.empty_like(a)
    fast_exp_array(a, out)
    ref = np.exp(a.astype(np.longdouble))  # accurate reference, rounded to dtype below
    assert _ulps(out, ref).max() <= max_ulp
    assert _ulps(out, np.exp(a)).max() <= max_ulp + 1
    zero = np.array([0.0], dtype=dtype)
    fast_exp_array(zero.copy(), zero)
    assert zero[0] == 1.0  # exp(0) is exactly 1: the RBF diagonal


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fast_exp_below_normal_range_is_zero(dtype):
    a = np.array([-1e4, -800.0, -np.inf, np.nan, -1e30], dtype=dtype)
    out = np.full_like(a, 7.0)
    fast_exp_array(a, out)
    assert (out == 0).all()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_numba_transforms_against_numpy(rng, dtype):
    X = rng.normal(size=(11, 4)).astype(dtype)
    Y = rng.normal(size=(13, 4)).astype(dtype)
    G0 = (X @ Y.T).astype(dtype)
    xx, yy = row_sq_norms(X), row_sq_norms(Y)
    np.testing.assert_allclose(xx, (X.astype(np.float64) ** 2).sum(1), rtol=1e-6)
    tol = _tol(dtype)
    for r0, r1, c0 in [(0, 11, 0), (3, 8, 5)]:
        sl = np.s_[r0:r1, c0:]

        G = G0.copy()
        rbf_from_gram(G, xx, yy, 0.4, r0, r1, c0)
        np.testing.assert_allclose(G[sl], numpy_kernel(X, Y, "rbf", gamma=0.4)[sl], **tol)
        untouched = np.ones_like(G, dtype=bool)
        untouched[sl] = False
        np.testing.assert_array_equal(G[untouched], G0[untouched])

        G = G0.copy()
        poly_from_gram(G, 0.4, 1.0, 3.0, r0, r1, c0)
        np.testing.assert_allclose(G[sl], numpy_kernel(X, Y, "polynomial", 0.4, 3, 1.0)[sl], **tol)

        G = G0.copy()
        sigmoid_from_gram(G, 0.4, 1.0, r0, r1, c0)
        np.testing.assert_allclose(G[sl], numpy_kernel(X, Y, "sigmoid", 0.4, 3, 1.0)[sl], **tol)

        G = G0.copy()
        cosine_from_gram(G, np.sqrt(xx), np.sqrt(yy), r0, r1, c0)
        np.testing.assert_allclose(G[sl], numpy_kernel(X, Y, "cosine")[sl], **tol)

        out = np.zeros((11, 13), dtype=dtype)
        laplacian_tile(X, np.ascontiguousarray(Y.T), 0.4, out, r0, r1, c0)
        np.testing.assert_allclose(out[sl], numpy_kernel(X, Y, "laplacian", 0.4)[sl], **tol)
        out = np.zeros((11, 13), dtype=dtype)
        laplacian_block(X, Y, 0.4, out, r0, r1)
        np.testing.assert_allclose(out[r0:r1], numpy_kernel(X, Y, "laplacian", 0.4)[r0:r1], **tol)


def test_mirror_tile():
    K = np.arange(36.0).reshape(6, 6)
    up = np.triu(K)
    for r0, r1 in [(0, 2), (2, 5), (5, 6)]:
        mirror_tile(K, r0, r1)
    np.testing.assert_array_equal(K, up + np.triu(up, 1).T)


# --- kernel_diag, callables, precomputed ---------------------------------------------------


def _callable_kernel(X, Y, scale=1.0):
    return scale * (X @ Y.T) ** 2


@pytest.mark.parametrize("kernel", KERNELS + ["callable", "precomputed"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_kernel_diag_matches_full_matrix(rng, kernel, dtype):
    X = rng.normal(size=(15, 4)).astype(dtype)
    X[3] = 0  # a zero row (cosine's special case)
    kw = dict(gamma=0.3, degree=3, coef0=0.5)
    if kernel == "callable":
        kw = dict(kernel=_callable_kernel, kernel_params={"scale": 2.0})
    elif kernel == "precomputed":
        X = pairwise_kernels(X, kernel="rbf", gamma=0.3)
        kw = dict(kernel="precomputed")
    else:
        kw["kernel"] = kernel
    diag = kernel_diag(X, **kw)
    assert diag.dtype == dtype
    np.testing.assert_allclose(diag, np.diag(pairwise_kernels(X, **kw)), **_tol(dtype))


def test_callable_and_precomputed(XY):
    X, Y = XY
    K = pairwise_kernels(X, Y, kernel=_callable_kernel, kernel_params={"scale": 3.0})
    np.testing.assert_allclose(K, 3.0 * (X @ Y.T) ** 2)
    P = pairwise_kernels(X, Y, kernel="rbf", gamma=0.2)
    np.testing.assert_array_equal(pairwise_kernels(P, Y, kernel="precomputed"), P)
    with pytest.raises(DKernelError, match="a precomputed kernel must be square"):
        kernel_diag(P, kernel="precomputed")
    with pytest.raises(DKernelError, match=r"must be square, got X of shape \(2000, 2\)"):
        pairwise_kernels(np.ones((2000, 2)), kernel="precomputed")  # the data, not K
    with pytest.raises(DKernelError, match="one column per row of Y"):
        pairwise_kernels(P, X, kernel="precomputed")


def test_resolve_kernel():
    spec = resolve_kernel("Gaussian", None, 3, 1.0, None, n_features=4)
    assert spec.kernel == "rbf" and spec.gamma == 0.25 and spec.is_radial
    assert resolve_kernel("linear", None, n_features=4).gamma is None
    assert not resolve_kernel("poly", 1.0).is_radial


def test_private_core_trusts_input(XY):
    X, Y = XY
    spec = resolve_kernel("rbf", 0.3)
    np.testing.assert_allclose(
        pairwise_from_spec(X, Y, spec), numpy_kernel(X, Y, "rbf"), rtol=1e-12
    )


# --- lazy dask blocks ---------------------------------------------------------------------


@pytest.mark.parametrize("kernel", ["rbf", "laplacian", "polynomial", "cosine"])
def test_kernel_matrix_blocks(scheduler, rng, kernel):
    X = rng.normal(size=(50, 4))
    Y = rng.normal(size=(30, 4))
    ref = pairwise_kernels(X, Y, kernel=kernel, gamma=0.3)
    Xd = da.from_array(X, chunks=(17, 4))
    Yd = da.from_array(Y, chunks=(12, 2))  # column chunks are merged
    for A, B, kw in [(Xd, Yd, {}), (X, Y, {"chunks": 16}), (Xd, Y, {"chunks": 7})]:
        K = kernel_matrix(A, B, kernel=kernel, gamma=0.3, **kw)
        assert isinstance(K, da.Array)
        assert K.dtype == np.float64
        np.testing.assert_allclose(K.compute(), ref, rtol=1e-12, atol=1e-14)
    K = kernel_matrix(Xd, Yd, kernel=kernel, gamma=0.3)
    assert K.chunks == (Xd.chunks[0], (12, 12, 6))
    assert len(K.dask.layers[K.name]) == K.npartitions == 3 * 3  # one task per block


def test_kernel_matrix_symmetric_float32(scheduler, rng):
    X = rng.normal(size=(40, 3)).astype(np.float32)
    K = kernel_matrix(da.from_array(X, chunks=(15, 3)), gamma=0.5)
    assert K.dtype == np.float32
    Kc = K.compute()
    assert Kc.dtype == np.float32
    np.testing.assert_allclose(Kc, pairwise_kernels(X, gamma=0.5), rtol=1e-6, atol=1e-7)
    assert (np.diag(Kc) == 1).all()  # diagonal blocks take the symmetric path
    for s0, s1 in [(0, 15), (15, 30), (30, 40)]:
        np.testing.assert_allclose(Kc[s0:s1, s0:s1], Kc[s0:s1, s0:s1].T, rtol=1e-6)


def test_kernel_matrix_nonfinite_block_names_row(scheduler, rng):
    X = rng.normal(size=(20, 3))
    X[13, 2] = np.nan
    K = kernel_matrix(da.from_array(X, chunks=(5, 3)), gamma=0.5)
    with pytest.raises(DKernelError, match=r"X contains NaN at row 13, column 2"):
        K.compute()
    Y = rng.normal(size=(9, 3))
    Y[7, 0] = np.inf
    K = kernel_matrix(da.from_array(X[:10], chunks=(5, 3)), da.from_array(Y, chunks=(4, 3)))
    with pytest.raises(DKernelError, match=r"Y contains inf at row 7, column 0"):
        K.compute()


def test_kernel_matrix_bad_input(rng):
    X = da.from_array(rng.normal(size=(10, 3)), chunks=5)
    with pytest.raises(DKernelError, match="X has 3 features but Y has 2"):
        kernel_matrix(X, rng.normal(size=(4, 2)))
    with pytest.raises(DKernelError, match="must be 2-D"):
        kernel_matrix(da.zeros(5, chunks=2))
    with pytest.raises(DKernelError, match="non-empty"):
        kernel_matrix(np.zeros((0, 3)))
    with pytest.raises(DKernelError, match="not 'precomputed'"):
        kernel_matrix(X, kernel="precomputed")


# --- bandwidth ----------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["median", "mean"])
@pytest.mark.parametrize("kernel", ["rbf", "laplacian"])
def test_estimate_gamma_against_numpy(rng, method, kernel):
    from dkernel.data import sample_rows

    X = rng.normal(size=(400, 3))
    S = sample_rows(X, 150, random_state=7, replace=False)
    diff = S[:, None, :] - S[None, :, :]
    D = np.abs(diff).sum(-1) if kernel == "laplacian" else (diff**2).sum(-1)
    D = D[np.triu_indices(150, 1)]
    D = D[D > 0]
    ref = 1.0 / (np.median(D) if method == "median" else D.mean())
    got = estimate_gamma(X, method=method, kernel=kernel, sample_size=150, random_state=7)
    assert got == pytest.approx(ref, rel=1e-12)


def test_estimate_gamma_numpy_and_dask_agree(scheduler, rng):
    X = rng.normal(size=(500, 4))
    a = estimate_gamma(X, sample_size=100, random_state=3)
    b = estimate_gamma(da.from_array(X, chunks=(64, 4)), sample_size=100, random_state=3)
    assert a == b
    assert estimate_gamma(X, sample_size=100, random_state=4) != a  # the seed matters


def test_estimate_gamma_bad_input(rng):
    X = rng.normal(size=(10, 2))
    with pytest.raises(DKernelError, match="method must be 'median' or 'mean'"):
        estimate_gamma(X, method="mode")
    with pytest.raises(DKernelError, match="supports 'rbf', 'laplacian'"):
        estimate_gamma(X, kernel="linear")
    with pytest.raises(DKernelError, match="sample_size must be >= 2"):
        estimate_gamma(X, sample_size=1)
    with pytest.raises(DKernelError, match="at least 2 rows"):
        estimate_gamma(X[:1])
    with pytest.raises(DKernelError, match="all sampled rows are identical"):
        estimate_gamma(np.ones((5, 2)))


# --- bad input ----------------------------------------------------------------------------


@pytest.mark.parametrize("bad,what", [(np.nan, "NaN"), (np.inf, "inf"), (-np.inf, "inf")])
def test_nonfinite_input_names_row_and_column(rng, bad, what):
    X = rng.normal(size=(6, 3))
    Y = rng.normal(size=(4, 3))
    X[4, 1] = bad
    with pytest.raises(DKernelError, match=rf"X contains {what} at row 4, column 1"):
        pairwise_kernels(X)
    with pytest.raises(DKernelError, match=rf"Y contains {what} at row 4, column 1"):
        pairwise_kernels(Y, X)
    with pytest.raises(DKernelError, match=rf"X contains {what} at row 4, column 1"):
        kernel_diag(X)


def test_bad_shapes_and_parameters(rng):
    X = rng.normal(size=(6, 3))
    with pytest.raises(DKernelError, match=r"X must be 2-D \(n_samples, n_features\)"):
        pairwise_kernels(X[0])
    with pytest.raises(DKernelError, match=r"Y must be 2-D"):
        pairwise_kernels(X, np.zeros((2, 3, 1)))
    with pytest.raises(DKernelError, match=r"X is empty \(shape \(0, 3\)\)"):
        pairwise_kernels(np.zeros((0, 3)))
    with pytest.raises(DKernelError, match="X has 3 features but Y has 2"):
        pairwise_kernels(X, rng.normal(size=(4, 2)))
    with pytest.raises(DKernelError, match="unknown kernel 'gauss'"):
        pairwise_kernels(X, kernel="gauss")
    with pytest.raises(DKernelError, match="unknown kernel 3"):
        pairwise_kernels(X, kernel=3)
    for gamma in (0.0, -1.0):
        with pytest.raises(DKernelError, match="gamma must be > 0"):
            pairwise_kernels(X, gamma=gamma)
    with pytest.raises(DKernelError, match="gamma must be finite"):
        pairwise_kernels(X, gamma=np.inf)
    with pytest.raises(DKernelError, match="degree must be >= 0"):
        pairwise_kernels(X, kernel="poly", degree=-1)
    with pytest.raises(DKernelError, match="X must be numeric"):
        pairwise_kernels(np.array([["a", "b"]]))
    with pytest.raises(DKernelError, match="sparse input is not supported"):
        import scipy.sparse as sp

        pairwise_kernels(sp.csr_matrix(X))


def test_dask_scheduler_fixture_sees_dask(scheduler):
    # the threaded scheduler (None) or the LocalCluster client is the current scheduler
    if scheduler is None:
        assert dask.config.get("scheduler") == "threads"
    else:
        assert scheduler.status == "running"
