"""``dkernel ingest``, ``dkernel info`` and ``dkernel check``."""

from __future__ import annotations

import argparse
import sys

from .._validation import DKernelError
from ._common import array_names, cluster_session, emit_json, local_path, small_job_options


def register(sub: argparse._SubParsersAction) -> None:
    _add_ingest(sub)
    _add_info(sub)
    _add_check(sub)


def _add_ingest(sub: argparse._SubParsersAction) -> None:
    """``dkernel ingest``: the store's layout, then the text formats' options."""
    p = sub.add_parser(
        "ingest",
        help="write a .npz, CSV or LIBSVM file into a zarr store",
        description="Write a .npz, CSV or LIBSVM file (optionally .gz or .bz2) into a zarr "
        "dataset store, chunk by chunk, each chunk with its checksum. Runs in this process.",
    )
    p.add_argument("source", help="input file (.npz, .csv/.tsv, LIBSVM text; .gz/.bz2 too)")
    p.add_argument(
        "store", help="output store: a path or a URL (s3://BUCKET/KEY, gs://, az://, file://)"
    )
    p.add_argument(
        "--format",
        choices=["npz", "csv", "svmlight"],
        default=None,
        help="input format (default: from the file name)",
    )
    p.add_argument(
        "--chunk-rows",
        type=int,
        default=None,
        help="rows per chunk (default: a power of two, at most 8 MiB and 65536 rows)",
    )
    p.add_argument(
        "--dtype",
        choices=["float32", "float64"],
        default=None,
        help="dtype of X (default: the source's; text formats float32)",
    )
    _add_text_options(p)
    p.add_argument("--uncompressed", action="store_true", help="store chunks uncompressed")
    p.add_argument(
        "--test-size",
        type=float,
        default=None,
        help="hold out about this share of the rows as X_test/y_test (default: none)",
    )
    p.add_argument(
        "--seed",
        type=int,
        default=None,
        help="seed of the held-out split (default: a fresh one, recorded in the store)",
    )
    p.add_argument("--overwrite", action="store_true", help="replace an existing store")
    p.set_defaults(func=_ingest, uses_cluster=False)


def _add_text_options(p: argparse.ArgumentParser) -> None:
    """The options of the CSV and LIBSVM readers."""
    p.add_argument("--label-column", type=int, default=-1, help="CSV label column (default: last)")
    p.add_argument("--no-labels", action="store_true", help="CSV has no label column")
    p.add_argument(
        "--delimiter",
        default=",",
        help="CSV field separator (default ','; '\\t' or 'tab' for tabs; .tsv files use tabs)",
    )
    p.add_argument("--zero-based", action="store_true", help="LIBSVM indices start at 0")
    p.add_argument(
        "--n-features",
        type=int,
        default=None,
        help="LIBSVM width when the file does not reach the last feature",
    )


def _add_info(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "info",
        help="shape, chunks and classes of a store, and every array in it",
        description="Print a store's shape, chunks, classes and every array in it as JSON. "
        "Runs in this process; --verify also reads every chunk of every array against its "
        "checksum (with this process's threads; `dkernel check` does it on the cluster).",
    )
    p.add_argument("store", help="dataset store: path or URL")
    p.add_argument(
        "--verify",
        action="store_true",
        help="read every chunk of every array and check it (exit 2 on damage)",
    )
    p.set_defaults(func=_info, uses_cluster=False)


def _add_check(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "check",
        help="verify every chunk of every array of a store on the cluster",
        description="Read every chunk of every array of a store on the Dask cluster and check "
        "it against the store's checksum manifest. Exit 0 and print a JSON report when the "
        "store is whole; exit 2 with one line naming store, array and chunk when not.",
    )
    p.add_argument("store", help="dataset store: path or URL")
    p.set_defaults(func=_check)


def _no_cluster_note(args, command: str) -> None:
    """``ingest``/``info`` run in this process: say so when ``--cluster`` was given."""
    if getattr(args, "cluster", None):
        print(
            f"dkernel: note: {command} runs in this process, without a Dask cluster; "
            f"--cluster {args.cluster} is not used",
            file=sys.stderr,
        )


def _ingest(args) -> int:
    from ..data import ingest

    _no_cluster_note(args, "ingest")

    delimiter = {"\\t": "\t", "tab": "\t"}.get(args.delimiter, args.delimiter)
    if not delimiter:
        raise DKernelError("--delimiter must not be empty")
    ds = ingest(
        local_path(args.source),
        local_path(args.store),
        format=args.format,
        chunk_rows=args.chunk_rows,
        dtype=args.dtype,
        label_column=None if args.no_labels else args.label_column,
        delimiter=delimiter,
        zero_based=args.zero_based,
        n_features=args.n_features,
        overwrite=args.overwrite,
        compressors=None if args.uncompressed else "default",
        test_size=args.test_size,
        random_state=args.seed,
    )
    emit_json(_describe(ds))
    return 0


def _info(args) -> int:
    from ..data import open_dataset

    _no_cluster_note(args, "info")
    ds = open_dataset(local_path(args.store))
    out = _describe(ds)
    if args.verify:
        import dask

        with dask.config.set(scheduler="threads"):
            out["verified"] = verify(ds)
    emit_json(out)
    return 0


def _check(args) -> int:
    from ..data import open_dataset

    ds = open_dataset(local_path(args.store))  # a missing chunk file: named here, no reads
    with cluster_session(args.cluster, **small_job_options(ds, args.cluster)):
        chunks = verify(ds)
    emit_json({"store": ds.path, "verified": chunks, "ok": True})
    return 0


def verify(ds) -> dict[str, int]:
    """Read every chunk of every array of ``ds`` (on the current scheduler); return the
    number of chunks checked per array. The data layer's reads verify each chunk against
    its checksum: a damaged one raises a ``DKernelError`` naming store, array and chunk."""
    import dask

    views = {name: ds.read(name) for name in array_names(ds)}
    count = dask.delayed(_rows, pure=True)
    parts = {
        name: [count(block) for block in view.to_delayed().ravel()] for name, view in views.items()
    }
    dask.compute(parts)
    return {name: len(blocks) for name, blocks in parts.items()}


def _rows(block) -> int:
    return int(block.shape[0])


def _describe(ds) -> dict:
    out = {
        "store": ds.path,
        "n_samples": ds.n_samples,
        "n_features": ds.n_features,
        "dtype": str(ds.X.dtype),
        "chunks": [int(ds.X.chunksize[0]), int(ds.X.chunksize[1])],
        "n_chunks": int(ds.X.numblocks[0]),
        "labels": ds.y is not None,
        "classes": ds.attrs.get("classes"),
        "source": ds.attrs.get("source"),
    }
    if ds.attrs.get("label_names") is not None:  # text labels: y holds their indices
        out["label_names"] = list(ds.attrs["label_names"])
    if ds.X_test is not None:
        out["n_test"] = int(ds.X_test.shape[0])
    if ds.attrs.get("split") is not None:  # held out at ingest
        out["split"] = dict(ds.attrs["split"])
    out["arrays"] = _arrays(ds)
    return out


def _arrays(ds) -> dict[str, dict]:
    """Every array in the store, the ones jobs wrote (labels, predictions) included, as
    the data layer opens them (its manifest checked against the chunk files)."""
    out: dict[str, dict] = {}
    for name in array_names(ds):
        view = ds.read(name)
        out[name] = {
            "shape": [int(s) for s in view.shape],
            "dtype": str(view.dtype),
            # the largest chunk as read (as the store's "chunks"): a store's chunk grid can be
            # larger than the array, which is then one chunk of all its rows
            "chunks": [int(c) for c in view.chunksize],
        }
    return out
