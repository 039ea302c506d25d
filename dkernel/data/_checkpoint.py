"""Checkpoints of an iterative fit: one file, written atomically, tied to its parameters.

A checkpoint is a single ``.npz`` file: every NumPy array of the state is an entry, and one
more entry (``__dkernel_meta__``) holds the rest as JSON, with a fingerprint of the fit's
parameters. It is written to a hidden sibling and renamed over the old file (``os.replace``,
after an ``fsync``), so a process killed at any moment leaves the previous checkpoint or the
new one, never a torn file. A URL (``s3://...``) puts it on object storage, written with one
PUT, which is whole too. Loading checks the fingerprint: a checkpoint of another fit is
refused instead of resumed.

Examples
--------
>>> import os, tempfile, numpy as np
>>> from dkernel.data import load_checkpoint, save_checkpoint
>>> path = os.path.join(tempfile.mkdtemp(), "fit.ckpt.npz")
>>> params = {"n_clusters": 3, "random_state": 0}
>>> save_checkpoint(path, {"centers": np.zeros((3, 2)), "n_iter": 7}, params=params)
>>> state = load_checkpoint(path, params=params)
>>> state["n_iter"], state["centers"].shape
(7, (3, 2))
>>> load_checkpoint(path + ".missing", params=params) is None
True
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import logging
import os
import time
import zipfile
from collections.abc import Mapping
from typing import Any

import numpy as np

from .._validation import DKernelError, json_value
from .._version import __version__
from ..runtime import timer
from ._atomic import pid_alive
from ._files import check_output, read_bytes, remove_file, write_bytes
from ._location import as_location

logger = logging.getLogger(__name__)

#: Version of the checkpoint layout.
CHECKPOINT_FORMAT = 1
_META = "__dkernel_meta__"


def _jsonable(value: Any) -> Any:
    """``value`` with NumPy scalars (and tuples) made plain; raises on anything else."""

    def error(bad):
        return f"checkpoint values must be NumPy arrays or JSON-like, got {type(bad).__name__}"

    return json_value(value, error)


def fingerprint(params: Mapping[str, Any]) -> str:
    """SHA-256 of the parameters as canonical JSON (objects without JSON form by ``repr``)."""

    def plain(v):
        try:
            return _jsonable(v)
        except DKernelError:
            return repr(v)

    text = json.dumps({str(k): plain(v) for k, v in params.items()}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def save_checkpoint(
    path: str | os.PathLike, state: Mapping[str, Any], *, params: Mapping[str, Any]
) -> None:
    """Write ``state`` atomically to ``path`` (a ``.npz`` file), tied to ``params``.

    Parameters
    ----------
    path : str or os.PathLike
        The checkpoint file; its folder must exist.
    state : mapping of str to ndarray or JSON-like value
        Arrays are stored as ``.npz`` entries; other values (ints, floats, strings, lists,
        dicts such as ``Generator.bit_generator.state``) as JSON.
    params : mapping
        The parameters the state belongs to (e.g. ``estimator.get_params()``); their
        fingerprint is stored and checked by :func:`load_checkpoint`.
    """
    if os.fspath(path).endswith(("/", os.sep)):
        raise DKernelError(f"checkpoint {path!r} ends with '/': give the path of a file")
    loc = as_location(path)
    path = loc.url
    folder, base = os.path.split(path)
    if loc.is_local and not os.path.isdir(folder):
        raise DKernelError(f"folder {folder!r} for the checkpoint does not exist")
    arrays: dict[str, Any] = {}
    values: dict[str, Any] = {}
    for key, value in state.items():
        if not isinstance(key, str) or not key or key == _META:
            raise DKernelError(f"checkpoint keys must be non-empty strings, got {key!r}")
        if isinstance(value, np.ndarray):
            if value.dtype == object:
                raise DKernelError(f"checkpoint array {key!r} has dtype object")
            arrays[key] = value
        else:
            values[key] = _jsonable(value)
    meta = {
        "format": CHECKPOINT_FORMAT,
        "dkernel_version": __version__,
        "fingerprint": fingerprint(params),
        "time": time.time(),
        "values": values,
    }
    arrays[_META] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    if loc.is_local:
        _remove_stale_temps(folder, base)
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    write_bytes(loc, buf.getvalue())  # temporary sibling + fsync + rename, or one PUT


def _remove_stale_temps(folder: str, base: str) -> None:
    """Delete temporary files of saves killed before their rename (dead pid, or a day old)."""
    prefix = f".{base}.tmp-"
    for name in os.listdir(folder):
        if not name.startswith(prefix):
            continue
        pid_text = name[len(prefix) :].split("-", 1)[0]
        path = os.path.join(folder, name)
        try:
            old = time.time() - os.stat(path).st_mtime > 86400
        except OSError:
            continue
        if old or (pid_text.isdigit() and not pid_alive(int(pid_text))):
            with contextlib.suppress(OSError):
                os.remove(path)


def load_checkpoint(
    path: str | os.PathLike, *, params: Mapping[str, Any], on_mismatch: str = "raise"
) -> dict[str, Any] | None:
    """The state saved at ``path``, or None when there is no checkpoint.

    Parameters
    ----------
    path : str or os.PathLike
    params : mapping
        The parameters of the fit that wants to resume; they must have the fingerprint
        the checkpoint was saved with.
    on_mismatch : {"raise", "ignore"}, default="raise"
        A checkpoint of other parameters: raise a ``DKernelError``, or return None (start
        over; the next save replaces it).

    Returns
    -------
    dict or None
        Arrays and values as saved.

    Raises
    ------
    DKernelError
        The file is not a dkernel checkpoint or is damaged, or (``on_mismatch="raise"``)
        it was saved for other parameters; or no checkpoint can be written at ``path``
        (checked first, as the fit that resumes writes it: see
        :func:`dkernel.data.check_output`).
    """
    if on_mismatch not in ("raise", "ignore"):
        raise DKernelError(f"on_mismatch must be 'raise' or 'ignore', got {on_mismatch!r}")
    # the fit that asks will write here: a folder, a missing folder or bucket, refused
    # credentials or a dead endpoint are named now, before its work
    loc = as_location(check_output(path, "checkpoint"))
    path = loc.url
    source: Any = path
    if not loc.is_local:
        try:
            source = io.BytesIO(read_bytes(loc))
        except FileNotFoundError:
            return None
    elif not os.path.exists(path):
        return None
    try:
        with np.load(source, allow_pickle=False) as data:
            if _META not in data.files:
                raise DKernelError(f"{path!r} is not a dkernel checkpoint")
            meta = json.loads(data[_META].tobytes().decode())
            arrays = {k: data[k] for k in data.files if k != _META}
    except DKernelError:
        raise
    except (OSError, ValueError, zipfile.BadZipFile, json.JSONDecodeError) as exc:
        raise DKernelError(f"checkpoint {path!r} cannot be read ({exc})") from None
    if meta.get("format") != CHECKPOINT_FORMAT:
        raise DKernelError(f"checkpoint {path!r} has format {meta.get('format')!r}")
    if meta.get("fingerprint") != fingerprint(params):
        if on_mismatch == "ignore":
            return None
        raise DKernelError(
            f"checkpoint {path!r} was saved by a fit with other parameters; "
            "remove it or use the parameters it was saved with"
        )
    return {**meta.get("values", {}), **arrays}


class CheckpointFile:
    """The checkpoint of one fit: its file or object (``path``), the parameters its state
    is tied to (``params``) and the steps between two saves (``every``). The estimators'
    checkpoints add what they save; loading, saving and removing are these."""

    def __init__(self, path, every: int, params: Mapping[str, Any]) -> None:
        self.path = os.fspath(path)
        self.every = int(every)
        self.params = params

    def load(self) -> dict[str, Any] | None:
        """The state saved for these parameters (None when there is none; another fit's
        raises)."""
        return load_checkpoint(self.path, params=self.params)

    def write(self, state: Mapping[str, Any], what: str) -> None:
        """Save ``state`` (timed as ``what`` in the log)."""
        with timer(what, logger):
            save_checkpoint(self.path, state, params=self.params)

    def remove(self) -> None:
        """The fit is whole: its checkpoint is spent (a local file or an object alike)."""
        remove_file(self.path)
