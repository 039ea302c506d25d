"""The BSGD state and its conversions (dkernel.svm.state): the one coefficient rule, the
model file's raw arrays and the checkpoint entries, each read back to the same state."""

from __future__ import annotations

import _bsgd
import numpy as np
import pytest

from dkernel.kernels import KernelSpec
from dkernel.svm import _budget as nb
from dkernel.svm import state


def _cfg(avg_mode: int, *, maint: int = nb.MERGE) -> nb.BSGDConfig:
    """The settings of ``_trained``'s states: budget 6, averaging from step 1."""
    return _bsgd.config(6, avg_mode, 1, maint=maint)


def _trained(rng, *, n_sv=5, c=2, maint=nb.MERGE) -> nb.BSGDState:
    """A state with ``n_sv`` SVs, a global scale, averaged sums owed lazily, counters."""
    st = _bsgd.state(rng, 6, 3, c, maint, gamma=None, n_sv=n_sv)  # SVs, A, scale 0.7
    st.Abar[:n_sv] = rng.normal(size=(n_sv, c))
    st.b[:] = rng.normal(size=c)
    st.bbar[:] = rng.normal(size=c)
    st.fs[nb.FS_WSUM], st.fs[nb.FS_SACC] = 3.0, 2.5
    st.sref[:n_sv] = rng.uniform(0, 2.5, size=n_sv)  # each SV owes A (S - sref)
    st.ist[nb.IS_T], st.ist[nb.IS_NMAINT] = 40, 4
    st.fs[nb.FS_DEGR] = 2.0
    return st


def test_coefficients_are_the_average_when_it_has_weight_else_the_iterate(rng):
    st = _trained(rng)
    owed = st.Abar[:5] + st.A[:5] * (2.5 - st.sref[:5])[:, None]
    coef, b = state.coefficients(st.copy(), _cfg(nb.AVG_LINEAR))
    np.testing.assert_allclose(coef, owed / 3.0)  # the lazy sums flushed first
    np.testing.assert_array_equal(b, st.bbar / 3.0)
    for cfg, W in ((_cfg(nb.AVG_OFF), 3.0), (_cfg(nb.AVG_LINEAR), 0.0)):
        other = st.copy()
        other.fs[nb.FS_WSUM] = W
        coef, b = state.coefficients(other, cfg)
        np.testing.assert_array_equal(coef, 0.7 * st.A[:5])
        np.testing.assert_array_equal(b, 0.7 * st.b)


def test_fitted_attributes_scale_the_intercept_by_the_constant_feature(rng):
    st = _trained(rng)
    spec = KernelSpec("rbf", 0.5, 3.0, 1.0, {})
    on = state.fitted_attributes(st.copy(), np.array([0, 1, 2]), spec, _cfg(nb.AVG_OFF),
                                  n_iter=2, d=3)  # fmt: skip
    off = state.fitted_attributes(
        st.copy(), np.array([0, 1, 2]), spec, _cfg(nb.AVG_OFF)._replace(icpt=0.0), n_iter=2, d=3
    )
    np.testing.assert_array_equal(on["intercept_"], 0.7 * st.b)
    assert not off["intercept_"].any()
    assert (on["t_"], on["n_maintenance_"], on["weight_degradation_"]) == (40, 4, 0.5)
    assert on["support_vectors_"].shape == (5, 3) and on["refit_alpha_"] is None


@pytest.mark.parametrize("maint", [nb.MERGE, nb.PROJECT])
def test_raw_arrays_rebuild_the_state(rng, maint):
    """A model file's raw arrays give back the state the numba loop goes on from."""
    st = _trained(rng, maint=maint)
    cfg = _cfg(nb.AVG_LINEAR, maint=maint)
    st.K[:5, :5] = np.exp(-0.5 * ((st.SV[:5, None] - st.SV[None, :5]) ** 2).sum(-1))
    raw = state.raw_arrays(st)  # flushes st's sums
    back = state.state_from_model(
        raw, st.SV[:5], n_cols=2, cfg=cfg, clock=40, n_maintenance=4, weight_degradation=0.5
    )
    for f in ("SV", "A", "Abar", "b", "bbar", "sqn", "SVT", "ist"):
        np.testing.assert_array_equal(getattr(back, f), getattr(st, f), err_msg=f)
    np.testing.assert_allclose(back.K[:5, :5], st.K[:5, :5], rtol=1e-12)
    assert back.fs[nb.FS_DEGR] == 2.0 and (back.sref[:5] == 2.5).all()
    assert state.coefficients(back, cfg)[0].tolist() == state.coefficients(st, cfg)[0].tolist()


def test_checkpoint_arrays_leave_out_the_transposed_copy(rng):
    """A checkpoint holds SV, not its transposed copy; the state read back rebuilds it."""
    st = _trained(rng)
    saved = state.checkpoint_arrays(st)
    assert "state_SVT" not in saved and "state_SV" in saved
    back = state.state_from_checkpoint(saved)
    for f in nb.BSGDState._fields:
        np.testing.assert_array_equal(getattr(back, f), getattr(st, f))
    assert back.SVT.flags.c_contiguous


def test_partial_checkpoint_entries_keep_every_bit(rng):
    p = state.partial_from_state(_trained(rng), n=17)
    back = state.partial_of(state.partial_arrays(p))
    for f in p._fields:
        np.testing.assert_array_equal(getattr(back, f), getattr(p, f), err_msg=f)
