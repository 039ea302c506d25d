"""Kernel functions, lazy Dask kernel blocks, bandwidth heuristics and graph kernels."""

from ._bandwidth import estimate_gamma

# The internal surface: what the other subpackages use (not part of the public API).
from ._bandwidth import gamma_from_rows as gamma_from_rows
from ._bandwidth import sample_dense as sample_dense
from ._blocks import kernel_matrix
from ._graph import GraphKernel, HeatKernel, KNNKernel, heat_kernel, knn_kernel

# the numba tile kernels (checked against NumPy in the tests)
from ._numba import cosine_from_gram as cosine_from_gram
from ._numba import fast_exp_array as fast_exp_array
from ._numba import laplacian_block as laplacian_block
from ._numba import laplacian_tile as laplacian_tile
from ._numba import mirror_tile as mirror_tile
from ._numba import poly_from_gram as poly_from_gram
from ._numba import rbf_from_gram as rbf_from_gram
from ._numba import row_sq_norms as row_sq_norms
from ._numba import sigmoid_from_gram as sigmoid_from_gram
from ._pair import krow_into as krow_into
from ._pair import kval as kval
from ._pair import pair_gram as pair_gram
from ._pair import pair_matrix as pair_matrix
from ._pair import sq_norm as sq_norm
from ._pair import sq_norms as sq_norms
from ._pairwise import ONE_BLAS_THREAD as ONE_BLAS_THREAD
from ._pairwise import (
    KernelSpec,
    kernel_diag,
    pairwise_kernels,
    resolve_kernel,
)
from ._pairwise import diag_from_spec as diag_from_spec
from ._pairwise import effective_n_jobs as effective_n_jobs
from ._pairwise import pairwise_from_spec as pairwise_from_spec
from ._pairwise import row_tiles as row_tiles
from ._pairwise import run_tiles as run_tiles
from ._scale import check_kernel_scale as check_kernel_scale
from ._table import KERNEL_ALIASES, KERNELS, RADIAL_KERNELS, KernelInfo, kernel_info
from ._table import KERNEL_CODES as KERNEL_CODES
from ._table import width_kernels as width_kernels

__all__ = [
    "KERNELS",
    "KERNEL_ALIASES",
    "RADIAL_KERNELS",
    "GraphKernel",
    "HeatKernel",
    "KNNKernel",
    "KernelInfo",
    "KernelSpec",
    "estimate_gamma",
    "heat_kernel",
    "kernel_diag",
    "kernel_info",
    "kernel_matrix",
    "knn_kernel",
    "pairwise_kernels",
    "resolve_kernel",
]
