"""The SVM terms every coreset build shares: bias column, signs, hinge, cost, point costs."""

from __future__ import annotations

import numpy as np
import pytest

from dkernel.coreset import (
    class_counts,
    coreset_cost,
    decision,
    hinge,
    labels_of,
    part_costs,
    point_costs,
    regulariser,
    signs,
    svm_cost,
    weight_vector,
    with_bias,
)


@pytest.fixture
def problem():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(50, 3)).astype(np.float32)
    y = rng.choice(np.array([3, 7]), size=50)
    w = rng.normal(size=4)
    u = rng.uniform(0.5, 2.0, size=50)
    return X, y, w, u


def test_bias_column_and_decision(problem):
    X, _, w, _ = problem
    X1 = with_bias(X)
    assert X1.dtype == np.float64 and X1.shape == (50, 4)
    np.testing.assert_array_equal(X1[:, :-1], X.astype(np.float64))
    np.testing.assert_array_equal(X1[:, -1], 1.0)
    np.testing.assert_allclose(decision(X.astype(np.float64), w), X1 @ w, rtol=1e-12)
    np.testing.assert_array_equal(weight_vector([1, 2, 3], 4), [1.0, 2.0, 3.0, 4.0])


def test_signs_and_labels_are_inverse(problem):
    _, y, _, _ = problem
    ys = signs(y, 7)
    assert set(np.unique(ys)) == {-1.0, 1.0}
    np.testing.assert_array_equal(ys > 0, y == 7)
    np.testing.assert_array_equal(labels_of(ys, (3, 7)), y)
    np.testing.assert_array_equal(class_counts(ys), [(y == 3).sum(), (y == 7).sum()])


def test_hinge_is_the_margin_violation(problem):
    X, y, w, _ = problem
    scores = with_bias(X) @ w
    ys = signs(y, 7)
    h = hinge(scores, ys)
    assert (h >= 0).all()
    inside = ys * scores < 1.0
    np.testing.assert_allclose(h[inside], 1.0 - ys[inside] * scores[inside])
    assert (h[~inside] == 0).all()


def test_point_costs_add_up_to_the_cost(problem):
    """F(P, w) = sum_p u(p) f(p, w): the regulariser spread by weight, and by parts."""
    X, y, w, u = problem
    X1, ys = with_bias(X), signs(y, 7)
    C = 2.5
    F = svm_cost(X1, ys, u, C, w)
    assert F == pytest.approx(0.5 * w[:-1] @ w[:-1] + C * u @ hinge(X1 @ w, ys), rel=1e-12)
    costs = point_costs(hinge(X1 @ w, ys), u, C=C, reg=regulariser(w), U_total=u.sum())
    assert costs.sum() == pytest.approx(F, rel=1e-12)
    ones = np.ones(50)
    unit = point_costs(hinge(X1 @ w, ys), ones, C=C, reg=regulariser(w), U_total=50.0)
    h = hinge(X1 @ w, ys)
    parts = part_costs(
        np.array([h[:20].sum(), h[20:].sum()]),
        np.array([20, 30]),
        C=C,
        reg=regulariser(w),
        U_total=50.0,
    )
    np.testing.assert_allclose(parts, [unit[:20].sum(), unit[20:].sum()], rtol=1e-12)
    assert coreset_cost(X, y, w[:-1], w[-1], C=C, sample_weight=u) == pytest.approx(F, rel=1e-12)
