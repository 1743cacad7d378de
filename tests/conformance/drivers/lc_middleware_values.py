"""The LangChain door with saved values: `CtxBudgetMiddleware(values=("memories", "{user_id}"))`.

`lc_middleware`'s driver (a real ``create_agent``, LangChain's fake chat model recording what it
received), with the middleware's ``values=`` set: the run's user's saved values, read from the
namespace ``("memories", <user>)`` of the memory's values, are offered on each call as tier
``SAVED`` items under the same budget.

- Setup: before the first call that names a user (``add``, ``pin``, ``send``), the driver puts
  `SIZES` values for that user with ``memory.put_values`` (the batch of ``put_value``), each
  ``{"content": <text>}``: from a few words to several hundred tokens, more than any budget of
  the suite holds, so some are always cut. Each text is made of common words (the suite's
  questions match them) and a unique tag, so it is found exactly where it was sent. A user is
  seeded once: what another object removes (``delete_user``) is not put back.
- ``send``: as `lc_middleware`'s, and ``chosen`` also lists the report's ``SAVED`` items (they
  are ctxbudget's own items, with no caller id): each by the id `value_id` gives its
  namespace and key, with the item's text (``<key>: <value as JSON>``). ``got`` is found the
  same way in what the model received, the values the driver put included: a value the model
  got that the report does not include (or the reverse) breaks the chosen promise.
- The other verbs are `lc_middleware`'s; ``bad`` runs name a user nobody seeded.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

from ctxbudget.core.items import Tier
from ctxbudget.memory.values import ValuePut

from .base import Place, Received, Turn
from .common import chosen_refs, identify
from .lc_middleware import MiddlewareDriver

__all__ = ["SIZES", "VALUES", "ValuesDriver", "make", "value_id"]

VALUES = ("memories", "{user_id}")
"""The middleware's ``values=``: LangMem's layout, the run's user at element 1."""

SIZES = (3, 8, 20, 45, 90, 180, 360, 600, 900)
"""Words of each value a user gets: small ones and large ones, together far over any budget."""

WORDS = (
    "lisbon cat miso cello garden train sister coffee piano winter market river bread "
    "sunday trip dog pixel recipe doctor concert book museum bike spring"
).split()

_TAGS = itertools.count()


def value_id(namespace: Sequence[str], key: str) -> str:
    """How the driver names a saved value: its namespace and key."""
    return "value:" + "/".join([*namespace, key])


def saved_text(n: int, size: int) -> str:
    """A value's text: ``size`` common words (from a place of its own) and a unique tag."""
    words = [WORDS[(n * 7 + i) % len(WORDS)] for i in range(size)]
    return f"saved v{next(_TAGS):06d}x {' '.join(words)}"


def chosen_with_saved(context: Any) -> list[tuple[str, str]]:
    """The report's included items by caller id, its saved values by `value_id`, in order."""
    if context is None:
        return []
    refs = iter(chosen_refs(context))
    chosen: list[tuple[str, str]] = []
    for item in context.included:
        if item.ref is not None:
            chosen.append(next(refs))
        elif item.tier == Tier.SAVED:
            key = str(item.metadata["key"])
            chosen.append((value_id(item.metadata["namespace"], key), item.text))
    return chosen


class ValuesDriver(MiddlewareDriver):
    """`MiddlewareDriver` whose middleware offers the run's user's saved values."""

    def __init__(self, place: Place) -> None:
        super().__init__(place, values=VALUES)
        self.name = "lc_middleware_values"
        self.seeded: set[str] = set()

    def seed(self, user: str | None) -> None:
        """Put `SIZES` values for ``user`` (once per user)."""
        if user is None or user in self.seeded:
            return
        self.seeded.add(user)
        namespace = (VALUES[0], user)
        texts = {f"fact-{n}": saved_text(n, size) for n, size in enumerate(SIZES)}
        puts = [ValuePut(namespace, key, {"content": text}) for key, text in texts.items()]
        self.memory.put_values(puts, user_id=user)
        for key, text in texts.items():
            self.registry.note(value_id(namespace, key), text)

    def add(self, session: str, user: str, turns: Sequence[Turn]) -> None:
        """The user's values first, then `MiddlewareDriver.add`."""
        self.seed(user)
        super().add(session, user, turns)

    def pin(self, text: str, id: str, session: str | None = None, user: str | None = None) -> None:  # noqa: A002
        """The user's values first (a user pin), then `MiddlewareDriver.pin`."""
        self.seed(user)
        super().pin(text, id, session=session, user=user)

    def send(self, session: str, user: str, query: str, budget: int) -> Received:
        """`MiddlewareDriver.send` with the user's values; the report's values are chosen."""
        self.seed(user)
        got = super().send(session, user, query, budget)
        got.chosen = chosen_with_saved(got.report)
        got.got = identify(got.texts, {**self.registry.texts, **dict(got.chosen)})
        got.extra["saved"] = [c for c in got.chosen if c[0].startswith("value:")]
        return got


def make(place: Place) -> ValuesDriver:
    """The sync driver (``invoke``) with ``values=``."""
    return ValuesDriver(place)
