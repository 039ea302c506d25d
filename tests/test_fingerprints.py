"""Fingerprints: results pinned to numbers, so that a change of the algorithm (another
support vector kept or merged, another step) fails here, while a change that only reorders
floating-point arithmetic stays within the tolerances. Every pin of the package's results
lives in this file.

The step counts are exact, the sums within ``FINGERPRINT_RTOL``. The loops sum in their
own order, never the BLAS's, so the pins hold whichever BLAS kernel the processor (or
``OPENBLAS_CORETYPE``) picks; projection's refreshed inverse comes from LAPACK, whose
kernels round differently (1.3e-6 apart between OpenBLAS's Haswell and SkylakeX kernels),
hence its own tolerance.

Regenerate after a deliberate change of the algorithm (and say so in CHANGELOG.md)::

    PYTHONPATH=. python tests/test_fingerprints.py

prints the current values in the form of ``PINNED`` below; paste them over it.
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import load_digits

from dkernel.data import make_checkerboard
from dkernel.svm import BudgetedSVC

FINGERPRINT_RTOL = {"merge": 1e-6, "project": 1e-5, "remove": 1e-6}
#: BSGD, one sequential pass over a 2x2 checkerboard, per maintenance:
#: (t_, n_maintenance_, dual_coef_.sum(), |dual_coef_|.sum(), support_vectors_.sum()).
PINNED = {
    "merge": (700, 75, 0.6970566209994242, 138.2169489232897, 2.0125825600684832),
    "project": (700, 74, 1.0351877604874744, 617.4733125085575, 1.769410573235363),
    "remove": (700, 147, 1.4285714285714293, 35.71428571428572, 3.0238624866573955),
}
#: BSGD, two sequential epochs on 600 digits (10 classes, merging):
#: (t_, n_maintenance_, |dual_coef_|.sum()).
PINNED_MULTICLASS = (1200, 187, 3459.738134400749)


def _board(n, seed=0):
    X, y = make_checkerboard(n, n_cells=2, random_state=seed)
    return X - 1.0, y


def _one_pass(maintenance):
    X, y = _board(700)
    clf = BudgetedSVC(
        budget=25,
        maintenance=maintenance,
        gamma=2.0,
        alpha=1e-3,
        max_iter=1,
        average=False,
        distributed=False,
        refit=False,
        random_state=3,
    ).fit(X, y)
    return X, y, clf


def _multiclass():
    X, y = load_digits(return_X_y=True)
    X = X / 16
    clf = BudgetedSVC(
        budget=40,
        gamma=0.05,
        alpha=1e-4,
        max_iter=2,
        average=False,
        random_state=1,
        refit=False,
    ).fit(X[:600], y[:600])
    return X, y, clf


def _print(clf):
    return (clf.t_, clf.n_maintenance_)


@pytest.mark.parametrize("maintenance", sorted(PINNED))
def test_sequential_one_pass_is_unchanged(maintenance):
    X, y, clf = _one_pass(maintenance)
    t, n_maint, coef_sum, coef_abs, sv_sum = PINNED[maintenance]
    # behaviour: one step per row, the budget kept, the board learnt
    assert clf.t_ == len(X) and clf.support_vectors_.shape[0] <= 25
    assert clf.score(X, y) > 0.8
    # the fingerprint
    assert _print(clf) == (t, n_maint)
    got = (clf.dual_coef_.sum(), np.abs(clf.dual_coef_).sum(), clf.support_vectors_.sum())
    np.testing.assert_allclose(
        got, (coef_sum, coef_abs, sv_sum), rtol=FINGERPRINT_RTOL[maintenance]
    )


def test_sequential_multiclass_epochs_unchanged():
    X, y, clf = _multiclass()
    assert clf.score(X[600:], y[600:]) > 0.7  # behaviour: digits learnt (10 classes, B = 40)
    assert _print(clf) == PINNED_MULTICLASS[:2]  # the fingerprint
    coef_abs = np.abs(clf.dual_coef_).sum()
    np.testing.assert_allclose(coef_abs, PINNED_MULTICLASS[2], rtol=FINGERPRINT_RTOL["merge"])


if __name__ == "__main__":  # print the current values (see the module docstring)
    print("PINNED = {")
    for name in sorted(PINNED):
        c = _one_pass(name)[2]
        sums = (c.dual_coef_.sum(), np.abs(c.dual_coef_).sum(), c.support_vectors_.sum())
        print(f"    {name!r}: {(*_print(c), *(float(v) for v in sums))!r},")
    print("}")
    c = _multiclass()[2]
    print(f"PINNED_MULTICLASS = {(*_print(c), float(np.abs(c.dual_coef_).sum()))!r}")
