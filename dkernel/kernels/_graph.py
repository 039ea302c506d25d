"""Graph kernels of the kernel k-means paper, built from a sparse kNN graph.

Both are transductive: they are defined on the rows they were built from, and an
algorithm addresses them by row index (``block(rows, cols)``), never as an n x n array.
"""

from __future__ import annotations

import abc

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import expm_multiply

from .._validation import DKernelError, check_finite_2d, check_scalar


def _knn_adjacency(X: np.ndarray, n_neighbors: int) -> sp.csr_matrix:
    from sklearn.neighbors import NearestNeighbors  # not at import: workers load this package

    nn = NearestNeighbors(n_neighbors=n_neighbors + 1).fit(X)
    A = nn.kneighbors_graph(X, mode="connectivity")
    A.setdiag(0)
    A.eliminate_zeros()
    A = A.maximum(A.T).tocsr()  # symmetric: i ~ j if either is among the other's k nearest
    return A.astype(np.float64)


class GraphKernel(abc.ABC):
    """A precomputed kernel on the n rows of a kNN graph, addressed by row index.

    Attributes
    ----------
    n_samples : int
    matrix : scipy.sparse.csr_matrix or None
        The whole kernel when it is sparse (kNN kernel: O(n k) memory).
    """

    kind = "graph"

    def __init__(self, n_samples: int):
        self.n_samples = n_samples

    def _check(self, idx) -> np.ndarray:
        idx = np.asarray(idx, dtype=np.int64).ravel()
        if idx.size and (idx.min() < 0 or idx.max() >= self.n_samples):
            raise DKernelError(
                f"row indices must lie in [0, {self.n_samples}) for this graph kernel"
            )
        return idx

    @abc.abstractmethod
    def block(self, rows, cols) -> np.ndarray:
        """Dense ``K[rows][:, cols]``."""

    @abc.abstractmethod
    def diag(self, rows) -> np.ndarray:
        """``K[i, i]`` for the given rows."""


class KNNKernel(GraphKernel):
    """``K = D^-1 A D^-1`` for the symmetric kNN adjacency A with degrees D (sparse)."""

    def __init__(self, A: sp.csr_matrix):
        super().__init__(A.shape[0])
        deg = np.asarray(A.sum(axis=1)).ravel()
        inv = np.where(deg > 0, 1.0 / np.maximum(deg, 1e-300), 0.0)
        Dinv = sp.diags(inv)
        self.matrix = (Dinv @ A @ Dinv).tocsr()
        self._diag = self.matrix.diagonal()

    def block(self, rows, cols) -> np.ndarray:
        rows, cols = self._check(rows), self._check(cols)
        return self.matrix[rows][:, cols].toarray()

    def diag(self, rows) -> np.ndarray:
        return self._diag[self._check(rows)]


class HeatKernel(GraphKernel):
    """``K = exp(-t L)`` for the normalised Laplacian ``L = I - D^-1/2 A D^-1/2`` of a kNN graph.

    ``K`` is dense, so it is never formed: ``block(rows, cols)`` computes the needed columns
    ``exp(-t L) e_j`` with :func:`scipy.sparse.linalg.expm_multiply` in O(nnz(S) |cols|)
    time and O(n |cols|) memory, and keeps a bounded cache of recent columns.
    """

    def __init__(self, A: sp.csr_matrix, t: float, cache_columns: int = 4096):
        super().__init__(A.shape[0])
        deg = np.asarray(A.sum(axis=1)).ravel()
        inv_sqrt = np.where(deg > 0, 1.0 / np.sqrt(np.maximum(deg, 1e-300)), 0.0)
        D = sp.diags(inv_sqrt)
        S = D @ A @ D
        self.L = (sp.identity(A.shape[0], format="csc") - S).tocsc()
        self.t = float(t)
        self.matrix = None
        self._cache: dict[int, np.ndarray] = {}
        self._cache_columns = cache_columns

    def _columns(self, cols: np.ndarray) -> np.ndarray:

        missing = np.array([c for c in np.unique(cols) if c not in self._cache], dtype=np.int64)
        if missing.size:
            E = np.zeros((self.n_samples, missing.size))
            E[missing, np.arange(missing.size)] = 1.0
            V = expm_multiply(-self.t * self.L, E)
            if len(self._cache) + missing.size > self._cache_columns:
                self._cache.clear()
            for k, c in enumerate(missing):
                self._cache[int(c)] = V[:, k]
        return np.stack([self._cache[int(c)] for c in cols], axis=1)

    def block(self, rows, cols) -> np.ndarray:
        rows, cols = self._check(rows), self._check(cols)
        return self._columns(cols)[rows]

    def diag(self, rows) -> np.ndarray:
        rows = self._check(rows)
        return np.array([self._columns(np.array([r]))[r, 0] for r in rows])


def knn_kernel(X, n_neighbors: int = 10) -> KNNKernel:
    """The kNN graph kernel ``D^-1 A D^-1`` of the kernel k-means paper.

    ``A`` is the symmetrised 0/1 adjacency of the ``n_neighbors``-nearest-neighbour graph
    and ``D`` its degree matrix. Memory O(n k): the kernel is a sparse matrix with at most
    ``2 n k`` non-zeros. It applies where clusters are connected regions of a manifold
    (rings, moons) and n is small enough to build the graph in memory.

    Examples
    --------
    >>> from dkernel.data import make_rings
    >>> from dkernel.kernels import knn_kernel
    >>> X, _ = make_rings(200, random_state=0)
    >>> K = knn_kernel(X, n_neighbors=5)
    >>> K.block([0, 1], [0, 1]).shape
    (2, 2)
    """
    X = check_finite_2d(X, name="X")
    check_scalar(n_neighbors, "n_neighbors", kind=(int, np.integer), low=1, high=X.shape[0] - 1)
    return KNNKernel(_knn_adjacency(X, int(n_neighbors)))


def heat_kernel(X, n_neighbors: int = 10, t: float = 1.0) -> HeatKernel:
    """The heat kernel ``exp(-t L)``, ``L = I - D^-1/2 A D^-1/2``, of the kNN graph.

    This is ``exp(-t) exp(t D^-1/2 A D^-1/2)``: heat diffusing for time ``t`` along the
    graph, so rows joined by short paths get large values. (The literal
    ``exp(-t D^-1/2 A D^-1/2)`` would score graph neighbours *below* non-neighbours at
    first order, ``I - t S``, so the Laplacian form is the one implemented.)

    Memory O(n k) for the graph plus O(n) per column asked for; the n x n kernel is never
    formed. Each new column costs a sparse matrix-exponential action (a few dozen sparse
    products), so it suits algorithms that touch a bounded set of columns (mini-batch
    kernel k-means with truncation), not full-batch Lloyd on large n.

    Examples
    --------
    >>> from dkernel.data import make_rings
    >>> from dkernel.kernels import heat_kernel
    >>> X, _ = make_rings(200, random_state=0)
    >>> K = heat_kernel(X, n_neighbors=5, t=2.0)
    >>> bool(K.block([0], [0])[0, 0] > 0)
    True
    """
    X = check_finite_2d(X, name="X")
    check_scalar(n_neighbors, "n_neighbors", kind=(int, np.integer), low=1, high=X.shape[0] - 1)
    check_scalar(t, "t", low=0.0, low_inclusive=False)
    return HeatKernel(_knn_adjacency(X, int(n_neighbors)), t)
