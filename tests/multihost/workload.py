"""What the client host runs in ``make test-cluster`` (and the one-host reference run).

    python workload.py plumbing --scheduler tcp://HOST:PORT --bucket NAME

prints one JSON line on stdout: which addresses the workers serve on, what each worker sees of
the client's private files, and what each one reads back from the bucket.

    python workload.py {cli,api} --scheduler tcp://HOST:PORT --root s3://BUCKET/PREFIX
    python workload.py kill --scheduler tcp://HOST:PORT --root s3://BUCKET/PREFIX --kill w2

generate a data set in the client's private temporary folder and run every step on the
cluster through the CLI or through the Python API, with stores and models under ``--root``
(an object-store URL on the cluster, a local folder for the one-host reference). Each prints a
JSON line with the CLI summaries and, base64-encoded, an ``.npz`` of every result array (read
back from the stores), for the caller to compare with the reference. ``kill`` fits the API's
k-means on the API store once more, prints ``KILL <address>`` once worker ``--kill`` holds part
of the fit, and waits for a line on stdin (the caller's word that the worker is dead) before
letting the fit finish on the survivor.

The S3 endpoint and credentials come from the ``AWS_*`` environment variables, as on any cloud
host.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import errno
import io
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator


def _worker_view(marker: str, code_dir: str) -> dict:
    """Runs on a worker: whether it sees the client's files, can write the code's folder, or
    has a route out of the test network."""
    try:
        with tempfile.NamedTemporaryFile(dir=code_dir):
            code_writable = True
    except OSError:
        code_writable = False
    return {
        "sees_client_marker": os.path.exists(marker),
        "code_dir_writable": code_writable,
        "outside_unreachable": _outside_unreachable(),
    }


def _outside_unreachable() -> bool:
    """True when an address outside the test network has no route (nothing is sent)."""
    try:
        socket.create_connection(("203.0.113.1", 80), timeout=2).close()
    except OSError as e:
        return e.errno == errno.ENETUNREACH
    return False


def _make_bucket(name: str) -> None:
    import s3fs

    fs = s3fs.S3FileSystem()
    if not fs.exists(name):
        fs.mkdir(name)


def _read_object(url: str) -> bytes:
    import s3fs

    return s3fs.S3FileSystem().cat(url)


def plumbing(args: argparse.Namespace) -> dict:
    import dask.array as da
    import numpy as np
    import s3fs
    from distributed import Client

    fs = s3fs.S3FileSystem()
    _make_bucket(args.bucket)
    payload = np.arange(1000, dtype=np.int64).tobytes()
    local = os.path.join(tempfile.gettempdir(), "payload.bin")  # the client's private tmp
    with open(local, "wb") as f:
        f.write(payload)
    fs.put(local, f"{args.bucket}/plumbing/payload.bin")

    with Client(args.scheduler, timeout=60) as client:
        client.wait_for_workers(2, timeout=60)
        workers = sorted(client.scheduler_info(n_workers=-1)["workers"])
        code_dir = os.path.dirname(os.path.abspath(__file__))
        views = client.run(_worker_view, local, code_dir)
        total = da.arange(100_000, chunks=10_000).sum()
        # One task per worker, pinned: each worker's own read through its own network.
        reads = {
            w: client.submit(
                _read_object, f"{args.bucket}/plumbing/payload.bin", workers=[w], pure=False
            ).result(timeout=60)
            for w in workers
        }
        return {
            "workers": workers,
            "views": views,
            "sum": int(total.compute()),
            "reads_equal": {w: r == payload for w, r in reads.items()},
            "client_addr": client.scheduler_comm.comm.local_address,
            "client_outside_unreachable": _outside_unreachable(),
        }


N_ROWS = 20_000
CHUNK_ROWS = 2_500
KMEANS = {"n_clusters": 4, "batch_size": 512, "max_iter": 30, "random_state": 0}
SVM = {"budget": 100, "gamma": 8.0, "max_iter": 1, "random_state": 0}
CORESET_SIZE = 500


def _data(work: str) -> tuple[str, str]:
    """The same rows as a CSV (for the CLI) and an .npz (for the API), in ``work``."""
    import numpy as np

    from dkernel.data import make_checkerboard

    X, y = make_checkerboard(N_ROWS, random_state=0)
    csv = os.path.join(work, "train.csv")
    np.savetxt(csv, np.column_stack([X, y]), delimiter=",", fmt=["%.6f", "%.6f", "%d"],
               header="x0,x1,label", comments="")  # fmt: skip
    npz = os.path.join(work, "train.npz")
    np.savez(npz, X=np.loadtxt(csv, delimiter=",", skiprows=1, usecols=(0, 1)), y=y)
    return csv, npz


def _cli(scheduler: str, *args: str) -> dict:
    """One ``dkernel`` command against the cluster; its JSON summary."""
    cmd = [sys.executable, "-m", "dkernel", "--cluster", scheduler, "--no-progress", *args]
    with _timed("_".join(a for a in args[:2] if not a.startswith("/") and "://" not in a)):
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise SystemExit(f"dkernel {' '.join(args)} exited {done.returncode}:\n{done.stderr}")
    # The summary is the indented JSON object that ends the output.
    start = done.stdout.rfind("\n{")
    return json.loads(done.stdout[start + 1 if start >= 0 else 0 :])


def _store_arrays(prefix: str, store: str, names: tuple[str, ...]) -> dict:
    from dkernel.data import open_dataset

    ds = open_dataset(store)
    return {f"{prefix}{name}": ds.read(name) for name in names}


def _model_arrays(prefix: str, path: str) -> dict:
    from dkernel.svm import load_model

    clf = load_model(path)
    return {f"{prefix}support_vectors": clf.support_vectors_, f"{prefix}dual_coef": clf.dual_coef_}


def _worker_address(client, name: str) -> str:
    for addr, info in client.scheduler_info(n_workers=-1)["workers"].items():
        if str(info.get("name")) == name:
            return addr
    raise SystemExit(f"no worker named {name!r}")


class _Stall:
    """Worker plugin: the ``nth`` task that starts on the worker at address ``victim`` never
    runs there (a replacement worker has another address and runs normally).

    When that task turns to executing, a task that never ends goes into the worker's thread
    pool (one thread) ahead of it. The worker's event loop stays free, so the scheduler hears
    of the ``nth - 1`` tasks it finished before and sees the ``nth`` one processing: the fit
    cannot end until the caller's kill, which is thus always mid-fit, and those finished
    results die with the worker.
    """

    name = "dkt-stall"

    def __init__(self, victim: str, nth: int) -> None:
        self.victim, self.nth, self.started = victim, nth, 0

    def setup(self, worker) -> None:
        self.worker = worker

    def transition(self, key, start, finish, **kwargs) -> None:
        if finish != "executing" or self.worker.address != self.victim:
            return
        self.started += 1
        if self.started == self.nth:
            self.worker.executors["default"].submit(_forever)


def _forever() -> None:
    while True:
        time.sleep(1)


class _Finished:
    """Scheduler plugin: how many tasks worker ``addr`` has finished."""

    name = "dkt-finished"

    def __init__(self, addr: str) -> None:
        self.addr, self.count = addr, 0

    def transition(self, key, start, finish, *args, stimulus_id=None, **kwargs) -> None:
        if finish == "memory" and kwargs.get("worker") == self.addr:
            self.count += 1


def _kill_ready(dask_scheduler, addr: str, done: int) -> bool:
    ws = dask_scheduler.workers.get(addr)
    return (
        ws is not None
        and dask_scheduler.plugins[_Finished.name].count >= done
        and bool(ws.processing)
    )


def _fit_with_kill(client, store: str, victim: str, nth: int = 3) -> tuple[object, bool]:
    """Fit k-means; once ``victim`` runs its ``nth`` task of the fit, ask for its death."""
    import threading

    from distributed.diagnostics.plugin import SchedulerPlugin, WorkerPlugin

    from dkernel.cluster import MiniBatchKernelKMeans

    addr = _worker_address(client, victim)
    client.register_plugin(type("Finished", (_Finished, SchedulerPlugin), {})(addr))
    client.register_plugin(type("Stall", (_Stall, WorkerPlugin), {})(addr, nth))
    box: dict = {}

    def fit() -> None:
        try:
            box["model"] = MiniBatchKernelKMeans(**KMEANS).fit(store)
        except BaseException as e:  # reported by the main thread
            box["error"] = e

    t = threading.Thread(target=fit, daemon=True)
    t.start()
    while t.is_alive() and not client.run_on_scheduler(_kill_ready, addr=addr, done=nth - 1):
        time.sleep(0.05)
    alive_at_kill = t.is_alive()
    sys.stdout.write(f"KILL {addr}\n")
    sys.stdout.flush()
    sys.stdin.readline()  # the caller killed it
    t.join()
    if "error" in box:
        raise box["error"]
    return box["model"], alive_at_kill


SECONDS: dict[str, float] = {}


@contextlib.contextmanager
def _timed(step: str) -> Iterator[None]:
    """Wall time of each step, reported beside the results (never compared)."""
    t0 = time.perf_counter()
    yield
    SECONDS[step] = round(time.perf_counter() - t0, 2)


def _prepare(args: argparse.Namespace) -> tuple[str, str, str]:
    root = args.root.rstrip("/")
    if root.startswith("s3://"):
        _make_bucket(root[len("s3://") :].split("/")[0])
    return (root, *_data(args.work))


def run_cli(args: argparse.Namespace) -> dict:
    """Every step as ``dkernel`` commands, stores and the model under ``--root``."""
    root, csv, _ = _prepare(args)
    store, model, core = f"{root}/cli.zarr", f"{root}/cli-svm.npz", f"{root}/cli-core.zarr"
    sch = args.scheduler
    summaries = {}
    summaries["ingest"] = _cli(sch, "ingest", csv, store, "--chunk-rows", str(CHUNK_ROWS))
    summaries["kmeans"] = _cli(sch, "kmeans", store, "--n-clusters", str(KMEANS["n_clusters"]),
                               "--batch-size", str(KMEANS["batch_size"]),
                               "--max-iter", str(KMEANS["max_iter"]), "--seed", "0")  # fmt: skip
    summaries["svm_train"] = _cli(sch, "svm", "train", store, model, "--budget",
                                  str(SVM["budget"]), "--gamma", str(SVM["gamma"]),
                                  "--max-iter", str(SVM["max_iter"]), "--seed", "0")  # fmt: skip
    summaries["svm_predict"] = _cli(sch, "svm", "predict", model, store)
    summaries["coreset"] = _cli(sch, "coreset", store, core, "--size", str(CORESET_SIZE),
                                "--seed", "0")  # fmt: skip
    arrays = _store_arrays("", store, ("X", "y", "labels", "predictions"))
    arrays |= _store_arrays("core_", core, ("X", "y", "weight"))
    arrays |= _model_arrays("svm_", model)
    return {"summaries": summaries, "npz": _npz(arrays)}


def run_api(args: argparse.Namespace) -> dict:
    """Every step through the Python API, stores and the model under ``--root``."""
    import numpy as np
    from distributed import Client

    from dkernel.cluster import MiniBatchKernelKMeans
    from dkernel.coreset import distributed_coreset, write_coreset
    from dkernel.data import ingest, write_array
    from dkernel.svm import BudgetedSVC, load_model

    root, _, npz = _prepare(args)
    store, model, core = f"{root}/api.zarr", f"{root}/api-svm.npz", f"{root}/api-core.zarr"
    with Client(args.scheduler, timeout=60) as client:
        client.wait_for_workers(2, timeout=60)
        with _timed("ingest"):
            ds = ingest(npz, store, chunk_rows=CHUNK_ROWS)
        with _timed("kmeans"):
            km = MiniBatchKernelKMeans(**KMEANS).fit(store)
            write_array(ds, "labels", np.asarray(km.labels_, dtype=np.int64))
            predicted = np.asarray(km.predict(store))
            score = float(km.score(store))
        with _timed("svm_train"):
            BudgetedSVC(**SVM).fit(store).save(model)
        with _timed("svm_predict"):
            clf = load_model(model)
            write_array(ds, "predictions", clf.predict(ds.X))  # written by the workers
        with _timed("coreset"):
            write_coreset(distributed_coreset(store, m=CORESET_SIZE, random_state=0), core)
        with _timed("read_back"):
            arrays = _store_arrays("", store, ("X", "y", "labels", "predictions"))
            arrays |= _store_arrays("core_", core, ("X", "y", "weight"))
            arrays |= _model_arrays("svm_", model)
    arrays["kmeans_predict"] = predicted
    return {"summaries": {"kmeans_score": score}, "npz": _npz(arrays)}


def run_kill(args: argparse.Namespace) -> dict:
    """k-means on the API store again, with worker ``args.kill`` killed mid-fit."""
    import numpy as np
    from distributed import Client

    with Client(args.scheduler, timeout=60) as client:
        client.wait_for_workers(2, timeout=60)
        km, alive = _fit_with_kill(client, f"{args.root.rstrip('/')}/api.zarr", args.kill)
        workers_after = len(client.scheduler_info(n_workers=-1)["workers"])
        # labels_ of a store fit stay on the workers: fetched while the client is open
        labels = np.asarray(km.labels_, dtype=np.int64)
    return {
        "summaries": {"fit_alive_at_kill": alive, "workers_after": workers_after},
        "npz": _npz({"kill_labels": labels}),
    }


def _npz(arrays: dict) -> str:
    import numpy as np

    buf = io.BytesIO()
    np.savez(buf, **{k: np.asarray(v) for k, v in arrays.items()})
    return base64.b64encode(buf.getvalue()).decode()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("mode", choices=["plumbing", "cli", "api", "kill"])
    parser.add_argument("--scheduler", required=True)
    parser.add_argument("--bucket", help="plumbing: the bucket to create and read")
    parser.add_argument("--root", help="cli/api/kill: URL or folder under which stores go")
    parser.add_argument("--work", default=tempfile.gettempdir(), help="private input files")
    parser.add_argument("--kill", help="kill: name of the worker to kill mid-fit")
    args = parser.parse_args(argv)
    modes = {"plumbing": plumbing, "cli": run_cli, "api": run_api, "kill": run_kill}
    result = modes[args.mode](args)
    sys.stdout.write(json.dumps({**result, "seconds": SECONDS}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
