r"""What the model sees, in what order, and what each piece costs.

Three formats share one layout of sections, in a cache-friendly order: the stable prefix
(system, pinned, tools) first and byte-identical across turns, then files, summaries, retrieved
knowledge, recent history in chronological order, and the current query last.

* ``messages``: provider chat messages. The stable prefix is one system message, files,
  summaries and knowledge a second one, each history item its own message, the query a user
  message. A layout made with ``one_system=True`` puts all of it in the first system message
  (adapters that send everything before the caller's own messages as one system message,
  `ctxbudget.core.split`): it is counted as it is sent, one message overhead less.
* ``text``: one string with ``## Section`` headers; content lines are indented on continuation,
  so content can never start a line that looks like a header.
* ``compact``: one string, one line per item (``who|text`` under ``@section`` headers) with
  newlines and backslashes escaped, so content can never forge a section or a turn.

Each row (`ctxbudget.core.markup.row_fragment`) shows who said it, what it says and the tool
calls it carries (`ctxbudget.core.rows`: ``assistant (Ben): Looking. [calls search({"q": "x"})
id=c1]``); a file's row opens with its path instead (``### src/app.py``, then its lines
indented; compact: ``### src/app.py|text``).
A knowledge or summary row of an item a newer one restates (`ContextItem.newer`) has
``[earlier; see newer]`` after its label (``user (Ana) [earlier; see newer]|I live in Lisbon``).
The system prompt and the query are not indented or escaped (they stay as written), except
that a line of theirs that would read as structure (a section header, a date line, a
``role:`` / ``role|`` turn) gets a backslash in front; so does a line of a knowledge entry
without an author that starts like one. `parse_rendered` inverts the text and compact formats
(`ctxbudget.core.readback`): every text comes back as it was put, trimmed of surrounding
whitespace (and, in the text format, with its line breaks as ``"\\n"``).

Every piece of rendered text is a *fragment* that ends with ``"\\n"`` and starts with a character
that is neither whitespace nor ``"/"``. With tiktoken encodings this makes the count of the whole
exactly the sum of the fragments' counts (its pre-tokenizer never joins such fragments), which is
what lets packing count once per item and still know the exact total. Counters without that
property are checked on the whole rendered output instead.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ctxbudget.core.items import ContextItem
from ctxbudget.core.markup import (
    COMPACT_HEADERS,
    DATED,
    SECTION_GROUPS,
    SECTION_OF_TIER,
    SECTIONS,
    TEXT_HEADERS,
    date_label,
    row_fragment,
)
from ctxbudget.core.numbers import shown
from ctxbudget.core.unicode import lone_surrogate
from ctxbudget.errors import InvalidItemError
from ctxbudget.tokens.counter import TokenCounter

__all__ = ["FORMATS", "Format", "Layout", "Part", "message_of"]

Format = Literal["messages", "text", "compact"]
FORMATS: tuple[Format, ...] = ("messages", "text", "compact")


class Layout:
    """The rendering rules of one format with one counter: sections, fragments and their costs.

    Args:
        fmt: the format.
        counter: what counts the tokens.
        one_system: (``messages`` only) files, summaries and knowledge go into the system
            message of the stable prefix instead of a second one.
        joined: (with ``one_system``) that message is sent inside the caller's own system
            message, a history item of role ``system`` given first and never pruned: after its
            text (which then ends with a line break, so that the counts add up) or as a text
            part after its parts. It pays no message overhead of its own.
    """

    def __init__(
        self,
        fmt: Format,
        counter: TokenCounter,
        *,
        one_system: bool = False,
        joined: bool = False,
    ) -> None:
        if fmt not in FORMATS:
            msg = f"format must be one of {list(FORMATS)}, got {shown(fmt)}"
            raise InvalidItemError(msg)  # a ValueError too
        self.format: Format = fmt
        self.counter = counter
        self.one_system = one_system
        self.joined = joined and one_system
        self._headers = COMPACT_HEADERS if fmt == "compact" else TEXT_HEADERS
        self._header_cost = {s: counter.count(h) for s, h in self._headers.items()}
        self._fragments: dict[tuple[Any, ...], str] = {}
        self._costs: dict[tuple[Any, ...], int] = {}
        self._date_costs: dict[str, int] = {}

    # -- where things go -------------------------------------------------------------------
    @staticmethod
    def section_of(item: ContextItem) -> str:
        """The section an item renders in.

        By tier; custom tiers go with retrieved knowledge, and a summary (an item with
        ``summary_of``) of a tier without a section of its own goes with the summaries.
        """
        # An IntEnum tier hashes as its int: no conversion on this hot path.
        return SECTION_OF_TIER.get(item.tier) or ("summaries" if item.summary_of else "knowledge")

    def group_of(self, section: str) -> str:
        """The message a section goes into; text formats are also sent as [system, user]."""
        if self.format == "messages":
            group = SECTION_GROUPS[section]
            return "prefix" if self.one_system and group == "context" else group
        return "text-query" if section == "query" else "text"

    # -- costs ------------------------------------------------------------------------------
    def base_cost(self) -> int:
        """Tokens paid whatever is included: the reply priming of a chat request."""
        return self.counter.reply_priming

    def open_cost(self, section: str) -> int:
        """Tokens paid once when the first item of ``section`` is included (header)."""
        if self.format == "messages":
            if section in ("system", "history", "query"):
                return 0
            return self._header_cost[section]
        if section == "system":
            return 0
        return self._header_cost[section]

    def groups_of(self, section: str) -> tuple[str, ...]:
        """Every message a section writes into.

        The text formats' query header goes at the end of the system message, the query itself
        into the user message.
        """
        group = self.group_of(section)
        if group == "text-query" and self.open_cost(section):
            return ("text", group)
        return (group,)

    def group_open_cost(self, group: str) -> int:
        """Tokens paid once when a group (a message) gets its first item.

        The text formats are guaranteed to fit both as one string and as the
        ``[system, user]`` messages of `to_messages`, so their message overhead is paid too.
        """
        if group == "prefix" and self.joined:
            return 0  # sent inside the caller's own system message
        if group in ("prefix", "context", "text"):
            return self.counter.per_message + self.counter.count("system")
        if group == "text-query":
            return self.counter.per_message + self.counter.count("user")
        return 0

    def fragment(self, item: ContextItem, section: str) -> str:
        """The exact text ``item`` contributes to the output (message content for messages)."""
        if item.tool_calls:  # the calls' names and arguments are in the text: not cached
            return row_fragment(item, section, self.format)
        key = (
            section,
            item.text,
            item.role,
            item.name,
            item.timestamp,
            item.images,
            item.tool_call_id,
            bool(item.newer),
        )
        cached = self._fragments.get(key)
        if cached is not None:
            return cached
        text = row_fragment(item, section, self.format)
        if len(self._fragments) > 200_000:
            self._fragments.clear()
        self._fragments[key] = text
        return text

    # -- dates: one line when the date changes, not a time on every row ----------------------
    def date_of(self, item: ContextItem, section: str) -> str:
        """The date line an item sits under (empty: none), by format and section."""
        if item.timestamp is None or section not in DATED[self.format]:
            return ""
        return date_label(item.timestamp)

    def date_line(self, date: str) -> str:
        """The line that opens a run of items of one date."""
        return f"[{date}]\n"

    def date_line_cost(self, date: str) -> int:
        """Tokens of `date_line` (cached)."""
        tokens = self._date_costs.get(date)
        if tokens is None:
            tokens = self._date_costs[date] = self.counter.count(self.date_line(date))
        return tokens

    def join_refund(
        self, older: Sequence[ContextItem], newer: Sequence[ContextItem], section: str
    ) -> int:
        """Tokens saved when ``older`` renders right before ``newer``.

        The date line ``newer`` opens with is not needed when ``older`` ends on the same date.
        """
        first = next((d for d in (self.date_of(it, section) for it in newer) if d), "")
        if not first:
            return 0
        last = next((d for d in (self.date_of(it, section) for it in reversed(older)) if d), "")
        return self.date_line_cost(first) if first == last else 0

    def run_cost(self, items: Sequence[ContextItem], section: str) -> int:
        """Tokens of consecutive items (in render order) with the date lines among them."""
        total = 0
        last = ""
        for item in items:
            date = self.date_of(item, section)
            if date and date != last:
                total += self.date_line_cost(date)
                last = date
            total += self.cost(item, section)
        return total

    def cost(self, item: ContextItem, section: str) -> int:
        """Tokens ``item`` adds when included (its message overhead for the messages format)."""
        if item.tool_calls or item.parts is not None:  # depends on more than the key: not cached
            return self._counted(item, section)
        key = (
            section,
            item.text,
            item.role,
            item.name,
            item.timestamp,
            item.tool_call_id,
            bool(item.newer),
        )
        tokens = self._costs.get(key)
        if tokens is None:
            tokens = self._counted(item, section)
            if len(self._costs) > 200_000:
                self._costs.clear()
            self._costs[key] = tokens
        return tokens

    def _counted(self, item: ContextItem, section: str) -> int:
        """`_cost`, with a text the tokenizer refuses said as the item's and the field's."""
        try:
            return self._cost(item, section)
        except InvalidItemError as exc:
            fields = ("text", "name", "tool_call_id", "tool_calls")
            for field in fields:
                values = getattr(item, field)
                for value in values if isinstance(values, tuple) else (values,):
                    problem = lone_surrogate(value) if isinstance(value, str) else None
                    if problem is not None:
                        msg = f"ContextItem {item.id!r}: {field} {problem}"
                        raise InvalidItemError(msg) from exc
            msg = f"ContextItem {item.id!r}: {exc}"
            raise InvalidItemError(msg) from exc

    def _cost(self, item: ContextItem, section: str) -> int:
        text = self.fragment(item, section)
        if self.format == "messages" and section in ("history", "query"):
            role = "user" if section == "query" else (item.role or "user")
            if (
                item.name
                or item.tool_calls
                or item.tool_call_id is not None
                or item.parts is not None
            ):
                message = message_of(item, role, text)
                return self.counter.count_messages([message]) - self.counter.reply_priming
            return self.counter.per_message + self.counter.count(role) + self.counter.count(text)
        return self.counter.count(text)

    # -- output -----------------------------------------------------------------------------
    def render_sections(self, placed: Mapping[str, Sequence[ContextItem]]) -> list[Part]:
        """The output as parts: ``(group, role, text, item)`` in order, headers included."""
        parts: list[Part] = []
        for section in SECTIONS:
            items = placed.get(section, ())
            if not items:
                continue
            header = self.open_cost(section) and self._headers.get(section)
            if header:
                parts.append(Part(self.groups_of(section)[0], "system", header, None))
            last = ""
            for position, item in enumerate(items):
                if section == "query" and position and self.format != "messages":
                    # Each query after the first goes under the header again, on a line of its
                    # own: `readback` finds them apart, and the count stays additive.
                    previous = parts[-1]
                    if previous.text:
                        parts[-1] = dataclasses.replace(previous, text=previous.text + "\n")
                    parts.append(Part("text-query", "user", self._headers["query"], None))
                date = self.date_of(item, section)
                if date and date != last:
                    parts.append(Part(self.group_of(section), "system", self.date_line(date), None))
                    last = date
                role = "system"
                if section == "history":
                    role = item.role or "user"
                elif section == "query":
                    role = "user"
                parts.append(Part(self.group_of(section), role, self.fragment(item, section), item))
        return parts

    def query_join_cost(self, item: ContextItem) -> int:
        """Tokens a query adds when another query follows it.

        Text formats: its line break and the next query's header; messages: none (each query
        is a message of its own).
        """
        if self.format == "messages":
            return 0
        text = self.fragment(item, "query")
        joined = self.counter.count(text + "\n") - self.counter.count(text) if text else 0
        return joined + self._header_cost["query"]

    def parts_tokens(self, parts: Sequence[Part]) -> int:
        """The exact tokens of the output as sent, summed from the parts' cached counts.

        Exact for counters whose counts add up over fragments (tiktoken); see the module
        docstring.
        """
        counter = self.counter
        total = counter.reply_priming
        groups: set[str] = set()
        for part in parts:
            if part.item is not None and (
                self.format == "messages" and part.group in ("history", "query")
            ):
                section = "query" if part.group == "query" else "history"
                total += self.cost(part.item, section)
                continue
            if part.group not in groups:
                groups.add(part.group)
                total += self.group_open_cost(part.group)
            total += counter.count(part.text)
        return total

    def to_text(self, parts: Iterable[Part]) -> str:
        """Join parts into the text output (text and compact formats)."""
        return "".join(p.text for p in parts)

    def to_messages(self, parts: Sequence[Part]) -> list[dict[str, Any]]:
        """Provider chat messages from parts (works for every format)."""
        if self.format != "messages":
            # The query header stays at the end of the system message, so the messages carry
            # exactly the fragments of the text plus the per-message overhead.
            queries = [p for p in parts if p.group == "text-query"]
            body = [p for p in parts if p.group != "text-query"]
            out: list[dict[str, Any]] = []
            if body:  # even when every included text is empty: it was paid for
                out.append({"role": "system", "content": "".join(p.text for p in body)})
            if queries:
                out.append({"role": "user", "content": "".join(p.text for p in queries)})
            return out
        messages: list[dict[str, Any]] = []
        open_groups: dict[str, tuple[dict[str, Any], list[str]]] = {}
        for part in parts:
            if part.group in ("prefix", "context"):
                group = open_groups.get(part.group)
                if group is None:
                    group = open_groups[part.group] = ({"role": "system", "content": ""}, [])
                    messages.append(group[0])
                group[1].append(part.text)  # joined once: hundreds of memories a call
            elif part.item is not None:
                messages.append(message_of(part.item, part.role, part.text))
        for message, texts in open_groups.values():
            message["content"] = "".join(texts)
        if self.joined and "prefix" in open_groups and len(messages) > 1:
            own = messages[1]
            if own["role"] == "system":  # the caller's system message takes the prefix
                text = messages.pop(0)["content"]
                content = own["content"]
                own["content"] = (
                    content + text
                    if isinstance(content, str)
                    else [*content, {"type": "text", "text": text}]
                )
        return messages


def message_of(item: ContextItem, role: str, content: str) -> dict[str, Any]:
    """The provider message of a history or query item."""
    message: dict[str, Any] = {"role": role, "content": content}
    if item.parts is not None:  # a multimodal message is sent as its parts
        message["content"] = list(item.parts)
    if item.name:
        message["name"] = item.name
    if item.tool_call_id is not None:
        message["tool_call_id"] = item.tool_call_id
    raw_calls = item.metadata.get("tool_calls") if item.tool_calls else None
    if raw_calls is not None:
        message["tool_calls"] = raw_calls
    return message


@dataclass(frozen=True, slots=True)
class Part:
    """One piece of output: its group (message), role, text, and the item (None for headers)."""

    group: str
    role: str
    text: str
    item: ContextItem | None
