"""How much of a call's context repeats the previous call's: what a prompt cache can reuse.

Providers cache a prompt's leading tokens (OpenAI and Gemini on their own, Anthropic up to its
``cache_control`` breakpoints) and bill them at a discount when the next request starts with
exactly the same bytes. `shared_prefix_tokens` measures that prefix against the previous call
of the same session (``assemble(previous=...)``), per format:

* ``messages``: the leading messages that are identical to the previous call's, as provider
  messages (role, content or content parts, name, tool calls and tool call id). The first
  message that differs ends the prefix, even when it starts the same way: only whole messages
  count (a provider that caches by token may reuse a little more, so this is a lower bound).
  Each counts what it costs in `TokenCounter.count_messages` (content and per-message
  overhead; the reply priming is not part of any prefix).
* ``text`` and ``compact``: the longest common start of the rendered text (``render()``, which
  is the system and the user message of ``to_messages()`` put together) that ends at a line
  break, so a line that changed counts for nothing; counted with the counter.

`PreviousContexts` keeps the newest context of each session in process, bounded, for callers
that assemble a session's turns one after the other (`ContextMemory`, the LlamaIndex memory).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any, TypeAlias

from ctxbudget.core.items import Tier
from ctxbudget.core.report import AssembledContext
from ctxbudget.errors import ConfigurationError, ConfigurationTypeError
from ctxbudget.tokens.counter import TokenCounter

__all__ = [
    "Previous",
    "PreviousContexts",
    "history_start",
    "shared_message_tokens",
    "shared_prefix_tokens",
    "shared_text_tokens",
]

Previous: TypeAlias = AssembledContext | Sequence[Mapping[str, Any]] | str
"""The previous call: its `AssembledContext`, the provider messages it sent, or its text."""


def shared_message_tokens(
    messages: Sequence[Mapping[str, Any]],
    previous: Sequence[Mapping[str, Any]],
    counter: TokenCounter,
) -> int:
    """Tokens of the leading ``messages`` identical to ``previous``'s (whole messages only).

    >>> counter = TokenCounter.for_model("gpt-4o")
    >>> system = {"role": "system", "content": "Be brief."}
    >>> shared_message_tokens([system, {"role": "user", "content": "Hi"}], [system], counter)
    7
    """
    total = 0
    for now, before in zip(messages, previous, strict=False):
        if now != before:
            break
        total += counter.count_messages([now]) - counter.reply_priming
    return total


def shared_text_tokens(text: str, previous: str, counter: TokenCounter) -> int:
    r"""Tokens of the common start of ``text`` and ``previous``, up to its last line break.

    >>> shared_text_tokens("a\nb\nc", "a\nb\nd", TokenCounter.for_model("gpt-4o"))
    4
    """
    same = _common_length(text, previous)
    cut = text.rfind("\n", 0, same) + 1
    return counter.count(text[:cut]) if cut else 0


def shared_prefix_tokens(
    context: AssembledContext, previous: Previous, counter: TokenCounter
) -> int:
    """Tokens at the start of ``context`` that repeat ``previous`` exactly (see the module).

    Raises:
        ConfigurationTypeError: ``previous`` is none of an `AssembledContext`, a list of
            provider messages or a text (a text only for the text formats).
    """
    if context.format == "messages":
        return shared_message_tokens(context.to_messages(), _messages_of(previous), counter)
    return shared_text_tokens(context.render(), _text_of(previous), counter)


def history_start(previous: Previous | None) -> str | None:
    """The id of the user turn the previous call's history started with (None: unknown)."""
    if not isinstance(previous, AssembledContext):
        return None
    history = (it for it in previous.included if it.tier == Tier.RECENT)
    return next((it.id for it in history if not it.role or it.role == "user"), None)


class PreviousContexts:
    """The newest context of each session, kept in process for ``previous=`` (thread-safe).

    A context is kept with the ``generation`` of its session (`ContextMemory` passes the
    store's, which changes when a message is deleted or replaced or the session is deleted
    and started again): asked with another generation, it is not returned, so a session's new
    life never counts a prefix shared with its old one.

    Args:
        keep: how many sessions keep theirs (the least recently used go first; 0: none).

    >>> kept = PreviousContexts(keep=2)
    >>> kept.get("s1") is None
    True
    """

    def __init__(self, *, keep: int = 256) -> None:
        if isinstance(keep, bool) or not isinstance(keep, int) or keep < 0:
            msg = f"keep must be a number of sessions (0 or more), got {keep!r}"
            raise ConfigurationError(msg)
        self._keep = keep
        self._contexts: OrderedDict[str, tuple[str, AssembledContext]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, session_id: str, *, generation: str | None = None) -> AssembledContext | None:
        """The newest context kept for ``session_id`` (in this ``generation`` if given), or None."""
        with self._lock:
            kept = self._contexts.get(session_id)
            if kept is None or generation not in (None, kept[0]):
                return None
            self._contexts.move_to_end(session_id)
            return kept[1]

    def put(self, session_id: str, context: AssembledContext, *, generation: str = "") -> None:
        """Keep ``context`` as the newest of ``session_id`` (in its ``generation``)."""
        if not self._keep:
            return
        with self._lock:
            self._contexts[session_id] = (generation, context)
            self._contexts.move_to_end(session_id)
            while len(self._contexts) > self._keep:
                self._contexts.popitem(last=False)

    def forget(self, session_id: str) -> None:
        """Drop what is kept for ``session_id``: its next call shares no prefix with the last.

        For a call that is not the conversation's next turn (the same turn assembled again
        with another budget, as ``ctxbudget demo`` does), whose shared prefix means nothing.
        """
        with self._lock:
            self._contexts.pop(session_id, None)


def _messages_of(previous: Previous) -> Sequence[Mapping[str, Any]]:
    if isinstance(previous, AssembledContext):
        return previous.to_messages()
    if isinstance(previous, str):
        msg = (
            "previous is a text, which only the text and compact formats render; for the "
            "messages format pass the previous AssembledContext or the messages it sent"
        )
        raise ConfigurationTypeError(msg)
    _check(previous)
    return previous


def _text_of(previous: Previous) -> str:
    if isinstance(previous, AssembledContext):
        return previous.render()
    if isinstance(previous, str):
        return previous
    _check(previous)
    # The text formats' messages are the rendered text cut in two: joined, they are the text.
    return "".join(str(message.get("content", "")) for message in previous)


def _check(previous: object) -> None:
    if isinstance(previous, Sequence) and all(isinstance(m, Mapping) for m in previous):
        return
    msg = (
        "previous must be the previous call's AssembledContext, the provider messages it sent "
        f"(a list of dicts) or its rendered text, got {type(previous).__name__}"
    )
    raise ConfigurationTypeError(msg)


def _common_length(first: str, second: str) -> int:
    """Length of the longest common start, by bisection on slices (compared in C)."""
    low, high = 0, min(len(first), len(second))
    if first[:high] == second[:high]:
        return high
    while high - low > 1:  # first[:low] is common, first[:high] is not
        middle = (low + high) // 2
        if first[low:middle] == second[low:middle]:
            low = middle
        else:
            high = middle
    return low
