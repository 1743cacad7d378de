"""How a ctxbudget call becomes a span: the tracer, found once, and the decorator that opens one.

Nothing here imports OpenTelemetry when the module is imported. The first traced call looks for
``opentelemetry.trace`` once; without it (or with ``enabled=False``) every later call costs a
global read and a comparison. With it, spans are started in the current context, so they nest
under whatever span the application or its framework has open. With the API installed but no
SDK set up, no span is started (one look at the global provider per call, until one is set);
a span that does not record (a sampler dropped it) is never given attributes.

`traced` opens one span per call. One assembly is one span: `ContextMemory.assemble` opens it
(`opens_assembly`), and the core assembly it runs records its report on that span instead of
opening its own (`in_assembly`); the candidates gathered on the way are a child span.
"""

from __future__ import annotations

import functools
import inspect
import re
import traceback
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from ctxbudget.telemetry.settings import TelemetrySettings, current, on_configure

if TYPE_CHECKING:
    from opentelemetry.trace import Span, Tracer

__all__ = [
    "Attributes",
    "Tracing",
    "active",
    "assembly_in_progress",
    "exportable",
    "refused_span",
    "spanned_as",
    "traced",
]

P = ParamSpec("P")
R = TypeVar("R")

Attributes = dict[str, Any]
"""Span attributes: str, bool, int, float or homogeneous sequences of them."""


_SURROGATE = re.compile("[\ud800-\udfff]")


def _utf8(value: Any) -> Any:
    """``value``; a str holding lone surrogates with each one as U+FFFD (valid UTF-8)."""
    if not isinstance(value, str) or value.isascii():
        return value
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", value)
    return value


def exportable(attributes: Attributes) -> Attributes:
    """``attributes`` with every text (a sequence's items too) valid UTF-8, as OTLP needs."""
    out: Attributes = {}
    for key, value in attributes.items():
        if isinstance(value, list | tuple):
            value = [_utf8(item) for item in value]
        out[key] = _utf8(value)
    return out


@dataclass(frozen=True, slots=True)
class Tracing:
    """The tracer ctxbudget's spans are made with, and the settings it was made under."""

    tracer: Tracer
    settings: TelemetrySettings
    current_span: Callable[[], Span]
    live: Callable[[], bool]  # False while spans would be the API's no-ops (no SDK set up)


_UNSET: Any = object()
_tracing: Any = _UNSET  # a Tracing, None (no tracing), or _UNSET (not looked for yet)
# The span of the `ContextMemory.assemble` running in this context: the core assembly it runs
# records its report there instead of opening a span of its own.
_assembly: ContextVar[Any] = ContextVar("ctxbudget_assembly_span", default=None)


def _forget() -> None:
    global _tracing
    _tracing = _UNSET


on_configure(_forget)


def active() -> Tracing | None:
    """The tracing in force, or None when no span is made (not installed, or disabled)."""
    found = _tracing
    if found is _UNSET:
        found = _resolve()
    return found  # type: ignore[no-any-return]


def _resolve() -> Tracing | None:
    global _tracing
    settings = current()
    found: Tracing | None = None
    if settings.enabled:
        try:
            from opentelemetry import trace
        except ImportError:
            trace = None  # type: ignore[assignment]
        if trace is not None:
            from ctxbudget import __version__

            provider = settings.tracer_provider
            tracer = trace.get_tracer("ctxbudget", __version__, tracer_provider=provider)
            found = Tracing(tracer, settings, trace.get_current_span, _live(trace, provider))
    _tracing = found
    return found


def assembly_in_progress() -> Any:
    """The span of the `ContextMemory.assemble` running in this context, if any."""
    return _assembly.get()


def _live(trace: Any, provider: Any) -> Callable[[], bool]:
    """Whether spans can record: not while the global provider is the API's placeholder.

    Until the application sets a provider, the API hands out spans that record nothing; making
    them costs microseconds per call, looking at the provider about one. A global provider is
    set once for the life of the process, so once one is there it is not looked at again.
    """
    idle = (trace.ProxyTracerProvider, trace.NoOpTracerProvider)
    if provider is not None:
        recording = not isinstance(provider, idle)
        return lambda: recording
    get_provider = trace.get_tracer_provider
    seen = False

    def live() -> bool:
        nonlocal seen
        if not seen:
            seen = not isinstance(get_provider(), idle)
        return seen

    return live


Before = Callable[[Mapping[str, Any], TelemetrySettings], Attributes]
After = Callable[[Mapping[str, Any], Any, TelemetrySettings], Attributes]


def traced(
    name: str,
    *,
    before: Before | None = None,
    after: After | None = None,
    opens_assembly: bool = False,
    in_assembly: bool = False,
) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """A decorator: each call of the method is a span called ``name``.

    ``before`` gives the attributes known from the call's arguments (bound, defaults applied),
    set as the span starts; ``after`` those known from its result (and the same arguments,
    bound only when there is a ``before``). Neither is called when the span is not recording.
    A call that raises (an interruption too: ``KeyboardInterrupt``) is marked as an error with
    ``error.type`` (its class; the message and traceback only with ``capture_content``: they
    may quote content). Arguments the method does not take are its own to refuse: its
    `TypeError` is the call's error, as without tracing.

    ``opens_assembly``: the span is the one assembly of this call (`ContextMemory.assemble`);
    ``in_assembly``: when such a span is the current span, the call opens none: the span that
    opened the assembly records the result (the core `ContextAssembler.assemble`).
    """

    def decorate(method: Callable[P, R]) -> Callable[P, R]:
        signature = inspect.signature(method)

        @functools.wraps(method)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
            tracing = _tracing
            if tracing is None:
                return method(*args, **kwargs)
            if tracing is _UNSET:
                tracing = _resolve()
                if tracing is None:
                    return method(*args, **kwargs)
            if not tracing.live():
                return method(*args, **kwargs)
            if in_assembly:
                outer = _assembly.get()
                if outer is not None and outer is tracing.current_span():
                    return method(*args, **kwargs)  # the assembly's span records the result
            # Exceptions are recorded here: their messages may quote what was stored or asked.
            with tracing.tracer.start_as_current_span(
                name, record_exception=False, set_status_on_exception=False
            ) as span:
                recording = span.is_recording()
                bound: Mapping[str, Any] = {}
                if recording and before is not None:
                    bound = _bound(signature, args, kwargs)
                    if bound:
                        span.set_attributes(exportable(before(bound, tracing.settings)))
                token = _assembly.set(span) if opens_assembly else None
                try:
                    result = method(*args, **kwargs)
                except BaseException as exc:  # an interrupted call did not succeed either
                    if recording:
                        _failed(span, exc, tracing.settings)
                    raise
                finally:
                    if token is not None:
                        _assembly.reset(token)
                if recording and after is not None:
                    span.set_attributes(exportable(after(bound, result, tracing.settings)))
                return result

        wrapper.__ctxbudget_span__ = name  # type: ignore[attr-defined]  # for `refused_span`
        return wrapper

    return decorate


def spanned_as(name: str) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Mark a method whose work runs in a span ``name`` further in (``ctxbudget.write``).

    A call of it refused before it ran (a closed memory) still ends one (`refused_span`).
    """

    def mark(method: Callable[P, R]) -> Callable[P, R]:
        method.__ctxbudget_span__ = name  # type: ignore[attr-defined]
        return method

    return mark


def refused_span(method: Callable[..., Any], exc: BaseException) -> None:
    """The span of a `traced` ``method`` refused before it ran, ended with ``exc`` as its error.

    A closed memory refuses each call before its method (and so its span) starts: without this
    the call left no trace, where every call that raises ends its span in error (until
    2026-12-01). Nothing when ``method`` is not traced or tracing is off.
    """
    name = getattr(method, "__ctxbudget_span__", None)
    tracing = _tracing
    if tracing is _UNSET:
        tracing = _resolve()
    if name is None or tracing is None or not tracing.live():
        return
    with tracing.tracer.start_as_current_span(
        name, record_exception=False, set_status_on_exception=False
    ) as span:
        if span.is_recording():
            _failed(span, exc, tracing.settings)


def _bound(signature: inspect.Signature, args: Any, kwargs: Any) -> Mapping[str, Any]:
    """The call's arguments by name, defaults applied; empty when they do not fit.

    Arguments that do not fit are the method's to refuse, with Python's own `TypeError`
    (recorded on the span as the call's error), not one raised here first.
    """
    try:
        call = signature.bind(*args, **kwargs)
    except TypeError:
        return {}
    call.apply_defaults()
    return call.arguments


def _failed(span: Span, error: BaseException, settings: TelemetrySettings) -> None:
    """Mark ``span`` as failed: the error's class always, its message only with content on."""
    from opentelemetry.trace import Status, StatusCode

    kind = type(error).__qualname__
    span.set_attribute("error.type", kind)
    span.set_status(Status(StatusCode.ERROR, kind))
    if not settings.capture_content:
        return
    trace = _utf8("".join(traceback.format_exception(error)))  # it survives a failing __str__
    try:
        message = _utf8(str(error))
    except Exception:  # noqa: BLE001 - an error whose __str__ fails is still the call's error
        # The SDK's record_exception calls str() too: the event is added as it would add it,
        # so the caller gets the call's own error, not this one, as without tracing.
        module = type(error).__module__
        name = kind if module in ("builtins", "") else f"{module}.{kind}"
        said = f"({name}: its message cannot be shown)"
        event = {"exception.type": name, "exception.message": said, "exception.stacktrace": trace}
        span.add_event("exception", {**event, "exception.escaped": "False"})
        return
    span.record_exception(error, {"exception.message": message, "exception.stacktrace": trace})
