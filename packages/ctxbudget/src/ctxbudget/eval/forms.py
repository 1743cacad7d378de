"""How the LoCoMo turns are stored: the speaker in ``name``, as a ``Name: `` prefix, or not at all.

Apps record who said a turn in different ways, and quality must not depend on which
(`ctxbudget.memory.reading.speakers`). The evaluation stores the same turns in one of three forms:

- ``name``: the speaker in the message's ``name`` (the default, and how earlier runs stored
  them): ``{"role": "user", "name": "Caroline", "text": "I went..."}``;
- ``prefix``: the speaker at the start of the text, as a transcript or a multi-party log
  writes it: ``{"role": "user", "text": "Caroline: I went..."}``;
- ``role``: the role only: ``{"role": "user", "text": "I went..."}``.

The role is ``user`` for the conversation's first speaker and ``assistant`` for the other in
every form. The baselines see the same form: their rows carry the same name and text, and the
vector top-k embeds ``Speaker: text`` where the speaker is known (``name`` and ``prefix``) and
the text alone where it is not (``role``).

>>> speaker_forms("all")
('name', 'prefix', 'role')
>>> entity_settings("both")
(False, True)
>>> excerpt_settings("on")
(True,)
"""

from __future__ import annotations

from typing import Any

from ctxbudget.core.items import ContextItem, Tier
from ctxbudget.errors import ConfigurationError
from ctxbudget.eval.locomo import Conversation, Turn

__all__ = [
    "ENTITY_CHOICES",
    "SPEAKER_CHOICES",
    "SPEAKER_FORMS",
    "SWITCH_CHOICES",
    "entity_settings",
    "excerpt_settings",
    "speaker_forms",
    "turn_item",
    "turn_line",
    "turn_message",
]

SPEAKER_FORMS = ("name", "prefix", "role")
"""The ways a turn's speaker is stored, in report order (``name`` is the reference)."""
SPEAKER_CHOICES = (*SPEAKER_FORMS, "all")
"""What ``--speakers`` accepts (a comma-separated list of them is accepted too)."""
SWITCH_CHOICES = ("off", "on", "both")
"""What ``--entities`` and ``--excerpts`` accept: the setting off, on, or a run with each."""
ENTITY_CHOICES = SWITCH_CHOICES
"""What ``--entities`` accepts: `MemoryConfig.entities` off, on, or a run with each."""


def speaker_forms(value: str) -> tuple[str, ...]:
    """The forms named by ``value``: one of `SPEAKER_CHOICES` or a comma-separated list.

    Raises:
        ConfigurationError: a name that is not a form.

    >>> speaker_forms("prefix,name")
    ('name', 'prefix')
    """
    wanted = {part.strip() for part in value.split(",") if part.strip()}
    if "all" in wanted:
        return SPEAKER_FORMS
    unknown = sorted(wanted - set(SPEAKER_FORMS))
    if unknown or not wanted:
        msg = (
            f"speakers must be one of {', '.join(SPEAKER_CHOICES)} (or a comma-separated list "
            f"of forms), got {value!r}"
        )
        raise ConfigurationError(msg)
    return tuple(form for form in SPEAKER_FORMS if form in wanted)


def entity_settings(value: str) -> tuple[bool, ...]:
    """`MemoryConfig.entities` for each run ``value`` asks for (one of `SWITCH_CHOICES`).

    Raises:
        ConfigurationError: another value.
    """
    return _switch(value, "entities")


def excerpt_settings(value: str) -> tuple[bool, ...]:
    """`MemoryConfig.excerpts` for each run ``value`` asks for (one of `SWITCH_CHOICES`).

    Raises:
        ConfigurationError: another value.
    """
    return _switch(value, "excerpts")


def _switch(value: str, name: str) -> tuple[bool, ...]:
    settings = {"off": (False,), "on": (True,), "both": (False, True)}
    found = settings.get(value.strip())
    if found is None:
        msg = f"{name} must be one of {', '.join(SWITCH_CHOICES)}, got {value!r}"
        raise ConfigurationError(msg)
    return found


def _check(form: str) -> None:
    if form not in SPEAKER_FORMS:
        msg = f"speakers must be one of {', '.join(SPEAKER_FORMS)}, got {form!r}"
        raise ConfigurationError(msg)


def _role(turn: Turn, conversation: Conversation) -> str:
    return "user" if turn.speaker == conversation.speakers[0] else "assistant"


def _text(turn: Turn, form: str) -> str:
    return f"{turn.speaker}: {turn.text}" if form == "prefix" else turn.text


def turn_message(turn: Turn, conversation: Conversation, form: str) -> dict[str, Any]:
    """The message `ContextMemory.add_messages` stores for ``turn`` in ``form``.

    >>> from ctxbudget.eval.locomo import Conversation, Turn
    >>> t = Turn("D1:1", "Ana", "Hi!", 1, None)
    >>> turn_message(t, Conversation("c", ("Ana", "Ben"), (t,), ()), "prefix")["text"]
    'Ana: Hi!'
    """
    _check(form)
    message: dict[str, Any] = {
        "id": turn.dia_id,
        "role": _role(turn, conversation),
        "text": _text(turn, form),
        "timestamp": turn.timestamp,
    }
    if form == "name":
        message["name"] = turn.speaker
    return message


def turn_item(turn: Turn, conversation: Conversation, form: str) -> ContextItem:
    """The history item the baselines pack for ``turn`` in ``form`` (same name, same text)."""
    _check(form)
    return ContextItem(
        turn.dia_id,
        _text(turn, form),
        tier=Tier.RECENT,
        role=_role(turn, conversation),
        name=turn.speaker if form == "name" else None,
        timestamp=turn.timestamp,
        source="message",
    )


def turn_line(turn: Turn, form: str) -> str:
    """What the vector top-k embeds for ``turn``: ``Speaker: text`` when the speaker is known."""
    _check(form)
    return turn.text if form == "role" else f"{turn.speaker}: {turn.text}"
