"""The MCP server of a `ContextMemory`: its tools, their arguments and their errors.

`build_server` registers each `MemoryTools` method as a tool of the official SDK's `MCPServer`,
with a JSON schema of its arguments and a description the model reads. The SDK converts no
value: each reaches the core's own checks as the client sent it (``budget: "200"`` is refused
as `ContextMemory.assemble` refuses it, with the same message). An argument the tool does not
have, or one it needs that is missing, is refused by name (`ctxbudget.mcp.arguments`), and
every refusal (a bad session id, a text too long, a budget that nothing fits, a session of
another user) comes back to the client as a tool error (``isError``) with the message; the
server keeps serving. Tools run on worker threads (`ContextMemory` is safe across threads).

Needs the ``mcp`` extra (``pip install 'ctxbudget[mcp]'``).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from importlib import metadata
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

from mcp.server.context import CallNext, HandlerResult
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

from ctxbudget.errors import CtxBudgetError
from ctxbudget.mcp.arguments import check_call, tool_arguments
from ctxbudget.mcp.explained import explained
from ctxbudget.mcp.stdio import CALLS
from ctxbudget.mcp.tools import DEFAULT_BUDGET, FORMATS, RECALL_KINDS, ROLES, MemoryTools
from ctxbudget.memory.ordering import CallOrder

if TYPE_CHECKING:
    from ctxbudget.memory.context import ContextMemory

__all__ = ["INSTRUCTIONS", "build_server"]

_T = TypeVar("_T")

#: What the server tells the model about itself when a client connects (then how to pass users).
INSTRUCTIONS = """\
Long-term memory with token budgets (ctxbudget). Store each turn of a conversation with
`remember` (the same session_id for one conversation) and durable facts with `remember_fact`.
Before answering, call `context` with the user's question and a token budget: it returns the
messages worth sending (recent turns, relevant older turns, pinned facts, summaries), and they
always fit the budget. `recall` searches what was stored; `sessions` lists conversations;
`edit_message` corrects a stored message; `forget_messages`, `forget_session` and `forget_fact`
delete."""

_USERS = "Pass the user's user_id on every call, so that each user's memory stays their own."
_ONE_USER = "This server serves one user ({user}): leave user_id out."


def _arg(description: str, schema: dict[str, Any]) -> Any:
    """An argument the client's value reaches unconverted (the core checks it), with a schema.

    Typed ``Any`` for the SDK, so that pydantic converts nothing (``"200"`` stays a str, ``true``
    a bool, for the core to refuse by its own rule); ``schema`` is what clients are shown.
    """
    return Field(description=description, json_schema_extra=schema)


_TEXT: dict[str, Any] = {"type": "string"}
_OPTIONAL_TEXT: dict[str, Any] = {"type": ["string", "null"]}
_IDS: dict[str, Any] = {"type": "array", "items": {"type": "string"}}

SessionId = Annotated[Any, _arg("the conversation: an id you choose and keep using for it", _TEXT)]
OptionalSession = Annotated[
    Any, _arg("the conversation (see remember); leave out for none", _OPTIONAL_TEXT)
]
UserId = Annotated[
    Any,
    _arg(
        "the user the call is for; each user's memory is kept apart (a server started with "
        "--user serves that user only: leave it out)",
        _OPTIONAL_TEXT,
    ),
]
RecordId = Annotated[
    Any,
    _arg("your own id for it, unique in its session or user (default: a new one)", _OPTIONAL_TEXT),
]
Text = Annotated[Any, _arg("the message text", _TEXT)]

_READS = ToolAnnotations(read_only_hint=True, open_world_hint=False)
_WRITES = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)
_DELETES = ToolAnnotations(read_only_hint=False, destructive_hint=True, open_world_hint=False)


def build_server(
    memory: ContextMemory, *, user: str | None = None, name: str = "ctxbudget"
) -> MCPServer[Any]:
    """An MCP server whose tools remember, recall and assemble with ``memory``.

    Args:
        memory: the memory every tool uses; the caller closes it after serving (which stores
            the messages the tools acknowledged).
        user: serve this user only (`MemoryTools`); None: each call names its user.
        name: the server's name, as clients show it.

    >>> server = build_server(ContextMemory(path=tmp_path))  # doctest: +SKIP
    >>> server.run("stdio")  # doctest: +SKIP
    """
    tools = MemoryTools(memory, user=user)
    server: MCPServer[Any] = MCPServer(
        name,
        title="ctxbudget memory",
        instructions=f"{INSTRUCTIONS} {_USERS if user is None else _ONE_USER.format(user=user)}",
        version=_version(),
        # Logs go to stderr (the SDK's handler); warnings only, so a client's log stays quiet.
        log_level="WARNING",
    )

    def remember(
        session_id: SessionId,
        role: Annotated[Any, _arg("who said it", {"type": "string", "enum": list(ROLES)})],
        text: Text,
        user_id: UserId = None,
        name: Annotated[
            Any, _arg('the speaker\'s name; leave out, null or "" for none', _OPTIONAL_TEXT)
        ] = None,
        id: RecordId = None,  # noqa: A002 - the tool's argument name
        timestamp: Annotated[
            Any,
            _arg(
                "when it was said: ISO-8601 text or seconds since 1970 (UTC)",
                {"type": ["string", "number", "null"]},
            ),
        ] = None,
    ) -> dict[str, Any]:
        """Store one message of a conversation, in order; returns its id."""
        return _tool(
            lambda: tools.remember(
                session_id, role, text, user_id=user_id, name=name, id=id, timestamp=timestamp
            )
        )

    def remember_fact(
        text: Annotated[Any, _arg("the fact, e.g. 'Maya is vegetarian'", _TEXT)],
        session_id: OptionalSession = None,
        user_id: UserId = None,
        id: RecordId = None,  # noqa: A002 - the tool's argument name
    ) -> dict[str, Any]:
        """Pin a fact to a conversation (session_id) or to a user (user_id only).

        Pinned facts are offered in every context of their conversation, or of every
        conversation of their user. Pinning the same text to the same scope again stores it once.
        """
        return _tool(
            lambda: tools.remember_fact(text, session_id=session_id, user_id=user_id, id=id)
        )

    def recall(
        query: Annotated[Any, _arg("what to look for, in words", _TEXT)],
        session_id: OptionalSession = None,
        user_id: UserId = None,
        k: Annotated[
            Any,
            _arg(
                "how many hits at most (default 10)",
                {"type": "integer", "minimum": 0},
            ),
        ] = 10,
        kinds: Annotated[
            Any,
            _arg(
                f"kinds of record to search (default: {list(RECALL_KINDS)})",
                {
                    "type": ["array", "null"],
                    "items": {"type": "string", "enum": list(RECALL_KINDS)},
                },
            ),
        ] = None,
    ) -> dict[str, Any]:
        """Search stored messages, pinned facts and summaries by meaning and words.

        Name a session_id (one conversation) or a user_id (all of that user's conversations
        and facts); with both, that user's records in that conversation. Hits come best first.
        """
        return _tool(
            lambda: tools.recall(
                query,
                session_id=session_id,
                user_id=user_id,
                k=k,
                kinds=RECALL_KINDS if kinds is None else kinds,
            )
        )

    def context(
        session_id: SessionId,
        question: Annotated[Any, _arg("the user's current message", _TEXT)],
        budget: Annotated[
            Any,
            _arg(
                "tokens the context may use (counted with --model)",
                {"type": "integer", "minimum": 1},
            ),
        ] = DEFAULT_BUDGET,
        user_id: UserId = None,
        system: Annotated[
            Any, _arg("a system prompt to include (never cut)", _OPTIONAL_TEXT)
        ] = None,
        format: Annotated[  # noqa: A002 - the tool's argument name
            Any,
            _arg(
                "messages (chat messages), text or compact (one text)",
                {"type": "string", "enum": list(FORMATS)},
            ),
        ] = "messages",
    ) -> dict[str, Any]:
        """Build the context for answering a question in a conversation, within a token budget.

        Returns the messages to send (the question last), tokens_used (never above
        tokens_available), and what was included and left out, with the reasons.
        """
        return _tool(
            lambda: tools.context(
                session_id,
                question,
                budget=budget,
                user_id=user_id,
                system=system,
                format=format,
            )
        )

    def sessions(user_id: UserId = None) -> dict[str, Any]:
        """List the conversations that hold records: a user's, or all in this namespace."""
        return _tool(lambda: tools.sessions(user_id=user_id))

    def forget_session(session_id: SessionId) -> dict[str, Any]:
        """Delete a conversation: every message, pinned fact and summary of it. Cannot be undone."""
        return _tool(lambda: tools.forget_session(session_id))

    def edit_message(
        session_id: SessionId,
        id: Annotated[Any, _arg("the message's id, as remember returned it", _TEXT)],  # noqa: A002
        text: Text,
        user_id: UserId = None,
    ) -> dict[str, Any]:
        """Correct a stored message: its new text replaces the old everywhere, in its place."""
        return _tool(lambda: tools.edit_message(session_id, id, text, user_id=user_id))

    def forget_messages(
        session_id: SessionId,
        ids: Annotated[Any, _arg("the messages' ids, as remember returned them", _IDS)],
        user_id: UserId = None,
    ) -> dict[str, Any]:
        """Delete messages of a conversation, and what quoted them. Cannot be undone."""
        return _tool(lambda: tools.forget_messages(session_id, ids, user_id=user_id))

    def forget_fact(
        id: Annotated[Any, _arg("the fact's id, as remember_fact returned it", _TEXT)],  # noqa: A002
        session_id: OptionalSession = None,
        user_id: UserId = None,
    ) -> dict[str, Any]:
        """Remove a pinned fact of a conversation (session_id) or of a user (user_id only)."""
        return _tool(lambda: tools.forget_fact(id, session_id=session_id, user_id=user_id))

    registered: list[tuple[Callable[..., dict[str, Any]], ToolAnnotations]] = [
        (remember, _WRITES),
        (remember_fact, _WRITES),
        (recall, _READS),
        (context, _READS),
        (sessions, _READS),
        (edit_message, _DELETES),  # the old text is gone
        (forget_messages, _DELETES),
        (forget_session, _DELETES),
        (forget_fact, _DELETES),
    ]
    for function, hints in registered:
        server.add_tool(function, annotations=hints, structured_output=True)
    arguments = {function.__name__: tool_arguments(function) for function, _ in registered}
    server.middleware.append(_counted)
    order = CallOrder()  # pipelined calls apply in the order sent (a write after all before it)
    reads = frozenset(f.__name__ for f, hints in registered if hints is _READS)
    server.middleware.append(partial(_ordered, order, reads))
    server.middleware.append(partial(check_call, arguments))
    server.middleware.append(explained)  # the SDK's bare "Invalid request parameters", said
    return server


async def _counted(ctx: Any, call_next: CallNext) -> HandlerResult:
    """Every request, counted while it is answered (`ctxbudget.mcp.stdio.CALLS`)."""
    CALLS.start()
    try:
        return await call_next(ctx)
    finally:
        CALLS.end()


async def _ordered(
    order: CallOrder, reads: frozenset[str], ctx: Any, call_next: CallNext
) -> HandlerResult:
    """A tool call runs after the writes sent before it; a write after every call before it.

    The SDK runs each tool on a worker thread, where a call sent later could run first: until
    2026-12-01 ``remember`` calls a client sent without waiting for each reply were stored in
    the threads' order, not the conversation's (`ctxbudget.memory.ordering`).
    """
    if ctx.method != "tools/call":
        return await call_next(ctx)
    params = ctx.params if isinstance(ctx.params, dict) else {}
    name = params.get("name")  # not a str: the relay's form of one (refused or read later)
    writes = not (isinstance(name, str) and name in reads)  # an unknown one waits its turn
    return await order.run(lambda: call_next(ctx), writes=writes)


def _tool(work: Callable[[], _T]) -> _T:
    """Run a tool's work; its refusals become tool errors with their message.

    ctxbudget's errors, and the builtin ``TypeError``/``ValueError`` the core raises for a
    value of the wrong kind: the client's values reach the core unconverted.
    """
    try:
        return work()
    except (CtxBudgetError, TypeError, ValueError) as exc:
        raise ToolError(str(exc)) from exc


def _version() -> str:
    try:
        return metadata.version("ctxbudget")
    except metadata.PackageNotFoundError:  # a source folder that was never installed
        return "0"
