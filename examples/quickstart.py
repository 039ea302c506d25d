"""dkernel in a few lines, on the embedded default (an in-process LocalCluster).

Run:  python examples/quickstart.py            (about half a minute on a laptop)

Writes a synthetic checkerboard to a zarr store chunk by chunk, opens it as dask arrays,
draws seeded mini-batches on the cluster and computes a lazy RBF kernel block.
Everything runs under ``if __name__ == "__main__":`` because Dask workers are spawned
processes that re-import this file.
"""

import os
import shutil
import tempfile

import numpy as np

from dkernel.data import make_checkerboard, open_dataset, sample_rows
from dkernel.kernels import estimate_gamma, kernel_matrix
from dkernel.runtime import get_client

if __name__ == "__main__":
    workdir = tempfile.mkdtemp(prefix="dkernel-quickstart-")
    client = get_client()  # the embedded default; see cluster-configs/ for the others
    try:
        print("dashboard:", client.dashboard_link)

        # 200k rows written chunk by chunk (sizes beyond memory work the same way)
        ds = make_checkerboard(
            200_000,
            random_state=0,
            chunk_rows=25_000,
            store=os.path.join(workdir, "checkerboard.zarr"),
        )
        print(ds)
        ds = open_dataset(ds.path)  # what a later session would do

        X = ds.X.persist()  # keep the decoded chunks in cluster memory
        batch, idx = sample_rows(X, 1024, random_state=0, return_indices=True)
        again = sample_rows(ds.X.rechunk((40_000, 2)), 1024, random_state=0)
        print(
            "batch",
            batch.shape,
            "same rows under another chunking:",
            bool(np.array_equal(batch, again)),
        )

        gamma = estimate_gamma(X, random_state=0)
        K = kernel_matrix(X[:100_000], X[:2_000], gamma=gamma)  # lazy, one task per block
        print(
            f"gamma={gamma:.3g}; K is {K.shape} in {K.npartitions} blocks; "
            f"mean row sum {float(K.sum(axis=1).mean().compute()):.1f}"
        )
    finally:
        cluster = client.cluster
        client.close()
        cluster.close()
        shutil.rmtree(workdir, ignore_errors=True)
