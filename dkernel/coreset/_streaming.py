"""Streaming coresets: the paper's merge-and-reduce tree over data arriving in batches."""

from __future__ import annotations

import functools
import logging
import numbers
import os

import numpy as np

from .._validation import DKernelError, check_finite_2d, check_scalar, label_classes
from ..data import load_checkpoint, save_checkpoint
from ..runtime import progress, progress_enabled
from ._coreset import (
    BETA,
    LOSS_SHARE,
    Coreset,
    _build,
    _check_mixture,
    _exact,
    _with_labels,
    merge,
)
from ._sensitivity import _base_seed, check_C
from ._svm_terms import signs

logger = logging.getLogger(__name__)


class StreamingCoreset:
    """An SVM coreset of a stream, kept in O(leaf_size log n) memory.

    Rows are buffered until ``leaf_size`` have arrived; the buffer becomes a leaf coreset
    of ``m`` draws (level 1). Like a binary counter, two coresets of the same level are
    merged and reduced to one of the next level, so at most one coreset per level is held:
    after n rows, at most ``floor(log2(n / leaf_size)) + 1`` buckets of <= m rows each,
    plus a buffer of fewer than ``leaf_size`` rows.

    Parameters
    ----------
    m : int
        Draws per coreset (each bucket holds at most m rows).
    leaf_size : int
        Rows per leaf (the paper's 2l for l = m); must be at least ``m``, several times m
        keeps the leaf error low.
    C : float, default=1.0
        Hinge weight of the SVM cost.
    k : int, optional
        k-means++ clusters per label (default ``ceil(ln leaf_size)``).
    beta, loss_share : float
        The sampling mixture (see :func:`svm_coreset`).
    random_state : int or None
        Base seed: node (level, index) uses ``SeedSequence([seed, level, index])``, so the
        same stream and seed give the same coreset.
    checkpoint : str or os.PathLike, optional
        A ``.npz`` file: the state (buckets, buffered rows, counters, seed) is written to it
        atomically after every ``checkpoint_every`` leaves. A new ``StreamingCoreset`` with
        the same parameters and checkpoint resumes from it on its first ``partial_fit``:
        feed it the stream from row ``n_seen_`` on and the coreset is exactly the one an
        uninterrupted run gives. A checkpoint of other parameters is a ``DKernelError``.
    checkpoint_every : int, default=1
        Leaves built between two checkpoint writes.
    verbose : int, default=0
        ``>= 1``: a progress bar on stderr (a notebook widget in Jupyter) for each
        ``partial_fit`` that builds leaves: leaves built, rows seen, buckets held.

    Attributes
    ----------
    n_samples_seen_ : int
    n_seen_ : int
        Rows consumed so far, restored ones included (with a checkpoint: the row of the
        stream to continue from; 0 before any ``partial_fit``).
    buckets_ : list of Coreset or None
        ``buckets_[i]`` summarises ``leaf_size * 2**i`` rows, or is empty.
    classes_ : ndarray of shape (2,)

    Notes
    -----
    Each row is touched by one leaf build (O(leaf_size d k) per leaf) and each bucket merge
    costs O(m d k) plus the coarse solve on 2m rows. A node's hinge weight is
    C * (rows in the leaves built so far) / (rows it stands for): the final total is
    unknown while streaming, and this keeps the result independent of batch boundaries;
    sampling stays unbiased for any choice.

    References
    ----------
    M. Tukan, C. Baykal, D. Feldman, D. Rus, "On coresets for support vector machines",
    TAMC 2020 / Theoretical Computer Science 2021, Algorithm 2.

    Examples
    --------
    >>> import numpy as np
    >>> from dkernel.coreset import StreamingCoreset
    >>> rng = np.random.default_rng(0)
    >>> sc = StreamingCoreset(m=50, leaf_size=200, random_state=0)
    >>> for _ in range(5):
    ...     X = rng.normal(size=(200, 2)); sc = sc.partial_fit(X, np.where(X[:, 0] > 0, 1, -1))
    >>> S = sc.coreset()
    >>> S.source_size, len(sc.buckets_), len(S) <= 50 * 3
    (1000, 3, True)
    """

    buckets_: list[Coreset | None]

    def __init__(
        self,
        m,
        leaf_size,
        *,
        C=1.0,
        k=None,
        beta=BETA,
        loss_share=LOSS_SHARE,
        random_state=None,
        checkpoint=None,
        checkpoint_every=1,
        verbose=0,
    ):
        self.m = m
        self.leaf_size = leaf_size
        self.C = C
        self.k = k
        self.beta = beta
        self.loss_share = loss_share
        self.random_state = random_state
        self.checkpoint = checkpoint
        self.checkpoint_every = checkpoint_every
        self.verbose = verbose

    def _ckpt_params(self) -> dict:
        """What a checkpoint is tied to (not the checkpoint path or interval)."""
        rs = self.random_state
        return {
            "kind": "StreamingCoreset",
            "m": self.m,
            "leaf_size": self.leaf_size,
            "C": self.C,
            "k": self.k,
            "beta": self.beta,
            "loss_share": self.loss_share,
            "random_state": rs if rs is None or isinstance(rs, numbers.Integral) else repr(rs),
        }

    @property
    def n_seen_(self) -> int:
        """Rows consumed so far (restored from a checkpoint included)."""
        if not hasattr(self, "n_samples_seen_"):
            self._resume()
        return int(getattr(self, "n_samples_seen_", 0))

    def _resume(self) -> bool:
        """Load the checkpoint into self when there is one; True when state was restored."""
        if self.checkpoint is None or hasattr(self, "n_samples_seen_"):
            return False
        self._check_params()
        state = load_checkpoint(self.checkpoint, params=self._ckpt_params())
        if state is None:
            return False
        self.n_samples_seen_ = int(state["n_samples_seen"])
        self.n_features_in_ = int(state["n_features_in"])
        self.classes_ = state["classes"]
        self._seed = int(state["seed"])
        self._made = {int(lv): int(c) for lv, c in state["made"].items()}
        self._buf_X, self._buf_y = [state["buf_X"]], [state["buf_y"]]
        self._buffered = int(state["buf_X"].shape[0])
        self.buckets_ = []
        for i, meta in enumerate(state["buckets"]):
            if meta is None:
                self.buckets_.append(None)
                continue
            self.buckets_.append(
                Coreset(
                    X=state[f"b{i}_X"],
                    y=state[f"b{i}_y"],
                    weight=state[f"b{i}_weight"],
                    sensitivity=state[f"b{i}_sensitivity"],
                    total_sensitivity=float(meta["total_sensitivity"]),
                    source_size=int(meta["source_size"]),
                    C=float(meta["C"]),
                    classes=tuple(state[f"b{i}_classes"].tolist()),
                    info=dict(meta["info"]),
                )
            )
        self._leaves_saved = self._made.get(1, 0)
        logger.info(
            "streaming coreset resumed from %s at row %d", self.checkpoint, self.n_samples_seen_
        )
        return True

    def _save(self) -> None:
        Xb = np.concatenate(self._buf_X) if self._buf_X else np.empty((0, self.n_features_in_))
        yb = np.concatenate(self._buf_y) if self._buf_y else np.empty(0)
        state: dict = {
            "n_samples_seen": int(self.n_samples_seen_),
            "n_features_in": int(self.n_features_in_),
            "classes": np.asarray(self.classes_),
            "seed": int(self._seed),
            "made": {str(lv): int(c) for lv, c in self._made.items()},
            "buf_X": Xb,
            "buf_y": yb,
        }
        metas: list = []
        for i, b in enumerate(self.buckets_):
            if b is None:
                metas.append(None)
                continue
            metas.append(
                {
                    "total_sensitivity": float(b.total_sensitivity),
                    "source_size": int(b.source_size),
                    "C": float(b.C),
                    "info": b.info,
                }
            )
            state[f"b{i}_X"] = np.asarray(b.X)
            state[f"b{i}_y"] = np.asarray(b.y)
            state[f"b{i}_weight"] = np.asarray(b.weight)
            state[f"b{i}_sensitivity"] = np.asarray(b.sensitivity)
            state[f"b{i}_classes"] = np.asarray(b.classes)
        state["buckets"] = metas
        save_checkpoint(os.fspath(self.checkpoint), state, params=self._ckpt_params())
        self._leaves_saved = self._made.get(1, 0)

    def _check_params(self):
        check_scalar(self.m, "m", kind=numbers.Integral, low=1)
        check_scalar(self.leaf_size, "leaf_size", kind=numbers.Integral, low=1)
        if self.leaf_size < self.m:
            raise DKernelError(
                f"leaf_size={self.leaf_size} is smaller than the coreset size m={self.m}"
            )
        check_C(self.C)
        check_scalar(self.k, "k", kind=numbers.Integral, low=1, allow_none=True)
        _check_mixture(self.beta, self.loss_share)
        check_scalar(self.checkpoint_every, "checkpoint_every", kind=numbers.Integral, low=1)
        check_scalar(self.verbose, "verbose", kind=numbers.Integral, low=0)

    def partial_fit(self, X, y, classes=None):
        """Add a batch of rows; returns self.

        Parameters
        ----------
        X : array-like of shape (n_batch, n_features)
        y : array-like of shape (n_batch,)
        classes : array-like of two labels, optional
            The stream's labels; otherwise learnt from the batches (at most two).
        """
        self._check_params()
        X = check_finite_2d(X)
        y = np.asarray(y)
        if y.ndim != 1 or y.shape[0] != X.shape[0]:
            raise DKernelError(
                f"y has shape {y.shape}, expected ({X.shape[0]},) to match the rows of X"
            )
        self._resume()
        if not hasattr(self, "n_samples_seen_"):
            self._leaves_saved = 0
            self.n_samples_seen_ = 0
            self.n_features_in_ = X.shape[1]
            self.buckets_ = []
            self._buf_X, self._buf_y = [], []
            self._buffered = 0
            self._seed = _base_seed(self.random_state)
            self._made = {}
            self.classes_ = label_classes(y if classes is None else classes)
        if X.shape[1] != self.n_features_in_:
            raise DKernelError(f"X has {X.shape[1]} features, the stream has {self.n_features_in_}")
        # union1d with an empty float array would turn int labels into floats
        labels = label_classes(y) if self.classes_.size == 0 else np.union1d(self.classes_, y)
        if labels.size > 2:
            raise DKernelError(f"the stream has labels {labels.tolist()}: more than two classes")
        self.classes_ = labels
        self.n_samples_seen_ += X.shape[0]
        self._buf_X.append(X)
        self._buf_y.append(y)
        self._buffered += X.shape[0]
        L = int(self.leaf_size)
        n_leaves = self._buffered // L
        with progress(
            n_leaves or None,
            "StreamingCoreset leaves",
            enabled=bool(n_leaves) and progress_enabled(self.verbose),
        ) as bar:
            while self._buffered >= L:
                Xa, ya = np.concatenate(self._buf_X), np.concatenate(self._buf_y)
                self._buf_X, self._buf_y = [Xa[L:]], [ya[L:]]
                self._buffered -= L
                self._push(self._leaf(Xa[:L], ya[:L]))
                bar.update(1, rows=self.n_samples_seen_, buckets=self.n_buckets_)
        if (
            self.checkpoint is not None
            and self._made.get(1, 0) - self._leaves_saved >= self.checkpoint_every
        ):
            self._save()
        return self

    def _leaf_rows(self) -> int:
        """Rows summarised by the leaves built so far (independent of batch boundaries)."""
        return self._made.get(1, 0) * int(self.leaf_size)

    def _classes(self):
        c = self.classes_.tolist()
        if len(c) == 2:
            return tuple(c)
        return (c[0], c[0]) if c else (-1, 1)

    def _next_rng(self, level):
        index = self._made.get(level, 0)
        self._made[level] = index + 1
        return np.random.default_rng(np.random.SeedSequence([self._seed, level, index]))

    def _leaf(self, X, y) -> Coreset:
        neg, pos = self._classes()
        ys = signs(y, pos)  # one class seen so far (neg == pos): all +1
        n = X.shape[0]
        out = _build(
            X,
            ys,
            np.ones(n),
            int(self.m),
            C=float(self.C),
            k=self.k,
            rng=self._next_rng(1),
            mix=_check_mixture(self.beta, self.loss_share),
            tol=0.05,
            U_total=float(self._leaf_rows() + n),  # this leaf included
        )
        return _with_labels(out, (neg, pos))

    def _push(self, c: Coreset) -> None:
        level = 0
        while level < len(self.buckets_) and (held := self.buckets_[level]) is not None:
            merged = merge(held, c)
            self.buckets_[level] = None
            c = merged.reduce(
                int(self.m),
                random_state=self._next_rng(level + 2),
                total_weight=float(self._leaf_rows()),
                k=self.k,
                beta=self.beta,
                loss_share=self.loss_share,
            )
            level += 1
        if level == len(self.buckets_):
            self.buckets_.append(None)
        self.buckets_[level] = c

    @property
    def n_buckets_(self) -> int:
        """Coresets held now (one per occupied level)."""
        return sum(b is not None for b in getattr(self, "buckets_", []))

    def coreset(self, m=None, *, random_state=None) -> Coreset:
        """The coreset of everything seen so far.

        The union of the buckets and the (exact, unit-weight) buffer; with ``m`` it is
        reduced once more to at most ``m`` draws.
        """
        if not getattr(self, "n_samples_seen_", 0):
            raise DKernelError("no rows seen yet: call partial_fit first")
        neg, pos = self._classes()
        if neg == pos:
            raise DKernelError(
                f"the stream has one class only ({neg!r}); an SVM coreset needs two "
                "(pass classes=[negative, positive] to partial_fit if the other is to come)"
            )
        parts = [b for b in self.buckets_ if b is not None]
        if self._buffered:
            Xb, yb = np.concatenate(self._buf_X), np.concatenate(self._buf_y)
            parts.append(_exact(Xb, yb, C=float(self.C), classes=(neg, pos)))
        out = functools.reduce(merge, parts)
        if m is not None:
            check_scalar(m, "m", kind=numbers.Integral, low=1)
            out = out.reduce(
                int(m),
                random_state=random_state,
                k=self.k,
                beta=self.beta,
                loss_share=self.loss_share,
            )
        return out
