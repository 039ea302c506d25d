"""Progress bars for people: one small API the estimators, ingest and the CLI share.

A bar is tqdm's: a widget in Jupyter (when ``ipywidgets`` is installed), text on stderr in a
terminal or a batch job's log. It needs no logging set up. Library calls show nothing unless
asked (``verbose``/``enabled=True``, or ``dkernel.progress: true`` in the Dask config, which
is what the CLI's ``--progress`` sets)::

    from dkernel.runtime import progress, progress_enabled

    with progress(max_iter, "kernel k-means", enabled=progress_enabled(self.verbose)) as bar:
        for it in range(max_iter):
            with bar.compiling("minibatch-kernels"):  # a note while numba compiles, once
                step()
            bar.update(1, objective=obj)

>>> with progress(3, "demo", enabled=False) as bar:
...     bar.update(3, loss=0.5)
>>> bar.n
3
"""

from __future__ import annotations

import contextlib
import importlib.util
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from typing import IO, Any

import dask.config
from tqdm.std import tqdm as _std_tqdm

# the packaged defaults are loaded before anything overrides ``dkernel.*`` (a ``dask.config.set``
# of a key whose parent does not exist yet would drop the defaults loaded inside its block)
from . import _config  # noqa: F401

#: Work that already showed its "compiling" note in this process.
_COMPILED: set[str] = set()
_COMPILED_LOCK = threading.Lock()

COMPILE_NOTE = "compiling numba kernels (first use in this process, can take ~20 s)"


def progress_enabled(verbose: Any = 0) -> bool:
    """Whether to show a bar: ``verbose`` > 0, or ``dkernel.progress`` in the Dask config."""
    if verbose is True or (verbose and not isinstance(verbose, bool) and int(verbose) > 0):
        return True
    return bool(dask.config.get("dkernel.progress", False))


def show_progress(enabled: bool = True):
    """Turn bars on (or off) for the calls in a ``with`` block: ``dkernel.progress``.

    >>> with show_progress():
    ...     progress_enabled()
    True
    """
    return dask.config.set({"dkernel.progress": bool(enabled)})


def in_notebook() -> bool:
    """True inside a Jupyter kernel (not a terminal IPython, not plain Python)."""
    ipython_mod = sys.modules.get("IPython")
    if ipython_mod is None:
        return False
    try:
        shell = ipython_mod.get_ipython()
    except Exception:  # pragma: no cover - an IPython without get_ipython
        return False
    return shell is not None and "IPKernelApp" in getattr(shell, "config", {})


def bar_class() -> type:
    """The tqdm class a bar shown now would be: tqdm's notebook bar inside Jupyter when
    ipywidgets is there, else the text bar.

    What ``tqdm.auto`` picks, decided at each call rather than at import, and without its
    warning when ipywidgets is missing (the text bar renders fine in a notebook's stderr).
    """
    if in_notebook() and importlib.util.find_spec("ipywidgets") is not None:
        from tqdm.notebook import tqdm as notebook_tqdm

        return notebook_tqdm
    return _std_tqdm


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


class Progress:
    """A running bar; the no-op twin when disabled keeps the same counters.

    Attributes
    ----------
    n : int
        Units done so far.
    total : int or None
        Units expected (``None``: unknown, the bar counts up).
    postfix : dict
        The last values passed to :meth:`update` (objective, accuracy, ...).
    """

    def __init__(
        self,
        total: int | None,
        desc: str,
        *,
        enabled: bool,
        unit: str = "it",
        file: IO[str] | None = None,
        leave: bool = True,
        unit_scale: bool = False,
    ) -> None:
        self.total = None if total is None else int(total)
        self.desc = desc
        self.n = 0
        self.postfix: dict[str, Any] = {}
        self.enabled = bool(enabled)
        self.notes: list[str] = []
        self._bar: Any = None
        if self.enabled:
            cls = bar_class()
            kwargs: dict[str, Any] = dict(
                total=self.total,
                desc=desc,
                unit=unit,
                leave=leave,
                unit_scale=unit_scale,
                dynamic_ncols=True,
                mininterval=0.5,
            )
            if cls is _std_tqdm:
                kwargs["file"] = file if file is not None else sys.stderr
                kwargs["ascii"] = None
            self._bar = cls(**kwargs)

    def update(self, n: int = 1, **postfix: Any) -> None:
        """Advance by ``n`` units; keyword values are shown after the bar (``loss=0.31``)."""
        self.n += int(n)
        if postfix:
            self.postfix.update(postfix)
        if self._bar is not None:
            if postfix:
                self._bar.set_postfix_str(
                    ", ".join(f"{k}={_fmt(v)}" for k, v in self.postfix.items()), refresh=False
                )
            self._bar.update(int(n))

    def note(self, message: str) -> None:
        """A one-line message above the bar (the bar stays intact)."""
        self.notes.append(message)
        if self._bar is None:
            return
        if self._bar.__class__ is _std_tqdm:
            self._bar.write(f"dkernel: {message}", file=self._bar.fp)
        else:  # the notebook bar: show it in the bar's description
            self._bar.set_description_str(f"{self.desc} ({message})")

    def stop_early(self, reason: str) -> None:
        """The work ended before ``total`` units (an early stop): the bar ends full at the
        units done, with a note saying why."""
        self.note(f"stopped after {self.n} of {self.total}: {reason}")
        self.total = self.n
        if self._bar is not None:
            self._bar.total = self.n
            self._bar.refresh()

    @contextlib.contextmanager
    def compiling(self, key: str) -> Iterator[None]:
        """Wrap the first call of numba-compiled work ``key``; shows a note only then."""
        with compile_note(key, enabled=self.enabled, bar=self):
            yield

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None


@contextlib.contextmanager
def progress(
    total: int | None,
    desc: str,
    *,
    enabled: bool | None = None,
    unit: str = "it",
    file: IO[str] | None = None,
    leave: bool = True,
    unit_scale: bool = False,
) -> Iterator[Progress]:
    """A progress bar for ``total`` units of work, closed when the block ends.

    Parameters
    ----------
    total : int or None
        Units expected (iterations, rows, bytes); ``None`` when not known.
    desc : str
        Label before the bar, e.g. ``"BudgetedSVC epoch 1"``.
    enabled : bool, optional
        Show it; ``None`` follows ``dkernel.progress`` in the Dask config (off by default:
        library calls print nothing unless asked). Use :func:`progress_enabled` to combine
        an estimator's ``verbose`` with that setting.
    unit : str, default="it"
        Name of one unit (``"rows"``, ``"B"``).
    file : text stream, optional
        Where the text bar goes (default: ``sys.stderr`` at the time of the call).
    leave : bool, default=True
        Keep the finished bar on screen.
    unit_scale : bool, default=False
        Show large counts as 1.2M (rows, bytes).

    Yields
    ------
    Progress
        Call ``update(n, **values)``; ``note(text)``; ``compiling(key)``.
    """
    bar = Progress(
        total,
        desc,
        enabled=progress_enabled() if enabled is None else bool(enabled),
        unit=unit,
        file=file,
        leave=leave,
        unit_scale=unit_scale,
    )
    try:
        yield bar
    finally:
        bar.close()


@contextlib.contextmanager
def compile_note(
    key: str,
    *,
    enabled: bool | None = None,
    bar: Progress | None = None,
    file: IO[str] | None = None,
) -> Iterator[bool]:
    """Say "compiling numba kernels" around the first use of ``key`` in this process.

    The note goes on ``bar`` when given, else one line on ``file`` (default stderr);
    when the block ends a second line tells how long it took. Later uses of the same
    ``key`` (and every use when disabled) show nothing. Yields whether this was the first
    use.
    """
    with _COMPILED_LOCK:
        first = key not in _COMPILED
        _COMPILED.add(key)
    show = first and (progress_enabled() if enabled is None else bool(enabled))
    if not show:
        yield first
        return
    out = file if file is not None else sys.stderr
    message = f"{COMPILE_NOTE}: {key}"
    if bar is not None:
        bar.note(message + " ...")
    else:
        print(f"dkernel: {message} ...", file=out, flush=True)
    t0 = time.perf_counter()
    try:
        yield first
    finally:
        done = f"compiled {key} in {time.perf_counter() - t0:.1f} s"
        if bar is not None:
            bar.note(done)
            if bar._bar is not None:
                # the bar's rate and time left count the work, not the compilation
                if hasattr(bar._bar, "unpause"):
                    bar._bar.unpause()
                if bar._bar.__class__ is not _std_tqdm:
                    bar._bar.set_description_str(bar.desc)
        else:
            print(f"dkernel: {done}", file=out, flush=True)


def compute_blocks(array: Any, desc: str, *, verbose: Any = 0) -> Any:
    """``array.compute()``, with a bar of the rows done when :func:`progress_enabled`.

    For a lazy pass over the rows (one chunk along the columns): the k-means labels pass,
    a prediction. Under a distributed client the blocks are futures counted as they
    finish; under a local scheduler a callback counts them. Anything that is not such a
    dask array is returned as it is (computed, when it is a dask array).
    """
    from dask.array import Array

    if not isinstance(array, Array):
        return array
    if any(n != 1 for n in array.numblocks[1:]):
        return array.compute()
    import numpy as np

    blocks = list(array.to_delayed().ravel())
    if not progress_enabled(verbose):
        # the blocks come here one by one and are joined here: ``array.compute()`` would
        # first join them in one more task on a worker (Dask's ``finalize``), then send it
        return np.concatenate(dask.compute(*blocks), axis=0)
    rows = dict(zip((b.key for b in blocks), array.chunks[0]))
    with _rows_bar(rows, desc) as bar:
        client = distributed_client()
        if client is not None:
            from distributed import as_completed

            futures = client.compute(blocks)
            for done in as_completed(futures):
                bar.update(rows[done.key])
            parts = client.gather(futures)
        else:
            from dask.callbacks import Callback

            class _Count(Callback):
                def _posttask(self, key, result, dsk, state, worker_id):
                    if key in rows:
                        bar.update(rows[key])

            with _Count():
                parts = dask.compute(*blocks)
    return np.concatenate(parts, axis=0)


def watch(futures: list, desc: str, rows: list[int], *, verbose: Any = 0) -> None:
    """Wait for ``futures`` (of ``rows`` rows each) with a bar of the rows done, when
    :func:`progress_enabled` (nothing is waited for otherwise: the caller's next gather
    waits)."""
    if not futures or not progress_enabled(verbose):
        return
    from distributed import as_completed

    sizes = {f.key: r for f, r in zip(futures, rows)}
    with _rows_bar(sizes, desc) as bar:
        for done in as_completed(futures):
            bar.update(sizes[done.key])


def _rows_bar(sizes: dict, desc: str):
    """A bar of the rows of a pass (``sizes``: rows per block), however its blocks are
    grouped into tasks."""
    return progress(int(sum(sizes.values())), desc, enabled=True, unit="rows", unit_scale=True)


def distributed_client(holding: Sequence[Any] = ()) -> Any:
    """The distributed client Dask would compute on now, if any: the one place dkernel
    finds the client it computes on (``get_client`` only reuses a running one).

    With ``holding`` (distributed futures, e.g. a persisted array's), the client that holds
    them: work submitted next to them must go to their cluster, whatever the default is.
    """
    if holding:
        return holding[0].client
    from dask.base import get_scheduler

    scheduler = get_scheduler()
    owner = getattr(scheduler, "__self__", None)
    if owner is not None and type(owner).__name__ == "Client":
        return owner
    return None


def worker_addresses(client: Any) -> list[str]:
    """The sorted addresses of ``client``'s workers, asked of the scheduler now.

    Not ``client.scheduler_info()["workers"]``: that returns the client's cached identity
    after refreshing it, and the client's periodic refresh (which carries no per-worker
    entries) can overwrite the cache in between, so it may list no workers at all."""
    return sorted(client.nthreads())


def forget_compiled() -> None:
    """Tests: show the compile notes again."""
    with _COMPILED_LOCK:
        _COMPILED.clear()
