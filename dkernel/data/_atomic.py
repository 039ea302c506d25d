"""Atomic folder writes: hidden temporary siblings, a recoverable swap, stale-debris cleanup.

Every folder dkernel writes (a dataset store, or one array inside a store) goes through the
same three names beside its target ``NAME``::

    .NAME.tmp-<host>-<pid>-<rand>   being written (incomplete: never used, removed when stale)
    .NAME.new-<host>-<pid>-<rand>   complete, waiting to replace NAME (the commit point)
    .NAME.old-<host>-<pid>-<rand>   the replaced version, removed once NAME is in place

A write fills ``tmp``, renames it to ``new`` (from then on the write is committed), moves an
existing ``NAME`` to ``old``, renames ``new`` to ``NAME`` and removes ``old``. A crash at any
point leaves names :func:`recover` can finish: a complete ``new`` always wins (rolled forward),
a lone ``old`` with no ``NAME`` is moved back (rolled back), and incomplete ``tmp`` folders are
deleted. Debris is only touched when its writer is gone: same host and a dead process id, or
older than :data:`STALE_SECONDS`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import signal
import socket
import threading
import time
import uuid
import zlib
from collections.abc import Iterator
from typing import NamedTuple

logger = logging.getLogger(__name__)

#: Debris of a writer on another host (or of unknown origin) is stale after this long.
STALE_SECONDS = 24 * 3600

#: This host in the names of temporary folders (which host's processes may still own them).
HOST_TAG = f"{zlib.crc32(socket.gethostname().encode()):08x}"
_DEBRIS = re.compile(
    r"^\.(?P<base>.+)\.(?P<kind>tmp|new|old)-"
    r"(?:(?P<host>[0-9a-f]{8})-(?P<pid>\d+)-)?(?P<rand>[0-9a-f]{8})$"
)


class _Debris(NamedTuple):
    path: str
    kind: str
    host: str | None
    pid: int | None
    mtime: float


def sibling(target: str, kind: str) -> str:
    """A fresh hidden sibling name of ``target`` of the given kind (tmp, new or old)."""
    parent, base = os.path.split(os.path.abspath(target))
    return os.path.join(parent, f".{base}.{kind}-{HOST_TAG}-{os.getpid()}-{uuid.uuid4().hex[:8]}")


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` of this host still runs (another user's counts as alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True


def _debris(target: str) -> list[_Debris]:
    parent, base = os.path.split(os.path.abspath(target))
    found = []
    try:
        names = os.listdir(parent)
    except OSError:
        return []
    for name in names:
        m = _DEBRIS.match(name)
        if m is None or m["base"] != base:
            continue
        path = os.path.join(parent, name)
        try:
            mtime = os.stat(path).st_mtime
        except OSError:  # removed meanwhile
            continue
        pid = int(m["pid"]) if m["pid"] else None
        found.append(_Debris(path, m["kind"], m["host"], pid, mtime))
    return sorted(found, key=lambda d: d.mtime)


def _is_stale(d: _Debris, now: float) -> bool:
    if d.pid is not None and d.host == HOST_TAG:
        return d.pid != os.getpid() and not pid_alive(d.pid)
    return now - d.mtime > STALE_SECONDS or (d.pid is None and d.kind != "tmp")


def _remove(path: str) -> None:
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(OSError):
            os.remove(path)


def recover(target: str) -> None:
    """Finish or undo an interrupted write of ``target`` and delete its stale debris.

    A stale complete version (``.NAME.new-*``) replaces ``NAME`` (the interrupted swap is
    completed); with none, a stale ``.NAME.old-*`` is moved back when ``NAME`` is missing
    (rolled back). Stale temporary folders and replaced versions are deleted. Folders of
    writers still running are left alone. Errors (a read-only folder) are logged, not raised.
    """
    target = os.path.abspath(target)
    now = time.time()
    stale = [d for d in _debris(target) if _is_stale(d, now)]
    if not stale:
        return
    try:
        news = [d for d in stale if d.kind == "new"]
        olds = [d for d in stale if d.kind == "old"]
        if news:
            logger.warning("completing an interrupted write of %s", target)
            _swap(news[-1].path, target)
        elif olds and not os.path.exists(target):
            logger.warning("rolling back an interrupted write of %s", target)
            os.rename(olds[-1].path, target)
        for d in stale:
            if os.path.exists(d.path):
                _remove(d.path)
    except OSError as exc:
        logger.warning("cannot clean up after an interrupted write of %s (%s)", target, exc)


def _swap(new: str, target: str) -> None:
    """Move the complete folder ``new`` to ``target``, replacing what is there."""
    old = None
    if os.path.lexists(target):
        old = sibling(target, "old")
        os.rename(target, old)
    try:
        os.rename(new, target)
    except BaseException:
        if old is not None and not os.path.lexists(target):
            os.rename(old, target)
        raise
    if old is not None:
        _remove(old)


def commit(tmp: str, target: str) -> None:
    """Put the complete folder ``tmp`` in place of ``target`` (the recoverable swap).

    ``tmp`` is first renamed to a ``.NAME.new-*`` sibling: from then on the write is
    committed, and if the process dies before ``NAME`` points at it, :func:`recover`
    (run by the next reader or writer) completes the swap.
    """
    new = sibling(target, "new")
    os.rename(tmp, new)
    _swap(new, target)


@contextlib.contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """Handle SIGTERM like SIGINT (a ``KeyboardInterrupt``) inside the block.

    So ``finally`` clauses and context managers clean up when a job scheduler or ``kill``
    stops the process. Only in the main thread (elsewhere signals cannot be handled).
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame):
        raise KeyboardInterrupt(f"terminated by signal {signum}")

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
