"""dkernel: scalable kernel methods on Dask.

Subpackages: :mod:`dkernel.kernels` (kernel functions and lazy kernel blocks),
:mod:`dkernel.data` (zarr stores, batch sampling, generators), :mod:`dkernel.runtime`
(clusters), :mod:`dkernel.cluster` (kernel k-means), :mod:`dkernel.svm` (budgeted SGD SVM),
:mod:`dkernel.coreset` (SVM coresets), :mod:`dkernel.cli` (the ``dkernel`` command).

Groups of rows, as the code and docs name them (from storage up to compute):

chunk
    A zarr store's unit of storage and I/O (``chunk_rows`` rows; the default divides
    :data:`dkernel.data.ALIGN_ROWS`), and a dask array's unit of one task.
block
    The rows one task works on: a dask block, or a group of whole chunks read by one task
    (a ``RowSource`` regrouped with ``blocks_of``). In the coresets, a leaf's rows.
shard
    A fixed range of consecutive rows of equal size that one worker trains on per round in
    a distributed ``BudgetedSVC`` fit; the count is fixed, so the model does not depend on
    the storage chunks.
leaf
    A fixed row range of ``leaf_size`` rows at the bottom of a coreset build: the
    distributed builds derive it from (n, m) only, never from the chunks; the stream takes
    it as a parameter. Tree nodes above the leaves cover unions of them.
tile
    A range of rows of a kernel matrix computed in one BLAS product and transformed while
    in cache (``dkernel.kernels``); smaller than a block, inside one task.
batch
    The rows of one step of a streaming or mini-batch algorithm: a ``partial_fit`` call, a
    mini-batch of kernel k-means (``batch_size``), a stream's arrival.

Randomness: an estimator's ``random_state`` (int, ``RandomState`` or None) goes through
scikit-learn's ``check_random_state`` and seeds the draws made in one place, in order (the
seeding sample, the gamma sample, the batch indices' own generator). Work split into tasks
never shares a generator: each task's comes from ``numpy.random.SeedSequence`` keyed by
the fit's seed and what the task covers (a distributed BSGD round: ``(seed, epoch,
shard)``; a coreset leaf or tree node: ``(seed, first row, last row, kind)``; a generated
or held-out block of rows: ``(seed, block)``), so results depend on the rows, never on the
chunking, the workers or the order tasks run in.
"""

from . import _defaults  # noqa: F401  (the dkernel.* defaults in Dask's config)
from ._validation import DKernelError
from ._version import __version__

__all__ = ["DKernelError", "__version__", "load_model"]


def load_model(path, **options):
    """Read a model file written by the ``save`` method of any dkernel estimator
    (:func:`dkernel._model_io.read_model`, ``max_bytes=`` as there; imported on first use).

    Also :func:`dkernel.svm.load_model` (the same function)."""
    from ._model_io import read_model

    return read_model(path, **options)
