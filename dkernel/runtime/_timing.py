"""Phase timing for logs."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator


@contextlib.contextmanager
def timer(name: str, logger: logging.Logger, level: int = logging.DEBUG) -> Iterator[dict]:
    """Log how long the block took: ``with timer("assign", logger): ...``.

    Yields a dict whose ``"seconds"`` is filled in when the block ends.
    """
    out: dict = {}
    t0 = time.perf_counter()
    try:
        yield out
    finally:
        out["seconds"] = time.perf_counter() - t0
        logger.log(level, "%s: %.3f s", name, out["seconds"])
