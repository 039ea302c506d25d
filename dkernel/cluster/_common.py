"""Shared plumbing of the kernel k-means estimators: kernel access, input checks, centers.

A *kernel oracle* evaluates ``K(A, B)`` and ``diag K(A, A)`` on "points": rows of X for
the numeric kernels (``NumericOracle``, in ``_blocks.py`` with the worker-side passes),
row indices into the training set for the transductive graph kernels
(``kernel="knn"``/``"heat"``, here). Everything above it is written once for both.
"""

from __future__ import annotations

import abc
import functools
import itertools
import numbers
import uuid
from collections.abc import Callable
from typing import Any

import dask.array as da
import numpy as np
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted

from .._base import read_inputs, read_weights
from .._defaults import setting
from .._model_io import MAX_MODEL_BYTES, fitted_spec, read_npz, set_feature_names
from .._params import check_table
from .._validation import (
    DKernelError,
    checked_block,
    is_dask_array,
    report_nonfinite,
)
from ..data import (
    ResidentRows,
    chunk_bounds,
    chunk_grid,
    join_rows,
    pass_groups,
    row_bytes,
    take_rows,
)
from ..kernels import KERNEL_CODES, check_kernel_scale, heat_kernel, knn_kernel
from ..runtime import (
    compute_blocks,
    distributed_client,
    named_worker_errors,
    phase,
    progress,
    progress_enabled,
    watch,
)
from . import _numba as _nb
from ._blocks import (
    _TILE_ROWS,
    _assign_block,
    _distance_block,
    _label_block,
)

#: Transductive graph kernels, built on the training rows and addressed by index.
GRAPH_KERNELS = ("knn", "heat")
#: Numeric kernels the estimators accept (plus a callable).
SUPPORTED_KERNELS = frozenset(KERNEL_CODES)


class _IndexOracle(abc.ABC):
    """Points are row indices (graph and precomputed kernels): nothing to prepare."""

    graph = True
    mu = None
    evals = 0

    @abc.abstractmethod
    def kernel(self, A, B):
        """Kernel values between the index sets ``A`` and ``B``."""

    def prep(self, A, out=None):
        return A, None

    def kernel_p(self, A, a_sq, B=None, b_sq=None, out=None):
        return self.kernel(A, A if B is None else B)

    def kernel_blocks(self, A, a_sq, bounds) -> list:
        return [self.kernel(A[r0:r1], A[r0:r1]) for r0, r1 in itertools.pairwise(bounds)]


class _GraphOracle(_IndexOracle):
    """Kernel values of a :class:`~dkernel.kernels.GraphKernel`; points are row indices."""

    def __init__(self, graph):
        self.G = graph
        self.evals = 0

    def kernel(self, A: np.ndarray, B: np.ndarray) -> np.ndarray:
        self.evals += A.shape[0] * B.shape[0]
        if A.shape[0] == 0 or B.shape[0] == 0:
            return np.zeros((A.shape[0], B.shape[0]))
        return np.ascontiguousarray(self.G.block(A, B))

    def diag(self, A: np.ndarray) -> np.ndarray:
        return np.asarray(self.G.diag(A), dtype=np.float64)


class _PrecomputedOracle(_IndexOracle):
    """Kernel values from a dense matrix held in memory; points are row indices."""

    def __init__(self, K: np.ndarray):
        self.K = K
        self.evals = 0

    def kernel(self, A, B):
        self.evals += len(A) * len(B)
        return np.ascontiguousarray(self.K[np.ix_(A, B)])

    def diag(self, A):
        return np.asarray(self.K[A, A], dtype=np.float64)


def _fetch_checked(X, idx: np.ndarray, dtype) -> np.ndarray:
    """Rows ``X[idx]`` as C-contiguous ``dtype``: one grouped read of the touched chunks
    (:func:`dkernel.data.take_rows`), values checked in that read (NaN/inf named by the
    global row)."""
    rows = np.ascontiguousarray(take_rows(X, idx, name="kkmeans-batch"), dtype=dtype)
    if rows.size and not np.isfinite(rows).all():
        bad = np.flatnonzero(~np.isfinite(rows).all(axis=1))[0]
        report_nonfinite(rows[bad : bad + 1], name="X", row_offset=int(idx[bad]))
    return rows


def _gather_checked(X, is_dask: bool, dtype, max_bytes: int, what: str) -> np.ndarray:
    """All of X in this process as ``dtype`` (one read per chunk, values checked in it).

    For the variants that truly need every row in memory; dask/store input larger than
    ``max_bytes`` is refused with an error naming ``max_data_bytes``.
    """
    if not is_dask:
        return np.asarray(X, dtype=dtype)
    _check_fits(X, dtype, max_bytes, what)
    return np.asarray(X.map_blocks(checked_block, _as_dtype, dtype, dtype=dtype).compute())


def _check_fits(X, dtype, max_bytes: int, what: str) -> None:
    """Refuse to hold dask/store X in memory when it is larger than ``max_bytes``."""
    nbytes = int(X.shape[0]) * int(X.shape[1]) * np.dtype(dtype).itemsize
    if nbytes > max_bytes:
        raise DKernelError(
            f"{what} holds all of X in memory ({nbytes / 2**20:.1f} MiB), above "
            f"max_data_bytes={max_bytes}; raise max_data_bytes, or use "
            "MiniBatchKernelKMeans with tau set (it streams batches from the store)"
        )


def _as_dtype(Xb, dtype):
    return np.asarray(Xb, dtype=dtype)


#: Fitted records a model file may carry (restored as they are).
_RECORDED = ("inertia_", "n_iter_", "history_", "n_kernel_evals_", "timings_", "kernel_evals_")


def _check_rate(learning_rate):
    if isinstance(learning_rate, str):
        if learning_rate not in ("beta", "sklearn"):
            raise DKernelError(
                f"unknown learning_rate {learning_rate!r}; "
                "use 'beta', 'sklearn' or a float in (0, 1]"
            )
        return learning_rate
    if (
        isinstance(learning_rate, bool)
        or not isinstance(learning_rate, numbers.Real)
        or not 0.0 < float(learning_rate) <= 1.0
    ):
        raise DKernelError(
            f"learning_rate must be 'beta', 'sklearn' or a float in (0, 1], got {learning_rate!r}"
        )
    return float(learning_rate)


def _graph_params(kernel, kernel_params, n):
    params = dict(kernel_params or {})
    allowed = {"knn": {"n_neighbors"}, "heat": {"n_neighbors", "t"}}[kernel]
    extra = set(params) - allowed
    if extra:
        raise DKernelError(
            f"kernel={kernel!r} takes kernel_params {sorted(allowed)}, got {sorted(extra)}"
        )
    nn = params.get("n_neighbors", 10)
    if isinstance(nn, bool) or not isinstance(nn, numbers.Integral) or not 1 <= nn <= n - 1:
        raise DKernelError(
            f"kernel_params['n_neighbors'] must be an int in [1, {n - 1}], got {nn!r}"
        )
    params["n_neighbors"] = int(nn)
    if kernel == "heat":
        t = params.get("t", 1.0)
        if isinstance(t, bool) or not isinstance(t, numbers.Real) or not t > 0:
            raise DKernelError(f"kernel_params['t'] must be a positive number, got {t!r}")
        params["t"] = float(t)
    return params


def _check_init_points(init, n_clusters: int, n_features: int) -> None:
    """Given initial centers: k finite points of the data's width."""
    Z = np.asarray(init)
    if Z.shape != (n_clusters, n_features):
        raise DKernelError(f"init has shape {Z.shape}, expected ({n_clusters}, {n_features})")
    if not np.isfinite(Z).all():
        raise DKernelError("init contains NaN or inf")


def use_graph_kernel(est, X_rows) -> _GraphOracle:
    """Build the estimator's graph kernel ("knn"/"heat") on the training rows ``X_rows``:
    set it as ``est._graph`` (no numeric kernel: ``_spec`` and ``gamma_`` None) and return
    its oracle (``oracle.G`` is the graph).

    A function, not a method of :class:`_KernelCentersMixin`: the class is at its size
    limit (``tests/test_code_shape.py``)."""
    kernel = est.kernel.lower()
    params = _graph_params(kernel, est.kernel_params, len(X_rows))
    graph: Any
    if kernel == "knn":
        graph = knn_kernel(X_rows, params["n_neighbors"])
    else:
        graph = heat_kernel(X_rows, params["n_neighbors"], params["t"])
    est._graph, est._spec, est.gamma_ = graph, None, None
    return _GraphOracle(graph)


def labels_like_rows(labels: np.ndarray, X, is_dask: bool):
    """The training rows' NumPy ``labels`` as a fit returns them: for dask or store input a
    dask array of X's row chunks, as NumPy otherwise."""
    return da.from_array(labels, chunks=(X.chunks[0],)) if is_dask else labels


def _assign_points(oracle, P, S, coef, norms):
    """Labels and squared distances of the points ``P`` to the centers ``coef`` over the
    support ``S`` (norms ``norms``), tile by tile."""
    labels = np.empty(len(P), dtype=np.int64)
    dist = np.empty(len(P))
    for r0 in range(0, len(P), _TILE_ROWS):
        Pb = P[r0 : r0 + _TILE_ROWS]
        inner = oracle.kernel(Pb, S) @ coef.T
        _nb.assign_nearest(
            oracle.diag(Pb),
            np.ascontiguousarray(inner),
            norms,
            labels[r0 : r0 + _TILE_ROWS],
            dist[r0 : r0 + _TILE_ROWS],
        )
    return labels, dist


class _KernelCentersMixin:
    """Centers as weighted support points; input checks; predict/transform/score.

    Fitted attributes used here: ``center_support_`` (s, d), ``center_coef_`` (k, s),
    ``center_norms_`` (k,) = ``<C_j, C_j>``, ``_spec`` (the resolved kernel) and, for the
    graph kernels, ``_graph``.
    """

    # provided by the estimator and _BaseKernelEstimator (declared for the type checker)
    kernel: Any
    n_clusters: int
    init: Any
    _kernel_spec: Callable[..., Any]
    _resolve_gamma: Callable[..., Any]
    _graph: Any
    _spec: Any
    _row_pass: Callable[..., Any]
    _parameter_table: dict
    n_features_in_: int
    gamma_: Any
    inertia_: Any
    n_iter_: int
    n_kernel_evals_: int
    kernel_evals_: dict
    _loaded_sizes: list

    def _is_graph(self) -> bool:
        return isinstance(self.kernel, str) and self.kernel.lower() in GRAPH_KERNELS

    # ------------------------------------------------------------------ input
    def _start_fit(self, X, sample_weight, *, lazy_unit=False):
        """The checks every ``fit`` starts with, in order, before any work.

        Returns ``(X, is_dask, n, weights, rng, dtype)``; ``lazy_unit``: dask or store
        input without weights gets :class:`UnitWeights` (no n-row array on the client).
        """
        self.check_params()
        X, is_dask = read_inputs(X, estimator=self)[:2]
        n = int(X.shape[0])
        self._check_data_params(n)
        if lazy_unit and is_dask and sample_weight is None:
            w = UnitWeights(n)
        else:
            w = _check_weights(sample_weight, n)
        rng = check_random_state(self.random_state)
        dtype = np.float32 if X.dtype == np.float32 else np.float64
        return X, is_dask, n, w, rng, dtype

    # ----------------------------------------------------------------- checks
    def check_params(self) -> None:
        """Check the parameters that do not depend on the data, before any is read.

        ``fit`` calls this first; the CLI calls it before it starts a cluster. Raises a
        :class:`~dkernel.DKernelError` naming the first bad parameter.
        """
        check_table(self, self._parameter_table)
        self._check_other_params()
        if isinstance(self.init, str):
            if self.init not in ("k-means++", "random"):
                raise DKernelError(
                    f"init must be 'k-means++', 'random' or an array, got {self.init!r}"
                )
        elif self._is_graph():
            raise DKernelError("graph kernels take init='k-means++' or 'random', not points")
        if isinstance(self.kernel, str) and self.kernel.lower() not in GRAPH_KERNELS:
            self._kernel_spec(None)  # unknown kernel names raise here
        elif not isinstance(self.kernel, str) and not callable(self.kernel):
            raise DKernelError(f"unknown kernel {self.kernel!r}")

    def _check_other_params(self) -> None:
        """The estimator's rules that its table cannot state."""

    def _check_data_params(self, n: int) -> None:
        """The checks that need the data: ``n`` rows (``n_features_in_`` set)."""
        if self.n_clusters > n:
            raise DKernelError(f"n_clusters={self.n_clusters} must be <= n_samples={n}")
        if not isinstance(self.init, str):
            _check_init_points(self.init, self.n_clusters, self.n_features_in_)

    def _fit_spec(self, X, rng, sample, rows) -> None:
        """Resolve the kernel's gamma (from ``sample`` where the rule needs rows) and check
        the width against ``rows``: a width off X's scale is named before any work."""
        self._spec = self._resolve_gamma(X, rng, sample=sample)
        check_kernel_scale(rows, self._spec)
        self.gamma_ = self._spec.gamma

    # ---------------------------------------------------------------- centers
    def _set_centers(self, oracle, points, coef, norms, X_rows=None):
        """Store the fitted centers: ``points`` stacked support, ``coef`` (k, s)."""
        coef = np.asarray(coef, dtype=np.float64)
        keep = np.flatnonzero(np.any(coef != 0.0, axis=0))
        coef = np.ascontiguousarray(coef[:, keep])
        pts = points[keep]
        if oracle.graph:
            self.center_support_indices_ = np.asarray(pts, dtype=np.int64)
            self.center_support_ = X_rows[pts] if X_rows is not None else None
        else:
            self.center_support_ = np.ascontiguousarray(pts)
        self.center_coef_ = coef
        self.center_norms_ = np.asarray(norms, dtype=np.float64).copy()

    def _assign_all(self, X, is_dask: bool, *, token: str = "kkmeans-labels"):
        """Labels and squared distances of every row, shape (n, 2) as ``[label, dist]``.

        NumPy: local tiles, a NumPy array. Dask: one task per row chunk on the workers, a
        lazy dask array (values checked in the same read).
        """
        if self._is_graph():
            labels, dist = _assign_points(
                _GraphOracle(self._graph),
                np.arange(self._graph.n_samples),
                self.center_support_indices_,
                self.center_coef_,
                self.center_norms_,
            )
            return np.column_stack([labels, dist])
        if not is_dask:
            X = X.astype(self.center_support_.dtype, copy=False)
        return self._row_pass(X, is_dask, _assign_block, *self._center_args(), n_out=2, token=token)

    def _labels_and_distances(self, X, is_dask: bool, *, token: str = "kkmeans-labels"):
        """``(labels, squared distances)`` of every row as NumPy (one pass; computes dask;
        ``token`` names its tasks on the dashboard)."""
        desc = f"{type(self).__name__} labels"
        verbose = getattr(self, "verbose", 0)
        if not is_dask and not self._is_graph() and progress_enabled(verbose):
            # rows in memory: the same pass in slabs of rows, so that its bar can move
            n = len(X)
            parts = []
            with progress(n, desc, enabled=True, unit="rows", unit_scale=True) as bar:
                slab = int(setting("kmeans.label-slab-rows"))
                for r0 in range(0, n, slab):
                    parts.append(self._assign_all(X[r0 : r0 + slab], False))
                    bar.update(len(parts[-1]))
            res = np.concatenate(parts)
        else:
            res = self._assign_all(X, is_dask, token=token)
            res = np.asarray(compute_blocks(res, desc, verbose=verbose))
        return res[:, 0].astype(np.int64), res[:, 1]

    def _fit_labels(self, X, is_dask: bool, w, *, token: str = "kkmeans-labels"):
        """``(labels, inertia)`` of the training rows, one pass over them.

        Rows in memory: NumPy labels. Dask or store input: a dask array on the cluster; under
        a distributed client each stored chunk is read and assigned in one task
        (:class:`~dkernel.data.ResidentRows`, one part per chunk), the labels stay on the
        workers and only one weighted distance sum per chunk comes to the client.
        """
        client = distributed_client() if is_dask and not self._is_graph() else None
        if client is None:
            labels, dist = self._labels_and_distances(X, is_dask, token=token)
            inertia = float(np.dot(np.asarray(w), dist))
            # the same type of result with or without a cluster
            return labels_like_rows(labels, X, is_dask), inertia
        run = uuid.uuid4().hex  # the pass's id in its task keys (the dashboard names the step)
        with phase("labels", width=X.numblocks[0]):
            # adjacent chunks share a part (pass_groups) when they lie on a grid, each
            # still assigned and summed on its own: the grouping never enters a value
            bounds = chunk_bounds(X)
            grid = chunk_grid(bounds)
            cuts = np.arange(len(bounds))
            if grid is not None:
                cuts = pass_groups(np.diff(bounds), row_bytes(X))
            assign = functools.partial(
                _assign_loaded, args=self._center_args(), dtype=self.center_support_.dtype,
                grid=grid,
            )  # fmt: skip
            ranges = itertools.pairwise(bounds[cuts])
            out = ResidentRows.load((X,), ranges, assign, name=f"{token}-{run}")
            desc = f"{type(self).__name__} {token.split('-')[-1]}"
            rows = [b - a for a, b in out.ranges]
            watch(out.parts, desc, rows, verbose=getattr(self, "verbose", 0))
            unit = isinstance(w, UnitWeights)
            each = [(a, None if unit else w[a:b]) for a, b in out.ranges]
            # one round trip: the sums come back once every chunk is assigned (a chunk's
            # error raised here, within the call)
            sums = out.collect(_chunk_distances, name=f"{token}-total-{run}", each=each, grid=grid)
            # the array's graph holds the parts' futures: they live as long as it does; its
            # chunks are their label columns, cut when the labels are computed
            labels = out.as_dask_array(
                dtype=np.int64, each=_label_column, name=f"{token}-column-{run}"
            )
        return labels, float(np.sum(np.concatenate(sums)))

    def _center_args(self):
        return (self.center_support_, self.center_coef_, self.center_norms_, self._spec)

    def _check_predictable(self):
        check_is_fitted(self, "center_coef_")
        if self._is_graph():
            raise DKernelError(
                f"kernel={self.kernel!r} is a transductive graph kernel defined only on the "
                "training rows: use labels_ or fit_predict, not predict/transform/score on new data"
            )

    # ------------------------------------------------------------- public API
    def predict(self, X):
        """Index of the nearest center in feature space for each row of X.

        Parameters
        ----------
        X : ndarray, dask array, zarr array or store path of shape (n, n_features)

        Returns
        -------
        labels : ndarray of shape (n,), or a lazy dask array for dask/zarr/store input
            (computed blockwise on the workers).
        """
        self._check_predictable()
        X, is_dask = self._validate_X(X, reset=False)
        if not is_dask:
            X = X.astype(self.center_support_.dtype, copy=False)
        return self._row_pass(
            X,
            is_dask,
            _label_block,
            *self._center_args(),
            n_out=None,
            dtype=np.int64,
            token="kkmeans-predict",
        )

    def transform(self, X):
        """Feature-space distances ``||phi(x) - C_j||`` to every center, shape (n, k).

        A lazy dask array for dask/zarr/store input, computed blockwise on the workers.
        """
        self._check_predictable()
        X, is_dask = self._validate_X(X, reset=False)
        if not is_dask:
            X = X.astype(self.center_support_.dtype, copy=False)
        k = self.center_coef_.shape[0]
        return self._row_pass(
            X, is_dask, _distance_block, *self._center_args(), n_out=k, token="kkmeans-transform"
        )

    # ------------------------------------------------------------ persistence
    def save(self, path) -> None:
        """Write the fitted model to ``path`` (a file path or a URL such as ``s3://``).

        An ``.npz`` with a JSON header, read back with ``allow_pickle=False`` (see
        :mod:`dkernel.cluster._io`); written atomically, so a failed save leaves no
        half-written file. The model of a graph or callable kernel cannot be saved.
        """
        from ._io import write_kmeans

        check_is_fitted(self, "center_coef_")
        write_kmeans(self, path)

    @classmethod
    def load(cls, path, *, max_bytes: int = MAX_MODEL_BYTES):
        """Read a model written by :meth:`save`; it predicts, transforms and scores exactly
        as the saved one (``labels_`` of the training rows are not kept, and
        :meth:`partial_fit` starts a new model). Files above ``max_bytes`` (1 GiB by
        default, on disk or unpacked) are refused unread; every value of the file is
        checked. Raises ``DKernelError``.
        """
        return cls._from_file(*read_npz(path, max_bytes=max_bytes))

    @classmethod
    def _from_file(cls, where: str, header: dict, arrays: dict):
        from ._io import check_kmeans

        params, fitted, arrays = check_kmeans(cls, where, header, arrays)
        try:
            est = cls(**params)
            est.n_features_in_ = int(fitted["n_features_in_"])
            set_feature_names(est, fitted)
            est.check_params()
            est._check_data_params(int(params["n_clusters"]))
            if est._is_graph() or fitted["kernel"] not in SUPPORTED_KERNELS:
                raise DKernelError(f"kernel {fitted['kernel']!r} of the fitted model is unknown")
        except (TypeError, DKernelError) as exc:
            raise DKernelError(f"{where!r} has a corrupt header ({exc})") from None
        est._spec = fitted_spec(params, fitted)
        est.gamma_ = fitted["gamma_"]
        est.center_support_ = arrays["center_support"]
        est.center_coef_ = arrays["center_coef"]
        est.center_norms_ = arrays["center_norms"]
        check_kernel_scale(est.center_support_, est._spec, where=f"{where!r} is corrupt: ")
        for key in _RECORDED:
            if key in fitted:
                setattr(est, key, fitted[key])
        est._loaded_sizes = [int(v) for v in fitted["cluster_sizes"]]
        return est

    def _cluster_sizes(self) -> list[int]:
        """Training rows per cluster (from ``labels_``, or as saved in a model file)."""
        labels = getattr(self, "labels_", None)
        if labels is None:
            return list(getattr(self, "_loaded_sizes", []))
        k = self.center_coef_.shape[0]
        if is_dask_array(labels):  # on the cluster: k counts come back, not the labels
            return np.asarray(da.bincount(labels, minlength=k).compute()).tolist()
        return np.bincount(labels, minlength=k).tolist()

    def summary(self) -> dict[str, Any]:
        """The fitted model in a few JSON-ready numbers.

        ``estimator``, ``n_clusters``, ``kernel``, ``gamma`` (the width used), ``n_features``,
        ``n_support`` (points the centers are made of), ``inertia`` (over the training rows;
        None after :meth:`partial_fit` alone), ``n_iter``, ``n_kernel_evals``,
        ``cluster_sizes`` (training rows per cluster; empty after :meth:`partial_fit`
        alone), and ``timings`` (seconds per phase) where the fit recorded them.
        """
        check_is_fitted(self, "center_coef_")
        spec = getattr(self, "_spec", None)
        kernel = self.kernel if spec is None else spec.kernel  # graph kernels: no spec
        out: dict[str, Any] = {
            "estimator": type(self).__name__,
            "n_clusters": int(self.center_coef_.shape[0]),
            "kernel": kernel
            if isinstance(kernel, str)
            else getattr(kernel, "__name__", "callable"),
            "gamma": self.gamma_,
            "n_features": int(self.n_features_in_),
            "n_support": int(self.center_coef_.shape[1]),
            "inertia": None if getattr(self, "inertia_", None) is None else float(self.inertia_),
            "n_iter": int(self.n_iter_),
            "n_kernel_evals": int(self.n_kernel_evals_),
            "cluster_sizes": self._cluster_sizes(),
        }
        if hasattr(self, "timings_"):
            out["timings"] = {k: float(v) for k, v in self.timings_.items()}
        return out

    @named_worker_errors
    def score(self, X, y=None, sample_weight=None):
        """Negative kernel k-means objective ``-sum_i w_i min_j ||phi(x_i) - C_j||^2``.

        Comparable between models of one kernel width only: it tends to 0 as gamma does.
        To choose gamma (``GridSearchCV``) score with
        :func:`~dkernel.cluster.kernel_alignment_score` instead.
        """
        self._check_predictable()
        X, is_dask = self._validate_X(X, reset=False)
        n = int(X.shape[0])
        lazy = is_dask and sample_weight is None
        w = UnitWeights(n) if lazy else _check_weights(sample_weight, n)
        return -self._fit_labels(X, is_dask, w, token="kkmeans-score")[1]


class UnitWeights:
    """Weights of 1 for n rows, made only where they are used (a fit on dask or store input
    without ``sample_weight`` never holds n of them on the client)."""

    def __init__(self, n: int) -> None:
        self.n = int(n)

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, idx) -> np.ndarray:
        if isinstance(idx, slice):
            return np.ones(len(range(*idx.indices(self.n))))
        idx = np.asarray(idx)
        count = int(idx.sum()) if idx.dtype == bool else idx.shape[0]
        return np.ones(count)

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        return np.ones(self.n, dtype=dtype or np.float64)


def _assign_loaded(Xb, start: int, *, args, dtype, grid) -> np.ndarray:
    """A part's ``[label, squared distance]`` rows, its values checked (global rows named),
    assigned one stored chunk at a time (``grid``: the chunks, None: the part is one)."""
    Xb = np.asarray(Xb)
    report_nonfinite(Xb, name="X", row_offset=start)
    out = [
        _assign_block(np.ascontiguousarray(Xb[a:b], dtype=dtype), *args)
        for a, b in _part_chunks(grid, start, len(Xb))
    ]
    return join_rows(out)


def _chunk_distances(res: np.ndarray, k: int, piece, *, grid) -> np.ndarray:
    """A part's weighted squared distances summed per stored chunk (``piece``: the part's
    first row and its weights, None: unit): the same sums however the chunks are grouped
    into parts."""
    start, wk = piece
    d = res[:, 1]
    return np.array([
        d[a:b].sum() if wk is None else np.dot(wk[a:b], d[a:b])
        for a, b in _part_chunks(grid, start, len(d))
    ])  # fmt: skip


def _part_chunks(grid, start: int, n: int):
    """The ``(lo, hi)`` local rows of each stored chunk in the part of ``n`` rows from row
    ``start`` (``grid``: the chunks, None: the part is one)."""
    cuts = [0, n] if grid is None else grid.cuts(start, start + n) - start
    return itertools.pairwise(cuts)


def _label_column(res: np.ndarray) -> np.ndarray:
    return res[:, 0].astype(np.int64)


def _check_weights(sample_weight, n):
    return read_weights(sample_weight, n, lazy=False)
