"""Cluster failures as named dkernel errors, for the API and the CLI alike."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any, TypeVar

from .._validation import DKernelError

F = TypeVar("F", bound=Callable[..., Any])


class NoWorkersError(DKernelError):
    """Work found no running Dask worker for ``dkernel.cluster.no-workers-timeout`` seconds.

    distributed's ``NoWorkerError`` with the way out named; ``timeout`` and ``task`` as
    it has them.
    """

    def __init__(self, timeout: float, task: Any = None) -> None:
        super().__init__(
            f"no Dask worker ran for {timeout:g} s: the cluster has none, lost its last, or "
            "all are paused (memory); start workers, or raise "
            "dkernel.cluster.no-workers-timeout"
        )
        self.timeout = timeout
        self.task = task


def as_no_workers(exc: BaseException) -> NoWorkersError | None:
    """``exc`` as a :class:`NoWorkersError` when it is distributed's ``NoWorkerError``
    (never imports distributed: without it loaded, no such error exists)."""
    mod = sys.modules.get("distributed.scheduler")
    if mod is None or not isinstance(exc, mod.NoWorkerError):
        return None
    return NoWorkersError(exc.timeout, exc.task)


def named_worker_errors(func: F) -> F:
    """Decorate an estimator method that computes on the cluster: a ``NoWorkerError`` from
    inside becomes a :class:`NoWorkersError` (a ``DKernelError``)."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except Exception as exc:
            named = as_no_workers(exc)
            if named is None:
                raise
            raise named from None

    return wrapper  # type: ignore[return-value]
