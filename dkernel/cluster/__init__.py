"""Kernel k-means: truncated mini-batch (Jourdan & Schwartzman, 2024) and full batch.

The names below load on first use (PEP 562), so that a Dask worker unpickling a task of
``dkernel.cluster._blocks`` loads that module only, not the estimators (scikit-learn).
"""

import importlib
from typing import Any

_EXPORTS = {
    "KernelKMeans": "._full",
    "MiniBatchKernelKMeans": "._minibatch",
    "kernel_alignment_score": "._scoring",
    "kernel_kmeans_plusplus": "._init",
    "select_gamma": "._bandwidth",
    # the internal surface: what the other subpackages use (not part of the public API)
    "NumericOracle": "._blocks",
    "kmeans_plusplus_oracle": "._init",
}

__all__ = [
    "KernelKMeans",
    "MiniBatchKernelKMeans",
    "kernel_alignment_score",
    "kernel_kmeans_plusplus",
    "select_gamma",
]


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name], __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
