"""What an LLM entity extractor asks a model, and how its reply is read.

Both adapters' ``LLMEntityExtractor`` (LangChain, LlamaIndex) send the same prompt and read the
reply here, so they find the same entities. The prompt's one placeholder, ``{messages}``,
receives the texts numbered from 1, each with its speaker: ``3. [Ana] My sister Caroline...``.
The model answers one JSON object per line::

    {"message": 3, "name": "Caroline", "type": "person", "alias": "Ana's sister"}

Lines that are not such objects are skipped (a preamble, a code fence, a malformed line), as
are numbers outside the batch, and every name goes through `clean_name`: a model's reply can
never put markup or a line break into a card.
"""

from __future__ import annotations

import json
import string
from collections.abc import Callable, Sequence

from ctxbudget.core.numbers import count
from ctxbudget.errors import ConfigurationError
from ctxbudget.memory.entities.names import ENTITY_TYPES, Mention, as_mentions

__all__ = [
    "DEFAULT_ENTITY_PROMPT",
    "ask_in_batches",
    "check_entity_batch",
    "check_entity_prompt",
    "entity_prompt_fields",
    "parse_entity_reply",
]

DEFAULT_ENTITY_PROMPT = (
    "List the entities each numbered message below mentions: people, places, organizations "
    "and other named things (pets, products, books, events). Include people named by their "
    "relation to the speaker: 'my sister' said by Ana is \"Ana's sister\"; when such a phrase "
    'comes with a name ("my sister Caroline"), give the name with the phrase as its alias.\n'
    'Answer with one JSON object per line and nothing else, e.g. {{"message": 1, "name": '
    '"Caroline", "type": "person", "alias": "Ana\'s sister"}}; type is one of person, place, '
    "org, other; alias is optional.\n\n"
    "{messages}"
)
"""The default prompt of both adapters' ``LLMEntityExtractor``."""

_TEXT_CHARS = 2_000  # of each message sent (entities past it are not asked for)


def check_entity_prompt(prompt: str, where: str) -> str:
    """``prompt`` if its only field is ``{messages}``.

    Raises:
        ConfigurationError: no ``{messages}`` field, another field, or a malformed template.
    """
    try:
        fields = {name for _, name, _, _ in string.Formatter().parse(prompt) if name is not None}
    except ValueError as exc:
        msg = f"{where}: the entity prompt is not a valid template ({exc})"
        raise ConfigurationError(msg) from exc
    if fields != {"messages"}:
        msg = (
            f"{where}: the entity prompt must have one field, {{messages}}, where the numbered "
            f"messages go; it has {sorted(fields)} (double a brace to write it: {{{{ }}}})"
        )
        raise ConfigurationError(msg)
    return prompt


def entity_prompt_fields(texts: Sequence[str], speakers: Sequence[str | None]) -> dict[str, str]:
    """The ``{messages}`` field: each text on one line, numbered from 1, with its speaker."""
    lines = []
    for number, text in enumerate(texts, start=1):
        speaker = speakers[number - 1] if number - 1 < len(speakers) else None
        flat = " ".join(text[:_TEXT_CHARS].split())
        lines.append(f"{number}. [{speaker or 'unknown'}] {flat}")
    return {"messages": "\n".join(lines)}


def parse_entity_reply(reply: str, count: int) -> list[list[Mention]]:
    """The mentions a model's reply gives for ``count`` messages (see the module docstring).

    >>> parse_entity_reply('{"message": 2, "name": "Lisbon", "type": "place"}', 2)
    [[], [Mention(name='Lisbon', type='place', alias=None, weak=False)]]
    """
    found: list[list[Mention]] = [[] for _ in range(count)]
    for line in reply.splitlines():
        line = line.strip().rstrip(",")
        if not line.startswith("{"):
            continue
        try:
            data = json.loads(line)
        except ValueError:
            continue
        if not isinstance(data, dict):
            continue
        number, name = data.get("message"), data.get("name")
        if isinstance(number, bool) or not isinstance(number, int) or not 1 <= number <= count:
            continue
        if not isinstance(name, str):
            continue
        kind = data.get("type")
        alias = data.get("alias")
        found[number - 1].append(
            Mention(
                name,
                kind if kind in ENTITY_TYPES else "other",
                alias if isinstance(alias, str) and alias.strip() else None,
            )
        )
    return as_mentions(found, count, "LLMEntityExtractor")


def check_entity_batch(batch: object, where: str) -> int:
    """``batch`` (messages per model call) if it is a positive int.

    Raises:
        ConfigurationError: it is not.
    """
    return count(batch, f"{where}: batch", hint="messages per model call, e.g. batch=8")


def ask_in_batches(
    ask: Callable[[str], str],
    texts: Sequence[str],
    speakers: Sequence[str | None],
    *,
    prompt: str,
    batch: int,
) -> list[list[Mention]]:
    """The mentions of each text: ``ask(prompt text) -> reply`` once per ``batch`` texts.

    What both adapters' ``LLMEntityExtractor.extract`` do; a batch of blank texts is not sent.
    """
    out: list[list[Mention]] = []
    for start in range(0, len(texts), batch):
        chunk = list(texts[start : start + batch])
        if not any(text.strip() for text in chunk):
            out += [[] for _ in chunk]
            continue
        said = list(speakers[start : start + batch])
        reply = ask(prompt.format(**entity_prompt_fields(chunk, said)))
        out += parse_entity_reply(reply, len(chunk))
    return out
