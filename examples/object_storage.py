"""A store on S3: ingest, fit both estimators and a coreset from it, save a model there.

Run against your object store::

    export AWS_ENDPOINT_URL=https://... AWS_ACCESS_KEY_ID=... AWS_SECRET_ACCESS_KEY=...
    python examples/object_storage.py s3://my-bucket/dkernel-example

With no ``AWS_ENDPOINT_URL`` set it starts a local S3 API server (moto's server mode, from
``pip install "moto[server]"``) on 127.0.0.1 and uses a bucket there, so it runs anywhere.
"""

from __future__ import annotations

import os
import sys

import numpy as np


def main(prefix: str | None = None) -> dict:
    from dkernel.cluster import MiniBatchKernelKMeans
    from dkernel.coreset import distributed_coreset
    from dkernel.data import ingest, make_checkerboard, open_dataset
    from dkernel.runtime import get_client
    from dkernel.svm import BudgetedSVC, load_model

    X, y = make_checkerboard(20_000, random_state=0)
    with get_client() as client:
        print("dashboard:", client.dashboard_link, file=sys.stderr)
        ds = ingest(X, f"{prefix}/checkerboard.zarr", y=y, chunk_rows=4_000, overwrite=True)
        km = MiniBatchKernelKMeans(4, gamma=2.0, random_state=0).fit(ds.path)
        clf = BudgetedSVC(budget=200, gamma=2.0, random_state=0).fit(ds.path)
        clf.save(f"{prefix}/models/checkerboard.npz")
        again = load_model(f"{prefix}/models/checkerboard.npz")
        test = open_dataset(ds.path)
        core = distributed_coreset(ds.path, None, 1000, random_state=0)
        result = {
            "store": ds.path,
            "chunks": int(test.X.numblocks[0]),
            "kmeans_inertia": float(km.inertia_),
            "svm_accuracy": float(again.score(test.X, test.y)),
            "coreset_rows": int(core.X.shape[0]),
        }
        client.cluster.close()
    return result


def _local_server():
    """A moto S3 server on 127.0.0.1 with one bucket, for running this example anywhere."""
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
    import _s3server

    proc, server = _s3server.start()
    os.environ.update(server.env())
    _s3server.make_bucket(server, "dkernel-example")
    return proc, _s3server


if __name__ == "__main__":
    proc = None
    target = sys.argv[1] if len(sys.argv) > 1 else None
    if target is None:
        if "AWS_ENDPOINT_URL" in os.environ:
            sys.exit("give the URL prefix to write to, e.g. s3://my-bucket/dkernel-example")
        proc, launcher = _local_server()
        target = "s3://dkernel-example/run"
    try:
        out = main(target)
        print(out)
        assert np.isfinite(out["kmeans_inertia"]) and out["svm_accuracy"] > 0.9
    finally:
        if proc is not None:
            launcher.stop(proc)
