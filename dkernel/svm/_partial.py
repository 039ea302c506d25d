"""The steps of :meth:`BudgetedSVC.partial_fit <dkernel.svm.BudgetedSVC.partial_fit>`: one
pass over the caller's rows in their order, from a fresh state or the estimator's model
(its live state, or the state rebuilt from a loaded model's arrays), then the reservoir of
the rows streamed so far and, on request, the refit over it.

:func:`partial_fit` returns the new fitted attributes; the estimator sets them.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
from sklearn.utils import check_random_state

from .._validation import DKernelError
from ..runtime import progress, progress_enabled, timer
from . import _budget as nb
from ._checks import check_state_memory
from ._fit import (
    Options,
    config,
    feature_stats,
    label_map,
    prepare,
    resolve_spec,
    run_blocks,
    run_refit,
)
from ._predict import scaler_attributes, scaler_of
from .state import fitted_attributes, reservoir_add, reservoir_cap, state_from_model
from .stream import block_plan

logger = logging.getLogger(__name__)

#: ``alpha=None`` in a first ``partial_fit``: SGDClassifier's default.
_STREAM_ALPHA = 1e-4


def partial_fit(est, X, y, classes, sample_weight, *, refit: bool) -> dict[str, Any]:
    """:meth:`BudgetedSVC.partial_fit`'s work: the fitted attributes after one pass over
    the rows of X (``est`` is read: its parameters and, after the first call, its model)."""
    opts = Options.of(est)
    first_call = not hasattr(est, "classes_")
    if refit and not opts.refit:
        raise DKernelError("partial_fit(refit=True) needs the estimator's refit on")
    X, _is_dask, y, w, recorded = prepare(est, X, y, sample_weight, reset=first_call)
    classes = _stream_classes(est, first_call, recorded if classes is None else classes)
    n, d = int(X.shape[0]), int(X.shape[1])
    if first_call:
        cls, spec, cfg, state, n_iter, scaler = _start(est, opts, X, classes)
    else:
        cls, spec, cfg, state, n_iter, scaler = _continue(est, opts, n)
    plan = block_plan(n, seed=0, epoch=0, shuffle=False, block_rows=opts.block_rows)
    with progress(
        n,
        "BudgetedSVC partial_fit",
        enabled=progress_enabled(opts.verbose),
        unit="rows",
        unit_scale=True,
    ) as bar:
        run_blocks(
            plan, X, y, w, label_map(cls), state, cfg, bar=bar, scaler=scaler,
            verbose=opts.verbose,
        )  # fmt: skip
    # the sample goes on from the previous call only (not across a fit or a load)
    res = getattr(est, "_reservoir", None)
    res = res if res is not None and not first_call and res.clock == est._clock else None
    fitted = fitted_attributes(state, cls, spec, cfg, n_iter=max(n_iter, 1), d=d)
    fitted.update(scaler_attributes(scaler), distributed_=False)
    fitted["probA_"] = fitted["probB_"] = None  # a calibration of the former model no longer holds
    if opts.refit:
        rng = getattr(est, "_rng", None) or check_random_state(opts.random_state)
        cap = reservoir_cap(opts.budget, d, opts.refit_rows)
        res = reservoir_add(res, X, y, None if sample_weight is None else w, rng=rng, cap=cap)
        fitted.update(_rng=rng, _reservoir=res._replace(clock=fitted["_clock"]))
        if refit:
            fitted.update(_stream_refit(opts, fitted, cfg, scaler))
    return fitted


def _start(est, opts: Options, X, classes):
    """A first call's classes, kernel, config, fresh state, epochs (0) and scaler."""
    n, d = int(X.shape[0]), int(X.shape[1])
    cls = np.unique(np.asarray(classes))
    if len(cls) < 2:
        raise DKernelError(f"classes has one class only ({cls.tolist()}); need at least 2")
    n_cols = 1 if len(cls) == 2 else len(cls)
    check_state_memory(opts.budget, opts.maintenance, d, n_cols)
    spec = resolve_spec(est, X)
    alpha = float(opts.alpha) if opts.alpha is not None else _STREAM_ALPHA
    cfg = config(opts, spec, alpha, n)._replace(avg_start=1)
    state = nb.new_state(int(opts.budget), d, n_cols, cfg.maint)
    scaler = feature_stats(X) if opts.standardize else None
    return cls, spec, cfg, state, 0, scaler


def _continue(est, opts: Options, n: int):
    """A later call's classes, kernel, config, a copy of the model's state, epochs and
    scaler: all the estimator's."""
    spec = est._spec
    cfg = config(opts, spec, est.alpha_, n)._replace(avg_start=est._avg_start)
    state = current_state(est, cfg)
    return est.classes_, spec, cfg, state, est.n_iter_, scaler_of(est)


def current_state(est, cfg: nb.BSGDConfig) -> nb.BSGDState:
    """A private copy of a fitted estimator's state (rebuilt from the saved arrays after
    ``load``)."""
    st = getattr(est, "_state", None)
    if st is not None:
        return st.copy()
    return state_from_model(
        est._raw, est.support_vectors_, n_cols=est.dual_coef_.shape[1], cfg=cfg,
        clock=est._clock, n_maintenance=est.n_maintenance_,
        weight_degradation=est.weight_degradation_,
    )  # fmt: skip


def _stream_classes(est, first: bool, classes):
    """``partial_fit``'s classes: needed on the first call, the same on later ones."""
    if first and classes is None:
        raise DKernelError("classes must be passed to the first call to partial_fit")
    if not first and classes is not None:
        if not np.array_equal(np.unique(classes), est.classes_):
            raise DKernelError(
                f"classes {np.unique(classes).tolist()} differ from those of the "
                f"first partial_fit call {est.classes_.tolist()}"
            )
    return classes


def _stream_refit(opts: Options, fitted: dict, cfg: nb.BSGDConfig, scaler) -> dict:
    """``partial_fit(refit=True)``: the refit of :meth:`fit` over the reservoir."""
    res = fitted["_reservoir"]
    level = logging.INFO if opts.verbose else logging.DEBUG
    with timer("bsgd partial_fit refit", logger, level):
        _, attributes = run_refit(
            opts, res.seen, res.X, res.y, res.w, fitted, cfg=cfg, scaler=scaler,
            max_rows=len(res.y),
        )  # fmt: skip
    return attributes
