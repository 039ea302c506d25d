"""The steps of ``MiniBatchKernelKMeans.fit`` around the k-means step, as functions.

The checkpoint a fit resumes from and saves to (:class:`Checkpoint`), the rows it holds,
the batch stream with the initial sample (:func:`open_stream`), the seeding
(:func:`seed_centers`) and the truncated iterations (:func:`fit_windows`, the loop around
:func:`~dkernel.cluster._window.window_step`). ``fit`` itself reads as the sequence of
these; they take what they need as arguments and return what they make.
:func:`run_iterations` is the iteration loop both fits share (the untruncated fit's
step is :mod:`._recursive`'s).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import logging
import numbers
import warnings
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NamedTuple

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from .._defaults import setting
from ..data import CheckpointFile, draw_indices
from ._common import _fetch_checked, _gather_checked
from ._init import _init_centers
from ._window import WindowState, new_windows, plateau, stop_reason, window_step

logger = logging.getLogger(__name__)


class Loop(NamedTuple):
    """How a fit's iterations run: at most ``max_iter``, batches of ``batch_size`` rows
    (already capped at the n rows of the data), the ``max_no_improvement`` patience, and
    the ``callback`` of ``fit``."""

    max_iter: int
    batch_size: int
    patience: int | None
    callback: Callable[[int, float], Any] | None = None

    def plateau(self, n: int, b: int, history):
        return plateau(self.patience, n, b, history)

    def notify(self, n_iter: int, objective: float) -> None:
        """Tell the callback that iteration ``n_iter`` is done (an error it raises stops
        the fit)."""
        if self.callback is not None:
            self.callback(n_iter, objective)


# ---------------------------------------------------------------- checkpoint
class Checkpoint(CheckpointFile):
    """The checkpoint file of a fit, and the state it held when the fit opened it
    (``saved``, None when there was none)."""

    def __init__(self, path, every: int, params: dict) -> None:
        super().__init__(path, every, params)
        self.saved = self.load()

    def save(self, state: WindowState) -> None:
        """Write the state after ``state.n_iter`` iterations: exactly its arrays."""
        self.write(state.to_arrays(), "checkpoint")


def open_checkpoint(path, every, params, X, dtype, sample_weight, w) -> Checkpoint | None:
    """The fit's :class:`Checkpoint` (None without a ``path``), tied to ``params`` and
    the data (``X``'s shape, ``dtype``, the weights); one saved for other parameters or
    data raises."""
    if path is None:
        return None
    n, d = int(X.shape[0]), X.shape[1]
    params = checkpoint_params(params, n, d, dtype, sample_weight, w)
    return Checkpoint(path, every, params)


def checkpoint_params(params, n, d, dtype, sample_weight, w) -> dict:
    """What a checkpoint is tied to: the estimator's ``params`` that shape the fit, and
    the data's shape, dtype and weights (not ``verbose``, not the checkpoint options)."""
    params = dict(params)
    for key in ("checkpoint", "checkpoint_every", "verbose"):
        params.pop(key)
    rs = params["random_state"]
    if rs is not None and not isinstance(rs, numbers.Integral):
        params["random_state"] = type(rs).__name__  # an instance: its state is saved
    if not isinstance(params["init"], str):
        params["init"] = hashlib.sha256(np.ascontiguousarray(params["init"])).hexdigest()
    params["data"] = {"n": n, "d": int(d), "dtype": np.dtype(dtype).name}
    if sample_weight is not None:
        params["data"]["weights"] = hashlib.sha256(np.ascontiguousarray(w)).hexdigest()
    return params


# ------------------------------------------------------------------- the data
class Rows(NamedTuple):
    """The rows a fit holds in memory: those a graph kernel is built on (``graph``),
    all rows for the untruncated update (``all``); None where the fit streams batches."""

    graph: np.ndarray | None
    all: np.ndarray | None


def hold_rows(X, is_dask, dtype, *, graph, tau, max_bytes) -> Rows:
    """Read the rows the fit needs in memory (one checked read), refusing dask/store
    input above ``max_bytes``."""
    if graph:
        return Rows(_gather_checked(X, is_dask, dtype, max_bytes, "a graph kernel"), None)
    if tau is None:  # the untruncated update holds X: one read, up front
        return Rows(None, _gather_checked(X, is_dask, dtype, max_bytes, "tau=None (no truncation)"))
    return Rows(None, None)


def _row_fetcher(X, rows: Rows, is_dask, dtype):
    """The points of a batch: indices (graph kernels), one checked read of the touched
    chunks (dask/store input not held in memory), a copy out of memory otherwise."""
    if rows.graph is not None:
        return _indices
    if is_dask and rows.all is None:
        return functools.partial(_fetch_checked, X, dtype=dtype)
    X_local = X if rows.all is None else rows.all
    return lambda idx: np.ascontiguousarray(X_local[idx], dtype=dtype)


def _indices(idx):
    """A graph kernel's batches are row indices."""
    return idx


def sample_size(n, b, seeding) -> int:
    """Rows of the initial sample (``b``: rows per batch)."""
    size = seeding.init_size or max(3 * b, 10 * seeding.n_clusters)
    return max(min(n, size), seeding.n_clusters)


class Stream(NamedTuple):
    """The batches of a fit (``(indices, points)`` per iteration; ``close()`` when done),
    their seed, and the initial sample's indices and points (None when not drawn)."""

    batches: Iterator
    seed: int
    head: np.ndarray | None
    sample: np.ndarray | None


def open_stream(X, is_dask, dtype, rng, loop: Loop, rows: Rows, *, n_head, saved) -> Stream:
    """Draw the initial sample (``n_head`` rows, None: none) and open the batch stream.

    One read of the touched chunks gives the seeding sample, which is also the median
    heuristic's sample, and the first group of batches; batch indices come from their
    own generator, so the grouping cannot change the model. A resumed fit (``saved``)
    takes the saved seed and skips the batches already used (drawn, not read); dask or
    store input not held in memory is prefetched.
    """
    n = int(X.shape[0])
    head = None
    if n_head is not None:
        head = np.sort(draw_indices(n, n_head, rng, replace=False))
    seed = rng.randint(0, 2**31 - 1) if saved is None else saved["batch_seed"]
    start = 0 if saved is None else int(saved["n_iter"])
    batches = batch_stream(
        n,
        loop.batch_size,
        np.random.RandomState(int(seed)),
        _row_fetcher(X, rows, is_dask, dtype),
        X.shape[1],
        dtype,
        prefetch=is_dask and rows.all is None and rows.graph is None,
        max_batches=loop.max_iter - start,
        head=head,
        skip=start,
    )
    sample = None
    if head is not None:
        head, sample = next(batches)
    return Stream(batches, seed, head, sample)


class Seeding(NamedTuple):
    """The estimator's initialisation parameters."""

    init: Any
    n_clusters: int
    n_init: int
    init_size: int | None


def seed_centers(oracle, sample, w_sample, rng, dtype, seeding: Seeding):
    """The initial centers as single points: seeded on ``sample`` or given."""
    if not isinstance(seeding.init, str):
        return np.asarray(seeding.init, dtype=dtype)
    pick = _init_centers(
        oracle,
        sample,
        w_sample,
        seeding.n_clusters,
        rng,
        init=seeding.init,
        n_init=seeding.n_init,
    )
    return sample[pick]


class Start(NamedTuple):
    """Where a fit's iterations start: the initial centers ``Z`` (a new fit) or the
    ``state`` of a checkpoint (a resumed one), and the kernel values the initialisation
    counted (the fit's oracle is fresh: its count starts at 0)."""

    Z: np.ndarray | None
    state: WindowState | None
    evals_init: int


def initialise(oracle, stream: Stream, saved, w, rng, dtype, bar, seeding: Seeding) -> Start:
    """Seed the centers on the stream's initial sample, or restore a checkpoint's state
    (``saved``: its arrays; the bar moves to the iterations it did)."""
    if saved is None:
        w_head = None if stream.head is None else w[stream.head]
        Z = seed_centers(oracle, stream.sample, w_head, rng, dtype, seeding)
        return Start(Z, None, oracle.evals)
    state = WindowState.from_arrays(saved, rng=rng)
    oracle.evals = state.evals
    bar.update(state.n_iter, objective=state.history[-1])
    return Start(None, state, state.evals_init)


# --------------------------------------------------------------- iterations
def iteration_state(oracle, start: Start, stream: Stream, rng, gamma, mu) -> WindowState:
    """The state the truncated iterations start from: a checkpoint's, or one window per
    initial center (their kernel values counted as the iterations')."""
    if start.state is not None:
        return start.state
    return WindowState(
        new_windows(oracle, start.Z),
        rng,
        gamma=gamma,
        mu=mu,
        batch_seed=stream.seed,
        evals_init=start.evals_init,
    )


def run_iterations(step, state, n: int, bar, loop: Loop, ckpt: Checkpoint | None = None) -> None:
    """The iteration loop of both mini-batch fits, from ``state.n_iter`` (a resumed fit)
    to at most ``loop.max_iter``.

    ``step(it)`` does iteration ``it`` (its batch objective appended to ``state.history``)
    and returns whether the ``tol`` test was met. After each: the ``max_no_improvement``
    rule (``n`` rows; a resumed fit's history replayed first), the bar, the checkpoint
    every ``ckpt.every`` (not at a stop or after the last iteration), the callback, and at
    a stop before ``max_iter`` the bar's reason.
    """
    start = state.n_iter
    stop_rule = loop.plateau(n, loop.batch_size, state.history)
    for it in range(start, loop.max_iter):
        below_tol = step(it)
        stop = stop_rule(state.history[-1]) or below_tol
        bar.update(1, objective=state.history[-1])
        more = it + 1 < loop.max_iter
        if ckpt is not None and not stop and more and (it + 1) % ckpt.every == 0:
            ckpt.save(state)
        loop.notify(state.n_iter, state.history[-1])
        if stop:
            if more:
                bar.stop_early(stop_reason(below_tol, loop.patience))
            break


def fit_windows(state, oracle, batches, w, bar, rule, *, loop: Loop, ckpt) -> None:
    """The truncated iterations, from ``state.n_iter`` on (a resumed fit), each a
    :func:`window_step` on a batch of the ``n = len(w)`` rows; the state is saved to
    ``ckpt`` every ``ckpt.every``."""
    start = state.n_iter

    def step(it: int) -> bool:
        idx_b, Xb = next(batches)
        note = bar.compiling("kernel k-means iteration")
        with note if it == start else contextlib.nullcontext():
            return window_step(state, oracle, Xb, w[idx_b], rule)

    run_iterations(step, state, len(w), bar, loop, ckpt)


def kernel_evals(evals: int, start: Start, labels_evals: int) -> tuple[int, dict]:
    """``n_kernel_evals_`` and ``kernel_evals_``: the oracle's count ``evals`` split at
    the end of the initialisation, plus the labels pass."""
    split = {
        "init": int(start.evals_init),
        "iterations": int(evals - start.evals_init),
        "labels": int(labels_evals),
    }
    return int(evals + labels_evals), split


def warn_never_won(wins, n_iter) -> None:
    never = np.flatnonzero(wins == 0)
    if never.size:
        warnings.warn(
            f"center(s) {never.tolist()} never won a batch row in {n_iter} iterations "
            "and stayed at their initial point; consider fewer clusters or more iterations",
            ConvergenceWarning,
            stacklevel=2,  # fit, which calls this
        )


def batch_stream(
    n, batch_size, rng, fetch, d, dtype, *, prefetch=False, max_batches=None, head=None, skip=0
):
    """Yield ``(indices, points)`` per iteration; rows of several batches fetched at once.

    Indices are drawn one batch at a time from ``rng`` in the calling thread (so they do
    not depend on the grouping or the prefetch); a group of batches (at most the setting
    ``kmeans.prefetch-bytes`` of rows, balanced over ``max_batches``) is gathered in one pass
    over the touched chunks (rows in memory, ``prefetch=False``: one batch per fetch).
    ``head``: indices fetched with the first group and yielded first (the initial sample:
    one read serves both). ``prefetch``: the next group is fetched in a background thread
    while this one is used (dask/store input), never more than ``max_batches`` need.
    ``skip``: batches drawn and discarded first (never read): a resumed fit continues the
    same sequence. Call ``close()`` when done.
    """
    for _ in range(skip):
        draw_indices(n, batch_size, rng)
    per_batch = max(1, batch_size * d * np.dtype(dtype).itemsize)
    # rows in memory (no prefetch) are gathered a batch at a time: a group only pays off as
    # one pass over a store's chunks, and a large gather costs fresh pages
    group = max(1, int(setting("kmeans.prefetch-bytes")) // per_batch) if prefetch else 1
    n_groups = None
    if max_batches is not None:
        n_groups = -(-max_batches // group)
        group = -(-max_batches // n_groups)

    def draw():
        return [draw_indices(n, batch_size, rng) for _ in range(group)]

    def load(idxs, head=None):
        parts = idxs if head is None else [head, *idxs]
        rows = fetch(np.concatenate(parts))
        h = 0 if head is None else len(head)
        return idxs, rows[h:], rows[:h]

    pool = ThreadPoolExecutor(1, thread_name_prefix="dkernel-prefetch") if prefetch else None
    try:
        cur = load(draw(), head)
        done = 1
        if head is not None:
            yield head, cur[2]
        while True:
            nxt = None
            if pool is not None and (n_groups is None or done < n_groups):
                nxt = pool.submit(load, draw())
            idxs, rows, _ = cur
            for g, idx in enumerate(idxs):
                yield idx, rows[g * batch_size : (g + 1) * batch_size]
            cur = nxt.result() if nxt is not None else load(draw())
            done += 1
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
