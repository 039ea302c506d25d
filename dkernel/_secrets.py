"""One redaction rule for everything dkernel prints, logs, raises or writes.

A secret is (1) the value of a storage option whose key looks like a credential (``secret``,
``key``, ``token``, ``password``, ``sas``... at any depth of ``storage_options``), (2) the
user info of a URL (``s3://KEY:SECRET@bucket/...``), (3) the text of a ``--storage-option``
that does not parse (it may be a secret given without its key) and (4) the value of a
credential variable of the environment (``AWS_SECRET_ACCESS_KEY``...). The values met are
remembered in this process, and :func:`redact` masks each of them, any user info of a URL
and any ``credential-key=value`` pair, in a text about to be shown.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping
from typing import Any

#: Words that make an option key (or an environment variable) a credential's.
SECRET_WORDS = ("secret", "key", "token", "password", "passwd", "credential", "sas", "auth",
                "signature")  # fmt: skip
MASK = "***"
#: A secret shorter than this is not searched for in texts (it would mask ordinary words).
_MIN_LEN = 4
_KNOWN: set[str] = set()
_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)[^/@\s'\"]*@")
_PAIR = re.compile(
    r"(?P<key>[A-Za-z_.]*(?:" + "|".join(SECRET_WORDS) + r")[A-Za-z_]*)"
    r"(?P<sep>=['\"]?)(?P<value>[^\s,;'\"}&)]+)",
    re.IGNORECASE,
)
_ENV = re.compile(r"(SECRET|TOKEN|PASSWORD|ACCESS_KEY|ACCOUNT_KEY|SAS|CREDENTIAL)", re.I)


def is_secret_key(key: str) -> bool:
    """True when an option named ``key`` holds a credential."""
    low = str(key).lower()
    return any(w in low for w in SECRET_WORDS)


def remember(value: Any) -> None:
    """Remember ``value`` (a string, a number, or a nest of them) as a secret."""
    if isinstance(value, Mapping):
        for v in value.values():
            remember(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            remember(v)
    elif value is not None and not isinstance(value, bool):
        text = str(value)
        if len(text) >= _MIN_LEN:
            _KNOWN.add(text)


def remember_options(options: Mapping[str, Any] | None) -> None:
    """Remember the credentials among ``storage_options`` (nested ones too)."""
    for key, value in (options or {}).items():
        if is_secret_key(key):
            remember(value)
        elif isinstance(value, Mapping):
            remember_options(value)


def _environment() -> list[str]:
    return [v for k, v in os.environ.items() if _ENV.search(k) and len(v) >= _MIN_LEN]


def redact(text: Any) -> str:
    """``text`` with every secret masked (see the module's rule)."""
    out = str(text)
    for secret in sorted(_KNOWN | set(_environment()), key=len, reverse=True):
        if secret in out:
            out = out.replace(secret, MASK)
    out = _USERINFO.sub(lambda m: m["scheme"] + MASK + "@", out)
    return _PAIR.sub(_mask_pair, out)


def _mask_pair(m: re.Match) -> str:
    if m["value"] in ("VALUE", "...", MASK):  # a placeholder of a help text
        return m[0]
    return m["key"] + m["sep"] + MASK


class RedactingFilter(logging.Filter):
    """A log filter that applies :func:`redact` to each record's message."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a malformed record: leave it to the handler's own error path
            return True
        clean = redact(message)
        if clean != message:
            record.msg, record.args = clean, ()
        return True
