"""Every remote request is bounded as a whole, read from the Dask config at call time.

The endpoint is a real HTTP server on 127.0.0.1 (a thread) that drips its answer one byte
every 2 s, under any per-read timeout, or that accepts and never answers.
"""

from __future__ import annotations

import socket
import socketserver
import threading
import time

import dask.config
import pytest

from dkernel import DKernelError
from dkernel.data import open_dataset

_ANSWER = (
    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 64\r\n\r\n" + b"{" * 64
)


class SlowServer:
    """An HTTP endpoint that sends one byte every ``every`` seconds (``None``: nothing)."""

    def __init__(self, every: float | None):
        stop = self.stop = threading.Event()

        class Handler(socketserver.BaseRequestHandler):
            def handle(self):
                self.request.settimeout(0.5)
                try:
                    self.request.recv(65536)  # the request's head (and what fits)
                except OSError:
                    pass
                for byte in _ANSWER:
                    if stop.wait(every if every is not None else 3600):
                        return
                    try:
                        self.request.sendall(bytes([byte]))
                    except OSError:  # the client gave up
                        return

        socketserver.ThreadingTCPServer.daemon_threads = True
        self.server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.stop.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(params=["drip", "silent"])
def slow(request):
    server = SlowServer(2.0 if request.param == "drip" else None)
    try:
        yield server
    finally:
        server.close()


def _options(server):
    return {"endpoint_url": server.endpoint, "key": "k", "secret": "s",
            "client_kwargs": {"region_name": "us-east-1"}}  # fmt: skip


def _time_open(url, server):
    start = time.monotonic()
    with pytest.raises(DKernelError) as err:
        open_dataset(url, storage_options=_options(server))
    return time.monotonic() - start, str(err.value)


def test_slow_endpoint_ends_within_the_deadline(slow):
    url = "s3://b/g.zarr"
    # each read's timeout (3 s) is longer than the drip (2 s): only the deadline ends it
    with dask.config.set({"dkernel.storage.timeout": 3, "dkernel.storage.retries": 1,
                          "dkernel.storage.deadline": 4}):  # fmt: skip
        took, msg = _time_open(url, slow)
    assert url in msg and "in time" in msg
    assert took < 4 + 2, took
    # a config change applies to the next call (the client is not kept with stale bounds)
    with dask.config.set({"dkernel.storage.timeout": 3, "dkernel.storage.retries": 1,
                          "dkernel.storage.deadline": 1}):  # fmt: skip
        took, msg = _time_open(url, slow)
    assert url in msg and took < 1 + 1.5, took


@pytest.mark.parametrize(
    ("name", "value"),
    [("timeout", "ten"), ("retries", 0), ("retries", 1.5), ("deadline", -1), ("timeout", "nan")],
)
def test_bad_storage_setting_is_named(name, value):
    with dask.config.set({f"dkernel.storage.{name}": value}):
        with pytest.raises(DKernelError, match=rf"dkernel\.storage\.{name} must be .*{value!r}"):
            open_dataset("s3://b/g.zarr", storage_options={"endpoint_url": "http://127.0.0.1:9"})


def test_refused_connection_is_quick():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    start = time.monotonic()
    with dask.config.set({"dkernel.storage.timeout": 1, "dkernel.storage.retries": 1}):
        with pytest.raises(DKernelError, match="s3://b/g.zarr"):
            open_dataset(
                "s3://b/g.zarr", storage_options={"endpoint_url": f"http://127.0.0.1:{port}"}
            )
    assert time.monotonic() - start < 5
