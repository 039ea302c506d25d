"""Is a kernel usable on the data? A check on a few rows before the work that needs it.

A width ``gamma`` far off the data's scale, or X itself near the ends of the float range,
makes every kernel value between distinct rows 0 (or 1, or inf): the fit then runs to the
end and returns a model that predicts one class or one cluster. On a few hundred rows the
estimator already holds (its seeding sample, its first block, its support vectors) the
check costs O(m^2 d) and names the problem instead.
"""

from __future__ import annotations

import numpy as np
from scipy.spatial.distance import pdist

from .._validation import DKernelError
from ._pairwise import KernelSpec, pairwise_from_spec
from ._table import KERNELS

#: Rows the check looks at (the first of the given ones).
_ROWS = 256
#: ``gamma * distance^p`` beyond which a kernel value is 0 for any purpose (e^-1e10), and
#: below which it is 1 to ten digits; a width this far off is a mistake of scale, not a
#: choice: a nearest neighbour in the full data is not 10^5 times closer than in a sample.
_FAR, _NEAR = 1e10, 1e-10


def kernel_scale_problem(rows, spec: KernelSpec) -> str | None:
    """What makes ``spec`` degenerate on ``rows`` (at most 256 used), or None.

    Kernels whose gamma is a width: ``gamma * distance`` over the distinct pairs (the
    kernel's ``distance``: squared Euclidean for rbf, L1 for laplacian) all beyond 1e10
    (every value 0) or all below 1e-10 (every value 1), or distances that overflow or
    underflow. Every named kernel: values that are not finite (a polynomial of high degree).
    Callables and ``precomputed`` are not checked here.
    """
    if not isinstance(spec.kernel, str) or spec.kernel == "precomputed":
        return None
    R = np.asarray(rows, dtype=np.float64)[:_ROWS]
    if len(R) < 2:
        return None
    top = float(np.abs(R).max())
    with np.errstate(all="ignore"):
        metric = KERNELS[spec.kernel].distance
        if metric is not None and spec.gamma is not None:
            R = np.unique(R, axis=0)
            if len(R) < 2:
                return None
            D = pdist(R, metric)
            lo, hi = float(D.min()), float(D.max())
            what = "squared distance" if metric == "sqeuclidean" else "L1 distance"
            if not np.isfinite(hi):
                return (
                    f"X's values (up to {top:.3g} in magnitude) overflow the {what}s of "
                    f"kernel {spec.kernel!r}: rescale X (e.g. sklearn's StandardScaler)"
                )
            if hi == 0.0:
                return (
                    f"X's values (up to {top:.3g} in magnitude) are so small that the {what}s "
                    f"between distinct rows underflow to 0: rescale X (e.g. StandardScaler)"
                )
            g = float(spec.gamma)
            if g * lo > _FAR:
                return (
                    f"gamma={g:.3g} is far too large for the scale of X: the closest of "
                    f"{len(R)} distinct sampled rows have gamma * {what} = {g * lo:.3g}, so "
                    f"every kernel value between distinct rows is 0; use a gamma near "
                    f"1 / {1.0 / lo if lo > 0 else 0:.3g} or gamma=None (estimated from X)"
                )
            if g * hi < _NEAR:
                return (
                    f"gamma={g:.3g} is far too small for the scale of X: the farthest of "
                    f"{len(R)} distinct sampled rows have gamma * {what} = {g * hi:.3g}, so "
                    f"every kernel value is 1 to ten digits; use a gamma near 1 / {hi:.3g} "
                    f"or gamma=None (estimated from X)"
                )
            return None
        K = pairwise_from_spec(np.ascontiguousarray(R), None, spec)
        if not np.isfinite(K).all():
            extra = f" (degree={spec.degree:g})" if spec.kernel == "polynomial" else ""
            return (
                f"kernel {spec.kernel!r}{extra} overflows on rows of X (values up to "
                f"{top:.3g} in magnitude): kernel values reach inf or NaN; rescale X"
                + (" or lower the degree" if extra else "")
            )
    return None


def check_kernel_scale(rows, spec: KernelSpec, *, where: str = "") -> None:
    """Raise a ``DKernelError`` naming :func:`kernel_scale_problem`'s finding, if any."""
    problem = kernel_scale_problem(rows, spec)
    if problem is not None:
        raise DKernelError(f"{where}{problem}")
