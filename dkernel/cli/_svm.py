"""``dkernel svm train`` / ``dkernel svm predict`` and the demo step ``step_svm``."""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

import numpy as np

from .._validation import DKernelError
from ._common import (
    check_new_array,
    check_output_file,
    check_store_writable,
    cluster_session,
    coreset_record,
    emit_json,
    local_path,
    small_job_options,
    weights_note,
)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("svm", help="budgeted SGD kernel SVM (train on a store, predict into it)")
    ssub = p.add_subparsers(dest="svm_command", metavar="ACTION")
    ssub.required = True
    _add_train(ssub)
    _add_predict(ssub)


def _add_train(ssub: argparse._SubParsersAction) -> None:
    """``dkernel svm train``: the estimator's options, then the run's."""
    t = ssub.add_parser(
        "train",
        help="train a budgeted kernel SVM on a store's X, y; save the model",
        description="Train BudgetedSVC on a store's X, y: --max-iter streaming passes (epochs) "
        "of budgeted SGD over the chunks choose the support vectors, then one exact solve of "
        "their coefficients over the rows (the refit, over a uniform sample beyond "
        "--refit-rows; --no-refit keeps the SGD ones), on the "
        "cluster; save the model (.npz) and print a JSON summary (test accuracy when the "
        "store has a test split).",
    )
    t.add_argument("store", help="dataset store: path or URL (dkernel ingest / make_* output)")
    t.add_argument("model", help="model file to write (.npz): path or URL")
    _add_sgd_options(t)
    _add_kernel_options(t)
    t.add_argument("--max-iter", type=int, default=5, help="epochs: passes over the data")
    t.add_argument(
        "--standardize",
        action="store_true",
        help="standardise every feature with the training data's mean and std (one extra "
        "pass; recommended when features have unequal or small scales)",
    )
    refit = t.add_mutually_exclusive_group()
    refit.add_argument(
        "--no-refit",
        action="store_true",
        help="keep the SGD coefficients (the paper's model) instead of the exact refit",
    )
    refit.add_argument(
        "--refit",
        choices=["ovr", "weston_watkins", "crammer_singer"],
        default=None,
        help="the refit's multi-class loss: one-vs-rest, or one joint Weston-Watkins or "
        "Crammer-Singer problem (default: the estimator's, refit=True)",
    )
    t.add_argument(
        "--refit-rows",
        type=int,
        default=None,
        help="the refit solves over at most this many rows, a seeded uniform sample beyond "
        "(default: 256 per support vector)",
    )
    t.add_argument("--seed", type=int, default=0, help="random seed")
    _add_checkpoint_options(t)
    t.add_argument("--summary", default=None, help="also write the JSON summary here")
    t.set_defaults(func=_train)


def _add_sgd_options(t: argparse.ArgumentParser) -> None:
    """The budget, its maintenance and the SGD update."""
    t.add_argument("--budget", type=int, default=500, help="support vectors B (default 500)")
    t.add_argument(
        "--maintenance",
        choices=["merge", "project", "remove"],
        default="merge",
        help="what happens when the budget is full",
    )
    t.add_argument(
        "--algorithm",
        choices=["pegasos", "norma", "perceptron"],
        default="pegasos",
        help="the SGD update",
    )
    t.add_argument(
        "--alpha", type=float, default=None, help="regularisation (default 1/(4 n_samples))"
    )
    t.add_argument("--eta0", type=float, default=1.0, help="step of norma/perceptron")


def _add_kernel_options(t: argparse.ArgumentParser) -> None:
    t.add_argument("--kernel", default="rbf", help="rbf, laplacian, polynomial, ...")
    t.add_argument(
        "--gamma",
        type=float,
        default=None,
        help="kernel bandwidth (default: 1/(d X.var()), 1/d with --standardize)",
    )


def _add_checkpoint_options(t: argparse.ArgumentParser) -> None:
    t.add_argument(
        "--checkpoint",
        default=None,
        help="save the fit's state to this file as it goes; rerun the same command to resume "
        "from it (removed when the fit completes)",
    )
    t.add_argument(
        "--checkpoint-every",
        type=int,
        default=1,
        help="blocks of 65536 rows (or distributed rounds) between checkpoints (default 1)",
    )


def _add_predict(ssub: argparse._SubParsersAction) -> None:
    """``dkernel svm predict``."""
    q = ssub.add_parser(
        "predict",
        help="predict a store's X; write the labels into the store",
        description="Predict a store's X with a saved model on the cluster; write the labels "
        "into the store as array --name and print a JSON summary (accuracy when it has y).",
    )
    q.add_argument("model", help="model file written by 'dkernel svm train' (path or URL)")
    q.add_argument("store", help="dataset store: path or URL")
    q.add_argument(
        "--name",
        default="predictions",
        help="array name for the predictions inside the store (default predictions)",
    )
    q.add_argument(
        "--overwrite", action="store_true", help="replace an existing array of that name"
    )
    q.add_argument("--summary", default=None, help="also write the JSON summary here")
    q.set_defaults(func=_predict)


def _train(args: argparse.Namespace) -> int:
    from ..data import open_dataset
    from ..svm import BudgetedSVC

    ds = open_dataset(local_path(args.store))
    if ds.y is None:
        raise DKernelError(f"store {ds.path!r} has no labels 'y' to train on")
    model_path = check_output_file(args.model, "model file", remote=True)
    summary_path = check_output_file(args.summary, "summary file")
    clf = BudgetedSVC(
        budget=args.budget,
        maintenance=args.maintenance,
        algorithm=args.algorithm,
        alpha=args.alpha,
        eta0=args.eta0,
        kernel=args.kernel,
        gamma=args.gamma,
        max_iter=args.max_iter,
        standardize=args.standardize,
        refit=False if args.no_refit else (args.refit or True),
        refit_rows="auto" if args.refit_rows is None else args.refit_rows,
        random_state=args.seed,
        checkpoint=args.checkpoint,
        checkpoint_every=args.checkpoint_every,
    )
    clf.check_params()  # parameter and kernel errors before a cluster starts
    if args.checkpoint is not None:
        clf.set_params(checkpoint=check_output_file(args.checkpoint, "checkpoint", remote=True))
    core = _coreset_in(ds)
    with cluster_session(args.cluster):
        t0 = time.perf_counter()
        weights: dict[str, Any] = {"sample_weight": None}
        if core is None:
            clf.fit(ds)
        else:  # the rows stand for the source's only with their weights
            weights = weights_note(ds, coreset_record(ds) or {})
            core.fit(clf)  # as Coreset.fit in Python: the same model
        train_s = time.perf_counter() - t0
        summary: dict[str, Any] = {
            "store": ds.path,
            "model": model_path,
            "n_samples": ds.n_samples,
            **weights,
            **clf.summary(),  # the model's own numbers, as its summary() gives them
            "max_iter": args.max_iter,
            "seed": args.seed,
            "train_seconds": train_s,
        }
        if ds.X_test is not None and ds.y_test is not None:
            pred = clf.predict(ds.X_test).compute()
            truth = np.asarray(ds.labels("y_test"))  # a store of names: the names
            summary["test_accuracy"] = float(np.mean(pred == truth))
    clf.save(model_path)
    emit_json(summary, summary_path)
    return 0


def _coreset_in(ds):
    """The coreset a store holds (None for other stores); one-vs-rest coresets refused."""
    meta = coreset_record(ds)
    if meta is None:
        return None
    if meta.get("multiclass") == "ovr":
        raise DKernelError(
            f"store {ds.path!r} holds one-vs-rest coresets (one binary problem per class): "
            "train one model per class in Python (dkernel.coreset.read_coreset)"
        )
    from ..coreset import read_coreset

    return read_coreset(ds)


def _predict(args: argparse.Namespace) -> int:
    from ..data import check_array_name, decode, open_dataset, write_array
    from ..svm import BudgetedSVC

    check_array_name(args.name, what="--name")
    summary_path = check_output_file(args.summary, "summary file")
    model_path = local_path(args.model)
    if os.path.isdir(model_path):
        raise DKernelError(f"model file {args.model!r} is a folder")
    clf = BudgetedSVC.load(model_path)
    ds = open_dataset(local_path(args.store))
    check_new_array(ds, args.name, args.overwrite)
    check_store_writable(ds.path)
    if ds.n_features != clf.n_features_in_:
        raise DKernelError(
            f"store {ds.path!r} has {ds.n_features} features but the model "
            f"expects {clf.n_features_in_}"
        )
    with cluster_session(args.cluster, **small_job_options(ds, args.cluster)):
        t0 = time.perf_counter()
        pred, attrs = _as_stored(clf, clf.predict(ds.X))
        written = write_array(ds, args.name, pred, attrs=attrs, overwrite=args.overwrite)
        seconds = time.perf_counter() - t0
        summary: dict[str, Any] = {
            "model": model_path,
            "store": ds.path,
            "array": args.name,
            "n_samples": ds.n_samples,
            "predict_seconds": seconds,
        }
        if ds.y is not None:
            if attrs:  # names: compared as names, with the store's own
                written = decode(written, attrs["label_names"])
            summary["accuracy"] = float((written == ds.labels("y")).mean().compute())
    emit_json(summary, summary_path)
    return 0


def _as_stored(clf, pred):
    """``(predictions, attrs)`` as a store keeps labels: a model's class names as their
    indices in its ``classes_``, the names in the array's ``label_names`` attribute."""
    from ..data import are_names, code_names

    classes = clf.classes_
    if not are_names(classes):
        return pred, None
    names = tuple(str(c) for c in classes)
    return pred.map_blocks(code_names, names, dtype=np.int64), {"label_names": list(names)}


def step_svm(ctx) -> dict:
    """BSGD (merge, B=100) streamed from the demo's zarr checkerboard; test accuracy.

    The paper's one pass: one epoch, the last iterate, on the client while the workers read
    the chunks ahead. The estimator's defaults are not the paper's setting: over a single
    epoch, an iterate averaged over the whole epoch carries its early steps, which the last
    iterate has moved away from.
    """
    from ..data import make_checkerboard
    from ..svm import BudgetedSVC

    ds = ctx.stores["checkerboard"]
    clf = BudgetedSVC(
        budget=100,
        maintenance="merge",
        gamma=2.0,
        alpha=1.0 / ds.n_samples,
        max_iter=1,
        average=False,
        distributed=False,
        random_state=ctx.seed,
    )
    t0 = time.perf_counter()
    clf.fit(ds)
    train_s = time.perf_counter() - t0
    Xt, yt = make_checkerboard(20000, random_state=ctx.seed + 1)
    acc = float(clf.score(Xt, yt))
    ctx.say(
        f"BudgetedSVC(B=100, merge, pegasos): one pass over {ds.n_samples:,} rows "
        f"streamed from {ds.path} in {train_s:.1f} s; {clf.support_vectors_.shape[0]} SVs, "
        f"{clf.n_maintenance_:,} merges, mean degradation {clf.weight_degradation_:.3g}"
    )
    ctx.say(f"test accuracy on 20,000 fresh rows: {100 * acc:.2f}%")
    return {
        "rows": ds.n_samples,
        "train_s": train_s,
        "test_accuracy": acc,
        "n_support_vectors": int(clf.support_vectors_.shape[0]),
        "weight_degradation": clf.weight_degradation_,
    }
