"""The Dask dashboard during a kernel k-means fit: a screenshot of its status page.

Fits ``MiniBatchKernelKMeans`` on a zarr store (Gaussian blobs, 10^6 x 10 float32 in 100
chunks by default) on a ``LocalCluster`` of 2 worker processes whose dashboard listens on
``--port``, and takes a screenshot of ``/status`` with headless Chromium while the fit's
labels pass (``kkmeans-labels``, one task per group of chunks) runs on the workers: the moment the
scheduler reports a third of them done, the page is captured. The fit takes about 10 s on
2 cores, the whole script about 30 s; the screenshot shows the Progress panel with the
fit's task prefixes (``take-rows`` for the batch fetches, ``kkmeans-labels``).

Usage (Chromium from Debian's packages: ``apt-get install -y chromium``)::

    python benchmarks/dashboard_screenshot.py            # about 30 s
    python benchmarks/dashboard_screenshot.py --quick    # a smaller store, seconds

Output: ``benchmarks/results/dashboard_kmeans_fit.png`` (``_quick`` for --quick), and the
task prefixes the scheduler saw, printed.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

from tornado.websocket import websocket_connect

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    sys.exit("no Chromium found: apt-get install -y chromium")


class Browser:
    """Headless Chromium showing ``url`` (1400 x 900); :meth:`capture` saves what it shows.

    The Bokeh plots draw from a websocket after the page's load event, which
    ``chromium --screenshot`` does not wait for (``--virtual-time-budget`` runs the page's
    clock ahead of the data), so Chromium runs with its DevTools port on loopback and the
    picture is asked for over it (``Page.captureScreenshot``) at the moment chosen.
    """

    def __init__(self, url: str, *, port: int = 9333) -> None:
        self.profile = tempfile.mkdtemp(prefix="dkernel-chromium-")
        cmd = [
            _chromium(),
            "--headless",
            "--disable-gpu",
            "--hide-scrollbars",
            "--window-size=1400,900",
            "--remote-debugging-address=127.0.0.1",
            f"--remote-debugging-port={port}",
            "--remote-allow-origins=http://127.0.0.1",
            f"--user-data-dir={self.profile}",
            url,
        ]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            cmd.insert(1, "--no-sandbox")  # Chromium refuses to run as root with its sandbox
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/json", timeout=5) as r:
                    pages = [t for t in json.load(r) if t.get("type") == "page"]
                self.page = next(t for t in pages if t["url"].startswith(url.rsplit("/", 1)[0]))
                break
            except (OSError, StopIteration):
                if time.monotonic() > deadline:
                    self.close()
                    raise RuntimeError("Chromium's DevTools port did not answer") from None
                time.sleep(0.2)

    def capture(self, out: str) -> None:
        async def ask() -> bytes:
            ws = await websocket_connect(self.page["webSocketDebuggerUrl"])
            ws.write_message(json.dumps({"id": 1, "method": "Page.captureScreenshot"}))
            while True:
                msg = json.loads(await ws.read_message())
                if msg.get("id") == 1:
                    ws.close()
                    return base64.b64decode(msg["result"]["data"])

        png = asyncio.run(ask())
        os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
        with open(out, "wb") as f:
            f.write(png)

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=30)
        shutil.rmtree(self.profile, ignore_errors=True)


def _make_store(path: str, n: int, d: int, chunk_rows: int) -> None:
    import dask.array as da
    import numpy as np

    from dkernel.data import ingest

    centers = np.random.default_rng(0).normal(scale=4.0, size=(4, d)).astype(np.float32)
    labels = da.random.default_rng(1).integers(0, 4, size=n, chunks=chunk_rows)
    noise = da.random.default_rng(2).standard_normal((n, d), chunks=(chunk_rows, d))
    X = noise + labels.map_blocks(lambda b: centers[b], new_axis=1, chunks=(chunk_rows, d))
    ingest(X.astype(np.float32), path, chunk_rows=chunk_rows)


def _done_share(dask_scheduler, prefix: str) -> float:
    """The share of the tasks of ``prefix`` the scheduler knows that have finished."""
    tp = dask_scheduler.task_prefixes.get(prefix)
    if tp is None:
        return 0.0
    states = tp.states
    total = sum(states.values())
    return states.get("memory", 0) / total if total else 0.0


def _watch(client, browser: Browser, out: str, prefix: str, done: threading.Event) -> None:
    """Capture the page once a third of the tasks of ``prefix`` have finished (the Progress
    panel then shows the bar partly filled; its plots refresh every 100-500 ms)."""
    while not done.is_set():
        share = client.run_on_scheduler(_done_share, prefix=prefix)
        if share >= 1 / 3:
            time.sleep(0.5)
            browser.capture(out)
            print(f"screenshot taken while {prefix} tasks ran -> {out}", flush=True)
            return
        time.sleep(0.05)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--port", type=int, default=8799, help="dashboard port (default 8799)")
    ap.add_argument("--quick", action="store_true", help="a smaller store, seconds")
    ap.add_argument("--out", default=None, help="PNG path (default benchmarks/results/...)")
    args = ap.parse_args(argv)
    from distributed import Client, LocalCluster

    from dkernel.cluster import MiniBatchKernelKMeans

    n, chunk = (200_000, 5_000) if args.quick else (1_000_000, 10_000)
    name = "dashboard_kmeans_fit" + ("_quick" if args.quick else "")
    out = args.out or os.path.join(HERE, "results", name + ".png")
    tmp = tempfile.mkdtemp(prefix="dkernel-dashboard-")
    try:
        store = os.path.join(tmp, "blobs.zarr")
        _make_store(store, n, 10, chunk)
        with (
            LocalCluster(
                n_workers=2,
                threads_per_worker=1,
                processes=True,
                host="127.0.0.1",
                dashboard_address=f"127.0.0.1:{args.port}",
            ) as cluster,
            Client(cluster) as client,
        ):
            browser = Browser(client.dashboard_link)
            done = threading.Event()
            try:
                watcher = threading.Thread(
                    target=_watch,
                    args=(client, browser, out, "kkmeans-labels", done),
                    daemon=True,
                )
                watcher.start()
                started, t0 = time.time(), time.perf_counter()
                km = MiniBatchKernelKMeans(
                    4, batch_size=512, tau=400, max_iter=100, random_state=0, verbose=1
                ).fit(store)
                took = time.perf_counter() - t0
                print(f"fit of {n} rows in {took:.1f} s, {km.n_iter_} iterations")
                watcher.join(timeout=60)
            finally:
                done.set()
                browser.close()
            if not os.path.exists(out) or os.path.getmtime(out) < started:
                sys.exit("the labels pass ended before the screenshot: use more rows")
            prefixes = client.run_on_scheduler(
                lambda dask_scheduler: sorted(dask_scheduler.task_prefixes)
            )
            print("task prefixes:", ", ".join(prefixes))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.path.insert(0, ROOT)
    main()
