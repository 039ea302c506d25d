"""Phase accounting: what each phase of a fit, predict or coreset costs, and where.

``with accounting(client) as acc:`` around a call, ``with phase("rounds", width=k):``
around each of its phases (anywhere below it: the accounting is found through a context
variable, so the functions doing the work need no extra argument). Per phase:

- ``wall``: seconds of wall time; ``client_cpu``: CPU seconds of the client's process
  (``time.process_time``: its threads, not the workers' processes);
- ``worker_seconds``: the summed compute time of the tasks that started on the workers
  during the phase (the scheduler's task stream, read once when the accounting ends);
- ``round_trips``: blocking calls to the scheduler (every ``Client.sync``: a future's
  ``result``, a gather, a scatter, a ``dask.compute``), and ``bytes_to_client`` /
  ``bytes_from_client``: the size of what those calls returned and of every message the
  client sent (a submitted graph, a scattered value);
- ``width``: the most tasks the phase can run at once (its shards, parts or chunks), when
  the caller knows it.

From these :func:`amdahl` splits each phase into a serial part (what its wall time holds
beyond its worker time spread over the workers it could use) and a parallel part (its
worker time), and predicts the wall time on other worker counts. A phase nested in another
pauses it: every second is counted in one phase only.

Only the client's own calls are counted (the instance's ``sync`` and ``_send_to_scheduler``
are wrapped while the accounting is active, then restored): nothing changes on the
workers or the scheduler.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import math
import time
from collections.abc import Iterator
from typing import Any

from dask.sizeof import sizeof

logger = logging.getLogger(__name__)

_CURRENT: contextvars.ContextVar[Accounting | None] = contextvars.ContextVar(
    "dkernel_accounting", default=None
)

#: The counters of a phase, in report order.
FIELDS = (
    "wall",
    "client_cpu",
    "worker_seconds",
    "round_trips",
    "bytes_to_client",
    "bytes_from_client",
    "tasks",
    "width",
)


def _message_bytes(msg: Any) -> int:
    """The size of a message the client sends, without serialising it a second time: a
    graph (``update-graph``) arrives already serialised, and its frames are what the comm
    writes; any other message is small and counted by ``sizeof``."""
    expr = msg.get("expr_ser") if isinstance(msg, dict) else None
    frames = getattr(expr, "frames", None)
    if expr is not None and frames is not None:
        rest = {k: v for k, v in msg.items() if k != "expr_ser"}
        framed = sum(memoryview(f).nbytes for f in frames)
        return framed + int(sizeof(expr.header)) + int(sizeof(rest))
    return int(sizeof(msg))


class Accounting:
    """The phases of one call (see the module docstring)."""

    def __init__(self, client: Any = None) -> None:
        self.client = client
        self.phases: dict[str, dict[str, Any]] = {}
        self._stack: list[str] = []
        self._windows: list[tuple[str, float, float]] = []  # (phase, start, stop), epoch s
        self._mark: tuple[float, float, float] | None = None  # perf, cpu, epoch at resume
        self._stream: Any = None
        self._restore: list[tuple[str, Any]] = []

    # -------------------------------------------------------------- recording
    def _row(self, name: str) -> dict[str, Any]:
        if name not in self.phases:
            self.phases[name] = dict.fromkeys(FIELDS, 0)
            self.phases[name]["width"] = None
            self.phases[name]["worker_seconds"] = None if self.client is None else 0.0
        return self.phases[name]

    def _close_span(self) -> None:
        """Charge the time since the last mark to the phase on top of the stack."""
        if not self._stack or self._mark is None:
            return
        perf, cpu, epoch = self._mark
        row = self.phases[self._stack[-1]]
        row["wall"] += time.perf_counter() - perf
        row["client_cpu"] += time.process_time() - cpu
        self._windows.append((self._stack[-1], epoch, time.time()))
        self._mark = None

    def _open_span(self) -> None:
        if self._stack:
            self._mark = (time.perf_counter(), time.process_time(), time.time())

    @contextlib.contextmanager
    def phase(self, name: str, *, width: int | None = None) -> Iterator[dict[str, Any]]:
        row = self._row(name)
        if width is not None:
            row["width"] = max(int(width), row["width"] or 0)
        self._close_span()
        self._stack.append(name)
        self._open_span()
        try:
            yield row
        finally:
            self._close_span()
            self._stack.pop()
            self._open_span()

    def _count(self, *, trips: int = 0, to_client: int = 0, from_client: int = 0) -> None:
        if not self._stack:
            return
        row = self.phases[self._stack[-1]]
        row["round_trips"] += trips
        row["bytes_to_client"] += to_client
        row["bytes_from_client"] += from_client

    # ---------------------------------------------------------- client hooks
    def _hook(self) -> None:
        client = self.client
        if client is None:
            return
        sync, send = client.sync, client._send_to_scheduler

        def counted_sync(func, *args, asynchronous=None, **kwargs):
            result = sync(func, *args, asynchronous=asynchronous, **kwargs)
            if not (asynchronous if asynchronous is not None else client.asynchronous):
                self._count(trips=1, to_client=int(sizeof(result)))
            return result

        def counted_send(msg):
            self._count(from_client=_message_bytes(msg))
            return send(msg)

        for attr, value in (("sync", counted_sync), ("_send_to_scheduler", counted_send)):
            self._restore.append((attr, client.__dict__.get(attr)))
            setattr(client, attr, value)

    def _unhook(self) -> None:
        for attr, old in reversed(self._restore):
            if old is None:
                self.client.__dict__.pop(attr, None)
            else:
                setattr(self.client, attr, old)
        self._restore.clear()

    def start(self) -> None:
        if self.client is not None:
            from distributed import get_task_stream

            self._stream = get_task_stream(client=self.client)
            self._stream.__enter__()
            self._hook()

    def finish(self) -> None:
        """Unhook the client and charge the workers' task time to the phases."""
        if self.client is None:
            return
        self._unhook()
        stream, self._stream = self._stream, None
        if stream is None:  # start() failed before the stream was opened
            return
        stream.__exit__(None, None, None)
        for task in stream.data:
            spans = [s for s in task.get("startstops", ()) if s.get("action") == "compute"]
            if not spans:
                continue
            begin = min(s["start"] for s in spans)
            name = self._phase_at(begin)
            if name is not None:
                row = self.phases[name]
                row["worker_seconds"] += sum(s["stop"] - s["start"] for s in spans)
                row["tasks"] += 1

    def _phase_at(self, t: float) -> str | None:
        """The phase whose window holds ``t`` (else the last one that started before it)."""
        best = None
        for name, a, b in self._windows:
            if a <= t <= b:
                return name
            if a <= t:
                best = name
        return best

    def report(self) -> dict[str, dict[str, Any]]:
        """``{phase: {counter: value}}`` in the order the phases first ran."""
        return {name: dict(row) for name, row in self.phases.items()}


@contextlib.contextmanager
def accounting(client: Any = None) -> Iterator[Accounting]:
    """Account the phases of the calls inside (see the module docstring); nested
    accountings leave the outer one alone (the inner call's phases are its own)."""
    if client is not None and getattr(client, "status", "running") != "running":
        client = None  # a closed client: the call fails on its own, uncounted
    acc = Accounting(client)
    token = _CURRENT.set(acc)
    try:
        acc.start()
        yield acc
    finally:
        _CURRENT.reset(token)
        acc.finish()


@contextlib.contextmanager
def phase(name: str, *, width: int | None = None) -> Iterator[dict[str, Any] | None]:
    """Count the block as phase ``name`` of the current accounting (a no-op without one);
    its start is logged (DEBUG) either way."""
    logger.debug("phase %s begins", name)
    acc = _CURRENT.get()
    if acc is None:
        yield None
        return
    with acc.phase(name, width=width) as row:
        yield row


def spread(P: float, width: int | None, workers: int) -> float:
    """The wall time of ``P`` worker seconds on ``workers`` workers when the work comes in
    ``width`` granules of equal size (shards, parts or chunks): the busiest worker runs
    ``ceil(width / workers)`` of them, so 76 shards on 14 workers take 6 / 76 of ``P``,
    not 1 / 14. ``width`` None: work that divides evenly, ``P / workers``."""
    workers = max(1, int(workers))
    if not width:
        return P / workers
    return P * math.ceil(int(width) / workers) / int(width)


def amdahl(phases: dict[str, dict[str, Any]], workers: int, at: list[int]) -> dict[str, Any]:
    """Split each phase measured on ``workers`` workers into serial and parallel seconds and
    predict the wall time on each worker count of ``at``.

    A phase's parallel part is its summed worker time ``P``, in ``width`` granules of equal
    size spread over the workers in waves (:func:`spread`); its serial part ``S`` is what
    its wall time holds beyond that on the measured run (client computing, round trips, a
    critical path). Predicted: ``S + spread(P, width, w)``. Phases measured without a
    client (no worker time) are all serial.
    """
    out: dict[str, Any] = {"phases": {}, "predicted_wall": {}}
    totals = dict.fromkeys(at, 0.0)
    for name, row in phases.items():
        P = float(row.get("worker_seconds") or 0.0)
        width = row.get("width") or None
        S = max(0.0, float(row["wall"]) - spread(P, width, workers))
        pred = {w: S + spread(P, width, w) for w in at}
        for w in at:
            totals[w] += pred[w]
        out["phases"][name] = {
            "serial_seconds": S,
            "parallel_seconds": P,
            "serial_fraction": S / (S + P) if S + P > 0 else 0.0,
            "width": width,
            "predicted_wall": pred,
        }
    out["predicted_wall"] = totals
    return out
