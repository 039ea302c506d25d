"""Single files (models, checkpoints) on a local disk or on object storage, written whole.

A local file is written to a temporary sibling ``.NAME.tmp-<pid>-<rand>``, flushed, and
renamed over the target (the rename made durable too); an
object is written with one PUT, which object stores apply whole. Either way a reader sees
the previous file or the new one, never a part.
"""

from __future__ import annotations

import contextlib
import os
import uuid

from .._validation import DKernelError
from ._location import as_location, describe_error


def write_bytes(target, data: bytes, *, storage_options=None) -> None:
    """Write ``data`` to the file or object ``target`` whole (see the module docstring)."""
    loc = as_location(target, storage_options)
    if not loc.is_local:
        try:
            loc.fs.pipe_file(loc.path, data)
        except Exception as exc:
            raise DKernelError(f"cannot write {loc.url!r}: {describe_error(exc)}") from None
        return
    folder, base = os.path.split(loc.url)
    if not os.path.isdir(folder):
        raise DKernelError(f"folder {folder!r} for {base!r} does not exist")
    tmp = os.path.join(folder, f".{base}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, loc.url)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.remove(tmp)
    with contextlib.suppress(OSError):  # make the rename itself durable
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def file_size(target, *, storage_options=None) -> int | None:
    """Size in bytes of the file or object ``target``; None when there is none."""
    loc = as_location(target, storage_options)
    if loc.is_local:
        return os.path.getsize(loc.url) if os.path.isfile(loc.url) else None
    try:
        return int(loc.fs.info(loc.path)["size"])
    except FileNotFoundError:
        return None
    except Exception as exc:
        raise DKernelError(f"cannot read {loc.url!r}: {describe_error(exc)}") from None


def read_bytes(target, *, storage_options=None) -> bytes:
    """The bytes of the file or object ``target`` (one GET for an object)."""
    loc = as_location(target, storage_options)
    if loc.is_local:
        with open(loc.url, "rb") as fh:
            return fh.read()
    try:
        return loc.fs.cat_file(loc.path)
    except FileNotFoundError:
        raise
    except Exception as exc:
        raise DKernelError(f"cannot read {loc.url!r}: {describe_error(exc)}") from None
