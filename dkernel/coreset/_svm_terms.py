"""The terms of the SVM cost that every coreset build shares, written once.

With the bias folded into the weights as a constant last feature (the *bias column*), a
row p = (x, y) with sign y in {-1, +1} and weight u(p), and w = (w_{1:d}, b)::

    hinge(p, w) = max(0, 1 - y <w, (x, 1)>)
    F(P, w)     = ||w_{1:d}||^2 / 2 + C * sum_p u(p) hinge(p, w)
    f(p, w)     = ||w_{1:d}||^2 / (2 U) + C * hinge(p, w)      (U = sum_p u(p))

so F(P, w) = sum_p u(p) f(p, w): the regulariser is spread over the rows in proportion to
their weight, which is what lets a weighted subset stand for P. The solver, the
sensitivities, the distributed builds and the CLI all compute these quantities through the
functions below, so each has one arithmetic (and a seed gives the same coreset whichever
build computed it).
"""

from __future__ import annotations

import numpy as np

#: The two signs, negative class first: the order of every per-class array.
SIGNS = (-1.0, 1.0)


def with_bias(X) -> np.ndarray:
    """``X`` as float64 with the bias column (ones) appended last."""
    X = np.asarray(X)
    X1 = np.empty((X.shape[0], X.shape[1] + 1))
    X1[:, :-1] = X
    X1[:, -1] = 1.0
    return X1


def weight_vector(coef, intercept=0.0) -> np.ndarray:
    """w = (coef, intercept) as one float64 vector, bias last (matches :func:`with_bias`)."""
    return np.r_[np.ravel(coef).astype(np.float64), float(np.ravel([intercept])[0])]


def signs(y, positive) -> np.ndarray:
    """Labels as signs: +1.0 where ``y == positive``, -1.0 elsewhere."""
    return np.where(np.asarray(y) == positive, 1.0, -1.0)


def labels_of(ys, classes) -> np.ndarray:
    """The inverse of :func:`signs`: ``classes[1]`` where ``ys > 0``, ``classes[0]`` elsewhere."""
    return np.where(ys > 0, classes[1], classes[0])


def class_counts(ys) -> np.ndarray:
    """Rows of each sign, in :data:`SIGNS` order (float64)."""
    return np.array([float((ys < 0).sum()), float((ys > 0).sum())])


def decision(X, w) -> np.ndarray:
    """Scores <w, (x, 1)> of rows ``X`` held without a bias column (no copy of ``X``)."""
    return X @ w[:-1] + w[-1]


def margin_gap(scores, ys) -> np.ndarray:
    """1 - y <w, x>: positive for rows inside the margin or misclassified."""
    return 1.0 - ys * scores


def hinge(scores, ys) -> np.ndarray:
    """max(0, 1 - y <w, x>) of every row, from its score (``X1 @ w`` or :func:`decision`)."""
    return np.maximum(margin_gap(scores, ys), 0.0)


def regulariser(w) -> float:
    """||w_{1:d}||^2 / 2: the bias (last entry) is not regularised."""
    return 0.5 * float(w[:-1] @ w[:-1])


def svm_cost(X1, ys, u, C, w) -> float:
    """F(P, w) of rows ``X1`` (bias column last), signs ``ys`` and weights ``u``."""
    return regulariser(w) + C * float(u @ hinge(X1 @ w, ys))


def point_costs(hinges, u, *, C, reg, U_total) -> np.ndarray:
    """u(p) f(p, w) of every row, from its hinge and ``reg`` = :func:`regulariser` (w);
    they sum to F(P, w) when ``U_total`` is the weight of P."""
    return u * (reg / float(U_total) + C * hinges)


def part_costs(hinge_sums, part_weights, *, C, reg, U_total) -> np.ndarray:
    """sum_{p in part} u(p) f(p, w) of parts of unit-weight rows, from each part's hinge sum
    and row count (the block-level form of :func:`point_costs`)."""
    return reg * part_weights / U_total + C * hinge_sums
