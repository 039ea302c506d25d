"""Whole-or-nothing stores on object storage, where there is no rename.

A store at ``s3://bucket/name.zarr`` is a prefix holding one small *head* object and one
prefix per array write::

    name.zarr/dkernel.json                    the head: format, attributes, array -> prefix,
                                              and the prefixes it retired
    name.zarr/X.v-<host>-<pid>-<rand>/...     a zarr 3 array (zarr.json + chunks)
    name.zarr/y.v-<host>-<pid>-<rand>/...

A write puts every chunk and each array's metadata (with its checksum manifest) under fresh
prefixes, then publishes them by writing the head, one PUT that object stores apply whole.
Until that PUT the store is the previous one, unchanged; after it, the new one, complete. An
``overwrite`` therefore has no moment without a valid store, and a writer killed at any point
leaves only unreferenced prefixes, which the next writer of the store deletes: the ones the
head retired (a writer killed after its head's PUT, before deleting what it replaced), and
the others once their writer is gone (same host and a dead process, or older than a day).
Opening reads the head and each array's ``zarr.json``: a handful of requests, whatever the
number of chunks.
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
import uuid
from collections.abc import Mapping
from typing import Any

from .._validation import DKernelError
from ._atomic import HOST_TAG, STALE_SECONDS, pid_alive
from ._location import Location, bucket_exists, describe_error

logger = logging.getLogger(__name__)

#: Name of the head object at the root of a remote store.
HEAD_KEY = "dkernel.json"
_PREFIX = re.compile(r"^(?P<base>.+)\.v-(?P<host>[0-9a-f]{8})-(?P<pid>\d+)-(?P<rand>[0-9a-f]{8})$")


def new_prefix(name: str) -> str:
    """A fresh array prefix for one write of array ``name``."""
    return f"{name}.v-{HOST_TAG}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


def storage_error(loc: Location, what: str, exc: BaseException) -> DKernelError:
    """A :class:`DKernelError` naming the URL (never a secret) for a client failure."""
    if isinstance(exc, DKernelError):  # already named (a bad setting, a missing client)
        return exc
    return DKernelError(f"{what} {loc.url!r}: {describe_error(exc)}")


def read_head(loc: Location) -> dict[str, Any] | None:
    """The head of the store at ``loc``, or None where there is none."""
    try:
        raw = loc.fs.cat_file(loc.child(HEAD_KEY).path)
    except FileNotFoundError:
        return None
    except Exception as exc:
        raise storage_error(loc, "cannot open store", exc) from None
    try:
        head = json.loads(raw)
        if not isinstance(head, dict) or not isinstance(head.get("arrays"), dict):
            raise ValueError("no array table")
    except ValueError as exc:
        raise DKernelError(
            f"store {loc.url!r}: its {HEAD_KEY} is not a dkernel head ({exc})"
        ) from None
    return head


def write_head(loc: Location, head: Mapping[str, Any]) -> None:
    """Publish ``head``: the one PUT that makes a write visible."""
    data = json.dumps(head, sort_keys=True).encode()
    try:
        loc.fs.pipe_file(loc.child(HEAD_KEY).path, data)
    except Exception as exc:
        raise storage_error(loc, "cannot publish store", exc) from None


def listing(loc: Location) -> list[str]:
    """The names directly below ``loc`` (one LIST request); empty when there is nothing."""
    try:
        entries = loc.fs.ls(loc.path, detail=False, refresh=True)
    except FileNotFoundError:
        return []
    except Exception as exc:
        raise storage_error(loc, "cannot list", exc) from None
    return [e.rstrip("/").rsplit("/", 1)[-1] for e in entries]


def remove_prefix(loc: Location) -> None:
    """Delete everything under ``loc`` (best effort: logged, not raised)."""
    try:
        loc.fs.rm(loc.path, recursive=True)
    except FileNotFoundError:
        pass
    except Exception as exc:
        logger.warning("could not delete %s (%s)", loc.url, describe_error(exc))


def _prefix_age(loc: Location) -> float:
    try:
        info = loc.fs.info(loc.child("zarr.json").path)
        stamp = info.get("LastModified") or info.get("mtime") or info.get("created")
        if hasattr(stamp, "timestamp"):
            return time.time() - stamp.timestamp()
        if isinstance(stamp, (int, float)):
            return time.time() - float(stamp)
    except Exception:  # no metadata yet: a writer that died before its first PUT
        pass
    return float("inf")


def clean_debris(loc: Location, head: Mapping[str, Any] | None) -> None:
    """Delete array prefixes of dead writes: unreferenced by the head and no longer written.

    A prefix is a dead write's when the head retired it, when its writer ran on this host
    and is gone, or when it is older than :data:`~dkernel.data._atomic.STALE_SECONDS`.
    """
    referenced = set((head or {}).get("arrays", {}).values())
    retired = set((head or {}).get("retired", ()))
    for name in listing(loc):
        m = _PREFIX.match(name)
        if m is None or name in referenced:
            continue
        if name in retired:  # replaced by the head; its deletion was interrupted
            dead = True
        elif m["host"] == HOST_TAG:
            pid = int(m["pid"])
            dead = pid != os.getpid() and not pid_alive(pid)
        else:
            dead = _prefix_age(loc.child(name)) > STALE_SECONDS
        if dead:
            logger.info("removing the leftovers of an interrupted write: %s", name)
            remove_prefix(loc.child(name))


def check_target(loc: Location, overwrite: bool) -> dict[str, Any] | None:
    """A store may be written at ``loc``; returns the head it replaces (or None).

    Refuses an existing store without ``overwrite`` and any prefix holding other objects.
    Leftovers of dead writes of this store are removed first.
    """
    head = read_head(loc)
    names = listing(loc)
    if head is None and not names and loc.protocol != "memory":
        bucket = loc.path.split("/", 1)[0]
        try:
            found = bucket_exists(loc.fs, bucket)
        except Exception as exc:
            raise storage_error(loc, "cannot write store", exc) from None
        if not found:
            raise DKernelError(f"cannot write store {loc.url!r}: no bucket {bucket!r}")
    if head is None:
        foreign = [n for n in names if not _PREFIX.match(n)]
        if foreign:
            raise DKernelError(
                f"refusing to write a store at {loc.url!r}: it holds other objects "
                f"({', '.join(sorted(foreign)[:3])}) and no dkernel store"
            )
    elif not overwrite:
        raise DKernelError(f"{loc.url!r} already exists; pass overwrite=True to replace it")
    clean_debris(loc, head)
    return head


def publish(loc: Location, arrays: Mapping[str, str], attrs: Mapping[str, Any], old) -> None:
    """Write the head for ``arrays`` (name -> prefix) and delete what it replaces.

    The head names the prefixes it retires (``retired``): a writer that dies between the
    head's PUT and their deletion leaves them to the next writer, which deletes them even
    when they are of a process still alive (their names alone would mark them as that
    process's write in progress)."""
    retired = sorted(set((old or {}).get("arrays", {}).values()) - set(arrays.values()))
    write_head(loc, {"format": attrs.get("format"), "attrs": dict(attrs),
                     "arrays": dict(arrays), "retired": retired})  # fmt: skip
    for prefix in retired:
        remove_prefix(loc.child(prefix))
