"""Shared CLI plumbing: the cluster session, JSON output, errors."""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Iterator
from typing import Any


@contextlib.contextmanager
def cluster_session(cluster: str | None, **local_options: Any) -> Iterator[Any]:
    """A connected client for the ``--cluster`` option; closes what it started."""
    from ..runtime import get_client

    client = get_client(cluster, **local_options)
    owns = cluster is None or not str(cluster).startswith(("tcp://", "tls://", "ucx://"))
    try:
        yield client
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
