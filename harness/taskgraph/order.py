"""Dependency order with the standard library's graphlib: a stable topological order (the smallest id in natural
order first among ready steps), cycle detection with the cycle spelled out, and each step's dependency depth.

`edges` maps every step id to the ids it depends on (all declared; see TaskGraph.edges)."""

from __future__ import annotations

import heapq
from graphlib import CycleError, TopologicalSorter
from typing import Mapping, Sequence

from harness.taskgraph.ids import natural_key
from harness.taskgraph.nodes import GraphError

Edges = Mapping[str, Sequence[str]]


def _sorter(edges: Edges) -> TopologicalSorter:
    """Nodes and predecessors added in natural id order, so the reported cycle does not depend on declaration order."""
    sorter: TopologicalSorter = TopologicalSorter()
    for node in sorted(edges, key=natural_key):
        sorter.add(node, *sorted(edges[node], key=natural_key))
    return sorter


def _spelled(cycle: Sequence[str]) -> list[str]:
    """graphlib reports a cycle dependency -> dependent; spell it dependent -> dependency, from its smallest id."""
    ring = list(reversed(cycle[:-1]))
    start = ring.index(min(ring, key=natural_key))
    ring = ring[start:] + ring[:start]
    return ring + ring[:1]


def find_cycle(edges: Edges) -> list[str] | None:
    """One dependency cycle as [a, b, ..., a] (a depends on b ...), or None when the graph is acyclic."""
    try:
        _sorter(edges).prepare()
    except CycleError as exc:
        return _spelled(exc.args[1])
    return None


def topological_order(edges: Edges) -> list[str]:
    """Every id after its dependencies; among ready ids the smallest (natural order) first. GraphError on a cycle."""
    sorter = _sorter(edges)
    try:
        sorter.prepare()
    except CycleError as exc:
        raise GraphError("task graph has a dependency cycle: " + " -> ".join(_spelled(exc.args[1]))) from None
    ready: list[tuple[tuple, str]] = []
    out: list[str] = []
    while sorter.is_active():
        for node in sorter.get_ready():
            heapq.heappush(ready, (natural_key(node), node))
        _, node = heapq.heappop(ready)
        out.append(node)
        sorter.done(node)
    return out


def depths(edges: Edges) -> dict[str, int]:
    """Longest dependency chain above each id (roots 0). GraphError on a cycle."""
    depth: dict[str, int] = {}
    for node in topological_order(edges):
        depth[node] = 1 + max((depth[d] for d in edges[node]), default=-1)
    return depth
