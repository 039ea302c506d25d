"""The steps of :meth:`BudgetedSVC.fit <dkernel.svm.BudgetedSVC.fit>`, as functions of an
explicit plan and state.

:func:`fit` reads as the story of a fit: :func:`make_plan` resolves once what the fit needs
(the checked data, classes, alpha, seed, checkpoint, scaler, kernel: a :class:`FitPlan`,
with the estimator's parameters as :class:`Options`); the SGD passes run sequentially here
(:func:`fit_sequential`, blocks through the numba loop by :func:`run_blocks`) or in rounds
on the workers (:func:`fit_distributed`); the refit solves for exact coefficients
(:func:`refit_coefficients`); the held-out rows calibrate the probabilities. It returns the
fitted attributes; the estimator sets them only once everything succeeded.
"""

from __future__ import annotations

import functools
import itertools
import logging
import numbers
from typing import Any, NamedTuple

import dask
import dask.array as da
import numpy as np
from sklearn.utils import check_random_state

from .._base import read_classes, read_inputs
from .._defaults import setting
from .._validation import DKernelError, column_moments, feature_stats_error, is_dask_array
from ..data import chunk_bounds, take_rows
from ..kernels import KERNEL_CODES, KERNELS, KernelSpec, check_kernel_scale
from ..runtime import distributed_client, phase, progress, progress_enabled, timer
from . import _budget as nb
from . import _refit
from . import rounds as dist
from ._checks import check_state_memory
from ._io import Checkpoint, refit_resume, save_block, saved_in_refit
from ._predict import Model, calibrate, scaler_attributes
from .state import (
    Partial,
    check_trained,
    empty_partial,
    fitted_attributes,
    partial_arrays,
    partial_of,
    state_from_checkpoint,
    state_from_partial,
)
from .stream import BlockTask, Standardizer, block_plan, class_indices, prefetch, read_block

logger = logging.getLogger(__name__)

#: How merge screens partners: "golden" (a golden-section search per partner) or "lookup"
#: (a precomputed table of the binary argmax h(m, k), bilinear interpolation; multi-class
#: models always use golden section). Either way the chosen partner's h is refined by golden
#: section to ~1e-9. The table saves most of the screening's exp calls at the same accuracy
#: (benchmarks/results/bsgd_notes.md), so it is the default.
_MERGE_SEARCH = "lookup"
#: Default number of shards of a distributed fit: one per ``_SHARD_ROWS`` rows, at least
#: ``_MIN_SHARDS`` and at most ``_MAX_SHARDS`` (a function of n only, so the model never
#: depends on the number of workers; never more than one per row).
_SHARD_ROWS = 1 << 17
_MIN_SHARDS = 8
_MAX_SHARDS = 256
#: An averaging start no clock reaches.
_NEVER = 1 << 62
#: Stopping rule of the refit (``||grad|| <= tol ||grad(0)||`` per class) and its Newton
#: steps at most.
REFIT_TOL = 1e-3
REFIT_MAX_ITER = 50
#: The multi-class loss of ``refit=True`` (benchmarks/results/bsgd_refit_cs.md).
_REFIT_DEFAULT = "ovr"
#: ``probability=True``: the share of the rows held out for Platt scaling, and at most this
#: many rows (two parameters per score column need few; the rest train the model).
_CALIBRATION_SHARE = 0.1
_CALIBRATION_ROWS = 50_000


class Options(NamedTuple):
    """The estimator's parameters that the steps read (checked by ``check_params``), and
    the rows per virtual block (``dkernel.svm.block-rows``, read once per fit)."""

    budget: int
    maintenance: str
    algorithm: str
    alpha: float | None
    eta0: float
    radius: float | None
    fit_intercept: bool
    standardize: bool
    max_iter: int
    average: bool | int
    shuffle: bool
    distributed: Any
    refit: Any
    refit_rows: Any
    n_shards: int | None
    n_rounds: int
    split_every: int
    probability: bool
    random_state: Any
    verbose: int
    block_rows: int

    @classmethod
    def of(cls, est) -> Options:
        """``est``'s parameters now, with the block rows of the config now."""
        given = {f: getattr(est, f) for f in cls._fields if f != "block_rows"}
        return cls(**given, block_rows=int(setting("svm.block-rows")))


class FitPlan(NamedTuple):
    """What :func:`fit` resolves once before training (see :func:`make_plan`)."""

    opts: Options
    X: Any
    y: Any
    w: Any
    weighted: bool
    is_dask: bool
    classes: np.ndarray
    held: tuple | None
    n: int
    d: int
    n_cols: int
    alpha: float
    seed: int
    use_dist: bool
    client: Any
    ckpt: Checkpoint | None
    saved: dict | None
    y_map: Any
    scaler: Standardizer | None
    head: tuple | None
    spec: KernelSpec

    @property
    def resumes_refit(self) -> bool:
        """The checkpoint was saved in the refit (the SGD passes' model is in it)."""
        return saved_in_refit(self.saved)


# ------------------------------------------------------------------ the story
def fit(est, X, y, sample_weight) -> dict[str, Any]:
    """:meth:`BudgetedSVC.fit`'s work, its phases counted by the accounting around it: the
    fitted attributes (``est`` is only read, but for the feature count of its input)."""
    with phase("setup"):
        plan = make_plan(est, X, y, sample_weight)
    opts = plan.opts
    state, cfg, shards = sgd_passes(plan)
    check_trained(state, plan.w if plan.weighted else None)
    check_kernel_scale(
        state.SV[: state.n_sv], plan.spec, where="on the support vectors the SGD passes chose: "
    )
    fitted = fitted_attributes(
        state, plan.classes, plan.spec, cfg, n_iter=int(opts.max_iter), d=plan.d
    )
    fitted.update(scaler_attributes(plan.scaler), distributed_=bool(plan.use_dist))
    if opts.refit:
        client = plan.client
        if not plan.use_dist and plan.is_dask and opts.distributed == "auto":
            client = distributed_client()  # the rows stay on the workers
        fitted.update(refit_coefficients(plan, state, cfg, client, shards, fitted))
    if plan.use_dist:
        fitted["t_"] = plan.n * int(opts.max_iter)
    fitted["probA_"] = fitted["probB_"] = None
    if plan.held is not None:
        with phase("calibration"):
            model = Model(
                fitted["support_vectors_"], fitted["dual_coef_"], fitted["intercept_"],
                plan.spec, plan.scaler,
            )  # fmt: skip
            probs = calibrate(model, plan.classes, *plan.held, weighted=plan.weighted)
            fitted["probA_"], fitted["probB_"] = probs
    if plan.ckpt is not None:
        plan.ckpt.remove()
    return fitted


def sgd_passes(plan: FitPlan):
    """``(state, config, shards)`` after the SGD passes (shards: a distributed fit's rows on
    the workers, which the refit reuses; else None). A fit killed in the refit finds the
    passes' model in its checkpoint."""
    shards = None
    if plan.resumes_refit:
        state = state_from_checkpoint(plan.saved)
        cfg = sgd_config(plan)
        if plan.use_dist:  # the refit's parts are cut from the shards, as in the fit
            shards = load_shards(plan)
    elif plan.use_dist:
        state, cfg, shards = fit_distributed(plan)
    else:
        with phase("stream"):
            state, cfg = fit_sequential(plan)
    return state, cfg, shards


# ------------------------------------------------------------------ the plan
def make_plan(est, X, y, sample_weight) -> FitPlan:
    """Everything a fit decides before training, once: the checked data, the classes,
    the held-out calibration rows, alpha, the seed (a checkpoint's when resuming),
    distributed or not, the scaler, the kernel with gamma resolved and, sequentially,
    the first block read up front."""
    opts = Options.of(est)
    X, is_dask, y, w, classes = prepare(est, X, y, sample_weight, reset=True)
    if classes is None:
        classes = read_classes(y, token="svm-classes")
    if len(classes) < 2:
        raise DKernelError(f"y has one class only ({classes.tolist()}); need at least 2")
    n_cols = 1 if len(classes) == 2 else len(classes)
    # before the held-out rows are read
    check_state_memory(opts.budget, opts.maintenance, int(X.shape[1]), n_cols)
    held = None
    if opts.probability:  # Platt scaling is fitted on rows the model never saw
        X, y, w, held = hold_out(X, y, w, random_state=opts.random_state)
    n, d = int(X.shape[0]), int(X.shape[1])
    alpha = float(opts.alpha) if opts.alpha is not None else default_alpha(n)
    seed = int(check_random_state(opts.random_state).randint(np.iinfo(np.int32).max))
    use_dist, client = use_distributed(opts.distributed, is_dask, n)
    ckpt = Checkpoint.of(
        est, n=n, d=d, classes=classes, distributed=use_dist, block_rows=opts.block_rows
    )
    saved = ckpt.load() if ckpt is not None else None
    if saved is not None:
        seed = int(saved["seed"])
        at = saved["position"]
        if saved_in_refit(saved):
            at = f"refit step {saved['refit_steps']}"
        logger.info("resuming from checkpoint %s at %s", ckpt.path, at)
    y_map = label_map(classes)
    scaler = feature_stats(X) if opts.standardize else None
    # a sequential fit reads its first block up front, once, and trains on it (X is
    # then read once per epoch): gamma's sample, and the rows the kernel is checked on
    # before training; a distributed fit samples rows for gamma
    head = None
    if not use_dist and (samples_gamma(est) or saved is None):
        task0 = block_plan(
            n, seed=seed, epoch=0, shuffle=bool(opts.shuffle), block_rows=opts.block_rows
        )[0]
        head = read_block(X, y, w, task0, y_map=y_map, standardize=scaler)
    spec = resolve_spec(est, X, sample=None if head is None else head[0])
    if head is not None:
        check_kernel_scale(head[0], spec)  # a width off X's scale: say so before training
    return FitPlan(
        opts=opts, X=X, y=y, w=w, weighted=sample_weight is not None, is_dask=is_dask,
        classes=classes, held=held, n=n, d=d, n_cols=n_cols, alpha=alpha, seed=seed,
        use_dist=use_dist, client=client, ckpt=ckpt, saved=saved, y_map=y_map,
        scaler=scaler, head=head, spec=spec,
    )  # fmt: skip


def prepare(est, X, y, sample_weight, *, reset: bool):
    """(X, is_dask, y, w, classes) from the floor's one reader (:func:`read_inputs`):
    NumPy checked now, dask lazily as it is read (its weights in one pass); ``classes``:
    the store's recorded classes when y is the store's own labels, else None. ``reset``:
    the input's feature count becomes ``est``'s."""
    got = read_inputs(X, y, sample_weight, needs_y=True, weights="lazy", estimator=est, reset=reset)
    return got.X, got.is_dask, got.y, got.sample_weight, got.classes


def use_distributed(distributed, is_dask: bool, n: int):
    """(distributed?, client) of a fit of n rows under the parameter ``distributed``."""
    client = distributed_client() if is_dask else None
    if distributed == "auto":
        # setting "svm.auto-min-rows": below it the sequential stream measured as fast
        # or faster (benchmarks/results/bsgd_notes.md)
        use = client is not None and n >= int(setting("svm.auto-min-rows"))
        return use, client if use else None
    if distributed:
        return True, client if client is not None else distributed_client()
    return False, None


def samples_gamma(est) -> bool:
    """Whether resolving gamma needs rows of the data (the base's rule on raw data)."""
    spec = est._kernel_spec(None)
    width = KERNELS[str(spec.kernel)].distance is not None
    return spec.gamma is None and not est.standardize and width


def resolve_spec(est, X, *, sample=None) -> KernelSpec:
    """The kernel with gamma resolved (the base's rule, on ``sample`` when given;
    ``1 / n_features`` on data that will be standardised)."""
    spec = est._kernel_spec(X)
    if samples_gamma(est):
        spec = est._resolve_gamma(X, sample=sample)
    return spec


def label_map(classes: np.ndarray):
    """Raw labels -> indices into ``classes`` (per block, unknown labels named)."""

    def y_map(yb: np.ndarray, start: int) -> np.ndarray:
        return class_indices(yb, start, classes=classes)

    return y_map


def config(opts: Options, spec: KernelSpec, alpha: float, n: int) -> nb.BSGDConfig:
    """The numba loop's settings for ``opts``, the resolved kernel and alpha, with the
    averaging start of ``max_iter`` epochs of n steps each."""
    algo = nb.ALGORITHM_CODES[opts.algorithm]
    pw = KERNELS[str(spec.kernel)].merge_power or 2  # unused unless merging
    lookup = _MERGE_SEARCH == "lookup"
    if opts.average is False:
        avg_mode, avg_start = nb.AVG_OFF, 0
    elif opts.average is True:  # the last epoch, or the second half of a single pass
        T = int(opts.max_iter) * int(n)
        avg_mode, avg_start = nb.AVG_LINEAR, T - min(int(n), T // 2) + 1
    else:
        avg_mode, avg_start = nb.AVG_LINEAR, int(opts.average)
    return nb.BSGDConfig(
        kind=KERNEL_CODES[str(spec.kernel)],
        gamma=float(spec.gamma or 0.0),
        degree=float(spec.degree),
        coef0=float(spec.coef0),
        algo=algo,
        alpha=0.0 if algo == nb.PERCEPTRON else float(alpha),
        eta0=float(opts.eta0),
        radius=float(opts.radius or 0.0),
        maint=nb.MAINTENANCE_CODES[opts.maintenance],
        icpt=1.0 if opts.fit_intercept else 0.0,
        ridge=nb.PROJECT_RIDGE,
        pw=pw,
        search=nb.LOOKUP if lookup else nb.GOLDEN,
        T=nb.lookup_table(pw) if lookup else np.zeros((2, 2)),
        budget=int(opts.budget),
        avg_mode=avg_mode,
        avg_start=avg_start,
    )


def sgd_config(plan: FitPlan, prefix: int = 0) -> nb.BSGDConfig:
    """The SGD passes' configuration: a distributed fit's merged model advances its
    clock by the mean shard's rows per epoch, a sequential one by every row.

    ``prefix``: a distributed fit's first epochs ran as the stream (clock n each), so
    the last epoch, the one averaged, starts after them and the rounds before it."""
    opts = plan.opts
    n = plan.n
    if not plan.use_dist:
        return config(opts, plan.spec, plan.alpha, n)
    k = len(dist.plan_shards(n, shard_count(opts.n_shards, n)).starts)
    n_c = max(1, round(n / k))
    cfg = config(opts, plan.spec, plan.alpha, n_c)
    if prefix and opts.average is True and prefix < int(opts.max_iter):
        last = prefix * n + (int(opts.max_iter) - prefix - 1) * n_c
        cfg = cfg._replace(avg_start=last + 1)
    return cfg


# ------------------------------------------------------------------ distributed passes
def stream_prefix(plan: FitPlan, shards, epochs: int) -> Partial:
    """The first ``epochs`` epochs of a distributed fit as the sequential stream, in one
    task on one worker (:func:`~.rounds.stream_prefix`)."""
    opts = plan.opts
    cfg = config(opts, plan.spec, plan.alpha, plan.n)
    if epochs < int(opts.max_iter) and cfg.avg_mode != nb.AVG_OFF:
        cfg = cfg._replace(avg_start=_NEVER)  # the averaged epoch is a rounds epoch
    if shards.client is not None:
        cfg = dist._without_table(cfg)  # each process builds its own table
    run = functools.partial(
        dist.stream_prefix, cfg=cfg, n_cols=plan.n_cols, seed=plan.seed, epochs=epochs,
        shuffle=bool(opts.shuffle), block_rows=int(opts.block_rows),
    )  # fmt: skip
    logger.debug("bsgd prefix: %d rows through the SGD loop", epochs * plan.n)
    with timer("bsgd prefix", logger), phase("prefix", width=1):
        out = shards.join(run, name=f"bsgd-prefix-{shards.name}")
        return out if shards.client is None else out.result()


def fit_distributed(plan: FitPlan):
    """Rounds over fixed shards on the workers (:func:`~.rounds.fit_rounds`):
    ``(state, config, shards)``, the shards' rows still on the workers for the refit."""
    opts = plan.opts
    level = logging.INFO if opts.verbose else logging.DEBUG
    prefix = 0
    if plan.saved is None:
        prefix = dist.prefix_epochs(plan.n, plan.d, int(opts.max_iter))
    cfg = sgd_config(plan, prefix)
    start, resume_at = empty_partial(plan.d, plan.n_cols), (0, 0)
    if plan.saved is not None:
        start, resume_at = partial_of(plan.saved), tuple(plan.saved["position"])
    n_rounds = int(opts.n_rounds)
    ckpt, show = plan.ckpt, progress_enabled(opts.verbose)
    with (
        timer("bsgd distributed fit", logger, level),
        progress(
            int(opts.max_iter) * n_rounds, "BudgetedSVC rounds", enabled=show, unit="round"
        ) as bar,
    ):
        bar.update(resume_at[0] * n_rounds + resume_at[1])

        def on_round(epoch: int, rnd: int, part) -> None:
            """After each round; ``part`` is the merged model when it was fetched."""
            pos = (epoch, rnd + 1) if rnd + 1 < n_rounds else (epoch + 1, 0)
            if ckpt is not None and part is not None:
                ckpt.save(pos, plan.seed, partial_arrays(part))
            shown = {} if part is None else {"SVs": len(part.SV)}
            bar.update(1, epoch=f"{epoch + 1}/{opts.max_iter}", **shown)

        # numba compiles on the workers before the first round, under its own note
        with bar.compiling("bsgd"), phase("compile"):
            dist.compile_kernels(plan.client, cfg, plan.d, plan.n_cols)
        shards = load_shards(plan)
        if prefix:
            start, resume_at = stream_prefix(plan, shards, prefix), (prefix, 0)
            bar.update(prefix * n_rounds)
            if prefix == int(opts.max_iter):  # the whole fit was the stream
                cfg = config(opts, plan.spec, plan.alpha, plan.n)
        part = dist.fit_rounds(
            shards, cfg=cfg, start=start, n_rounds=n_rounds,
            n_epochs=int(opts.max_iter), split_every=int(opts.split_every),
            seed=plan.seed, shuffle=bool(opts.shuffle), first=resume_at, on_round=on_round,
            fetch_every=ckpt.every if ckpt is not None else (1 if show else 0),
        )  # fmt: skip
        if opts.verbose:
            logger.info(f"{len(shards)} shards x {n_rounds} rounds x {opts.max_iter} epochs")
    return state_from_partial(part, cfg), cfg, shards


def load_shards(plan: FitPlan):
    """The distributed fit's shards, read into the workers' memory once."""
    opts = plan.opts
    return dist.load_shards(
        plan.X, plan.y, plan.w if plan.weighted else None,
        n_shards=shard_count(opts.n_shards, plan.n), classes=plan.classes,
        scaler=plan.scaler, client=plan.client,
    )  # fmt: skip


def shard_count(n_shards, n: int) -> int:
    """The shards of a distributed fit of n rows: ``n_shards`` when given, else one per
    ``_SHARD_ROWS`` rows within ``[_MIN_SHARDS, _MAX_SHARDS]``."""
    if n_shards is not None:
        return int(n_shards)
    return int(np.clip(n // _SHARD_ROWS, _MIN_SHARDS, _MAX_SHARDS))


# ------------------------------------------------------------------ sequential passes
def fit_sequential(plan: FitPlan) -> tuple[nb.BSGDState, nb.BSGDConfig]:
    """``max_iter`` epochs of blocks in a seeded order through the numba loop, here."""
    opts = plan.opts
    level = logging.INFO if opts.verbose else logging.DEBUG
    n = plan.n
    cfg = sgd_config(plan)
    state = nb.new_state(int(opts.budget), plan.d, plan.n_cols, cfg.maint)
    epoch0, block0 = 0, 0
    if plan.saved is not None:
        state = state_from_checkpoint(plan.saved)
        epoch0, block0 = (int(v) for v in plan.saved["position"])
    show = progress_enabled(opts.verbose)
    with progress(
        int(opts.max_iter) * n, "BudgetedSVC", enabled=show, unit="rows", unit_scale=True
    ) as bar:
        for epoch in range(epoch0, int(opts.max_iter)):
            blocks = block_plan(n, seed=plan.seed, epoch=epoch, shuffle=bool(opts.shuffle),
                                block_rows=opts.block_rows)  # fmt: skip
            skip = block0 if epoch == epoch0 else 0
            bar.update(epoch * n + sum(t.stop - t.start for t in blocks[:skip]) - bar.n)
            after = None
            if plan.ckpt is not None:
                after = functools.partial(
                    save_block, plan.ckpt, state, plan.seed, epoch, len(blocks), skip
                )
            with timer(f"bsgd epoch {epoch}", logger, level):
                run_blocks(
                    blocks, plan.X, plan.y, plan.w, plan.y_map, state, cfg, bar=bar,
                    start_block=skip, after=after, scaler=plan.scaler, verbose=opts.verbose,
                    head=plan.head if epoch == 0 and skip == 0 else None,
                )  # fmt: skip
            rows = sum(t.stop - t.start for t in blocks[skip:])
            logger.debug("bsgd epoch %d: %d rows through the SGD loop", epoch, rows)
    return state, cfg


def run_blocks(
    plan: list[BlockTask],
    X,
    y,
    w,
    y_map,
    state: nb.BSGDState,
    cfg,
    *,
    bar=None,
    start_block: int = 0,
    after=None,
    scaler: Standardizer | None = None,
    head=None,
    verbose=0,
) -> None:
    """Blocks ``plan[start_block:]`` through the numba loop; ``after(i)`` once block i is
    done. ``head``: block ``plan[start_block]`` already read (not read again)."""

    def reader(task):
        return read_block(X, y, w, task, y_map=y_map, standardize=scaler)

    rest = prefetch(reader, plan[start_block + (head is not None) :], depth=2)
    blocks = rest if head is None else itertools.chain([head], rest)
    for i, (Xb, yi, wb) in enumerate(blocks, start=start_block):
        t0, v0 = int(state.ist[nb.IS_T]), int(state.ist[nb.IS_VIOL])
        if bar is not None:
            with bar.compiling("bsgd"):
                nb.sgd_chunk(Xb, yi, wb, state, cfg)
        else:
            nb.sgd_chunk(Xb, yi, wb, state, cfg)
        if after is not None:
            after(i)
        if bar is not None:
            steps = int(state.ist[nb.IS_T]) - t0
            viol = (int(state.ist[nb.IS_VIOL]) - v0) / max(1, steps)
            bar.update(len(yi), SVs=state.n_sv, margin_viol=viol)
        if verbose:
            logger.info(
                "block %d/%d: t=%d, %d SVs",
                i + 1,
                len(plan),
                int(state.ist[nb.IS_T]),
                state.n_sv,
            )


# ------------------------------------------------------------------ refit
def refit_coefficients(
    plan: FitPlan, state: nb.BSGDState, cfg: nb.BSGDConfig, client, shards, fitted: dict
) -> dict[str, Any]:
    """The fitted attributes of the exact coefficients over the support vectors BSGD chose
    (``refit=True``), warm-started from the SGD passes' ``fitted`` ones (none without
    support vectors); with a checkpoint, the solver's state is saved after each Newton
    step (beside the SGD passes' model, which a resumed fit then skips) and resumed
    from."""
    opts = plan.opts
    n_sv = state.n_sv
    if n_sv == 0:
        return {}
    level = logging.INFO if opts.verbose else logging.DEBUG
    with (
        timer("bsgd refit", logger, level),
        progress(
            None,
            "BudgetedSVC refit",
            enabled=progress_enabled(opts.verbose),
            unit=" Newton steps",
        ) as bar,
    ):

        def on_step(steps: int, g: float) -> None:
            bar.update(steps - bar.n, gradient=f"{g:.2g} of start (stop at {REFIT_TOL:g})")

        start, on_save = refit_resume(plan.ckpt, plan.saved, plan.seed, state, int(opts.max_iter))
        result, attributes = run_refit(
            opts, plan.n, plan.X, plan.y, plan.w if plan.weighted else None, fitted,
            cfg=cfg, scaler=plan.scaler, client=client, on_step=on_step, seed=plan.seed,
            max_rows=None if opts.refit_rows == "auto" else int(opts.refit_rows),
            start=start, on_save=on_save, resident=shards,
        )  # fmt: skip
        bar.update(result.n_iter - bar.n)
        return attributes


def run_refit(
    opts: Options, n: int, X, y, w, fitted: dict, *, cfg: nb.BSGDConfig, **given
) -> tuple[_refit.RefitResult, dict[str, Any]]:
    """:func:`_refit.refit` over (X, y, w) from the ``fitted`` attributes' SVs, coefficients
    and kernel, with the estimator's stopping rule, loss and refit alpha (of n rows; the
    other arguments ``given``): its result and the fitted attributes it sets."""
    alpha = refit_alpha(opts, n)
    result = _refit.refit(
        X, y, w, classes=fitted["classes_"], Z=fitted["support_vectors_"],
        coef=fitted["dual_coef_"], intercept=fitted["intercept_"], spec=fitted["_spec"],
        icpt=cfg.icpt, alpha=alpha, tol=REFIT_TOL, max_iter=REFIT_MAX_ITER,
        multi_class=refit_loss(opts.refit), **given,
    )  # fmt: skip
    attributes = {"dual_coef_": result.coef, "intercept_": result.intercept, "refit_alpha_": alpha}
    return result, attributes


def refit_alpha(opts, n: int) -> float:
    """The refit's alpha: the one given (also where the perceptron's SGD passes ignore
    it), else :func:`default_refit_alpha` (also for norma's zero: the refit needs > 0)."""
    given = opts.alpha is not None and opts.alpha > 0
    return float(opts.alpha) if given else default_refit_alpha(n)


def refit_loss(refit) -> str:
    """The multi-class loss of the refit (``refit`` is True or its name)."""
    return _REFIT_DEFAULT if refit is True else str(refit)


def default_alpha(n: int) -> float:
    """``alpha=None``: ``1 / (4 n)`` (C = 4 in SVC's terms), chosen with the default five
    epochs and last-epoch averaging (benchmarks/results/bsgd_notes.md)."""
    return 0.25 / n


def default_refit_alpha(n: int) -> float:
    """``alpha=None``: the refit's ``1 / (10 n)`` (C = 10), the best mean accuracy over the
    five shared sets of C = 4, 10, 20 for the refit alone (benchmarks/results/bsgd_notes.md)."""
    return 0.1 / n


# ------------------------------------------------------------------ data
def hold_out(X, y, w, *, random_state):
    """``(X, y, w)`` of the training rows and ``(X, y, w)`` of the calibration rows.

    The calibration rows are a sample without replacement of ``_CALIBRATION_SHARE`` of
    the rows, at most ``_CALIBRATION_ROWS``, drawn with ``random_state`` when it is an int
    (else seed 0: a resumed fit must find the same rows), gathered into memory (one
    task per touched chunk); the training rows are the others, in their order (dask:
    selected within each chunk, nothing moves).
    """
    n = int(X.shape[0])
    m = min(_CALIBRATION_ROWS, max(1, int(np.ceil(_CALIBRATION_SHARE * n))))
    if n - m < 2:
        raise DKernelError(
            f"probability=True holds out {m} of {n} rows for Platt scaling; "
            "too few rows are left to train on"
        )
    rs = random_state
    seed = int(rs) if isinstance(rs, numbers.Integral) and not isinstance(rs, bool) else 0
    idx = np.sort(np.random.RandomState(seed).choice(n, m, replace=False))
    keep = np.ones(n, dtype=bool)
    keep[idx] = False
    name = "svm-calibration-rows"
    held, train = [], []
    for A in (X, y, w):
        if is_dask_array(A):
            held.append(take_rows(A, idx, name=name))
            train.append(_without_rows(A, idx))
        else:
            held.append(A[idx])
            train.append(A[keep])
    Xc, yc, wc = held
    Xc, yc, wc = np.asarray(Xc, np.float64), np.asarray(yc), np.asarray(wc, np.float64)
    return (*train, (Xc, yc, wc))


def _without_rows(A, rows: np.ndarray):
    """Dask ``A`` without the sorted row positions ``rows``, dropped within each chunk (one
    named task per chunk; Dask's boolean indexing would shuffle the rows between tasks);
    ``rows`` travels once, as one key."""
    from dask.base import tokenize

    starts = chunk_bounds(A)
    dropped = np.diff(np.searchsorted(rows, starts))
    chunks = (tuple(int(c) for c in np.asarray(A.chunks[0]) - dropped), *A.chunks[1:])
    ref = dask.delayed(rows, name=f"svm-held-out-{tokenize(rows)}", pure=True)
    return da.map_blocks(
        _drop_rows, A, ref, chunks=chunks, dtype=A.dtype, meta=A._meta, token="svm-train-rows"
    )


def _drop_rows(block: np.ndarray, rows: np.ndarray, block_info=None) -> np.ndarray:
    lo, hi = block_info[0]["array-location"][0]
    a, b = np.searchsorted(rows, [lo, hi])
    return np.delete(block, rows[a:b] - lo, axis=0)


def _column_sums(Xb) -> np.ndarray:
    """``[sum x, sum x^2]`` of a block's columns, shape (2, d)."""
    Xb = np.asarray(Xb, dtype=np.float64)
    return np.stack([Xb.sum(axis=0), np.einsum("ij,ij->j", Xb, Xb)])


def feature_stats(X) -> Standardizer:
    """Mean and std of every feature in one pass (dask: blockwise sums, one compute);
    a constant feature gets scale 1."""
    if is_dask_array(X):
        # one task per row chunk (``svm-standardize`` on the dashboard), summed here in order
        d = int(X.shape[1])
        sums = X.map_blocks(
            _column_sums,
            chunks=((2,) * X.numblocks[0], (d,)),
            dtype=np.float64,
            token="svm-standardize",
        )
        s1, s2 = np.sum(dask.compute(*sums.to_delayed().ravel()), axis=0)
        n = int(X.shape[0])
        mean = s1 / n
        var = np.maximum(s2 / n - mean * mean, 0.0)
    else:
        Xf = np.asarray(X, dtype=np.float64)
        mean, var = column_moments(Xf)
    if not (np.isfinite(mean).all() and np.isfinite(var).all()):
        raise feature_stats_error(mean, var)
    std = np.sqrt(var)
    std[~(std > 1e-12 * np.maximum(1.0, np.abs(mean)))] = 1.0
    return Standardizer(mean, std)
