"""Shared CLI plumbing: the cluster session, JSON output, errors."""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Iterator
from typing import Any

from .._secrets import redact, remember, remember_options
from .._validation import DKernelError


def _is_address(cluster: str) -> bool:
    return "://" in cluster


def check_cluster_option(cluster: str | None) -> None:
    """Check ``--cluster`` without starting anything: a scheduler address, or a config file
    that exists and is valid. Every subcommand runs this first, used or not."""
    if cluster is None or _is_address(cluster):
        return
    from ..runtime import load_cluster_config

    load_cluster_config(cluster)


@contextlib.contextmanager
def cluster_session(cluster: str | None, **local_options: Any) -> Iterator[Any]:
    """A connected client for the ``--cluster`` option; closes what it started.

    SIGTERM is handled like Ctrl-C inside, so a killed command still closes the cluster
    it started (no orphaned worker processes). The dashboard link goes to stderr. A task
    lost to repeated worker deaths (``KilledWorker``: most often workers out of memory),
    work that found no worker for ``dkernel.cluster.no-workers-timeout`` and a scheduler
    lost mid-command each become a one-line ``DKernelError``.
    """
    # imported here, not with the module: the parser (and ``--help``) must not pay for
    # distributed's import
    from distributed import KilledWorker
    from distributed.scheduler import NoWorkerError

    from ..data import terminate_as_interrupt
    from ..runtime import NoWorkersError, get_client

    with terminate_as_interrupt():
        client = get_client(cluster, new=True, **local_options)
        owns = cluster is None or not _is_address(cluster)
        say(f"dashboard: {client.dashboard_link}")
        try:
            yield client
        except KilledWorker as exc:
            last = getattr(exc.last_worker, "address", exc.last_worker)
            raise DKernelError(
                f"task {exc.task!r} was lost: {exc.allowed_failures + 1} workers died running "
                f"it (the last {last}); workers killed for exceeding their memory_limit are "
                "the usual cause: give them more memory or use smaller chunks"
            ) from None
        except NoWorkerError as exc:
            raise NoWorkersError(exc.timeout, exc.task) from None
        except Exception:
            if client.status in ("running", "newly-created"):
                raise
            # the scheduler stopped (killed, out of memory, its job ended): whatever the
            # failing call raised (a closed comm, or a local scheduler's missing-dependency
            # error once the client has given up), the cause is the lost scheduler
            where = cluster or "the embedded cluster"
            raise DKernelError(
                f"lost the connection to the Dask scheduler ({where}): it stopped or was "
                "killed while the command ran"
            ) from None
        finally:
            cl = client.cluster if owns else None
            client.close()
            if cl is not None:
                cl.close()


#: Stores up to this many bytes of X are served by an in-process cluster (threads) when no
#: --cluster is given: starting worker processes (each importing dask, numba and dkernel)
#: costs seconds that a small predict or check does not need.
SMALL_JOB_BYTES = 64 * 2**20


def small_job_options(ds, cluster: str | None) -> dict[str, Any]:
    """``cluster_session``'s options for a command on the store ``ds``: the embedded
    cluster in this process (no worker processes) for a small store, else none."""
    if cluster is not None or os.environ.get("DASK_SCHEDULER_ADDRESS"):
        return {}
    import dask.config

    if dask.config.get("scheduler-address", None):
        return {}
    nbytes = int(ds.X.shape[0]) * int(ds.X.shape[1]) * ds.X.dtype.itemsize
    return {"processes": False} if nbytes <= SMALL_JOB_BYTES else {}


def local_path(text: str) -> str:
    """A path or URL argument as the command uses it: ``~`` expanded and absolute for a
    local path (``file://`` too); an object-storage URL checked for its form and kept."""
    from ..data import as_location

    return as_location(text).url


def store_exists(path: str) -> bool:
    """True when a store (or, locally, anything) is at ``path``."""
    if not is_remote(path):
        return os.path.exists(path)
    from ..data import open_dataset

    try:
        open_dataset(path)
    except DKernelError as exc:
        if "no dataset store" in str(exc):
            return False
        raise
    return True


def is_remote(text: str) -> bool:
    """True for an object-storage URL (``s3://``, ``gs://``, ``az://``, ``memory://``)."""
    from ..data import as_location

    return not as_location(text).is_local


def parse_storage_options(items: list[str] | None) -> dict[str, Any]:
    """``--storage-option KEY=VALUE`` arguments as ``storage_options``: a VALUE that reads
    as JSON is taken as JSON (numbers, true/false, objects), any other as a string; a
    dotted KEY (``client_kwargs.region_name``) sets a nested option. An argument that does
    not parse is never shown (it may be a secret given without its key)."""
    opts: dict[str, Any] = {}
    for number, item in enumerate(items or [], 1):
        key, sep, text = item.partition("=")
        if not sep or not key.strip():
            remember(item)
            raise DKernelError(
                f"--storage-option takes KEY=VALUE; argument {number} of --storage-option is "
                "not of that form (not shown: it may hold a secret)"
            )
        try:
            value: Any = json.loads(text)
        except json.JSONDecodeError:
            value = text
        remember_options({key.strip().rsplit(".", 1)[-1]: value})
        *parents, leaf = key.strip().split(".")
        node = opts
        for depth, part in enumerate(parents, 1):
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                where = ".".join(parents[:depth])
                raise DKernelError(
                    f"--storage-option {key.strip()}=... nests into {where!r}, which an "
                    "earlier --storage-option set to a value, not an object"
                )
        node[leaf] = value
    return opts


def check_output_file(text: str | None, what: str, *, remote: bool = False) -> str | None:
    """An output file the command writes after its work, checked before any work starts:
    not a folder (nor a path ending in '/'), its folder exists and accepts a new file.
    Returns the local path, or (``remote=True``: model files and checkpoints) the
    object-storage URL, once its bucket answered and took a zero-byte probe."""
    if text is None:
        return None
    if is_remote(text) and not remote:
        raise DKernelError(f"{what} {redact(text)!r} must be a local path")
    from ..data import check_output

    return check_output(text, what)


def check_output_store(text: str, what: str, *, inputs: tuple[str, ...] = ()) -> str:
    """An output store's path, checked before any work: its folder exists and is writable,
    and it is none of the input stores (nor inside one, nor holding one): replacing it
    would destroy the data the command reads."""
    path = local_path(text)
    if is_remote(path):
        for inp in inputs:
            src = local_path(inp)
            if path == src or path.startswith(src + "/") or src.startswith(path + "/"):
                raise DKernelError(
                    f"{what} {text!r} is the input store {inp!r} (or inside it, or holds "
                    "it): write the output to another path"
                )
        return path
    real = os.path.realpath(path)
    for inp in inputs:
        src = os.path.realpath(local_path(inp))
        if real == src or _inside(real, src) or _inside(src, real):
            raise DKernelError(
                f"{what} {text!r} is the input store {inp!r} (or inside it, or holds it): "
                "write the output to another path"
            )
    _check_folder(os.path.dirname(path), what)
    return path


def check_store_writable(path: str) -> None:
    """A store the command writes an array into (labels, predictions) accepts writes: a
    local folder takes a new file; on object storage a zero-byte probe object is written
    below the store's prefix and deleted."""
    if not is_remote(path):
        _check_folder(path, "store")
        return
    from ..data import check_prefix_writable

    check_prefix_writable(path, "store")


def _inside(path: str, folder: str) -> bool:
    return os.path.commonpath([path, folder]) == folder and path != folder


def _check_folder(folder: str, what: str) -> None:
    from ..data import check_folder_writable

    check_folder_writable(folder, what)


def array_names(ds) -> list[str]:
    """Every array of an opened store: the data's own and the ones jobs wrote into it.

    A local store's folders are the record (its ``arrays`` attribute is informative and
    may lag); elsewhere the attribute is what there is.
    """
    names = {n for n in ("X", "y", "X_test", "y_test") if getattr(ds, n) is not None}
    if ds.arrays:  # a store on object storage: its head lists every array
        names.update(ds.arrays)
    elif os.path.isdir(ds.path):
        for entry in os.listdir(ds.path):
            meta = os.path.join(ds.path, entry, "zarr.json")
            if not entry.startswith(".") and os.path.isfile(meta):
                names.add(entry)
    else:
        names.update(dict(ds.attrs.get("arrays") or {}))
    return sorted(names)


def coreset_record(ds) -> dict[str, Any] | None:
    """The ``coreset`` record of a store ``dkernel coreset`` wrote (rows with a ``weight``
    array that make them stand for the source's rows), or None for other stores."""
    meta = ds.attrs.get("coreset")
    if meta is None or "weight" not in array_names(ds):
        return None
    return dict(meta)


def weights_note(ds, meta: dict[str, Any]) -> dict[str, Any]:
    """Says on stderr that the coreset's weights are used; the summary's entry for it."""
    say(
        f"{ds.path} is a coreset: training on its {ds.n_samples:,} rows with their 'weight' "
        f"array (they stand for {int(meta['source_size']):,} rows)"
    )
    return {"sample_weight": "weight", "coreset_source_size": int(meta["source_size"])}


def check_new_array(ds, name: str, overwrite: bool) -> None:
    """A job's output array: refused before the work when one of that name exists."""
    if name in array_names(ds) and not overwrite:
        raise DKernelError(
            f"store {ds.path!r} already has an array {name!r}; pass --overwrite to replace it"
        )


def emit_json(summary: dict[str, Any], path: str | None = None) -> None:
    """Print the JSON summary (and write it to ``path`` when given)."""
    text = redact(json.dumps(summary, indent=2, default=_jsonable))
    if path:
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text + "\n")
    print(text)


def _jsonable(o):
    import numpy as np

    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    return str(o)


def say(msg: str) -> None:
    """A message for the person at the terminal: stderr, so stdout carries only the result."""
    print(f"dkernel: {redact(msg)}", file=sys.stderr, flush=True)


def fail(msg: str, code: int = 2) -> int:
    """Print ``dkernel: error: <msg>`` as one line on stderr; return the exit code."""
    one_line = " ".join(redact(msg).split())
    print(f"dkernel: error: {one_line}", file=sys.stderr)
    return code
