"""Kernel functions, lazy Dask kernel blocks, bandwidth heuristics and graph kernels."""

from ._bandwidth import estimate_gamma
from ._blocks import kernel_matrix
from ._graph import GraphKernel, HeatKernel, KNNKernel, heat_kernel, knn_kernel
from ._pairwise import (
    KERNEL_ALIASES,
    RADIAL_KERNELS,
    KernelSpec,
    kernel_diag,
    pairwise_kernels,
    resolve_kernel,
)

__all__ = [
    "KERNEL_ALIASES",
    "RADIAL_KERNELS",
    "GraphKernel",
    "HeatKernel",
    "KNNKernel",
    "KernelSpec",
    "estimate_gamma",
    "heat_kernel",
    "kernel_diag",
    "kernel_matrix",
    "knn_kernel",
    "pairwise_kernels",
    "resolve_kernel",
]
