"""Which names are one entity: `resolve`, a pure function of the names seen and the aliases.

Names are compared by `entity_key` (case, a possessive and titles aside). Then, in order, each
step over the groups the previous steps left:

1. **declared** aliases (``ContextMemory.relate(a, b, kind="alias")``) are one entity;
2. an alias **said with a name** (``my sister Caroline``: ``Ana's sister`` = ``Caroline``) is
   that entity when it was said with that name only; said with two names (two sisters), it
   stays an entity of its own;
3. a **one-word name** is the longer name it starts or ends (``Caroline`` -> ``Caroline
   Smith``, ``Dr. Smith`` -> ``John Smith``) when exactly one group has such a name.

Each entity is named by its fullest name (most words, then most mentions, then the first in
alphabetical order). The result depends only on the sets given, never on their order, so every
process that reads a session resolves its names the same way.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping

__all__ = ["is_phrase", "resolve"]


def is_phrase(key: str) -> bool:
    """Whether a key names someone by relation (``"ana's sister"``) rather than by name."""
    return "'s " in key or "' " in key


class _Groups:
    """Union-find over keys; a group's representative is its smallest key (order-free)."""

    def __init__(self, keys: Iterable[str]) -> None:
        self.parent = {key: key for key in keys}

    def find(self, key: str) -> str:
        root = key
        while self.parent[root] != root:
            root = self.parent[root]
        while self.parent[key] != root:
            self.parent[key], key = root, self.parent[key]
        return root

    def union(self, a: str, b: str) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            low, high = sorted((ra, rb))
            self.parent[high] = low


def resolve(
    counts: Mapping[str, int],
    said_with: Iterable[tuple[str, str]] = (),
    declared: Iterable[tuple[str, str]] = (),
) -> dict[str, str]:
    """Each key's entity, named by its canonical key (see the module docstring).

    Args:
        counts: every key seen, with how often (its mentions).
        said_with: ``(name key, alias key)`` pairs said together (step 2).
        declared: ``(key, key)`` pairs declared to be one entity (step 1).

    >>> resolve({"caroline": 3, "caroline smith": 1, "ana's sister": 1},
    ...         said_with=[("caroline", "ana's sister")])["ana's sister"]
    'caroline smith'
    """
    declared = [(a, b) for a, b in declared if a and b]
    said = sorted({(a, b) for a, b in said_with if a and b and a != b})
    keys = set(counts) | {k for pair in declared for k in pair} | {k for pair in said for k in pair}
    groups = _Groups(keys)
    for a, b in sorted(declared):
        groups.union(a, b)
    # 2: an alias said with one entity's names only.
    names_of: dict[str, set[str]] = defaultdict(set)
    for name, alias in said:
        names_of[alias].add(groups.find(name))
    for alias, names in sorted(names_of.items()):
        if len(names) == 1:
            groups.union(alias, next(iter(names)))
    # 3: a one-word name and the one group with a longer name that starts or ends with it.
    longer: dict[str, set[str]] = defaultdict(set)
    for key in sorted(keys):
        words = key.split()
        if len(words) > 1 and not is_phrase(key):
            root = groups.find(key)
            longer[words[0]].add(root)
            longer[words[-1]].add(root)
    merges = [
        (key, next(iter(longer[key])))
        for key in sorted(keys)
        if " " not in key and not is_phrase(key) and len(longer.get(key, ())) == 1
    ]
    for key, root in merges:
        groups.union(key, root)
    members: dict[str, list[str]] = defaultdict(list)
    for key in keys:
        members[groups.find(key)].append(key)
    out: dict[str, str] = {}
    for group in members.values():
        best = min(
            group,
            key=lambda k: (is_phrase(k), -len(k.split()), -counts.get(k, 0), k),
        )
        for key in group:
            out[key] = best
    return out
