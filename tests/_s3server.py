"""A real S3 API server for tests: moto's server mode in its own process.

s3fs's and zarr's own suites test against ``moto_server`` the same way: the clients under
test (s3fs/aiobotocore, obstore) talk HTTP to it exactly as to a cloud endpoint, configured
by the usual ``AWS_*`` variables. Nothing here mocks a client.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass

#: Credentials moto accepts (any non-empty pair); never real ones.
ACCESS_KEY = "testing-key"
SECRET_KEY = "testing-secret"
REGION = "us-east-1"


@dataclass(frozen=True)
class S3Server:
    """A running moto server: its endpoint URL and process id."""

    endpoint: str
    pid: int

    def env(self) -> dict[str, str]:
        """The ``AWS_*`` variables that point the standard clients at this server."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
            "AWS_DEFAULT_REGION": REGION,
            "AWS_REGION": REGION,
            "AWS_ALLOW_HTTP": "true",
            "AWS_EC2_METADATA_DISABLED": "true",
        }

    def storage_options(self) -> dict[str, object]:
        """Explicit options for the same server (as a user would pass them)."""
        return {
            "endpoint_url": self.endpoint,
            "key": ACCESS_KEY,
            "secret": SECRET_KEY,
            "client_kwargs": {"region_name": REGION},
        }


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def wait_http(url: str, timeout: float = 30.0) -> None:
    """Wait until ``url`` answers HTTP at all (any status)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            urllib.request.urlopen(url, timeout=1).close()
            return
        except urllib.error.HTTPError:
            return
        except OSError:
            if time.monotonic() > deadline:
                raise TimeoutError(f"no S3 server answered at {url} within {timeout} s") from None
            time.sleep(0.1)


def start(
    host: str = "127.0.0.1",
    port: int | None = None,
    *,
    argv_prefix=(),
    log: str | None = None,
    check_credentials: bool = False,
    ready=wait_http,
) -> tuple:
    """Start ``moto.server`` on ``host:port``; returns ``(Popen, S3Server)`` once it answers.

    ``argv_prefix`` runs it inside something else (``ip netns exec NAME``); ``log`` is a
    file that receives the server's access log (one line per request, see
    :func:`count_requests`). With ``check_credentials`` the server verifies signatures
    against its IAM users: create one with :func:`make_user` (the first requests, which do
    that, are let through unsigned). ``ready(url)`` returns once ``url`` answers (from another
    network namespace, where the server is in one: the default asks from this process).
    """
    port = port or free_port(host)
    cmd = [*argv_prefix, sys.executable, "-m", "moto.server", "-H", host, "-p", str(port)]
    sink = open(log, "ab") if log else subprocess.DEVNULL
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.DEVNULL,
        stderr=sink,
        start_new_session=True,
        env={
            **os.environ,
            "MOTO_ALLOW_NONEXISTENT_REGION": "true",
            **({"INITIAL_NO_AUTH_ACTION_COUNT": "3"} if check_credentials else {}),
        },
    )
    if log:
        sink.close()
    endpoint = f"http://{host}:{port}"
    try:
        ready(endpoint + "/moto-api/")
    except BaseException:
        stop(proc)
        raise
    return proc, S3Server(endpoint=endpoint, pid=proc.pid)


def stop(proc: subprocess.Popen, sig: int = signal.SIGTERM) -> None:
    """Stop the server by its process id (its own session: nothing else is signalled).

    ``sig`` goes to the session's process group first; SIGKILL follows after 10 s.
    """
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


def make_bucket(server: S3Server, name: str) -> None:
    """Create bucket ``name`` through boto3 (the real client)."""
    import boto3

    boto3.client(
        "s3",
        endpoint_url=server.endpoint,
        aws_access_key_id=ACCESS_KEY,
        aws_secret_access_key=SECRET_KEY,
        region_name=REGION,
    ).create_bucket(Bucket=name)


def make_user(server: S3Server) -> tuple[str, str]:
    """An IAM user allowed everything, on a server started with ``check_credentials``:
    its ``(access key id, secret)`` (three IAM requests)."""
    import json

    import boto3

    iam = boto3.client(
        "iam",
        endpoint_url=server.endpoint,
        aws_access_key_id=ACCESS_KEY,
        aws_secret_access_key=SECRET_KEY,
        region_name=REGION,
    )
    iam.create_user(UserName="dkernel-test")
    key = iam.create_access_key(UserName="dkernel-test")["AccessKey"]
    policy = {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}],
    }
    iam.put_user_policy(
        UserName="dkernel-test", PolicyName="all", PolicyDocument=json.dumps(policy)
    )
    return key["AccessKeyId"], key["SecretAccessKey"]


def count_requests(log: str, method: str = "GET", needle: str = "", also: str = "") -> int:
    """Requests of ``method`` whose path contains ``needle`` (and ``also``) in a server's
    access log."""
    with open(log, errors="replace") as fh:
        return sum(f'"{method} ' in line and needle in line and also in line for line in fh)


class BadServer:
    """An HTTP endpoint on 127.0.0.1 that answers every request with ``status`` after
    ``delay`` seconds (a slow or failing object store)."""

    def __init__(self, status: int, delay: float = 0.0):
        import http.server
        import threading

        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def _answer(self):
                time.sleep(outer.delay)
                self.send_response(outer.status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            do_GET = do_PUT = do_HEAD = do_POST = do_DELETE = _answer

            def log_message(self, *args):
                pass

        self.status, self.delay = status, delay
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.endpoint = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()
