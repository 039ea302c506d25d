"""The parameters of :class:`~dkernel.svm.BudgetedSVC`, declared and checked before any data
is read (``check_params``), and the memory its model state needs."""

from __future__ import annotations

import numbers
import os

import numpy as np

from .._params import NON_NEGATIVE, POSITIVE_INT, POSITIVE_INT_OR_NONE, check_table, options
from .._validation import DKernelError, check_scalar
from ..kernels import KERNEL_CODES, KERNELS
from . import _budget as nb
from . import _refit


def _is_bool(v) -> bool:
    return isinstance(v, (bool, np.bool_))


def _is_auto(v) -> bool:
    return isinstance(v, str) and v == "auto"


#: Numeric and option parameters (:func:`dkernel._params.check_table`).
PARAMETER_TABLE = {
    "budget": {"kind": numbers.Integral, "low": 2},
    "alpha": {**NON_NEGATIVE, "allow_none": True},
    "eta0": {"low": 0.0, "low_inclusive": False},
    "radius": {"low": 0.0, "low_inclusive": False, "allow_none": True},
    "max_iter": POSITIVE_INT,
    "n_shards": POSITIVE_INT_OR_NONE,
    "n_rounds": POSITIVE_INT,
    "split_every": {"kind": numbers.Integral, "low": 2},
    "checkpoint_every": POSITIVE_INT,
    "refit": options(True, False, *_refit.OBJECTIVES),
}
CHOICES = {
    "maintenance": tuple(nb.MAINTENANCE_CODES),
    "algorithm": tuple(nb.ALGORITHM_CODES),
}
FLAGS = ("fit_intercept", "standardize", "shuffle", "probability")
#: Parameters that take an int of at least ``low``, or the other form named.
INT_OR = {
    "average": (_is_bool, 1),
    "verbose": (_is_bool, 0),
    "refit_rows": (_is_auto, 1),
}


def check_params(est) -> None:
    """Check the parameters of ``est`` (see ``BudgetedSVC.check_params``)."""
    for name, choices in CHOICES.items():
        v = getattr(est, name)
        if not isinstance(v, str) or v not in choices:
            raise DKernelError(f"{name} must be one of {', '.join(choices)}; got {v!r}")
    check_table(est, PARAMETER_TABLE)
    if est.algorithm == "pegasos" and est.alpha is not None and est.alpha <= 0:
        raise DKernelError("alpha must be > 0 for algorithm='pegasos' (its rate is 1/(alpha t))")
    for name in FLAGS:
        if not isinstance(getattr(est, name), (bool, np.bool_)):
            raise DKernelError(f"{name} must be True or False; got {getattr(est, name)!r}")
    for name, (other_form, low) in INT_OR.items():
        if not other_form(getattr(est, name)):
            check_scalar(getattr(est, name), name, kind=numbers.Integral, low=low)
    if est.distributed not in ("auto", True, False):
        raise DKernelError(f"distributed must be 'auto', True or False; got {est.distributed!r}")
    if est.checkpoint is not None and not isinstance(est.checkpoint, (str, os.PathLike)):
        raise DKernelError(
            f"checkpoint must be a path or None; got {type(est.checkpoint).__name__}"
        )
    if callable(est.kernel) or est.kernel == "precomputed":
        raise DKernelError(
            f"BudgetedSVC needs a named kernel ({', '.join(KERNEL_CODES)}); callables "
            "and 'precomputed' are not supported"
        )
    spec = est._kernel_spec(None)  # unknown names raise here
    if est.maintenance == "merge" and KERNELS[str(spec.kernel)].merge_power is None:
        mergeable = " or ".join(k.name for k in KERNELS.values() if k.merge_power)
        raise DKernelError(
            f"maintenance='merge' cannot merge support vectors of kernel {spec.kernel!r}: "
            f"the merge needs k(x, z) = exp(-gamma ||x - z||^p) ({mergeable}); with "
            f"kernel {spec.kernel!r} use maintenance='remove' or 'project'"
        )


def check_state_memory(budget: int, maintenance: str, d: int, n_cols: int) -> None:
    """Refuse a budget whose model state (the (B+1)^2 kernel matrix of the support
    vectors, and its inverse for projection) does not fit this machine's free memory,
    before anything is read."""
    import psutil

    B1 = int(budget) + 1
    square = 2 if maintenance == "project" else 1
    need = 8 * B1 * (square * B1 + d + 3 * n_cols + 3)
    free = psutil.virtual_memory().available
    if need > free:
        what = " and its inverse" if square == 2 else ""
        raise DKernelError(
            f"budget={budget} needs {need / 2**30:,.1f} GiB for the model state "
            f"(the {B1:,} x {B1:,} kernel matrix of the support vectors{what}), more "
            f"than the {free / 2**30:,.1f} GiB free here: choose a smaller budget "
            "(hundreds to a few thousand support vectors)"
        )
