"""dkernel.runtime._tree: one tree-reduce, eager, delayed and on a client, with node ids."""

from __future__ import annotations

import functools

import dask
import numpy as np
import pytest
from dask.delayed import Delayed

from dkernel.runtime import TreeNode, tree_levels, tree_reduce


def _record(children, node):
    """A combine that shows the tree's shape: (level, index, children)."""
    return (node.level, node.idx, tuple(children))


def _noisy_sum(children, node, *, scale):
    """Sum plus a draw from the node's own stream (a randomised combine, like a coreset's)."""
    return float(sum(children)) + scale * float(node.rng().random())


def test_eager_shape_and_node_ids():
    root = tree_reduce(None, [0, 1, 2, 3, 4], _record, split_every=2)
    # level 1: (0,1) (2,3) (4); level 2: pairs; level 3: root
    assert root[:2] == (3, 0)
    left, right = root[2]
    assert left == (2, 0, ((1, 0, (0, 1)), (1, 1, (2, 3))))
    assert right == (2, 1, ((1, 2, (4,)),))
    assert tree_levels(5, 2) == 3 and tree_levels(1, 2) == 0 and tree_levels(16, 4) == 2


def test_single_leaf_and_bad_arguments():
    assert tree_reduce(None, ["only"], _record) == "only"
    with pytest.raises(ValueError, match="at least one leaf"):
        tree_reduce(None, [], _record)
    with pytest.raises(ValueError, match="split_every must be >= 2"):
        tree_reduce(None, [1, 2], _record, split_every=1)


def test_node_seeds_are_reproducible_and_distinct():
    a = TreeNode(1, 0, 7).rng().random(3)
    np.testing.assert_array_equal(a, TreeNode(1, 0, 7).rng().random(3))
    assert not np.array_equal(a, TreeNode(1, 1, 7).rng().random(3))
    assert not np.array_equal(a, TreeNode(2, 0, 7).rng().random(3))
    assert not np.array_equal(a, TreeNode(1, 0, 8).rng().random(3))


@pytest.mark.parametrize("split_every", [2, 3, 4])
def test_delayed_and_client_equal_eager(split_every, local_cluster_client):
    comb = functools.partial(_noisy_sum, scale=1e-3)
    leaves = [float(i) for i in range(11)]
    eager = tree_reduce(None, leaves, comb, split_every=split_every, seed=5)
    assert eager == pytest.approx(55.0, abs=0.02)
    lazy = tree_reduce(
        None, [dask.delayed(v) for v in leaves], comb, split_every=split_every, seed=5
    )
    assert isinstance(lazy, Delayed)
    assert lazy.compute(scheduler="sync") == eager
    client = local_cluster_client
    futs = client.scatter(leaves, hash=False)
    root = tree_reduce(client, futs, comb, split_every=split_every, seed=5)
    assert root.result() == eager
    # another seed, another result: the seed reaches the nodes
    assert tree_reduce(None, leaves, comb, split_every=split_every, seed=6) != eager
