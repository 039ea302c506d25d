"""The exact solve of the coefficients over BSGD's support vectors (``refit``)."""

import dask.array as da
import numpy as np
import pytest
from sklearn.datasets import load_digits
from sklearn.svm import LinearSVC

from dkernel import DKernelError
from dkernel.kernels import KernelSpec
from dkernel.svm import BudgetedSVC
from dkernel.svm import _refit as R
from dkernel.svm.stream import PART_ROWS, row_parts


def _board(n, seed=0):
    X = np.random.default_rng(seed).uniform(0, 4, size=(n, 2))
    y = np.where((np.floor(X[:, 0]) + np.floor(X[:, 1])) % 2 == 0, 1, -1)
    return X, y


def _objective(X, y, Z, coef, intercept, spec, alpha, w=None, icpt=0.0):
    """``alpha/2 (beta^T K beta + b^2) + 1/n sum w sqhinge``, straight from the definition."""
    K = R._BaseKernelEstimator._kernel(Z, Z, spec)
    f = R._BaseKernelEstimator._kernel(X, Z, spec) @ coef[:, 0] + intercept[0]
    w = np.ones(len(y)) if w is None else w
    loss = np.sum(w * np.maximum(0.0, 1.0 - y * f) ** 2) / len(y)
    reg = coef[:, 0] @ K @ coef[:, 0]
    if icpt > 0:
        reg += (intercept[0] / icpt) ** 2
    return 0.5 * alpha * reg + loss


def _solve(X, y, Z, *, alpha, w=None, icpt=0.0, coef=None, tol=1e-8, client=None):
    spec = KernelSpec("rbf", 2.0, 3, 1.0, {})
    classes = np.unique(np.asarray(y))
    c = 1 if len(classes) == 2 else len(classes)
    coef = np.zeros((len(Z), c)) if coef is None else coef
    return R.refit(
        X, y, w, classes=classes, Z=Z, coef=coef, intercept=np.zeros(c), spec=spec,
        icpt=icpt, scaler=None, alpha=alpha, tol=tol, max_iter=100, client=client,
    )  # fmt: skip


def test_solution_is_the_minimum_and_matches_liblinear():
    X, y = _board(1500)
    Z = X[:40]
    alpha = 1e-3
    spec = KernelSpec("rbf", 2.0, 3, 1.0, {})
    res = _solve(X, y, Z, alpha=alpha)
    f = _objective(X, y, Z, res.coef, res.intercept, spec, alpha)
    # liblinear's primal solve of the same whitened problem (C = 1 / (alpha n))
    basis, _ = R.make_basis(Z, spec, 0.0)
    F = R.features(X, basis)
    ll = LinearSVC(C=1 / (alpha * len(y)), fit_intercept=False, dual=False, tol=1e-10)
    ll.fit(F, y)
    beta = basis.T @ ll.coef_.T
    f_ll = _objective(X, y, Z, beta, np.zeros(1), spec, alpha)
    assert f <= f_ll * (1 + 1e-7)
    np.testing.assert_allclose(res.coef, beta, rtol=1e-4, atol=1e-4 * np.abs(beta).max())
    # a perturbation raises the objective: a minimum, not just a stationary guess
    g = np.random.default_rng(0).normal(size=res.coef.shape) * 1e-3
    assert _objective(X, y, Z, res.coef + g, res.intercept, spec, alpha) > f


def test_warm_start_reaches_the_same_minimum():
    X, y = _board(1200)
    Z = X[:30]
    cold = _solve(X, y, Z, alpha=1e-3)
    warm = _solve(X, y, Z, alpha=1e-3, coef=cold.coef + 0.1)
    np.testing.assert_allclose(warm.coef, cold.coef, rtol=1e-5, atol=1e-6)
    again = _solve(X, y, Z, alpha=1e-3, coef=cold.coef)
    assert again.n_iter <= 1


def test_integer_weights_equal_repeated_rows():
    X, y = _board(800)
    Z = X[:25]
    w = np.random.default_rng(1).integers(0, 3, size=len(y)).astype(float)
    rep = np.repeat(np.arange(len(y)), w.astype(int))
    alpha = 1e-3
    a = _solve(X, y, Z, alpha=alpha, w=w)
    # the same C = 1 / (alpha n): n counts rows, so the repeated set needs alpha * n / n_rep
    b = _solve(X[rep], y[rep], Z, alpha=alpha * len(y) / len(rep))
    np.testing.assert_allclose(a.coef, b.coef, rtol=1e-5, atol=1e-6)


def test_intercept_is_the_weight_of_a_regularised_constant_feature():
    X, y = _board(1000)
    y = np.where(X[:, 0] + X[:, 1] > 5.0, 1, -1)  # unbalanced: the intercept matters
    Z = X[:30]
    spec = KernelSpec("rbf", 2.0, 3, 1.0, {})
    res = _solve(X, y, Z, alpha=1e-3, icpt=1.0)
    assert res.intercept[0] != 0.0
    f = _objective(X, y, Z, res.coef, res.intercept, spec, 1e-3, icpt=1.0)
    for db in (-1e-2, 1e-2):
        assert _objective(X, y, Z, res.coef, res.intercept + db, spec, 1e-3, icpt=1.0) > f


def test_multiclass_one_vs_rest_columns_are_the_binary_solutions():
    X, y = load_digits(return_X_y=True)
    X, y = X[:600] / 16, y[:600]
    spec = KernelSpec("rbf", 2.0, 3, 1.0, {})
    Z = X[::20]
    multi = _solve(X, y, Z, alpha=1e-3)
    assert multi.coef.shape == (len(Z), 10)
    for k in (0, 7):
        yk = np.where(y == k, 1, -1)
        one = _solve(X, yk, Z, alpha=1e-3)
        np.testing.assert_allclose(multi.coef[:, k], one.coef[:, 0], rtol=1e-5, atol=1e-6)
    del spec


def test_row_parts_are_balanced_and_fixed_by_n():
    parts = row_parts(10)
    assert parts[0][0] == 0 and parts[-1][1] == 10
    sizes = [e - s for s, e in parts]
    assert len(parts) == 8 and max(sizes) - min(sizes) <= 1
    assert len(row_parts(3)) == 3
    assert len(row_parts(10 * PART_ROWS)) == 10


def test_refit_improves_bsgd_and_is_on_by_default():
    X, y = load_digits(return_X_y=True)
    sd = X.std(axis=0)
    X = (X - X.mean(axis=0)) / np.where(sd > 0, sd, 1.0)
    kw = dict(budget=60, gamma=1 / 64, max_iter=1, random_state=0)
    sgd = BudgetedSVC(refit=False, **kw).fit(X[:1200], y[:1200])
    exact = BudgetedSVC(**kw).fit(X[:1200], y[:1200])
    np.testing.assert_array_equal(exact.support_vectors_, sgd.support_vectors_)
    assert exact.score(X[1200:], y[1200:]) >= sgd.score(X[1200:], y[1200:]) + 0.01


def test_default_refit_is_the_minimum_at_its_own_weaker_alpha(tmp_path):
    """alpha=None: the SGD passes at 1/(4n), the refit the minimum of its objective at
    1/(10n); a given alpha serves both."""
    X, y = _board(2000)
    n = len(y)
    kw = dict(budget=30, gamma=2.0, max_iter=2, random_state=0)
    auto = BudgetedSVC(**kw).fit(X, y)
    same = BudgetedSVC(alpha=0.25 / n, **kw).fit(X, y)
    assert auto.alpha_ == same.alpha_ == pytest.approx(0.25 / n)
    assert auto.refit_alpha_ == pytest.approx(0.1 / n)
    assert same.refit_alpha_ == pytest.approx(0.25 / n)
    np.testing.assert_array_equal(auto.support_vectors_, same.support_vectors_)
    assert not np.allclose(auto.dual_coef_, same.dual_coef_)
    spec = KernelSpec("rbf", 2.0, 3, 1.0, {})
    Z, yy = auto.support_vectors_, np.where(y == auto.classes_[1], 1, -1)

    def f(model, alpha):
        return _objective(X, yy, Z, model.dual_coef_, model.intercept_, spec, alpha)

    assert f(auto, 0.1 / n) < f(same, 0.1 / n)
    assert f(same, 0.25 / n) < f(auto, 0.25 / n)
    assert auto.summary()["refit_alpha"] == auto.refit_alpha_
    auto.save(tmp_path / "m.npz")
    assert BudgetedSVC.load(tmp_path / "m.npz").refit_alpha_ == auto.refit_alpha_
    assert BudgetedSVC(refit=False, **kw).fit(X, y).refit_alpha_ is None
    perceptron = BudgetedSVC(algorithm="perceptron", alpha=1e-3, **kw).fit(X, y)
    assert (perceptron.alpha_, perceptron.refit_alpha_) == (0.0, 1e-3)  # its SGD ignores alpha
    assert auto.partial_fit(X[:100], y[:100]).refit_alpha_ is None  # no refit: SGD's model


def test_refit_on_workers_same_model_for_any_worker_count(local_cluster_client):
    X, y = _board(6000)
    Xd = da.from_array(X, chunks=(6000, 2))  # one chunk: the refit still splits the rows
    yd = da.from_array(y, chunks=6000)
    Z = X[:30]
    here = _solve(X, y, Z, alpha=1e-3, tol=1e-6)
    one = _solve(Xd, yd, Z, alpha=1e-3, tol=1e-6, client=_OneWorker(local_cluster_client))
    two = _solve(Xd, yd, Z, alpha=1e-3, tol=1e-6, client=local_cluster_client)
    np.testing.assert_array_equal(one.coef, two.coef)
    np.testing.assert_allclose(two.coef, here.coef, rtol=1e-9, atol=1e-9)


class _OneWorker:
    """The cluster's client seen as if it had its first worker only (every part placed
    there)."""

    def __init__(self, client):
        self._client = client

    def nthreads(self):
        threads = self._client.nthreads()
        first = sorted(threads)[0]
        return {first: threads[first]}

    def __getattr__(self, name):
        return getattr(self._client, name)


@pytest.mark.parametrize("bad", ["yes", 1, None, "crammer-singer", "OVR"])
def test_refit_must_be_a_bool_or_a_loss(bad):
    X, y = _board(100)
    msg = "refit must be one of True, False, 'ovr', 'weston_watkins', 'crammer_singer'; got"
    with pytest.raises(DKernelError, match=msg):
        BudgetedSVC(refit=bad, budget=10).fit(X, y)
    with pytest.raises(DKernelError, match=msg):  # before any data is read
        BudgetedSVC(refit=bad).check_params()


def _blobs_case(n, seed=0):
    """The issue's case, scaled down: 4 Gaussian blobs (scale 3) in 20-d, label = outside
    the median radius of a 5-d sphere around the row's blob centre, feature 3 x 1000."""
    from sklearn.datasets import make_blobs

    X, blob, centers = make_blobs(
        n_samples=n, n_features=20, centers=4, cluster_std=3.0, random_state=seed,
        return_centers=True,
    )  # fmt: skip
    r = np.linalg.norm(X[:, :5] - centers[blob, :5], axis=1)
    y = (r > np.median(r)).astype(np.int64)
    X[:, 3] *= 1000.0
    return X, y


def test_defaults_on_a_store_under_a_client_are_never_the_worse_choice(
    tmp_path, local_cluster_client
):
    from sklearn.svm import SVC

    from dkernel.data import write_arrays

    X, y = _blobs_case(12000)
    ntr = 9600
    ds = write_arrays(
        tmp_path / "blobs.zarr", [(X[:ntr], y[:ntr])], n=ntr, n_features=20,
        dtype=np.float64, chunk_rows=ntr // 2, has_y=True, attrs={},
    )  # fmt: skip
    kw = dict(budget=200, standardize=True, random_state=0)
    with local_cluster_client.as_current():
        default = BudgetedSVC(**kw).fit(str(ds.path))
        seq = BudgetedSVC(distributed=False, **kw).fit(str(ds.path))
    acc_default = default.score(X[ntr:], y[ntr:])
    acc_seq = seq.score(X[ntr:], y[ntr:])
    # as in the issue, SVC on an eighth of the training rows (20k of 160k there)
    sd = X[:ntr].std(axis=0)
    svc = SVC(gamma=1 / 20).fit(X[: ntr // 8] / sd, y[: ntr // 8])
    acc_svc = svc.score(X[ntr:] / sd, y[ntr:])
    assert acc_default >= acc_seq - 0.003
    assert acc_default >= acc_svc - 0.02
    # and the SGD coefficients alone were far from both
    sgd = BudgetedSVC(refit=False, **kw).fit(X[:ntr], y[:ntr]).score(X[ntr:], y[ntr:])
    assert acc_default >= sgd + 0.02


def test_features_recomputed_per_pass_when_they_do_not_fit(dkernel_config):
    X, y = _board(3000)
    Z = X[:30]
    w = np.random.default_rng(2).uniform(0.5, 2.0, size=len(y))
    cached = _solve(X, y, Z, alpha=1e-3, w=w, icpt=1.0)
    dkernel_config({"svm.refit-feature-cache-bytes": 0})
    recomputed = _solve(X, y, Z, alpha=1e-3, w=w, icpt=1.0)
    np.testing.assert_array_equal(recomputed.coef, cached.coef)
    np.testing.assert_array_equal(recomputed.intercept, cached.intercept)


# ----------------------------------------------------------------------------- joint losses
JOINT = ["weston_watkins", "crammer_singer"]


def _three(n, seed=0):
    """Three classes on the board: diagonal stripes."""
    X = np.random.default_rng(seed).uniform(0, 4, size=(n, 2))
    return X, (np.floor(X[:, 0]) + np.floor(X[:, 1])).astype(int) % 3


def _joint_objective(loss, X, y, Z, coef, intercept, spec, alpha, icpt=1.0):
    """``alpha/2 sum_j (beta_j^T K beta_j + (b_j/icpt)^2) + 1/n sum_i`` (the sum over
    r != y_i (Weston-Watkins) or the largest (Crammer-Singer) of) ``max(0, 1 - f_y +
    f_r)^2``, straight from the definition."""
    K = R._BaseKernelEstimator._kernel(Z, Z, spec)
    f = R._BaseKernelEstimator._kernel(X, Z, spec) @ coef + intercept
    rows = np.arange(len(y))
    slack = np.maximum(0.0, 1.0 - f[rows, y][:, None] + f)
    slack[rows, y] = 0.0
    per_row = (slack**2).sum(axis=1) if loss == "weston_watkins" else (slack**2).max(axis=1)
    reg = np.einsum("ij,ik,kj->", coef, K, coef) + np.sum((intercept / icpt) ** 2)
    return 0.5 * alpha * reg + per_row.mean()


def _three_part(n=400, seed=0):
    X, y = _three(n, seed)
    spec = KernelSpec("rbf", 2.0, 3, 1.0, {})
    basis, _ = R.make_basis(X[:25], spec, 1.0)
    w = np.random.default_rng(seed).uniform(0.5, 2.0, size=n)
    return R.make_part([(X, y, w)], basis, True), basis


@pytest.mark.parametrize("loss", JOINT)
def test_joint_loss_gradient_hessian_and_line_match_the_loss(loss):
    part, basis = _three_part()
    obj = R.OBJECTIVES[loss]
    rng = np.random.default_rng(1)
    V = rng.normal(size=(basis.width, 3))

    def value(V):
        return obj.grad(part, basis, V, False)[0, -1, 0]

    def grad(V):
        return obj.grad(part, basis, V, False)[0, :-1]

    st = obj.grad(part, basis, V, True)
    eps = 1e-6
    num = np.zeros_like(V)
    for i, j in np.ndindex(*V.shape):
        E = np.zeros_like(V)
        E[i, j] = eps
        num[i, j] = (value(V + E) - value(V - E)) / (2 * eps)
    np.testing.assert_allclose(st[0, :-1], num, rtol=1e-6, atol=1e-6 * np.abs(num).max())
    assert np.all(st[0, -1, 1:] == 0.0)  # one loss per row, in column 0
    zero = grad(np.zeros_like(V))
    if loss == "weston_watkins":  # differentiable at zero
        np.testing.assert_allclose(st[2, :-1], zero, rtol=1e-12, atol=1e-9)
    else:  # all classes tie at zero: the runner-up's share spread over the c - 1 others
        ww = R.part_grad_ww(part, basis, V, True)[2, :-1]
        np.testing.assert_allclose(st[2, :-1], ww / 2, rtol=1e-12, atol=1e-12)
    # the Hessian-vector product and its diagonal, as the finite differences see them
    D = rng.normal(size=V.shape)
    HD = obj.hess(part, basis, V, D)
    fd = (grad(V + eps * D) - grad(V - eps * D)) / (2 * eps)
    np.testing.assert_allclose(HD, fd, rtol=1e-5, atol=1e-6 * np.abs(fd).max())
    for i, j in [(0, 0), (3, 1), (basis.width - 1, 2)]:
        E = np.zeros_like(V)
        E[i, j] = 1.0
        assert obj.hess(part, basis, V, E)[i, j] == pytest.approx(st[1, i, j], rel=1e-9)
    _check_trial(obj, part, basis, V, rng.normal(size=V.shape) * 0.1)


def _check_trial(obj, part, basis, V, S):
    """The trial pass holds the gradient pass's sums at ``V + S`` and ``V + S / 2`` and the
    losses at ``V + t S`` for every t of the line search."""
    packed = obj.trial(part, basis, V, S)
    shape = (3, basis.width + 1, V.shape[1])
    size = int(np.prod(shape))
    assert packed.shape == (2 * size + len(R._STEPS) * V.shape[1],)
    at = packed[: 2 * size].reshape(2, *shape)
    line = packed[2 * size :].reshape(len(R._STEPS), -1)
    for j, t in enumerate((1.0, R._HALF)):  # the bits the gradient pass at V + t S gives
        np.testing.assert_array_equal(at[j], obj.grad(part, basis, V + S * t, False))
    for k in (0, 1, 5, 11):
        loss = obj.grad(part, basis, V + R._STEPS[k] * S, False)[0, -1]
        np.testing.assert_allclose(line[k], loss, rtol=1e-9)


@pytest.mark.parametrize("c", [1, 3])
def test_one_vs_rest_trial_pass_matches_the_gradient_pass(c):
    """One-vs-rest's trial pass computes its sums tile by tile beside the line's losses
    (not by a gradient pass per step): the same bits as those passes."""
    part, basis = _three_part()
    if c == 1:
        part = part._replace(yi=(part.yi == 1).astype(part.yi.dtype))
    rng = np.random.default_rng(2)
    V = rng.normal(size=(basis.width, c)) * 0.3
    _check_trial(R.OVR, part, basis, V, rng.normal(size=V.shape) * 0.3)


@pytest.mark.parametrize("loss", ["ovr", *JOINT])
def test_a_trial_pass_makes_each_tiles_features_once(loss):
    """Features that do not fit in memory are made per tile as a pass reads it: a trial
    pass (two gradient points and the line) makes each tile's once, as a gradient pass
    does, with the bits of the separate passes. The kernel counts its calls."""
    made = []

    def rbf(A, B):
        made.append(len(A))
        return np.exp(-2.0 * ((A[:, None, :] - B[None, :, :]) ** 2).sum(axis=2))

    n = 2 * R._TILE_ROWS + 500
    X, y = _three(n)
    basis, _ = R.make_basis(X[:25], KernelSpec(rbf, None, 3, 1.0, {}), 1.0)
    part = R.make_part([(X, y, np.ones(n))], basis, False)  # the rows, not their features
    rng = np.random.default_rng(3)
    V = rng.normal(size=(basis.width, 3)) * 0.3
    S = rng.normal(size=V.shape) * 0.1
    obj = R.OBJECTIVES[loss]
    tiles = [R._TILE_ROWS, R._TILE_ROWS, 500]
    made.clear()
    obj.trial(part, basis, V, S)
    assert made == tiles
    made.clear()
    obj.grad(part, basis, V, False)
    assert made == tiles
    _check_trial(obj, part, basis, V, S)


@pytest.mark.parametrize("dense", [True, False])
def test_newton_steps_take_one_pass_each_when_the_line_search_takes_a_full_or_half_step(dense):
    """A Newton step costs one trial pass (and CG's Hessian passes when the Hessian is not
    formed): the line search's losses and the next gradient (and Gram sums) come with the
    trial whenever it takes the full or the half step; only another step length costs a
    gradient pass of its own. The formed Hessian costs one pass over the rows first."""
    X, y = _three(1500)
    coef = np.random.default_rng(0).normal(size=(40, 3)) * 3  # a start far from the minimum
    calls, trials = [], []
    orig_pass, orig_trial = R._Passes._pass, R._trial

    def counted(self, op, args, gram):
        calls.append(op.__name__)
        assert gram == (dense and op is not R.part_energy)
        return orig_pass(self, op, args, gram)

    def trial(*args, **kwargs):
        t, st, G = orig_trial(*args, **kwargs)
        assert (G is not None) == (dense and st is not None)
        trials.append((t, st is not None))
        return t, st, G

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(R._Passes, "_pass", counted)
        mp.setattr(R, "_trial", trial)
        if not dense:
            mp.setattr(R, "_DENSE_BYTES", 0)
        res = _joint_solve(X, y, X[:40], "ovr", alpha=1e-4, coef=coef, tol=1e-8, max_iter=30)
    assert calls.count("part_trial") == len(trials) == res.n_iter
    if not dense:  # a half step was taken, its gradient from the trial (dense: below)
        assert any(R._HALF in t and reused for t, reused in trials)
    assert calls.count("part_grad") == 1 + sum(not reused for _, reused in trials)
    assert calls.count("part_energy") == int(dense)
    assert (calls.count("part_hess") > 0) != dense
    assert len(calls) == res.n_passes


def test_a_trial_gives_the_gradient_and_gram_sums_of_the_step_each_column_takes():
    """Per column the first step meeting Armijo's rule; the next gradient sums and (with
    formed Hessians) Gram sums are the trial's at that column's point: the half step's
    where it took the half step, the full step's elsewhere."""
    shape = (3, 3, 2)  # width 2, two columns
    rng = np.random.default_rng(0)
    at = rng.normal(size=(2, *shape))
    loss = np.zeros((len(R._STEPS), 2))
    loss[0, 0] = 100.0  # column 0's full step fails the rule, its half step meets it
    packed = np.concatenate([at.ravel(), loss.ravel()])
    V, S = np.zeros((2, 2)), np.ones((2, 2))
    f, gs, todo = np.full(2, 10.0), np.full(2, -1.0), np.ones(2, bool)
    grams = rng.normal(size=(2, 2, 3))  # (points, columns, upper triangle of 2 x 2)
    t, st, G = R._trial(packed, shape, V, S, 1.0, f, gs, todo, False, grams=grams)
    np.testing.assert_array_equal(t, [R._HALF, 1.0])
    np.testing.assert_array_equal(st[..., 0], at[1][..., 0])
    np.testing.assert_array_equal(st[..., 1], at[0][..., 1])
    np.testing.assert_array_equal(G, [grams[1][0], grams[0][1]])
    t, st, G = R._trial(packed, shape, V, S, 1.0, f, gs, todo, False)  # CG: no Gram sums
    np.testing.assert_array_equal(t, [R._HALF, 1.0])
    assert G is None
    loss[1, 0] = 100.0  # a quarter step: no sums from the trial
    packed = np.concatenate([at.ravel(), loss.ravel()])
    t, st, G = R._trial(packed, shape, V, S, 1.0, f, gs, todo, False, grams=grams)
    assert t[0] == 0.25 and st is None and G is None


def test_gram_sums_are_exact_in_any_grouping():
    """Each part's Gram sums are rounded to a grid set by the rows' feature energies, so
    they add to the same bits in any order and grouping (the workers add their own parts
    first), and they are the Gram of the active rows to about 1e-14 of the largest entry."""
    X, y = _three(3000)
    spec = KernelSpec("rbf", 2.0, 3, 1.0, {})
    basis, _ = R.make_basis(X[:60], spec, 1.0)
    w = np.random.default_rng(1).uniform(0.5, 2.0, len(y))
    parts = [R.make_part([(X[a:b], y[a:b], w[a:b])], basis, True) for a, b in R.row_parts(3000, 12)]
    V = np.random.default_rng(2).normal(size=(basis.width, 3)) * 0.5
    grid = R._grid(sum(R.part_energy(p, basis) for p in parts))
    grams = [R.part_grad(p, basis, V, False, grid)[1] for p in parts]
    assert grams[0].shape == (3, basis.width * (basis.width + 1) // 2)  # upper triangles
    total = R.add_in_order(grams)
    for order in (list(range(12))[::-1], [5, 0, 11, 3, 2, 9, 1, 8, 4, 7, 6, 10]):
        np.testing.assert_array_equal(R.add_in_order([grams[k] for k in order]), total)
    grouped = [R.add_in_order(grams[a:b]) for a, b in [(0, 5), (5, 6), (6, 12)]]  # per worker
    np.testing.assert_array_equal(R.add_in_order(grouped[::-1]), total)
    F = R.features(X, basis)
    Y = np.where(y[:, None] == np.arange(3), 1.0, -1.0)
    total = R._unpacked(total, basis.width)
    for j in range(3):
        act = Y[:, j] * (F @ V[:, j]) < 1.0
        ref = F[act].T @ (F[act] * 2.0 * w[act, None])
        np.testing.assert_allclose(total[j], ref, rtol=0, atol=1e-13 * np.abs(ref).max())
    # the CG path's ops are unchanged: no grid, no Gram sums
    assert isinstance(R.part_grad(parts[0], basis, V, False), np.ndarray)


def _joint_solve(X, y, Z, loss, *, alpha=1e-3, coef=None, tol=1e-6, max_iter=100, client=None):
    spec = KernelSpec("rbf", 2.0, 3, 1.0, {})
    coef = np.zeros((len(Z), 3)) if coef is None else coef
    return R.refit(
        X, y, None, classes=np.arange(3), Z=Z, coef=coef, intercept=np.zeros(3), spec=spec,
        icpt=1.0, scaler=None, alpha=alpha, tol=tol, max_iter=max_iter, client=client,
        multi_class=loss,
    )  # fmt: skip


def test_weston_watkins_newton_meets_its_stop_and_improves_the_warm_start():
    X, y = _three(1500)
    Z = X[:40]
    spec = KernelSpec("rbf", 2.0, 3, 1.0, {})
    alpha, tol = 1e-3, 1e-4
    warm = np.random.default_rng(0).normal(size=(len(Z), 3)) * 0.05
    res = _joint_solve(X, y, Z, "weston_watkins", alpha=alpha, coef=warm, tol=tol)
    assert 0 < res.n_iter < 100
    f = _joint_objective("weston_watkins", X, y, Z, res.coef, res.intercept, spec, alpha)
    assert f < _joint_objective("weston_watkins", X, y, Z, warm, np.zeros(3), spec, alpha)
    # the stop rule holds at the solution: every column's gradient norm below tol times
    # its norm at zero (computed here from the pass ops over all rows at once)
    basis, up = R.make_basis(Z, spec, 1.0)
    part = R.make_part([(X, y, np.ones(len(y)))], basis, True)
    C = 1.0 / (alpha * len(y))
    V = np.vstack([up.T @ res.coef, res.intercept[None, :]])
    st = R.part_grad_ww(part, basis, V, True)
    gnorm = np.linalg.norm(V + C * st[0, :-1], axis=0)
    assert np.all(gnorm <= tol * np.linalg.norm(C * st[2, :-1], axis=0))
    # and it is a minimum: perturbations raise the objective
    rng = np.random.default_rng(1)
    for _ in range(3):
        g = rng.normal(size=res.coef.shape) * 1e-3
        c = res.coef + g
        assert _joint_objective("weston_watkins", X, y, Z, c, res.intercept, spec, alpha) > f


def test_crammer_singer_newton_improves_the_warm_start_and_the_other_solutions():
    """The non-smooth loss: the solve lowers its objective below the warm start's and below
    that of the other losses' solutions (feasible points of the same problem)."""
    X, y = _three(1500)
    Z = X[:40]
    spec = KernelSpec("rbf", 2.0, 3, 1.0, {})
    warm = np.random.default_rng(0).normal(size=(len(Z), 3)) * 0.05
    res = _joint_solve(X, y, Z, "crammer_singer", coef=warm, tol=1e-4, max_iter=50)
    assert 0 < res.n_iter <= 50

    def objective(r_coef, r_icpt):
        return _joint_objective("crammer_singer", X, y, Z, r_coef, r_icpt, spec, 1e-3)

    f = objective(res.coef, res.intercept)
    assert f < objective(warm, np.zeros(3))
    ww = _joint_solve(X, y, Z, "weston_watkins")
    ovr = _solve(X, y, Z, alpha=1e-3, icpt=1.0, tol=1e-6)
    assert f < objective(ww.coef, ww.intercept)
    assert f < objective(ovr.coef, ovr.intercept)


def test_weston_watkins_columns_are_coupled_and_sum_to_zero():
    """Unlike one-vs-rest, the joint loss only sees score differences: its minimum-norm
    solution has columns summing to zero, and it is not the one-vs-rest solution."""
    X, y = _three(1200)
    Z = X[:30]
    ww = _joint_solve(X, y, Z, "weston_watkins", tol=1e-8)
    np.testing.assert_allclose(ww.coef.sum(axis=1), 0.0, atol=1e-6 * np.abs(ww.coef).max())
    np.testing.assert_allclose(ww.intercept.sum(), 0.0, atol=1e-6)
    ovr = _solve(X, y, Z, alpha=1e-3, tol=1e-8)
    assert np.abs(ww.coef - ovr.coef).max() > 1e-2


@pytest.mark.parametrize("loss", JOINT)
def test_joint_refit_beats_the_sgd_coefficients(loss):
    X, y = _three(4000, seed=3)
    Xt, yt = _three(2000, seed=4)
    kw = dict(budget=40, gamma=2.0, max_iter=1, random_state=0)
    sgd = BudgetedSVC(refit=False, **kw).fit(X, y)
    joint = BudgetedSVC(refit=loss, **kw).fit(X, y)
    np.testing.assert_array_equal(joint.support_vectors_, sgd.support_vectors_)
    assert joint.dual_coef_.shape == (len(joint.support_vectors_), 3)
    assert joint.score(Xt, yt) >= sgd.score(Xt, yt)
    assert joint.summary()["refit"] == loss
    assert BudgetedSVC(**kw).fit(X[:500], y[:500]).summary()["refit"] == "ovr"
    # binary problems have one column: every spelling is the same solve
    yb = np.where(y == 0, 1, -1)
    a = BudgetedSVC(refit=loss, **kw).fit(X, yb)
    b = BudgetedSVC(refit="ovr", **kw).fit(X, yb)
    np.testing.assert_array_equal(a.dual_coef_, b.dual_coef_)


@pytest.mark.parametrize("loss", JOINT)
def test_joint_refit_on_workers_same_as_here(local_cluster_client, loss):
    X, y = _three(6000)
    Xd = da.from_array(X, chunks=(6000, 2))
    yd = da.from_array(y, chunks=6000)
    Z = X[:30]
    kw = dict(tol=1e-6, max_iter=20)
    here = _joint_solve(X, y, Z, loss, **kw)
    one = _joint_solve(Xd, yd, Z, loss, client=_OneWorker(local_cluster_client), **kw)
    two = _joint_solve(Xd, yd, Z, loss, client=local_cluster_client, **kw)
    np.testing.assert_array_equal(one.coef, two.coef)
    np.testing.assert_array_equal(one.intercept, two.intercept)
    np.testing.assert_allclose(two.coef, here.coef, rtol=1e-9, atol=1e-9)


def test_sample_sizes_are_proportional_and_sum_to_m():
    ranges = row_parts(1000, 7)
    sizes = R.sample_sizes(ranges, 1000, 100)
    assert sum(sizes) == 100
    for (a, b), k in zip(ranges, sizes):
        assert abs(k - (b - a) / 10) < 1


def _solve_sampled(X, y, Z, client=None, seed=0, max_rows=3000):
    spec = KernelSpec("rbf", 2.0, 3, 1.0, {})
    return R.refit(
        X, y, None, classes=np.array([-1, 1]), Z=Z, coef=np.zeros((len(Z), 1)),
        intercept=np.zeros(1), spec=spec, icpt=0.0, scaler=None, alpha=1e-4, tol=1e-6,
        max_iter=100, client=client, seed=seed, max_rows=max_rows,
    )  # fmt: skip


def test_refit_on_a_row_sample_depends_on_n_and_seed_only(local_cluster_client):
    """Beyond max_rows the solve runs on a seeded uniform sample drawn per row range: the
    same coefficients here, on one worker or two, and for any chunking of the rows."""
    X, y = _board(5 * PART_ROWS // 2)
    Z = X[:30]
    here = _solve_sampled(X, y, Z)
    assert here.n_rows == 3000
    Xd, yd = da.from_array(X, chunks=(40000, 2)), da.from_array(y, chunks=40000)
    one = _solve_sampled(Xd, yd, Z, client=_OneWorker(local_cluster_client))
    Xd, yd = da.from_array(X, chunks=(25000, 2)), da.from_array(y, chunks=25000)
    two = _solve_sampled(Xd, yd, Z, client=local_cluster_client)
    np.testing.assert_array_equal(one.coef, two.coef)
    np.testing.assert_allclose(two.coef, here.coef, rtol=1e-9, atol=1e-9)
    other = _solve_sampled(X, y, Z, seed=1)
    assert not np.allclose(other.coef, here.coef)
    # the sample's solution is near the full one on every row (not fitted to its sample)
    full = _solve_sampled(X, y, Z, max_rows=None)
    assert full.n_rows == 256 * len(Z)  # the default: 256 rows per support vector
    spec = KernelSpec("rbf", 2.0, 3, 1.0, {})
    f = R._BaseKernelEstimator._kernel(X, Z, spec)
    acc = [np.mean(np.sign(f @ r.coef[:, 0]) == y) for r in (here, full)]
    assert acc[0] >= acc[1] - 0.01


@pytest.mark.parametrize("bad", [0, -5, 2.5, "all", None])
def test_refit_rows_must_be_auto_or_a_positive_int(bad):
    X, y = _board(100)
    with pytest.raises(DKernelError, match="refit_rows"):
        BudgetedSVC(refit_rows=bad, budget=10).fit(X, y)


def test_refit_rows_bounds_the_rows_the_estimator_solves_over():
    X, y = _board(4000)
    kw = dict(budget=40, gamma=2.0, max_iter=1, random_state=0)
    full = BudgetedSVC(**kw).fit(X, y)
    part = BudgetedSVC(refit_rows=1000, **kw).fit(X, y)
    np.testing.assert_array_equal(part.support_vectors_, full.support_vectors_)
    assert not np.array_equal(part.dual_coef_, full.dual_coef_)
    Xt, yt = _board(4000, seed=1)
    assert part.score(Xt, yt) >= full.score(Xt, yt) - 0.02
