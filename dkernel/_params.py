"""Declarative parameter tables.

An estimator lists the rules of its scalar parameters once, as a class-level mapping from
the parameter's name to the keyword arguments of :func:`dkernel._validation.check_scalar`,
or to :func:`options` for a parameter that takes one of a few values (scikit-learn's
``_parameter_constraints`` in spirit). :func:`check_table` checks every entry; estimators
call it from their public ``check_params``, before any data is read, so a bad parameter is
named before a store is opened or a cluster starts.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from typing import Any

import numpy as np

from ._validation import DKernelError, check_scalar

#: Shorthands for the common rules.
POSITIVE_INT: Mapping[str, Any] = {"kind": numbers.Integral, "low": 1}
POSITIVE_INT_OR_NONE: Mapping[str, Any] = {**POSITIVE_INT, "allow_none": True}
NON_NEGATIVE_INT: Mapping[str, Any] = {"kind": numbers.Integral, "low": 0}
NON_NEGATIVE: Mapping[str, Any] = {"low": 0.0}


def options(*choices: Any) -> Mapping[str, Any]:
    """The rule of a parameter that takes one of ``choices`` (bools and strings; ``True``
    matches a bool only, never 1)."""
    return {"options": choices}


def check_option(value: Any, name: str, choices: tuple) -> Any:
    """``value`` if it is one of ``choices`` (of the same type), else a ``DKernelError``
    naming the parameter."""
    for choice in choices:
        if isinstance(choice, bool):
            if isinstance(value, (bool, np.bool_)) and bool(value) is choice:
                return value
        elif type(value) is type(choice) and value == choice:
            return value
    shown = ", ".join(repr(c) for c in choices)
    raise DKernelError(f"{name} must be one of {shown}; got {value!r}")


def check_table(est, table: Mapping[str, Mapping[str, Any]]) -> None:
    """Check each parameter of ``est`` named in ``table`` against its rule."""
    for name, rule in table.items():
        if "options" in rule:
            check_option(getattr(est, name), name, rule["options"])
        else:
            check_scalar(getattr(est, name), name, **rule)
