"""The Pareto front of (quality, cost) points: higher quality, lower cost (experiments.tracking reads the points off
a sweep's trials and draws them)."""

from __future__ import annotations

from typing import Sequence

__all__ = ["pareto_front"]


def pareto_front(points: Sequence[tuple[float, float]]) -> list[int]:
    """Indices of the (quality, cost) points no other point dominates (quality at least as high and cost at most
    as low, one of them strictly), ordered by cost. Equal points are all on the front."""
    front = []
    for i, (q, c) in enumerate(points):
        if not any((q2 >= q and c2 <= c) and (q2 > q or c2 < c) for j, (q2, c2) in enumerate(points) if j != i):
            front.append(i)
    return sorted(front, key=lambda i: (points[i][1], -points[i][0]))
