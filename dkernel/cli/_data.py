"""``dkernel ingest`` and ``dkernel info``."""

from __future__ import annotations

import argparse
import sys

import zarr

from .._validation import DKernelError
from ._common import emit_json


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("ingest", help="write a .npz, CSV or LIBSVM file into a zarr store")
    p.add_argument("source", help="input file (.npz, .csv/.tsv, LIBSVM text)")
    p.add_argument("store", help="output zarr store folder")
    p.add_argument("--format", choices=["npz", "csv", "svmlight"], default=None)
    p.add_argument("--chunk-rows", type=int, default=None)
    p.add_argument("--dtype", choices=["float32", "float64"], default=None)
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
    p.add_argument("--uncompressed", action="store_true", help="store chunks uncompressed")
    p.add_argument("--overwrite", action="store_true")
    p.set_defaults(func=_ingest)

    p = sub.add_parser("info", help="shape, chunks and classes of a store, and every array in it")
    p.add_argument("store")
    p.set_defaults(func=_info)


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
        args.source,
        args.store,
        format=args.format,
        chunk_rows=args.chunk_rows,
        dtype=args.dtype,
        label_column=None if args.no_labels else args.label_column,
        delimiter=delimiter,
        zero_based=args.zero_based,
        n_features=args.n_features,
        overwrite=args.overwrite,
        compressors=None if args.uncompressed else "default",
    )
    emit_json(_describe(ds))
    return 0


def _info(args) -> int:
    from ..data import open_dataset

    _no_cluster_note(args, "info")
    emit_json(_describe(open_dataset(args.store)))
    return 0


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
    if ds.X_test is not None:
        out["n_test"] = int(ds.X_test.shape[0])
    out["arrays"] = _arrays(ds.path)
    return out


def _arrays(path: str) -> dict[str, dict]:
    """Every array in the store, the ones jobs wrote (labels, predictions) included."""
    group = zarr.open_group(path, mode="r")
    out: dict[str, dict] = {}
    for name, member in sorted(group.members(max_depth=None)):
        if isinstance(member, zarr.Array):
            out[name] = {
                "shape": [int(s) for s in member.shape],
                "dtype": str(member.dtype),
                "chunks": [int(c) for c in member.chunks],
            }
    return out
