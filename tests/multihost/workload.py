"""What the client host runs in ``make test-cluster`` (and the one-host reference run).

    python workload.py plumbing --scheduler tcp://HOST:PORT --bucket NAME

prints one JSON line on stdout: which addresses the workers serve on, what each worker sees of
the client's private files, and what each one reads back from the bucket. The S3 endpoint and
credentials come from the ``AWS_*`` environment variables, as on any cloud host.
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import socket
import sys
import tempfile


def _worker_view(marker: str, code_dir: str) -> dict:
    """Runs on a worker: its address, and whether it shares the client's files."""
    try:
        with tempfile.NamedTemporaryFile(dir=code_dir):
            code_writable = True
    except OSError:
        code_writable = False
    return {
        "hostname": socket.gethostname(),
        "sees_client_marker": os.path.exists(marker),
        "code_dir_writable": code_writable,
        "outside_unreachable": _outside_unreachable(),
    }


def _outside_unreachable() -> bool:
    """True when an address outside the test network has no route (nothing is sent)."""
    try:
        socket.create_connection(("192.0.2.1", 80), timeout=2).close()
    except OSError as e:
        return e.errno == errno.ENETUNREACH
    return False


def _read_object(url: str) -> bytes:
    import s3fs

    return s3fs.S3FileSystem().cat(url)


def plumbing(args: argparse.Namespace) -> dict:
    import dask.array as da
    import numpy as np
    import s3fs
    from distributed import Client

    fs = s3fs.S3FileSystem()
    fs.mkdir(args.bucket)
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("mode", choices=["plumbing"])
    parser.add_argument("--scheduler", required=True)
    parser.add_argument("--bucket", required=True)
    args = parser.parse_args(argv)
    result = plumbing(args)
    sys.stdout.write(json.dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
