"""Kernel k-means: truncated mini-batch (Jourdan & Schwartzman, 2024) and full batch."""

from ._bandwidth import select_gamma
from ._full import KernelKMeans
from ._init import kernel_kmeans_plusplus
from ._minibatch import MiniBatchKernelKMeans
from ._scoring import kernel_alignment_score

__all__ = [
    "KernelKMeans",
    "MiniBatchKernelKMeans",
    "kernel_alignment_score",
    "kernel_kmeans_plusplus",
    "select_gamma",
]
