"""Relations between entities: weighted edges, and a breadth-first walk bounded by depth.

Two entities mentioned in one turn are related, more so the more turns they share (weight: the
number of such turns); a relation declared with ``ContextMemory.relate(a, b, kind)`` is an edge
too, labelled with its kind and worth `DECLARED_WEIGHT` shared turns. `Graph.walk` goes out
from the entities a query names, nearest first, to a depth (`MemoryConfig.entity_depth`), each
entity once, following at most ``fanout`` edges of each (the heaviest).
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["DECLARED_WEIGHT", "Edge", "Graph"]

DECLARED_WEIGHT = 5.0
"""What a declared relation weighs, in shared turns."""


@dataclass(frozen=True, slots=True)
class Edge:
    """A relation from one entity to another: its weight and its declared kinds, if any."""

    target: str
    weight: float
    kinds: tuple[str, ...] = ()


class Graph:
    """Undirected weighted edges between entity keys (self-loops ignored).

    ``base``: a graph this one adds to, left as it is (a session's co-mentions, kept between
    calls, under the relations one call declares).

    >>> g = Graph()
    >>> g.add("ana", "lisbon", 2.0)
    >>> g.add("lisbon", "porto", 1.0, kind="near")
    >>> g.walk(["ana"], depth=2)
    [('ana', 0), ('lisbon', 1), ('porto', 2)]
    """

    def __init__(self, base: Graph | None = None) -> None:
        self._base = base
        self._weights: dict[str, dict[str, float]] = defaultdict(dict)
        self._kinds: dict[tuple[str, str], set[str]] = defaultdict(set)

    def add(self, a: str, b: str, weight: float, *, kind: str | None = None) -> None:
        """Add ``weight`` to the edge between ``a`` and ``b`` (and its ``kind``, if given)."""
        if a == b:
            return
        for x, y in ((a, b), (b, a)):
            self._weights[x][y] = self._weights[x].get(y, 0.0) + weight
        if kind:
            self._kinds[(a, b) if a < b else (b, a)].add(kind)

    def _weights_of(self, key: str) -> dict[str, float]:
        own = self._weights.get(key, {})
        if self._base is None:
            return own
        merged = dict(self._base._weights_of(key))
        for other, weight in own.items():
            merged[other] = merged.get(other, 0.0) + weight
        return merged

    def _kinds_of(self, pair: tuple[str, str]) -> set[str]:
        own = self._kinds.get(pair, set())
        return own if self._base is None else own | self._base._kinds_of(pair)

    def edges(self, key: str, *, fanout: int | None = None) -> list[Edge]:
        """The edges of ``key``, heaviest first (ties by key), at most ``fanout`` of them."""
        found = sorted(self._weights_of(key).items(), key=lambda kv: (-kv[1], kv[0]))
        if fanout is not None:
            found = found[: max(0, fanout)]
        return [
            Edge(other, weight, tuple(sorted(self._kinds_of(_pair(key, other)))))
            for other, weight in found
        ]

    def walk(self, start: Sequence[str], *, depth: int, fanout: int = 8) -> list[tuple[str, int]]:
        """Entities within ``depth`` edges of ``start``, nearest first, each once, with distance.

        ``start`` comes first, in its order (distance 0); then breadth-first, each entity's
        ``fanout`` heaviest edges in order. Cycles are never followed twice.
        """
        seen: dict[str, int] = {}
        queue: deque[str] = deque()
        for key in start:
            if key not in seen:
                seen[key] = 0
                queue.append(key)
        while queue:
            key = queue.popleft()
            distance = seen[key]
            if distance >= depth:
                continue
            for edge in self.edges(key, fanout=fanout):
                if edge.target not in seen:
                    seen[edge.target] = distance + 1
                    queue.append(edge.target)
        return list(seen.items())


def _pair(a: str, b: str) -> tuple[str, str]:
    return (a, b) if a < b else (b, a)
