"""Shared CLI plumbing: the cluster session, JSON output, errors."""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Iterator
from typing import Any

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
    it started (no orphaned worker processes). A task lost to repeated worker deaths
    (``KilledWorker``: most often workers out of memory) becomes a one-line ``DKernelError``.
    """
    # imported here, not with the module: the parser (and ``--help``) must not pay for
    # distributed's import
    from distributed import KilledWorker

    from ..data._atomic import terminate_as_interrupt
    from ..runtime import get_client

    with terminate_as_interrupt():
        client = get_client(cluster, **local_options)
        owns = cluster is None or not _is_address(cluster)
        try:
            yield client
        except KilledWorker as exc:
            last = getattr(exc.last_worker, "address", exc.last_worker)
            raise DKernelError(
                f"task {exc.task!r} was lost: {exc.allowed_failures + 1} workers died running "
                f"it (the last {last}); workers killed for exceeding their memory_limit are "
                "the usual cause: give them more memory or use smaller chunks"
            ) from None
        finally:
            cl = client.cluster if owns else None
            client.close()
            if cl is not None:
                cl.close()


def emit_json(summary: dict[str, Any], path: str | None = None) -> None:
    """Print the JSON summary (and write it to ``path`` when given)."""
    text = json.dumps(summary, indent=2, default=_jsonable)
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


def fail(msg: str, code: int = 2) -> int:
    """Print ``dkernel: error: <msg>`` as one line on stderr; return the exit code."""
    one_line = " ".join(str(msg).split())
    print(f"dkernel: error: {one_line}", file=sys.stderr)
    return code
