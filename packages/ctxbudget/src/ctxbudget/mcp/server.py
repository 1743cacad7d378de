"""The MCP server of a `ContextMemory`: its tools, their arguments and their errors.

`build_server` registers each `MemoryTools` method as a tool of the official SDK's `MCPServer`,
with a JSON schema of its arguments and a description the model reads. Arguments the schema
refuses, and every `CtxBudgetError` a tool raises (a bad session id, a text too long, a budget
that nothing fits), come back to the client as a tool error (``isError``) with the message; the
server keeps serving. Tools run on worker threads (`ContextMemory` is safe across threads).

Needs the ``mcp`` extra (``pip install 'ctxbudget[mcp]'``).
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import metadata
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeVar

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

from ctxbudget.errors import CtxBudgetError
from ctxbudget.mcp.tools import DEFAULT_BUDGET, MAX_K, RECALL_KINDS, Format, MemoryTools, Role

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
`forget_session` and `forget_fact` delete."""

_USERS = "Pass the user's user_id on every call, so that each user's memory stays their own."
_ONE_USER = "This server serves one user ({user}): leave user_id out."

SessionId = Annotated[
    str, Field(description="the conversation: an id you choose and keep using for it")
]
OptionalSession = Annotated[
    str | None, Field(description="the conversation (see remember); leave out for none")
]
UserId = Annotated[
    str | None,
    Field(
        description="the user the call is for; each user's memory is kept apart (a server "
        "started with --user serves that user only: leave it out)"
    ),
]
RecordId = Annotated[
    str | None,
    Field(description="your own id for it, unique in its session or user (default: a new one)"),
]

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
        role: Annotated[Role, Field(description="who said it")],
        text: Annotated[str, Field(description="the message text")],
        user_id: UserId = None,
        name: Annotated[str | None, Field(description="the speaker's name, if any")] = None,
        id: RecordId = None,  # noqa: A002 - the tool's argument name
        timestamp: Annotated[
            str | float | None,
            Field(description="when it was said: ISO-8601 text or seconds since 1970 (UTC)"),
        ] = None,
    ) -> dict[str, Any]:
        """Store one message of a conversation, in order; returns its id."""
        return _tool(
            lambda: tools.remember(
                session_id, role, text, user_id=user_id, name=name, id=id, timestamp=timestamp
            )
        )

    def remember_fact(
        text: Annotated[str, Field(description="the fact, e.g. 'Maya is vegetarian'")],
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
        query: Annotated[str, Field(description="what to look for, in words")],
        session_id: OptionalSession = None,
        user_id: UserId = None,
        k: Annotated[int, Field(description=f"how many hits at most (1-{MAX_K})")] = 10,
        kinds: Annotated[
            list[Literal["message", "pinned", "summary"]] | None,
            Field(description=f"kinds of record to search (default: {list(RECALL_KINDS)})"),
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
        question: Annotated[str, Field(description="the user's current message")],
        budget: Annotated[
            int, Field(description="tokens the context may use (counted with --model)")
        ] = DEFAULT_BUDGET,
        user_id: UserId = None,
        system: Annotated[
            str | None, Field(description="a system prompt to include (never cut)")
        ] = None,
        format: Annotated[  # noqa: A002 - the tool's argument name
            Format,
            Field(description="messages (chat messages), text or compact (one text)"),
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

    def forget_fact(
        id: Annotated[str, Field(description="the fact's id, as remember_fact returned it")],  # noqa: A002
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
        (forget_session, _DELETES),
        (forget_fact, _DELETES),
    ]
    for function, hints in registered:
        server.add_tool(function, annotations=hints, structured_output=True)
    return server


def _tool(work: Callable[[], _T]) -> _T:
    """Run a tool's work; ctxbudget's errors become tool errors with their message."""
    try:
        return work()
    except CtxBudgetError as exc:
        raise ToolError(str(exc)) from exc


def _version() -> str:
    try:
        return metadata.version("ctxbudget")
    except metadata.PackageNotFoundError:  # a source folder that was never installed
        return "0"
