"""dkernel: scalable kernel methods on Dask.

Subpackages: :mod:`dkernel.kernels` (kernel functions and lazy kernel blocks),
:mod:`dkernel.data` (zarr stores, batch sampling, generators), :mod:`dkernel.runtime`
(clusters), :mod:`dkernel.cluster` (kernel k-means), :mod:`dkernel.svm` (budgeted SGD SVM),
:mod:`dkernel.coreset` (SVM coresets), :mod:`dkernel.cli` (the ``dkernel`` command).
"""

__version__ = "0.1.0"

from ._validation import DKernelError

__all__ = ["DKernelError", "__version__", "load_model"]


def load_model(path, **options):
    """Read a model file written by the ``save`` method of any dkernel estimator
    (:func:`dkernel._model_io.load_model`, ``max_bytes=`` as there; imported on first use)."""
    from ._model_io import load_model as _load

    return _load(path, **options)
