"""The private base class of every kernel estimator: kernel parameters and validation."""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator

from .._validation import DKernelError
from ._pairwise import KernelSpec, _kernel_diag, _pairwise_kernels, resolve_kernel


class _BaseKernelEstimator(BaseEstimator):
    """Holds ``kernel``, ``gamma``, ``degree``, ``coef0``, ``kernel_params``.

    Subclasses call :meth:`_kernel_spec` once per fit (``gamma=None`` is resolved by the
    subclass's own rule, e.g. the median heuristic) and then :meth:`_kernel` /
    :meth:`_kernel_diag`, which trust validated, same-dtype NumPy input.
    """

    #: Kernel names a subclass accepts (None: all of :data:`KERNEL_ALIASES`).
    _supported_kernels: frozenset | None = None

    def _kernel_spec(self, X=None, *, gamma=None) -> KernelSpec:
        spec = resolve_kernel(
            self.kernel,
            self.gamma if gamma is None else gamma,
            self.degree,
            self.coef0,
            self.kernel_params,
        )
        if (
            self._supported_kernels is not None
            and not callable(spec.kernel)
            and spec.kernel not in self._supported_kernels
        ):
            names = ", ".join(sorted(self._supported_kernels))
            raise DKernelError(
                f"{type(self).__name__} does not support kernel {self.kernel!r}; use one of {names}"
            )
        if spec.gamma is None and X is not None and isinstance(spec.kernel, str):
            spec = spec._replace(gamma=1.0 / X.shape[1])
        return spec

    @staticmethod
    def _kernel(X: np.ndarray, Y: np.ndarray | None, spec: KernelSpec) -> np.ndarray:
        return _pairwise_kernels(X, Y, spec)

    @staticmethod
    def _kernel_diag(X: np.ndarray, spec: KernelSpec) -> np.ndarray:
        return _kernel_diag(X, spec)
