"""Builders shared by the BSGD tests: the numba loop's settings and a state with SVs."""

from __future__ import annotations

import numpy as np

from dkernel.kernels import KERNEL_CODES
from dkernel.svm import _budget, _fit


def rbf(X, Y, gamma):
    """The RBF Gram matrix of the rows of X and Y, in plain NumPy."""
    d2 = ((X[:, None, :] - Y[None, :, :]) ** 2).sum(-1)
    return np.exp(-gamma * d2)


def config(
    B, mode, start, maint=_budget.MERGE, alpha=0.01, algo=_budget.PEGASOS, gamma=0.5
) -> _budget.BSGDConfig:
    """RBF settings of the numba loop: budget ``B``, averaging ``mode`` from step ``start``."""
    return _budget.BSGDConfig(
        KERNEL_CODES["rbf"], gamma, 3.0, 1.0, algo, alpha, 1.0, 0.0, maint, 1.0,
        _budget.PROJECT_RIDGE, 2, _budget.GOLDEN, np.zeros((2, 2)), B, mode, start,
    )  # fmt: skip


def state(rng, B, d, c, maint, gamma=0.5, signs="mixed", n_sv=None) -> _budget.BSGDState:
    """A state of budget ``B`` with ``n_sv`` random SVs (B + 1 by default: a full model
    ready for one maintenance step) and their coefficients, drawn from ``rng`` in that
    order; their RBF Gram (and its inverse for projection) unless ``gamma`` is None."""
    n = B + 1 if n_sv is None else n_sv
    st = _budget.new_state(B, d, c, maint)
    X = rng.normal(size=(n, d))
    _budget.set_support(st, X)
    if signs == "positive":
        st.A[:n] = rng.uniform(0.1, 1.0, size=(n, c))
    else:
        st.A[:n] = rng.normal(size=(n, c))
    if gamma is not None:
        st.K[:n, :n] = rbf(X, X, gamma)
        if maint == _budget.PROJECT:
            _budget.refresh_inverse(st.K, st.M, n, _budget.PROJECT_RIDGE)
    st.fs[_budget.FS_SCALE] = 0.7
    st.ist[_budget.IS_NSV] = n
    return st


def fit_config(est, alpha, n, spec=None) -> _budget.BSGDConfig:
    """The numba loop's settings of ``est`` for n rows per epoch, with the kernel ``spec``
    (by default ``est``'s kernel as given)."""
    spec = est._kernel_spec(None) if spec is None else spec
    return _fit.config(_fit.Options.of(est), spec, alpha, n)
