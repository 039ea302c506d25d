"""Single files (models, checkpoints) on a local disk or on object storage, written whole.

A local file is written to a temporary sibling ``.NAME.tmp-<pid>-<rand>``, flushed, and
renamed over the target (the rename made durable too); an
object is written with one PUT, which object stores apply whole. Either way a reader sees
the previous file or the new one, never a part.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import uuid

from .._secrets import redact
from .._validation import DKernelError
from ._location import as_location, bucket_exists, describe_error


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


def remove_file(target, *, storage_options=None) -> None:
    """Delete the file or object ``target``; nothing to do when there is none."""
    loc = as_location(target, storage_options)
    if loc.is_local:
        with contextlib.suppress(FileNotFoundError):
            os.remove(loc.url)
        return
    try:
        loc.fs.rm_file(loc.path)
    except FileNotFoundError:
        return
    except Exception as exc:
        raise DKernelError(f"cannot remove {loc.url!r}: {describe_error(exc)}") from None


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


def check_output(target, what: str = "output file", *, storage_options=None) -> str:
    """Check, before any work, that a file (model, checkpoint, summary) can be written at
    ``target``; returns its canonical path or URL.

    A path ending in ``/`` names a folder and is refused (never written as a file of the
    folder's name, nor silently inside it), as is an existing folder. Locally the folder
    must exist and accept a new file; on object storage the bucket must exist (HEAD) and a
    zero-byte probe object beside the target is written and deleted, so a missing bucket,
    wrong credentials or a dead endpoint are named before the work, within
    ``dkernel.storage.deadline`` per request.
    """
    if isinstance(target, (str, os.PathLike)):
        text = os.fspath(target)
        if isinstance(text, str) and text.endswith(("/", os.sep)):
            raise DKernelError(
                f"{what} {redact(text)!r} ends with '/' and so names a folder: give the path "
                f"of a file (such as {redact(text + 'model.npz')!r}); nothing is written "
                "inside the folder in its stead"
            )
    loc = as_location(target, storage_options)
    if loc.is_local:
        _check_local(loc.url, what)
    else:
        _check_remote(loc, what)
    return loc.url


def check_folder_writable(folder: str, what: str) -> None:
    """``folder`` exists and a file can be created in it (a probe file, removed), else a
    :class:`DKernelError` naming it as the folder of ``what``."""
    if not os.path.isdir(folder):
        raise DKernelError(f"folder {folder!r} for the {what} does not exist")
    try:  # root passes os.access on a read-only mount: try it
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".dkernel-probe-"):
            pass
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        msg = f"folder {folder!r} for the {what} cannot be written ({reason})"
        raise DKernelError(msg) from None


def _check_local(path: str, what: str) -> None:
    folder = os.path.dirname(path)
    if os.path.isdir(path):
        raise DKernelError(f"{what} {path!r} is a folder; give the path of a file")
    check_folder_writable(folder, what)
    if os.path.exists(path) and not os.access(path, os.W_OK):
        raise DKernelError(f"{what} {path!r} cannot be written (permission denied)")


def check_prefix_writable(target, what: str = "store", *, storage_options=None) -> None:
    """Check, before any work, that objects can be written below the prefix ``target`` on
    object storage (a store a job writes an array into): a zero-byte probe object is written
    there and deleted. Local paths and ``memory://`` are not probed."""
    loc = as_location(target, storage_options)
    if not loc.is_local:
        _check_remote(loc, what, probe_inside=True)


def _check_remote(loc, what: str, *, probe_inside: bool = False) -> None:
    if loc.protocol == "memory":
        return
    fs, bucket = loc.fs, loc.path.split("/", 1)[0]
    tag = f"dkernel-probe-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    probe = f"{loc.path}/.{tag}" if probe_inside else f"{loc.path}.{tag}"
    try:
        if not bucket_exists(fs, bucket):
            raise DKernelError(f"cannot write the {what} {loc.url!r}: no bucket {bucket!r}")
        if not probe_inside and fs.isdir(loc.path):
            raise DKernelError(
                f"{what} {loc.url!r} is a folder (objects lie below it); give the path of a file"
            )
        fs.pipe_file(probe, b"")
        fs.rm_file(probe)
    except DKernelError:
        raise
    except Exception as exc:
        raise DKernelError(f"cannot write the {what} {loc.url!r}: {describe_error(exc)}") from None
