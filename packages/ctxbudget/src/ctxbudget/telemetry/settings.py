"""What ctxbudget's spans may say: `configure`, its environment variables, and hashed ids.

The settings are process-wide, like OpenTelemetry's own global provider. Each one is taken from
`configure`'s argument when given, else from its environment variable, else its default:

| argument | variable | default | what it does |
|---|---|---|---|
| ``enabled`` | ``CTXBUDGET_OTEL`` | on | off: no span, whatever is installed |
| ``hash_ids`` | ``CTXBUDGET_OTEL_HASH_IDS`` | on | session and user ids as a sha256 prefix |
| ``capture_content`` | ``CTXBUDGET_OTEL_CAPTURE_CONTENT`` | off | texts and item ids on spans |
| ``id_salt`` | ``CTXBUDGET_OTEL_ID_SALT`` | ``""`` | mixed into every hashed id |
| ``tracer_provider`` | (none) | the global one | where the spans go |

A variable's value is ``1``/``true``/``on``/``yes`` or ``0``/``false``/``off``/``no`` (any case);
anything else raises `ConfigurationError` naming the variable.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from ctxbudget.errors import ConfigurationError

__all__ = ["TelemetrySettings", "configure", "current", "hashed_id", "on_configure"]

_TRUE = frozenset({"1", "true", "on", "yes"})
_FALSE = frozenset({"0", "false", "off", "no"})


@dataclass(frozen=True, slots=True)
class TelemetrySettings:
    """What ctxbudget's spans record, and where they go (see `configure`).

    Attributes:
        enabled: make spans at all (they are only made when opentelemetry-api is installed).
        hash_ids: record session and user ids as the first 16 hex digits of their sha256
            (with ``id_salt``); False records them as given, and the session id as
            ``gen_ai.conversation.id`` too.
        capture_content: also record texts (the rendered context, the query, retrieved records)
            and item ids; never by default.
        id_salt: mixed into every hashed id, so that ids cannot be found by hashing guesses.
        tracer_provider: an OpenTelemetry ``TracerProvider`` to make spans with (None: the
            global one, ``opentelemetry.trace.get_tracer_provider()``, even one set later).
    """

    enabled: bool = True
    hash_ids: bool = True
    capture_content: bool = False
    id_salt: str = ""
    tracer_provider: Any = None


def _flag(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    msg = f"{name}={raw!r} is not a switch; set it to one of 1, true, on, yes, 0, false, off, no"
    raise ConfigurationError(msg)


def _from_environment() -> TelemetrySettings:
    return TelemetrySettings(
        enabled=_flag("CTXBUDGET_OTEL", True),
        hash_ids=_flag("CTXBUDGET_OTEL_HASH_IDS", True),
        capture_content=_flag("CTXBUDGET_OTEL_CAPTURE_CONTENT", False),
        id_salt=os.environ.get("CTXBUDGET_OTEL_ID_SALT", ""),
    )


_current: TelemetrySettings | None = None  # None: not read yet (from the environment)
_listeners: list[Any] = []  # called with no argument after every configure (spans' cache)


def current() -> TelemetrySettings:
    """The settings in force (read from the environment on first use)."""
    global _current  # process-wide, like OpenTelemetry's own provider
    if _current is None:
        _current = _from_environment()
    return _current


def configure(
    *,
    tracer_provider: Any = None,
    enabled: bool | None = None,
    hash_ids: bool | None = None,
    capture_content: bool | None = None,
    id_salt: str | None = None,
) -> TelemetrySettings:
    """Set what ctxbudget's spans record and where they go; returns the settings now in force.

    Every argument left None takes its environment variable's value, else its default (the
    module docstring's table), so ``configure()`` goes back to the defaults.

    Args:
        tracer_provider: an OpenTelemetry ``TracerProvider`` for ctxbudget's spans only (None:
            the global provider, also one set after this call).
        enabled: False makes no span at all.
        hash_ids: False records session and user ids as they are.
        capture_content: True records texts and item ids too.
        id_salt: a secret mixed into hashed ids.

    Raises:
        ConfigurationError: an environment variable that is not a switch, or an argument of
            the wrong type.

    >>> from ctxbudget import telemetry
    >>> telemetry.configure(capture_content=False).hash_ids
    True
    """
    for name, value in (
        ("enabled", enabled),
        ("hash_ids", hash_ids),
        ("capture_content", capture_content),
    ):
        if value is not None and not isinstance(value, bool):
            msg = f"configure({name}=...) takes True, False or None, got {value!r}"
            raise ConfigurationError(msg)
    if id_salt is not None and not isinstance(id_salt, str):
        msg = f"configure(id_salt=...) takes a str or None, got {type(id_salt).__name__}"
        raise ConfigurationError(msg)
    if tracer_provider is not None and not callable(getattr(tracer_provider, "get_tracer", None)):
        msg = (
            f"configure(tracer_provider=...) takes an OpenTelemetry TracerProvider, got a "
            f"{type(tracer_provider).__name__}"
        )
        raise ConfigurationError(msg)
    base = _from_environment()
    global _current
    _current = TelemetrySettings(
        enabled=base.enabled if enabled is None else enabled,
        hash_ids=base.hash_ids if hash_ids is None else hash_ids,
        capture_content=base.capture_content if capture_content is None else capture_content,
        id_salt=base.id_salt if id_salt is None else id_salt,
        tracer_provider=tracer_provider,
    )
    for listener in _listeners:
        listener()
    return _current


def on_configure(listener: Any) -> None:
    """Call ``listener()`` after every `configure` (the spans' cached tracer is dropped)."""
    _listeners.append(listener)


def hashed_id(value: str, salt: str = "") -> str:
    """``value`` as the first 16 hex digits of the sha256 of ``salt`` and ``value``.

    >>> hashed_id("session-1") == hashed_id("session-1") != hashed_id("session-1", "pepper")
    True
    """
    return _hashed(value, salt)


@lru_cache(maxsize=1024)
def _hashed(value: str, salt: str) -> str:
    data = f"{salt}\x00{value}".encode(errors="surrogatepass")
    return hashlib.sha256(data).hexdigest()[:16]
