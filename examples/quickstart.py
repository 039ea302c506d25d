"""dkernel in a few lines: every estimator fits and predicts, on the embedded default.

Run:  python examples/quickstart.py            (under a minute on a laptop)

Writes synthetic data to zarr stores chunk by chunk, then
1. clusters rings with MiniBatchKernelKMeans (from the store) and KernelKMeans (in memory),
2. trains BudgetedSVC on a checkerboard store and scores a held-out store blockwise,
3. builds an SVM coreset of the store and trains a scikit-learn SVC on it.
Everything runs under ``if __name__ == "__main__":`` because Dask workers are spawned
processes that re-import this file.
"""

import os
import shutil
import tempfile

import numpy as np
from sklearn.metrics import adjusted_rand_score
from sklearn.svm import LinearSVC

from dkernel.cluster import KernelKMeans, MiniBatchKernelKMeans
from dkernel.coreset import svm_coreset, uniform_coreset
from dkernel.data import make_checkerboard, make_gauss, make_rings, open_dataset
from dkernel.runtime import get_client
from dkernel.svm import BudgetedSVC


def main(workdir: str) -> None:
    # -- kernel k-means: a compact ring inside a wide one, 100k rows in a zarr store
    rings = make_rings(
        100_000,
        n_rings=2,
        inner_radius=0.5,
        spacing=2.0,
        noise=0.05,
        random_state=0,
        store=os.path.join(workdir, "rings.zarr"),
    )
    km = MiniBatchKernelKMeans(2, max_iter=50, random_state=0).fit(rings.path)
    labels = km.predict(rings.X)  # a lazy dask array, computed blockwise on the workers
    y = np.asarray(rings.y)
    print(
        f"MiniBatchKernelKMeans: ARI {adjusted_rand_score(y, np.asarray(labels)):.3f} "
        f"(support {km.center_support_.shape[0]} points, gamma {km.gamma_:.3g})"
    )
    X_small, y_small = make_rings(2_000, n_rings=2, inner_radius=0.5, spacing=2.0, random_state=1)
    full = KernelKMeans(2, max_iter=30, random_state=0).fit(X_small)
    print(f"KernelKMeans (2k rows in memory): ARI {adjusted_rand_score(y_small, full.labels_):.3f}")

    # -- budgeted SVM: stream a checkerboard store, score another store blockwise
    train = make_checkerboard(
        200_000, random_state=0, store=os.path.join(workdir, "checkerboard.zarr")
    )
    test = make_checkerboard(
        20_000, random_state=1, store=os.path.join(workdir, "checkerboard-test.zarr")
    )
    # max_iter=1: the one-pass streaming algorithm (the default, 5 epochs, reads it 5 times)
    clf = BudgetedSVC(budget=100, gamma=2.0, max_iter=1, random_state=0).fit(train.path)
    pred = clf.predict(test.X)  # lazy, blockwise on the workers
    acc = float((np.asarray(pred) == np.asarray(test.y)).mean())
    print(f"BudgetedSVC: test accuracy {acc:.3f} with {clf.support_vectors_.shape[0]} SVs")

    # -- SVM coreset: 1000 weighted rows stand in for 100k
    X, y = make_gauss(100_000, random_state=0)
    core = svm_coreset(X, y, 1000, random_state=0)
    uni = uniform_coreset(X, y, 1000, random_state=0)
    for name, c in (("coreset", core), ("uniform", uni)):
        model = c.fit(LinearSVC())
        print(f"LinearSVC on the {name} sample of 1000: accuracy {model.score(X, y):.3f}")
    # Two overlapping Gaussians: every row is as informative as any other, so a uniform
    # sample does as well here. A coreset pays off where few rows decide the boundary
    # (rare classes, far-out points): its SVM cost error is 0.24-0.58x a uniform sample's
    # on htru2, credit, ijcnn1 and skin (benchmarks/results/coreset.md).
    print("(a uniform sample does as well on overlapping Gaussians; see coreset.md)")


if __name__ == "__main__":
    workdir = tempfile.mkdtemp(prefix="dkernel-quickstart-")
    client = get_client()  # the embedded default; see cluster-configs/ for the others
    try:
        print("dashboard:", client.dashboard_link)
        main(workdir)
        print("store reopened later:", open_dataset(os.path.join(workdir, "rings.zarr")))
    finally:
        cluster = client.cluster
        client.close()
        cluster.close()
        shutil.rmtree(workdir, ignore_errors=True)
