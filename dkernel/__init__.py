"""dkernel: scalable kernel methods on Dask.

Subpackages: :mod:`dkernel.kernels` (kernel functions and lazy kernel blocks),
:mod:`dkernel.data` (zarr stores, batch sampling, generators), :mod:`dkernel.runtime`
(clusters), :mod:`dkernel.cluster` (kernel k-means), :mod:`dkernel.svm` (budgeted SGD SVM),
:mod:`dkernel.coreset` (SVM coresets), :mod:`dkernel.cli` (the ``dkernel`` command).
"""

__version__ = "0.1.0"

from ._validation import DKernelError

__all__ = ["DKernelError", "__version__"]
