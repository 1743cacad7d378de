"""What the drivers share: who is who in what a caller received, counting it, refusals.

- `identify`: the stored things a caller received, found by their text in what it received
  (a chat model sees text, not ids); the suite's texts are single lines with a unique tag each,
  so a text is found exactly where it was sent.
- `count_sent`: the tokens of chat messages as the provider bills them, counted here from
  scratch with tiktoken (OpenAI's published rule: 3 per message, 1 more for a name, 3 to prime
  the reply), not with ctxbudget's counter.
- `SPANS`: the in-memory exporter every in-process door's spans go to (the suite's conftest
  points ``ctxbudget.telemetry`` at it); `assembly_tokens` reads the last assembly's count.
- `refusal_of`, `attempt`, `raised`: an exception as the suite compares it.
- For the framework drivers: argument routing (`BUDGET_NAMES`, `routed`), turns as data
  (`pairs`, `payload`, `new_turns`), and what a caller received (`reported`, `heard`).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Awaitable, Callable, Collection, Iterable, Iterator, Mapping, Sequence
from functools import cache
from typing import Any, TypeVar

import tiktoken
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic import ValidationError

from ctxbudget.errors import CtxBudgetError
from ctxbudget.tokens.encodings import ensure_offline_encodings

from .base import Inexpressible, Received, Refusal, Turn

__all__ = [
    "BUDGET_NAMES",
    "MODEL",
    "PROVIDER",
    "SPANS",
    "gathered",
    "HoldsNothing",
    "Registry",
    "assembly_tokens",
    "attempt",
    "cancelled",
    "chosen_refs",
    "count_sent",
    "framework_value",
    "heard",
    "identify",
    "new_turns",
    "overtaken_by_thread",
    "overtaken_on_loop",
    "pairs",
    "payload",
    "raised",
    "raised_each",
    "refusal_of",
    "reported",
    "routed",
    "texts_of",
]

MODEL = "gpt-4o"

BUDGET_NAMES = frozenset({"budget", "max_tokens", "token_limit", "window"})
"""Names the suite may give a budget by; each driver passes it as its door's own argument."""

_T = TypeVar("_T")

SPANS = InMemorySpanExporter()
PROVIDER = TracerProvider()
PROVIDER.add_span_processor(SimpleSpanProcessor(SPANS))


class HoldsNothing:
    """``close`` and ``after_close`` of a door that holds no resource (no ``close`` in ``can``)."""

    def close(self) -> None:
        """Nothing to close."""

    def after_close(self) -> BaseException | None:
        """Not applicable."""
        return None


class Registry:
    """The texts a driver stored, by id (what it can recognise in what the caller received)."""

    def __init__(self) -> None:
        self.texts: dict[str, str] = {}

    def note(self, record_id: str, text: str) -> None:
        self.texts[record_id] = text


def identify(received: Sequence[str], known: Mapping[str, str]) -> list[tuple[str, str]]:
    """(id, text) of each known text found in ``received``, in the order first received."""
    stream = "\x00".join(received)
    found: list[tuple[int, str, str]] = []
    for record_id, text in known.items():
        at = stream.find(text)
        if at >= 0:
            found.append((at, record_id, text))
    return [(record_id, text) for _, record_id, text in sorted(found)]


def texts_of(messages: Iterable[Mapping[str, Any]]) -> list[str]:
    """The text content of each chat message (a list of parts: their text parts joined)."""
    out: list[str] = []
    for message in messages:
        content = message.get("content", "")
        if isinstance(content, str):
            out.append(content)
        else:
            out.append("".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping)))
    return out


@cache
def _encoding(model: str) -> tiktoken.Encoding:
    ensure_offline_encodings()  # tiktoken's own files, bundled: nothing is downloaded
    return tiktoken.encoding_for_model(model)


def count_sent(messages: Iterable[Mapping[str, Any]], model: str = "gpt-4o") -> int:
    """Tokens of ``messages`` as sent to ``model`` (text content only), counted from scratch."""
    encoding = _encoding(model)
    given = list(messages)
    total = 3  # the reply's priming
    for message, text in zip(given, texts_of(given), strict=True):
        total += 3 + len(encoding.encode(str(message.get("role", ""))))
        total += len(encoding.encode(text, disallowed_special=()))
        if message.get("name"):
            total += 1 + len(encoding.encode(str(message["name"])))
    return total


def assembly_tokens() -> int | None:
    """``ctxbudget.tokens.used`` of the last finished top-level ``ctxbudget.assemble`` span."""
    spans = [
        s
        for s in SPANS.get_finished_spans()
        if s.name == "ctxbudget.assemble"
        and s.attributes
        and "ctxbudget.tokens.used" in s.attributes
    ]
    if not spans:
        return None
    outer = [s for s in spans if s.parent is None] or spans
    value = outer[-1].attributes["ctxbudget.tokens.used"]  # type: ignore[index]
    return int(value)  # type: ignore[arg-type]


def refusal_of(exc: BaseException) -> Refusal:
    """How the suite compares an exception: its class name, message, and whether it is ours."""
    return Refusal(type(exc).__name__, str(exc), isinstance(exc, CtxBudgetError))


def attempt(call: Callable[[], object]) -> Refusal | None:
    """Run ``call``: None when it was accepted, else the error its caller got."""
    exc = raised(call)
    return None if exc is None else refusal_of(exc)


def raised(call: Callable[[], object]) -> BaseException | None:
    """Run ``call``: what it raised, or None."""
    try:
        call()
    except Exception as exc:  # noqa: BLE001 - the suite judges whatever the caller got
        return exc
    return None


def raised_each(calls: Mapping[str, Callable[[], object]]) -> dict[str, BaseException | None]:
    """`raised` of each call, by name."""
    return {name: raised(call) for name, call in calls.items()}


def framework_value(build: Callable[[], _T], what: str) -> _T:
    """``build()``, the framework's own object for a value (a message, a query bundle).

    Raises:
        Inexpressible: the framework's own type refuses the value before the door sees it
            (a LangChain message whose content is a bool): its callers cannot write it.
    """
    try:
        return build()
    except ValidationError as exc:
        reason = f"the framework refuses it as {what} before the door sees it"
        raise Inexpressible(reason) from exc


def routed(
    argument: str, value: object, options: dict[str, Any], *, budget_as: str = "budget"
) -> tuple[object, dict[str, Any]]:
    """(query, options) of a bad-value call: ``argument=value`` routed into them.

    A budget name goes to ``options[budget_as]``, ``query`` is the query, any other name is an
    option.
    """
    query: object = "Where do I live?"
    if argument in BUDGET_NAMES:
        options[budget_as] = value
    elif argument == "query":
        query = value
    else:
        options[argument] = value
    return query, options


def cancelled(
    start: Callable[[], Awaitable[object]],
    run: Callable[[Any], object] = asyncio.run,
) -> None:
    """Start the door's async call, cancel it at once, and return without waiting for it."""

    async def started_then_cancelled() -> None:
        task = asyncio.ensure_future(start())
        await asyncio.sleep(0)  # the call has started (handed to a worker)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    run(started_then_cancelled())


def gathered(
    calls: Sequence[Callable[[], Awaitable[object]]],
    run: Callable[[Any], object] = asyncio.run,
) -> None:
    """The door's async calls made side by side: tasks created in order on one loop, gathered."""

    async def at_once() -> None:
        await asyncio.gather(*(asyncio.ensure_future(call()) for call in calls))

    run(at_once())


def overtaken_by_thread(
    send: Callable[[], object], close: Callable[[], None], delay: float
) -> BaseException | None:
    """What a sync call got when another thread closed the door ``delay`` s after it began."""
    outcome: list[BaseException | None] = []
    started = threading.Event()

    def ask() -> None:
        started.set()
        outcome.append(raised(send))

    asking = threading.Thread(target=ask, daemon=True)
    asking.start()
    started.wait(10)
    time.sleep(delay)
    close()
    asking.join(60)
    if asking.is_alive():
        return TimeoutError("the call never ended after close")
    return outcome[0]


def overtaken_on_loop(
    send: Callable[[], Awaitable[object]],
    aclose: Callable[[], Awaitable[object]],
    delay: float,
    run: Callable[[Any], Any] = asyncio.run,
) -> BaseException | None:
    """What an async call got when another task closed the door ``delay`` s after it began."""

    async def both() -> BaseException | None:
        asking = asyncio.ensure_future(send())
        await asyncio.sleep(delay)
        await aclose()
        try:
            await asyncio.wait_for(asking, 60)
        except BaseException as exc:  # noqa: BLE001 - what the caller got
            return exc
        return None

    result: BaseException | None = run(both())
    return result


def chosen_refs(context: Any) -> list[tuple[str, str]]:
    """The report's included items as their callers know them: (own id, text), in order."""
    if context is None:
        return []
    return [(item.ref.id, item.text) for item in context.included if item.ref is not None]


def reported(
    context: Any, budget: int, got: list[tuple[str, str]], texts: list[str], **more: Any
) -> Received:
    """What a caller of a door that returns items received, with the report ``context``."""
    return Received(
        got=got,
        chosen=chosen_refs(context),
        available=budget,
        report_tokens=None if context is None else context.tokens_used,
        report=context,
        texts=texts,
        **more,
    )


def heard(
    sent: list[dict[str, Any]],
    context: Any,
    known: Mapping[str, str],
    budget: int,
    **more: Any,
) -> Received:
    """What a chat model was ``sent`` (OpenAI form) by a door whose report is ``context``."""
    texts = texts_of(sent)
    chosen = chosen_refs(context)
    return Received(
        got=identify(texts, {**known, **dict(chosen)}),
        chosen=chosen,
        available=budget,
        sent_tokens=count_sent(sent),
        report_tokens=None if context is None else context.tokens_used,
        report=context,
        texts=texts,
        messages=list(sent),
        **more,
    )


def pairs(turns: Sequence[Turn]) -> Iterator[tuple[Turn | None, Turn | None]]:
    """``(user, assistant)`` pairs in order; a turn with no partner is paired with None."""
    index = 0
    while index < len(turns):
        turn = turns[index]
        following = turns[index + 1] if index + 1 < len(turns) else None
        if turn.role == "user" and following is not None and following.role == "assistant":
            yield turn, following
            index += 2
        elif turn.role == "user":
            yield turn, None
            index += 1
        else:
            yield None, turn
            index += 1


def payload(turn: Turn) -> dict[str, Any]:
    """``turn`` as `ContextMemory.add_messages` takes it."""
    return {"id": turn.id, "role": turn.role, "text": turn.text}


def new_turns(memory: Any, session: str, before: Collection[str]) -> list[Turn]:
    """The session's stored messages whose ids are not in ``before``, as turns, in order."""
    memory.flush()
    return [Turn(str(r.role), r.text, r.id) for r in memory.history(session) if r.id not in before]
