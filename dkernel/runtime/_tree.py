"""One tree-reduce for every merge-and-reduce in dkernel (coresets, BSGD partial models).

``tree_reduce(client, leaves, combine, split_every=k, seed=s)`` combines ``leaves`` in groups
of ``k`` consecutive items, level after level, until one node is left. Every call gets the
node's id ``TreeNode(level, idx, seed)`` (leaves are level 0; the first combine level is 1),
from which a combine derives its randomness (``node.rng()``), so the tree's result depends
only on the leaves, their order and ``seed``: never on which worker ran what, or when.

Three ways to run, chosen by the arguments:

- ``client`` given: each level is one ``client.map`` (leaves may be futures or values);
  the root is returned as a future and nothing is waited for, so a caller can chain rounds;
- ``client=None`` and any leaf a :class:`dask.delayed.Delayed`: a delayed tree, its root
  returned as a ``Delayed``;
- otherwise: combined here, eagerly; the root value is returned.

A group of one (the last group of a level when ``split_every`` does not divide it) is
combined too, so every level reduces uniformly; a single leaf is returned as it is.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
from dask.delayed import Delayed, delayed

if TYPE_CHECKING:
    from distributed import Client


class TreeNode(NamedTuple):
    """Id of one combine: ``level`` (1 = just above the leaves), ``idx`` (its index within
    the level) and the tree's ``seed``."""

    level: int
    idx: int
    seed: int

    def seed_sequence(self) -> np.random.SeedSequence:
        """``SeedSequence([seed, level, idx])``: the node's own, reproducible stream."""
        return np.random.SeedSequence([int(self.seed), int(self.level), int(self.idx)])

    def rng(self) -> np.random.Generator:
        return np.random.default_rng(self.seed_sequence())


def _apply(node: TreeNode, children: list, *, combine: Callable[[list, TreeNode], Any]) -> Any:
    return combine(list(children), node)


def add_in_order(arrays: Sequence[np.ndarray], node: TreeNode | None = None) -> np.ndarray:
    """The arrays summed in the given order, into a copy of the first (a combine for
    :func:`tree_reduce`: ``node`` is not used)."""
    total = arrays[0].copy()
    for a in arrays[1:]:
        total += a
    return total


def tree_levels(n_leaves: int, split_every: int) -> int:
    """Number of combine levels above ``n_leaves`` leaves (0 for one leaf)."""
    if n_leaves < 1 or split_every < 2:
        raise ValueError("need at least one leaf and split_every >= 2")
    levels = 0
    while n_leaves > 1:
        n_leaves = -(-n_leaves // split_every)
        levels += 1
    return levels


def tree_reduce(
    client: Client | None,
    leaves: Sequence[Any],
    combine: Callable[[list, TreeNode], Any],
    *,
    split_every: int = 2,
    seed: int = 0,
    key: str | None = None,
) -> Any:
    """Reduce ``leaves`` with ``combine(children, node)`` in a tree of fan-in ``split_every``.

    Parameters
    ----------
    client : distributed.Client or None
        Submit every node to this client (the root comes back as a future), or build a
        delayed tree (when a leaf is ``Delayed``), or combine eagerly.
    leaves : sequence
        Futures, ``Delayed`` objects or plain values, in a fixed order.
    combine : callable
        ``combine(children: list, node: TreeNode) -> value``; must be picklable for a client
        (a module-level function or a ``functools.partial`` of one) and deterministic given
        its inputs and ``node``.
    split_every : int, default=2
        Fan-in (>= 2). 2-4 balance parallelism for tens of leaves; a large fan-in makes one
        big, slow root.
    seed : int, default=0
        Passed to every node (``node.seed``).
    key : str, optional
        Prefix of the task keys under a client (``f"{key}-{level}-{index}"``); the default
        lets distributed name them. Keys must be unique per call.

    Returns
    -------
    The root: a future (client), a ``Delayed`` (delayed leaves) or the value.
    """
    nodes = list(leaves)
    if not nodes:
        raise ValueError("tree_reduce needs at least one leaf")
    if int(split_every) < 2:
        raise ValueError(f"split_every must be >= 2, got {split_every}")
    k = int(split_every)
    lazy = client is None and any(isinstance(v, Delayed) for v in nodes)
    level = 0
    while len(nodes) > 1:
        level += 1
        groups = [nodes[j : j + k] for j in range(0, len(nodes), k)]
        ids = [TreeNode(level, index, int(seed)) for index in range(len(groups))]
        names = None if key is None else [f"{key}-{level}-{i}" for i in range(len(groups))]
        if client is not None:  # a level is one message to the scheduler
            nodes = client.map(_apply, ids, groups, key=names, pure=False, combine=combine)
        elif lazy:
            nodes = [
                delayed(_apply, pure=True)(
                    node,
                    group,
                    combine=combine,
                    dask_key_name=None if names is None else names[node.idx],
                )
                for node, group in zip(ids, groups)
            ]
        else:
            nodes = [_apply(node, group, combine=combine) for node, group in zip(ids, groups)]
    return nodes[0]
