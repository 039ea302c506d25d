"""The kernel table: one frozen record per named kernel, its numba code beside its properties.

As pynndescent keeps ``named_distances`` next to its property tables, every property that
code elsewhere tests a kernel's name for is a field of :class:`KernelInfo`, with one
meaning per field, and every caller looks it up (:func:`kernel_info`). A new kernel is a
numba transform (``_numba.py``), a pair-loop branch (``_pair.py``) and a row here.

Nothing here imports dask; the transforms trust their input.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .._validation import DKernelError
from . import _numba as _nb
from ._pair import COSINE, LAPLACIAN, LINEAR, MATERN, POLYNOMIAL, RBF, SIGMOID


@dataclass(frozen=True)
class KernelInfo:
    """What the code needs to know about one named kernel.

    Attributes
    ----------
    name : str
        The canonical name (``KernelSpec.kernel``, saved in model files).
    aliases : tuple of str
        Other names accepted for it (lower case).
    code : int or None
        Its code in the numba pair loops (:func:`~dkernel.kernels.kval`); None: no pair
        form (``precomputed``).
    radial : bool
        ``k(x, z) = f(||x - z||)``: translation invariant, so rows may be centred first.
    distance : str or None
        The distance ``gamma`` scales (a :func:`scipy.spatial.distance.pdist` metric):
        what the median heuristic and the scale check measure. None: gamma is not a width.
    scale_rule : str
        What ``gamma=None`` becomes under an estimator's ``"scale"`` rule: ``"scale"``
        (``1 / (n_features X.var())``), ``"median"`` (the median heuristic on
        ``distance``) or ``"inverse_dim"`` (``1 / n_features``).
    uses_gamma : bool
        Whether gamma enters the formula (``gamma=None`` stays None otherwise).
    unit_diagonal : bool
        ``k(x, x) = 1`` for every x.
    merge_power : int or None
        BSGD merging (Wang et al., 2012) replaces two support vectors by
        ``z = h x_m + (1 - h) x_n`` and needs ``k(x_m, z) = k(x_m, x_n)^((1 - h)^p)``, which
        holds for ``exp(-gamma ||x - z||^p)`` only: p (2 for rbf, 1 for laplacian), or None
        where the identity fails and merging is refused.
    norms : {"squared", "root"} or None
        The row norms the tile transform reads (squared, or their square roots).
    tile : callable or None
        ``tile(G, xx, yy, gamma, coef0, degree, r0, r1, c0)`` turns rows r0..r1, columns
        c0.. of the BLAS product ``G = X @ Y.T`` into kernel values in place. None: the
        kernel has no BLAS form and its own tile loop (laplacian), or no formula
        (precomputed).
    diag : callable or None
        ``diag(xx, gamma, coef0, degree)``: ``k(x, x)`` from the squared row norms ``xx``
        (in X's dtype); None for a unit diagonal.
    """

    name: str
    aliases: tuple[str, ...]
    code: int | None
    radial: bool
    distance: str | None
    scale_rule: str
    uses_gamma: bool
    unit_diagonal: bool
    merge_power: int | None
    norms: str | None
    tile: Callable | None
    diag: Callable | None


def _rbf_tile(G, xx, yy, gamma, coef0, degree, r0, r1, c0):
    _nb.rbf_from_gram(G, xx, yy, gamma, r0, r1, c0)


def _matern_tile(G, xx, yy, gamma, coef0, degree, r0, r1, c0):
    _nb.matern_from_gram(G, xx, yy, gamma, r0, r1, c0)


def _poly_tile(G, xx, yy, gamma, coef0, degree, r0, r1, c0):
    _nb.poly_from_gram(G, gamma, coef0, degree, r0, r1, c0)


def _sigmoid_tile(G, xx, yy, gamma, coef0, degree, r0, r1, c0):
    _nb.sigmoid_from_gram(G, gamma, coef0, r0, r1, c0)


def _cosine_tile(G, xx, yy, gamma, coef0, degree, r0, r1, c0):
    _nb.cosine_from_gram(G, xx, yy, r0, r1, c0)


def _linear_tile(G, xx, yy, gamma, coef0, degree, r0, r1, c0):
    """The product is the kernel: nothing to transform."""


_RBF = KernelInfo(
    name="rbf",
    aliases=("gaussian",),
    code=RBF,
    radial=True,
    distance="sqeuclidean",
    scale_rule="scale",
    uses_gamma=True,
    unit_diagonal=True,
    merge_power=2,
    norms="squared",
    tile=_rbf_tile,
    diag=None,
)
#: Every named kernel, by canonical name.
KERNELS: dict[str, KernelInfo] = {
    info.name: info
    for info in (
        _RBF,
        KernelInfo(
            name="laplacian",
            aliases=(),
            code=LAPLACIAN,
            radial=True,
            distance="cityblock",
            scale_rule="median",
            uses_gamma=True,
            unit_diagonal=True,
            merge_power=1,
            norms=None,
            tile=None,
            diag=None,
        ),
        # Matérn nu = 3/2: (1 + s) exp(-s), s = sqrt(3) ||x - z|| / l with the length scale
        # l = 1 / sqrt(2 gamma), so s = sqrt(6 gamma ||x - z||^2). As nu grows the Matérn
        # family tends to exp(-||x - z||^2 / (2 l^2)) = exp(-gamma ||x - z||^2): gamma means
        # what it means for rbf, and gamma=None follows rbf's rules.
        KernelInfo(
            name="matern",
            aliases=("matern32",),
            code=MATERN,
            radial=True,
            distance="sqeuclidean",
            scale_rule="scale",
            uses_gamma=True,
            unit_diagonal=True,
            merge_power=None,
            norms="squared",
            tile=_matern_tile,
            diag=None,
        ),
        KernelInfo(
            name="polynomial",
            aliases=("poly",),
            code=POLYNOMIAL,
            radial=False,
            distance=None,
            scale_rule="inverse_dim",
            uses_gamma=True,
            unit_diagonal=False,
            merge_power=None,
            norms=None,
            tile=_poly_tile,
            diag=lambda xx, gamma, coef0, degree: (gamma * xx + coef0) ** degree,
        ),
        KernelInfo(
            name="linear",
            aliases=(),
            code=LINEAR,
            radial=False,
            distance=None,
            scale_rule="inverse_dim",
            uses_gamma=False,
            unit_diagonal=False,
            merge_power=None,
            norms=None,
            tile=_linear_tile,
            diag=lambda xx, gamma, coef0, degree: xx,
        ),
        KernelInfo(
            name="sigmoid",
            aliases=(),
            code=SIGMOID,
            radial=False,
            distance=None,
            scale_rule="inverse_dim",
            uses_gamma=True,
            unit_diagonal=False,
            merge_power=None,
            norms=None,
            tile=_sigmoid_tile,
            diag=lambda xx, gamma, coef0, degree: np.tanh(gamma * xx + coef0),
        ),
        KernelInfo(
            name="cosine",
            aliases=(),
            code=COSINE,
            radial=False,
            distance=None,
            scale_rule="inverse_dim",
            uses_gamma=False,
            unit_diagonal=False,
            merge_power=None,
            norms="root",
            tile=_cosine_tile,
            diag=lambda xx, gamma, coef0, degree: xx > 0,
        ),
        KernelInfo(
            name="precomputed",
            aliases=(),
            code=None,
            radial=False,
            distance=None,
            scale_rule="inverse_dim",
            uses_gamma=False,
            unit_diagonal=False,
            merge_power=None,
            norms=None,
            tile=None,
            diag=None,
        ),
    )
}
#: Kernel names and their aliases (scikit-learn's vocabulary, plus "gaussian").
KERNEL_ALIASES = {
    alias: info.name for info in KERNELS.values() for alias in (info.name, *info.aliases)
}
#: The kernels a pair loop knows, by name (the names of :func:`~dkernel.kernels.resolve_kernel`).
KERNEL_CODES = {info.name: info.code for info in KERNELS.values() if info.code is not None}
#: Kernels with k(x, y) = f(||x - y||).
RADIAL_KERNELS = frozenset(info.name for info in KERNELS.values() if info.radial)


def kernel_info(name: str) -> KernelInfo:
    """The record of a kernel name or alias (any case); unknown names raise, listing all."""
    key = name.lower() if isinstance(name, str) else None
    if key not in KERNEL_ALIASES:
        names = ", ".join(sorted(KERNEL_ALIASES))
        raise DKernelError(f"unknown kernel {name!r}; choose one of {names} or a callable")
    return KERNELS[KERNEL_ALIASES[key]]


def width_kernels() -> str:
    """The kernels whose gamma is a width (a bandwidth rule applies), for messages."""
    return ", ".join(repr(k.name) for k in KERNELS.values() if k.distance is not None)
