"""The contract between the conformance suite and one door of the product.

The promises are written once, as test methods in ``tests/conformance/test_*.py``, against a
`Driver`: each door (sync memory, async memory, the CLI, MCP over stdio and over streamable
HTTP, the LangChain middleware in a real ``create_agent``, ``budget_messages``, the retriever,
the chat history, the LlamaIndex memory in a chat engine, its retriever and its node
postprocessor) has one small driver module in this package that turns the suite's few verbs
into that door's own calls, and reads back what the framework or client itself received.

A driver that cannot honour a verb says so by listing what it can do in `Driver.can`; the
suite skips with that reason, visibly (``-rs``), never silently.

Verbs (every argument is plain data; the suite never touches a framework type):

- ``add(session, user, turns)``: store conversation turns through the door (or through the
  memory the door reads, where the door itself does not write: a retriever).
- ``send(session, user, query, budget)``: one call of the door, and what came back:
  `Received`.
- ``bad(argument, value)``: one call of the door with ``argument`` set to ``value``; returns
  the error the caller got (`Refusal`), or None when the call was accepted.
- ``close()`` then ``after_close()``: the error a call on the closed door raises.

Optional verbs, each behind its capability (the suite calls one only when ``can`` lists it):

- ``pin(text, id, session=None, user=None)`` ("pin"): pin a fact through the door.
- ``after_close_each()`` ("close_each"): every call of the closed door, by name, with the
  exception each raised (None: it succeeded).
- ``cancel_delete(session)`` ("cancel"): start the door's async call that deletes or clears
  ``session``, cancel it at once, and return without waiting for it.
- ``kept(memory, session, user)`` ("kept"): the texts of what the door stored for ``session``
  (of ``user``), oldest first, as ``memory`` (another `ContextMemory` on the same place) reads
  them, for a door that keeps turns elsewhere than a session's history (a LangGraph store keeps
  them as values); without it the suite reads ``memory.history(session)``.
- ``edit(session, user, id, text)`` ("edit"): replace the stored message ``id`` of ``session``
  (of ``user``) with ``text`` through the door's own edit operation, in its place
  (`ContextMemory.replace_message` and its async twin); done when it returns.
- ``stop(signum, timeout)`` ("signals"): send ``signum`` to the server process (stdin left
  open), wait up to ``timeout`` seconds, and return its exit status (None: still running, then
  it is killed); and ``catching(signum, timeout) -> bool``: wait until the process handles
  ``signum`` itself (it is starting up), so a signal then tests start-up.

A driver may say which arguments its door takes (``takes``: a frozenset of the suite's names:
``budget``, ``k``, ``query``, ``text``, ``timestamp``, ``session_id``, ``user_id``); the suite skips
the others for that door, visibly. ``query=text`` there says the door's query is also a message it
stores or sends (the last human message): a bad query may be refused as the core refuses that text,
whichever of the core's checks sees it first. ``bad`` passes the value as the door's own caller
would write it (a JSON number in a JSON-RPC call, text on a command line); a door whose callers
cannot write the value at all (a command line has no bool, JSON has no NaN) raises `Inexpressible`
with the reason, and the suite skips that case for that door, visibly.

The suite holds a second `ContextMemory` on the same folder or server (``admin``) to delete,
replace and unpin behind the door's back, as another object, process or worker would. Of those
removals, a door that keeps what it stores as a user's values (a LangGraph store) is concerned
only by ``delete_user``, which removes them: a session, a message or a pin of the conversation
is not a value. Its ``removed_user_only`` leaves the others out of the removal machine.

A door without a report whose choice can still be read back for a call (a store: the core's
search answer) says ``chosen``: the chosen promise runs on it as on a door with a report.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

__all__ = [
    "CAPABILITIES",
    "Driver",
    "Inexpressible",
    "Place",
    "Received",
    "Refusal",
    "Turn",
]

CAPABILITIES = frozenset(
    {
        "add",  # stores turns through the door
        "send",  # answers a query with what fits (a context, documents, nodes, messages)
        "report",  # the call's AssembledContext (or the report document) can be read back
        "chosen",  # no report, but what the door chose for the call can be read back
        "span",  # the call makes an OpenTelemetry span with its token count
        "removal",  # reads stored state, so what another object removes must not come back
        "bad",  # takes arguments from its caller that the core's boundary must check
        "close",  # has a close; calls after it must raise one clear CtxBudgetError
        "cancel",  # async: a cancelled call has no effect or finishes before the next starts
        "signals",  # a server process: SIGTERM/SIGINT stop it whatever stdin does
        "pin",  # pins facts through the door (else the suite pins through its admin)
        "kinds",  # a Refusal's kind is the class of the error the caller got (else not shown)
        "close_each",  # after_close_each(): every call of a closed door, not only one
        "kept",  # kept(memory, session, user): it stores turns elsewhere than the history
        "removed_user_only",  # of the admin's removals, only delete_user concerns what it keeps
        "edit",  # edit(session, user, id, text): replaces a stored message through the door
        "gather",  # add_gathered(session, user, turns): its async add per turn, made at once
    }
)


@dataclass(frozen=True)
class Place:
    """Where a door's memory lives: an embedded folder, or a collection on a Chroma server.

    ``folder`` is set for embedded stores, ``url`` (and ``collection``) for a server;
    ``namespace`` is the tenant every object of one test shares. `open_memory` opens another
    `ContextMemory` on the same place (the suite's ``admin``, or the door's own).
    """

    folder: str | None
    url: str | None
    collection: str
    namespace: str
    embedder: Any

    def cli_options(self) -> list[str]:
        """The command line's global options for this place (``--path`` or ``--chroma-url``).

        The command line and the MCP server open the default collection (``ctxbudget``): a
        place for them has that collection, and ``namespace`` keeps tests apart.
        """
        where = (
            ["--path", self.folder] if self.folder is not None else ["--chroma-url", str(self.url)]
        )
        return [*where, "--namespace", self.namespace]

    def open_memory(self, **options: Any) -> Any:
        """A new `ContextMemory` on this place (write-behind off unless asked)."""
        from ctxbudget import ContextMemory
        from ctxbudget.store.chroma_store import ChromaStore

        store = ChromaStore(
            self.folder, url=self.url, embedder=self.embedder, collection=self.collection
        )
        options.setdefault("write_behind", False)
        return ContextMemory(store=store, namespace=self.namespace, **options)


@dataclass(frozen=True)
class Turn:
    """One conversation turn as the suite gives it: role (user/assistant), text, an id."""

    role: str
    text: str
    id: str


@dataclass
class Received:
    """What the door's caller (the framework, the client, the model) got from one ``send``.

    ``got``: (id, text) of each thing received, in the order received, as the caller can
    identify it (for a chat model: each message's id and text; for a retriever: each document's
    id and page content). ``chosen``: (id, text) of each item the door's report lists as
    included, in order, mapped to the same ids the caller sees. ``sent_tokens``: the tokens of
    what the model or client receives, counted here from scratch with tiktoken (None where the
    door returns items, not a prompt). ``report_tokens`` and ``span_tokens``: what the report
    and the span say (None where there is none). ``available``: ``window - reserve``.
    """

    got: list[tuple[str, str]]
    chosen: list[tuple[str, str]]
    available: int
    sent_tokens: int | None = None
    report_tokens: int | None = None
    span_tokens: int | None = None
    report: Any = None
    extra: dict[str, Any] = field(default_factory=dict)
    texts: list[str] = field(default_factory=list)
    """The raw text of everything the caller received (each message, document or node), in
    order: what a removed record must never appear in, identified or not."""
    messages: list[dict[str, Any]] = field(default_factory=list)
    """The chat messages received, in the provider's (OpenAI) form, for a door that sends a
    conversation (a chat model's request, a rendered context): what every provider must accept.
    Empty for doors that return documents or nodes."""
    stored: list[Turn] = field(default_factory=list)
    """Turns the send itself stored in the session, in order (an agent or a chat engine stores
    the question and its reply as they happen): a reference model of the session's history
    adds them. Empty for doors that only read."""


@dataclass(frozen=True)
class Refusal:
    """The error a caller got for a bad value: its class name and its message."""

    kind: str
    message: str
    is_ctxbudget_error: bool


class Inexpressible(Exception):  # noqa: N818 - a signal to the suite, not an error
    """Raised by ``bad``: this door's callers cannot write that value (the reason)."""


class Driver(Protocol):
    """One door of the product, as the suite drives it."""

    name: str
    can: frozenset[str]

    def add(self, session: str, user: str, turns: Sequence[Turn]) -> None:
        """Store ``turns`` through the door (acknowledged when this returns)."""

    def send(self, session: str, user: str, query: str, budget: int) -> Received:
        """One call of the door for ``query`` within ``budget`` tokens."""

    def bad(self, argument: str, value: object) -> Refusal | None:
        """One call with ``argument=value``; the error the caller got, or None (accepted)."""

    def close(self) -> None:
        """Close the door (and what it owns)."""

    def after_close(self) -> BaseException | None:
        """One call after `close`: the exception raised, or None (it succeeded)."""
