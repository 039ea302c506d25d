"""Where a store lives: a local folder or a prefix on object storage, named by path or URL.

A :class:`Location` is a small frozen value (it travels inside Dask tasks): the canonical URL,
its protocol and the ``storage_options`` that reach it. Local folders (a path, ``~/...`` or
``file://``) keep dkernel's rename-based atomic layout and direct file reads; everything
else goes through fsspec (``s3://`` with s3fs, ``gs://`` with gcsfs, ``az://``/``abfs://``
with adlfs, and ``memory://`` for tests) and zarr 3's ``FsspecStore``.

Endpoints and credentials come from ``storage_options`` or, as for every AWS client, from the
``AWS_*`` environment variables and profiles (``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``,
``AWS_PROFILE``...). Every request is bounded: ``dkernel.storage.timeout`` seconds per
connect/read and ``dkernel.storage.retries`` attempts with backoff (Dask config), so a dead
endpoint is an error, never a hang.
"""

from __future__ import annotations

import asyncio
import atexit
import functools
import inspect
import json
import logging
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import dask.config
from dask.utils import parse_timedelta

from .._secrets import MASK, redact, remember, remember_options
from .._validation import DKernelError

logger = logging.getLogger(__name__)

#: URL schemes read through fsspec, with the package that provides each.
REMOTE_PROTOCOLS = {
    "s3": "s3fs",
    "s3a": "s3fs",
    "gs": "gcsfs",
    "gcs": "gcsfs",
    "az": "adlfs",
    "abfs": "adlfs",
    "abfss": "adlfs",
    "memory": "fsspec",
}
#: The URL forms a store or model path may take (for help texts and errors).
URL_FORMS = "a local path, file://, s3://, gs://, az:// or abfs://, memory:// (tests)"


#: The asynchronous clients made in this process (closed by :func:`close_clients`).
_OPENED: list = []


def _freeze(options: Mapping[str, Any] | None) -> tuple:
    items = (options or {}).items()
    return tuple(sorted((str(k), json.dumps(v, sort_keys=True)) for k, v in items))


@dataclass(frozen=True)
class Location:
    """A store (or a key inside one) on a local disk or on object storage.

    Attributes
    ----------
    url : str
        Absolute local path, or ``scheme://bucket/key`` without a trailing slash.
    protocol : str
        ``"file"`` or the URL scheme.
    options : tuple
        The ``storage_options`` as a hashable tuple of (key, JSON value) pairs; never shown
        by ``repr`` or in error messages.
    """

    url: str
    protocol: str
    options: tuple = field(default=(), repr=False)

    @property
    def is_local(self) -> bool:
        return self.protocol == "file"

    def child(self, *names: str) -> Location:
        """The location of ``names`` below this one."""
        if self.is_local:
            return Location(os.path.join(self.url, *names), "file", self.options)
        return Location("/".join([self.url, *names]), self.protocol, self.options)

    @property
    def fs(self):
        """The fsspec filesystem of a remote location (cached per process and options)."""
        return _filesystem(self.protocol, self.options, storage_settings(), client_environment())

    @property
    def path(self) -> str:
        """The location as the filesystem names it (no scheme)."""
        if self.is_local:
            return self.url
        return self.url.split("://", 1)[1]

    def zarr_store(self, *, read_only: bool):
        """A zarr 3 store rooted here."""
        import zarr.storage

        if self.is_local:
            return zarr.storage.LocalStore(self.url, read_only=read_only)
        self.fs  # noqa: B018 - a missing client package is reported by name
        env = client_environment()
        fs = _async_filesystem(self.protocol, self.options, storage_settings(), env)
        return zarr.storage.FsspecStore(fs, path=self.path, read_only=read_only)

    def __str__(self) -> str:
        return self.url


def as_location(store, storage_options: Mapping[str, Any] | None = None) -> Location:
    """The :class:`Location` of ``store``: a path (``~`` expanded, made absolute), a
    ``file://`` URL, a remote URL, or a Location (returned with ``storage_options`` added).
    Without ``storage_options``, those of the Dask config key ``dkernel.storage.options``
    apply (empty by default: the client's environment variables and profiles).
    """
    if isinstance(store, Location):
        if storage_options:
            return Location(store.url, store.protocol, _freeze(storage_options))
        return store
    if storage_options is None:  # the process-wide default (the CLI's --storage-option)
        storage_options = dask.config.get("dkernel.storage.options", None) or None
    remember_options(storage_options)
    if not isinstance(store, (str, os.PathLike)):
        raise DKernelError(f"a store is named by a path or URL ({URL_FORMS}), got {store!r}")
    text = os.fspath(store)
    if isinstance(text, bytes):
        text = text.decode()
    if not text:
        raise DKernelError("a store path or URL must not be empty")
    if "://" not in text:
        return Location(os.path.abspath(os.path.expanduser(text)), "file", _freeze(storage_options))
    scheme, rest = text.split("://", 1)
    scheme = scheme.lower()
    if scheme in ("file", "local"):
        return Location(os.path.abspath(os.path.expanduser(rest)), "file", _freeze(storage_options))
    if scheme not in REMOTE_PROTOCOLS:
        raise DKernelError(f"unsupported store URL {redact(text)!r}: use {URL_FORMS}")
    rest, storage_options = _user_info(scheme, rest.strip("/"), storage_options)
    if not rest or (scheme != "memory" and "/" not in rest):
        raise DKernelError(
            f"store URL {redact(text)!r} names no key: use {scheme}://BUCKET/NAME (a store "
            "is a prefix inside a bucket)"
        )
    return Location(f"{scheme}://{rest}", scheme, _freeze(storage_options))


#: Credentials met in URLs, per (scheme, bucket): the URL that names the same bucket
#: without them (the clean one of a message, the CLI's argument once checked) uses them too.
_URL_CREDENTIALS: dict[tuple[str, str], dict[str, str]] = {}


def _user_info(scheme: str, rest: str, options: Mapping[str, Any] | None):
    """``rest`` without the user info of its URL (``KEY:SECRET@bucket/...``), which becomes
    the ``key``/``secret`` storage options of an ``s3://`` URL (given options win): the
    Location's URL, named in every message, never holds it."""
    netloc, slash, tail = rest.partition("/")
    if "@" not in netloc:
        found = _URL_CREDENTIALS.get((scheme, netloc))
        return rest, ({**found, **(options or {})} if found else options)
    info, _, bucket = netloc.rpartition("@")
    user, _, password = info.partition(":")
    remember(user)
    remember(password)
    if scheme not in ("s3", "s3a"):
        raise DKernelError(
            f"credentials in a {scheme}:// URL are not read: pass them in storage_options "
            f"or the environment ({scheme}://{MASK}@{bucket}{slash}{tail})"
        )
    found = {"key": user, **({"secret": password} if password else {})}
    _URL_CREDENTIALS[(scheme, bucket)] = found
    return bucket + slash + tail, {**found, **(options or {})}


class StorageSettings(NamedTuple):
    """The bounds of every remote request, read from the Dask config when a client is made."""

    timeout: float  #: s per connect and per read of one request
    retries: int  #: attempts per request, with backoff
    deadline: float  #: s for one request in all: its attempts, connects, reads and backoff


_WHERE = (
    "set in a Dask config file (~/.config/dask, DASK_CONFIG), a DASK_DKERNEL__STORAGE__{} "
    "variable or dask.config.set"
)


def _setting(name: str, default: Any, convert, what: str):
    value = dask.config.get(f"dkernel.storage.{name}", default)
    try:
        out = convert(value)
        if out is not None and not out > 0:
            raise ValueError
    except (TypeError, ValueError, KeyError, OverflowError):
        raise DKernelError(
            f"dkernel.storage.{name} must be {what}, got {value!r} ({_WHERE.format(name.upper())})"
        ) from None
    return out


def _seconds(value) -> float:
    out = float(parse_timedelta(value, default="seconds"))
    if not math.isfinite(out):
        raise ValueError
    return out


def _attempts(value) -> int:
    if isinstance(value, bool) or float(value) != int(float(value)):
        raise ValueError
    return int(float(value))


#: Environment variables the storage clients read (endpoints, credentials, profiles).
_CLIENT_ENV = ("AWS_", "GOOGLE_", "GCS_", "AZURE_")


def client_environment() -> tuple:
    """The clients' environment variables now: part of the cache key of a client, so a
    changed endpoint or credential variable gets a new client, as a changed option does."""
    return tuple(sorted((k, v) for k, v in os.environ.items() if k.startswith(_CLIENT_ENV)))


def storage_settings() -> StorageSettings:
    """The current ``dkernel.storage.timeout``/``retries``/``deadline``, checked.

    Read at each use, so a change of the Dask config applies to the next request."""
    return StorageSettings(
        timeout=_setting("timeout", 10, _seconds, "a number of seconds > 0"),
        retries=_setting("retries", 3, _attempts, "a whole number of attempts >= 1"),
        deadline=_setting("deadline", 60, _seconds, "a number of seconds > 0"),
    )


def _request_options(protocol: str, settings: StorageSettings) -> dict[str, Any]:
    """Timeouts and retries from the Dask config, in each client's own words."""
    if protocol in ("s3", "s3a"):
        return {
            # botocore's standard mode retries timeouts, dropped connections, 5xx and
            # throttling with capped exponential backoff; s3fs's own loops (nested, one per
            # call layer) are turned off in _bounded so that the attempts do not multiply
            "config_kwargs": {
                "connect_timeout": settings.timeout,
                "read_timeout": settings.timeout,
                "retries": {"max_attempts": settings.retries, "mode": "standard"},
            },
            # one GET per object: no size probe (HEAD) and no ranged split of large chunks
            "max_concurrency": 1,
        }
    if protocol in ("gs", "gcs"):
        return {"timeout": settings.timeout}
    return {}


def _client_kwargs(protocol: str, options: tuple, settings: StorageSettings) -> dict[str, Any]:
    """The fsspec filesystem's arguments: bounded requests, then the user's options."""
    if protocol == "memory":
        return {}
    return {**_request_options(protocol, settings), **{k: json.loads(v) for k, v in options}}


def _client_class(protocol: str):
    import fsspec

    try:
        return fsspec.get_filesystem_class(protocol)
    except ImportError as exc:
        raise DKernelError(
            f"{protocol}:// stores need {REMOTE_PROTOCOLS[protocol]}: "
            f'pip install "dkernel[cloud]" ({exc})'
        ) from None


@functools.lru_cache(maxsize=16)
def _filesystem(protocol: str, options: tuple, settings: StorageSettings, env: tuple = ()):
    cls = _client_class(protocol)
    # one instance per process, options, bounds and client environment (a change of any
    # makes a new one); skip_instance_cache keeps fsspec from sharing it with differently
    # configured users
    kwargs = _client_kwargs(protocol, options, settings)
    return _bounded(cls(**kwargs, skip_instance_cache=True), settings)


#: The asynchronous methods that make one request (s3fs's ``_call_s3``) or one object's
#: worth of requests; each runs under the request deadline.
_ONE_REQUEST = ("_call_s3", "_cat_file", "_pipe_file", "_info", "_exists", "_ls",
                "_put_file", "_get_file", "_rm_file")  # fmt: skip


def _with_deadline(method, seconds: float):
    async def bounded(*args, **kwargs):
        try:
            return await asyncio.wait_for(method(*args, **kwargs), seconds)
        except TimeoutError:
            raise TimeoutError(
                f"no complete answer within dkernel.storage.deadline ({seconds:g} s)"
            ) from None

    return bounded


def _bounded(fs, settings: StorageSettings):
    """``fs`` with each request under ``settings.deadline`` and one attempt per call of its
    own retry loop (s3fs): the attempts and their backoff are the client library's (see
    :func:`_request_options`), the deadline bounds them all, with every connect and read
    (a drip-feeding endpoint passes each read's timeout, never the deadline)."""
    from fsspec.asyn import sync_wrapper

    if hasattr(type(fs), "retries"):
        fs.retries = 1
    if not getattr(fs, "async_impl", False):
        return fs
    for name in _ONE_REQUEST:
        method = getattr(fs, name, None)
        if method is None or not inspect.iscoroutinefunction(method):
            continue
        setattr(fs, name, _with_deadline(method, settings.deadline))
        if not fs.asynchronous and name[1:] in vars(fs):  # the sync facade fsspec mirrored
            setattr(fs, name[1:], sync_wrapper(getattr(fs, name), obj=fs))
    return fs


@functools.lru_cache(maxsize=16)
def _async_filesystem(protocol: str, options: tuple, settings: StorageSettings, env: tuple = ()):
    """The asynchronous client of zarr, which drives its own event loop (one per process)."""
    cls = _client_class(protocol)
    if not cls.async_impl:
        from fsspec.implementations.asyn_wrapper import AsyncFileSystemWrapper

        fs = _filesystem(protocol, options, settings, env)
        return AsyncFileSystemWrapper(fs, asynchronous=True)
    kwargs = {"asynchronous": True, **_client_kwargs(protocol, options, settings)}
    fs = _bounded(cls(**kwargs, skip_instance_cache=True), settings)
    if not _OPENED:
        atexit.register(close_clients)  # after zarr's own hook, so it runs before it
    _OPENED.append(fs)
    return fs


def close_clients() -> None:
    """Close the sessions of the asynchronous clients this process made (a worker's or the
    client's at exit): left to the garbage collector, each prints asyncio's "Unclosed client
    session" lines on stderr."""
    if not _OPENED:
        return
    from zarr.core.sync import sync

    _async_filesystem.cache_clear()
    while _OPENED:
        fs = _OPENED.pop()
        creator = getattr(fs, "_s3creator", None)
        close = getattr(creator, "__aexit__", None)
        if close is None:
            continue
        try:
            sync(close(None, None, None), timeout=2)
        except Exception as exc:  # at exit: nothing left to tell but the log
            logger.debug("could not close a storage client (%s)", type(exc).__name__)


def bucket_exists(fs, bucket: str) -> bool:
    """True when ``bucket`` answers (a HEAD); False when the service says it is not there.
    Any other failure (a dead endpoint, refused credentials) raises, to be named as such:
    fsspec's ``exists`` would answer False for those too."""
    try:
        fs.info(bucket)
    except FileNotFoundError:
        return False
    return True


def describe_error(exc: BaseException) -> str:
    """A one-line, secret-free description of a storage client's exception.

    The kind of failure is read from the exception's type first (timeouts and refused
    connections carry the endpoint URL, whose port may hold any digits), then from the
    service's error words.
    """
    if isinstance(exc, DKernelError):
        return redact(exc)
    msg = str(exc).splitlines()[0] if str(exc) else ""
    low = msg.lower()
    kind = type(exc).__name__.lower()
    if isinstance(exc, TimeoutError) or "timeout" in kind:
        return "the storage endpoint did not answer in time"
    if "connectionerror" in kind or "could not connect" in low or "connection refused" in low:
        return "cannot connect to the storage endpoint"
    words = low.replace(" ", "")
    denied = ("signature", "accessdenied", "forbidden", "invalidaccesskey")
    if isinstance(exc, PermissionError) or any(k in words for k in denied):
        return "access denied (check the credentials and the endpoint)"
    if "nosuchbucket" in words or "bucket does not exist" in low:
        return "no such bucket"
    if "timed out" in low or "timeout" in low:
        return "the storage endpoint did not answer in time"
    if any(k in low for k in ("service unavailable", "internal error", "slow down")):
        return f"the storage endpoint failed ({msg[:120]})"
    return redact(f"{type(exc).__name__}: {msg}")[:300]
