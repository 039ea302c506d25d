"""Declarative parameter tables.

An estimator lists the rules of its scalar parameters once, as a class-level mapping from
the parameter's name to the keyword arguments of :func:`dkernel._validation.check_scalar`
(scikit-learn's ``_parameter_constraints`` in spirit). :func:`check_table` checks every
entry; estimators call it from their public ``check_params``, before any data is read,
so a bad parameter is named before a store is opened or a cluster starts.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from typing import Any

from ._validation import check_scalar

#: Shorthands for the common rules.
POSITIVE_INT: Mapping[str, Any] = {"kind": numbers.Integral, "low": 1}
POSITIVE_INT_OR_NONE: Mapping[str, Any] = {**POSITIVE_INT, "allow_none": True}
NON_NEGATIVE_INT: Mapping[str, Any] = {"kind": numbers.Integral, "low": 0}
NON_NEGATIVE: Mapping[str, Any] = {"low": 0.0}


def check_table(est, table: Mapping[str, Mapping[str, Any]]) -> None:
    """Check each parameter of ``est`` named in ``table`` against its rule."""
    for name, rule in table.items():
        check_scalar(getattr(est, name), name, **rule)
