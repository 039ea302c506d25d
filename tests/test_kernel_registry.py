"""One kernel registry: BSGD's training loop, its Gram rebuilds and its prediction all go
through dkernel.kernels (the pair kernels against NumPy: tests/test_kernels.py)."""

from __future__ import annotations

import inspect

import _bsgd
import numpy as np
import pytest

from dkernel import kernels
from dkernel.data import make_checkerboard
from dkernel.kernels import (
    KERNEL_CODES,
    krow_into,
    pair_gram,
    pair_matrix,
    pairwise_kernels,
    sq_norms,
)
from dkernel.svm import BudgetedSVC, _budget, _fit, _partial, rounds, state


@pytest.mark.parametrize("d", [1, 3, 40])
@pytest.mark.parametrize("kernel", sorted(KERNEL_CODES))
def test_pair_gram_equals_the_pair_function_bit_for_bit(rng, kernel, d):
    X = rng.normal(size=(23, d)) + 1.0
    args = (KERNEL_CODES[kernel], 0.3, 3.0, 1.0)
    K = pair_gram(X, sq_norms(X), *args)
    np.testing.assert_array_equal(K, pair_matrix(X, X, *args))
    np.testing.assert_array_equal(K, K.T)


@pytest.mark.parametrize("kernel", sorted(KERNEL_CODES))
def test_krow_into_equals_kval_bit_for_bit(kernel):
    """The scoring loop's row of kernel values (points as columns) is kval of each pair."""
    rng = np.random.default_rng(1)
    Z = rng.normal(size=(37, 5)) + 1.0
    x = rng.normal(size=5)
    args = (KERNEL_CODES[kernel], 0.3, 3.0, 1.0)
    out = np.full(40, np.nan)
    krow_into(*args, x, np.dot(x, x), np.ascontiguousarray(Z.T), sq_norms(Z), 30, out)
    np.testing.assert_array_equal(out[:30], pair_matrix(x[None, :], Z[:30], *args)[0])
    assert np.isnan(out[30:]).all()  # only the first n points are touched


def test_svm_uses_the_registry_objects():
    """The loop, the rebuilds and the config read the kernels package's objects; no kernel
    is defined inside dkernel.svm."""
    assert _budget.kval is kernels.kval
    assert _fit.KERNEL_CODES is kernels.KERNEL_CODES
    assert state.pair_gram is kernels.pair_gram and rounds.pair_gram is kernels.pair_gram
    assert _budget.sq_norms is kernels.sq_norms and rounds.sq_norms is kernels.sq_norms
    assert _budget.krow_into is kernels.krow_into
    for mod in (_budget, _fit, state, rounds):
        for name, obj in vars(mod).items():
            func = getattr(obj, "py_func", obj)
            if inspect.isfunction(func) and func.__module__ == mod.__name__:
                assert name not in {"kval", "kernel_matrix", "_gram", "pair_gram", "pair_matrix"}


def _board(n=600):
    X, y = make_checkerboard(n, n_cells=2, random_state=0)
    return X - 1.0, y


@pytest.mark.parametrize("kernel", ["rbf", "laplacian", "polynomial", "cosine"])
def test_training_rebuild_and_prediction_share_the_kernel(tmp_path, kernel):
    X, y = _board()
    maint = "merge" if kernel in ("rbf", "laplacian") else "remove"
    clf = BudgetedSVC(
        budget=20, maintenance=maint, kernel=kernel, gamma=2.0, max_iter=1, refit=False,
        average=False, distributed=False, random_state=0,
    ).fit(X, y)  # fmt: skip
    st = clf._state
    n = st.n_sv
    cfg = _bsgd.fit_config(clf, clf.alpha_, len(X), spec=clf._spec)
    args = (cfg.kind, cfg.gamma, cfg.degree, cfg.coef0)
    SV = st.SV[:n]
    np.testing.assert_array_equal(st.SVT[:, :n], SV.T)  # the scoring loop's copy
    # training: the K the loop grew entry by entry is the pair function's
    np.testing.assert_array_equal(st.K[:n, :n], pair_matrix(SV, SV, *args))
    # rebuilds: after load (from the saved arrays) and after a distributed round
    clf.save(tmp_path / "m.npz")
    rebuilt = _partial.current_state(BudgetedSVC.load(tmp_path / "m.npz"), cfg)
    np.testing.assert_array_equal(rebuilt.K[:n, :n], st.K[:n, :n])
    np.testing.assert_array_equal(rebuilt.sqn[:n], st.sqn[:n])
    part = state.partial_from_state(st.copy())
    np.testing.assert_array_equal(state.state_from_partial(part, cfg).K[:n, :n], st.K[:n, :n])
    # prediction: the registry's block kernel over the support vectors
    want = pairwise_kernels(X, SV, kernel=kernel, gamma=2.0) @ clf.dual_coef_ + clf.intercept_
    np.testing.assert_array_equal(clf.decision_function(X), want[:, 0])


@pytest.mark.parametrize("maintenance", ["remove", "merge"])
def test_a_loaded_model_continues_like_the_original(tmp_path, maintenance):
    """The rebuilt state equals the one in memory, so more training gives the same bits."""
    X, y = _board(900)
    kw = dict(budget=25, maintenance=maintenance, gamma=2.0, max_iter=1, refit=False,
              distributed=False, random_state=1)  # fmt: skip
    a = BudgetedSVC(**kw).fit(X[:600], y[:600])
    a.save(tmp_path / "m.npz")
    b = BudgetedSVC.load(tmp_path / "m.npz")
    a.partial_fit(X[600:], y[600:])
    b.partial_fit(X[600:], y[600:])
    np.testing.assert_array_equal(a.decision_function(X), b.decision_function(X))
