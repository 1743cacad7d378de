"""Read the LoCoMo benchmark (Maharana et al., ACL 2024) into turns and questions.

The file is a JSON list of samples (``sample_id``, ``conversation`` with ``session_<n>`` turn
lists and ``session_<n>_date_time`` strings, ``qa`` with ``question``, ``answer``, ``evidence``
and ``category``). The loader copes with the data's known quirks and says what it did about each
in `LocomoData.notes`:

- several evidence ids packed in one string (``"D8:6; D9:17"``) are split;
- malformed ids that say one id unambiguously (``"D:11:26"``, ``"D30:05"``) are repaired;
  others (``"D"``) are dropped, as are ids that name no turn (dangling);
- a question left with no evidence is skipped (it cannot be scored by evidence recall);
- a date with no session (or a session with no turns) contributes nothing;
- a turn without text or id, or repeating an id, is skipped.

The data is licensed CC BY-NC 4.0: it is read from where the user keeps it, never bundled.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ctxbudget.errors import CtxBudgetError

__all__ = [
    "ADVERSARIAL",
    "CATEGORIES",
    "Conversation",
    "DatasetError",
    "LocomoData",
    "Note",
    "Question",
    "Turn",
    "load_locomo",
    "parse_locomo",
    "split_evidence",
]

CATEGORIES: Mapping[int, str] = {
    1: "multi-hop",
    2: "temporal",
    3: "open-domain",
    4: "single-hop",
    5: "adversarial",
}
"""QA category codes as the LoCoMo repository's evaluation code maps them."""

ADVERSARIAL = 5
"""The unanswerable category: scored apart, never in the headline."""

_SESSION = re.compile(r"session_(\d+)")
_SESSION_DATE = re.compile(r"session_(\d+)_date_time")
_ID = re.compile(r"D(\d+):(\d+)")
# What a malformed id may look like and still say one id: "D:11:26", "D30:05", "d 4:6".
_LOOSE_ID = re.compile(r"[Dd]\s*:?\s*0*(\d+)\s*:\s*0*(\d+)")
_SEPARATORS = re.compile(r"[;,\s]+")
_DATE_FORMAT = "%I:%M %p on %d %B, %Y"


class DatasetError(CtxBudgetError, ValueError):
    """A benchmark file that cannot be read at all (missing, not JSON, not a list of samples)."""


@dataclass(frozen=True, slots=True)
class Turn:
    """One turn of a conversation.

    Attributes:
        dia_id: the turn's id, ``"D<session>:<position>"``.
        speaker: who said it.
        text: what was said, with a shared image's caption appended as ``[shares <caption>]``.
        session: the session number.
        timestamp: the session's date and time (seconds since the epoch, read as UTC), or None.
    """

    dia_id: str
    speaker: str
    text: str
    session: int
    timestamp: float | None


@dataclass(frozen=True, slots=True)
class Question:
    """One QA item with its usable evidence.

    Attributes:
        index: its position in the sample's ``qa`` list.
        question: the question text.
        answer: the gold answer as text (None when there is none, as for most adversarial
            items).
        category: the LoCoMo category code (see `CATEGORIES`).
        evidence: the dia_ids of the evidence turns that exist in the conversation.
    """

    index: int
    question: str
    answer: str | None
    category: int
    evidence: tuple[str, ...]

    @property
    def adversarial(self) -> bool:
        """Whether the question is of the unanswerable category."""
        return self.category == ADVERSARIAL


@dataclass(frozen=True, slots=True)
class Conversation:
    """One sample: its turns in order and its scorable questions."""

    sample_id: str
    speakers: tuple[str, str]
    turns: tuple[Turn, ...]
    questions: tuple[Question, ...]


@dataclass(frozen=True, slots=True)
class Note:
    """Something the loader repaired or skipped.

    Attributes:
        where: e.g. ``"conv-42 qa#88"``.
        action: ``"split"``, ``"repaired"``, ``"dropped"`` or ``"skipped"``.
        detail: what and why.
    """

    where: str
    action: str
    detail: str

    def __str__(self) -> str:
        return f"{self.where}: {self.action} {self.detail}"


@dataclass(frozen=True, slots=True)
class LocomoData:
    """The conversations of a LoCoMo file and what the loader did about its quirks."""

    conversations: tuple[Conversation, ...]
    notes: tuple[Note, ...]

    def counts(self) -> dict[str, int]:
        """How many notes of each action (``split``, ``repaired``, ``dropped``, ``skipped``)."""
        out: dict[str, int] = {}
        for note in self.notes:
            out[note.action] = out.get(note.action, 0) + 1
        return out


def split_evidence(value: str) -> tuple[list[str], list[str], list[str]]:
    """Read one evidence string: ``(ids, repaired, malformed)``.

    Several ids may be packed in one string; each part is a clean id, a malformed spelling of
    one id (repaired to the clean form) or unreadable.

    >>> split_evidence("D8:6; D9:17")
    (['D8:6', 'D9:17'], [], [])
    >>> split_evidence("D:11:26")
    (['D11:26'], ['D:11:26'], [])
    >>> split_evidence("D")
    ([], [], ['D'])
    """
    ids: list[str] = []
    repaired: list[str] = []
    malformed: list[str] = []
    text = value.strip()
    parts = [text] if _LOOSE_ID.fullmatch(text) else [p for p in _SEPARATORS.split(text) if p]
    for part in parts:
        loose = _LOOSE_ID.fullmatch(part)
        if loose is None:
            malformed.append(part)
            continue
        clean = f"D{int(loose.group(1))}:{int(loose.group(2))}"
        ids.append(clean)
        if clean != part:
            repaired.append(part)
    return ids, repaired, malformed


def load_locomo(path: str | Path) -> LocomoData:
    """Read a LoCoMo JSON file (``locomo10.json`` or a subset of it).

    Raises:
        DatasetError: the file is missing, not UTF-8 JSON, or not a list of samples.

    >>> data = load_locomo("locomo10.json")  # doctest: +SKIP
    >>> len(data.conversations)  # doctest: +SKIP
    10
    """
    file = Path(path)
    if not file.is_file():
        what = "a folder, not a file" if file.is_dir() else "no such file"
        msg = f"{file}: {what}; pass the path of locomo10.json (or a subset of it)"
        raise DatasetError(msg)
    try:
        raw = json.loads(file.read_text(encoding="utf-8-sig"))
    except UnicodeDecodeError as exc:
        msg = f"{file}: not UTF-8 text (byte {exc.start})"
        raise DatasetError(msg) from exc
    except json.JSONDecodeError as exc:
        msg = f"{file}:{exc.lineno}: not valid JSON ({exc.msg} at column {exc.colno})"
        raise DatasetError(msg) from exc
    return parse_locomo(raw, source=str(file))


def parse_locomo(raw: object, *, source: str = "data") -> LocomoData:
    """Read LoCoMo samples already parsed from JSON (see `load_locomo`).

    Raises:
        DatasetError: ``raw`` is not a list of samples, or no sample has a conversation.
    """
    if not isinstance(raw, list):
        msg = f"{source}: expected a JSON list of LoCoMo samples, got {type(raw).__name__}"
        raise DatasetError(msg)
    notes: list[Note] = []
    conversations: list[Conversation] = []
    seen: set[str] = set()
    for position, sample in enumerate(raw):
        name = f"sample {position}"
        if isinstance(sample, dict) and isinstance(sample.get("sample_id"), str | int):
            name = str(sample["sample_id"])
        if name in seen:
            name = f"{name}#{position}"
        seen.add(name)
        conversation = _conversation(name, sample, notes)
        if conversation is not None:
            conversations.append(conversation)
    if not conversations:
        msg = f"{source}: no sample has a usable conversation ({len(raw)} samples read)"
        raise DatasetError(msg)
    return LocomoData(tuple(conversations), tuple(notes))


def _conversation(name: str, sample: object, notes: list[Note]) -> Conversation | None:
    if not isinstance(sample, dict) or not isinstance(sample.get("conversation"), dict):
        notes.append(Note(name, "skipped", "the sample: it has no 'conversation' object"))
        return None
    conv: dict[str, Any] = sample["conversation"]
    sessions = sorted(
        (int(m.group(1)), key) for key in conv if (m := _SESSION.fullmatch(key))
    )  # session_10 after session_9
    numbers = {number for number, _ in sessions}
    dated = sorted(int(m.group(1)) for key in conv if (m := _SESSION_DATE.fullmatch(key)))
    undated_only = [n for n in dated if n not in numbers]
    if undated_only:
        notes.append(
            Note(name, "skipped", f"{_ranges(undated_only)}: a date but no turns (no session)")
        )
    turns: list[Turn] = []
    ids: set[str] = set()
    empty: list[int] = []
    for number, key in sessions:
        raw_turns = conv[key]
        if not isinstance(raw_turns, list) or not raw_turns:
            empty.append(number)
            continue
        when = _session_time(name, number, conv.get(f"{key}_date_time"), notes)
        for offset, raw_turn in enumerate(raw_turns):
            turn = _turn(f"{name} {key}[{offset}]", number, when, raw_turn, ids, notes)
            if turn is not None:
                ids.add(turn.dia_id)
                turns.append(turn)
    if empty:
        notes.append(Note(name, "skipped", f"{_ranges(empty)}: sessions without turns"))
    if not turns:
        notes.append(Note(name, "skipped", "the sample: no usable turns"))
        return None
    speakers = (str(conv.get("speaker_a") or ""), str(conv.get("speaker_b") or ""))
    questions = _questions(name, sample.get("qa"), ids, notes)
    return Conversation(name, speakers, tuple(turns), tuple(questions))


def _turn(
    where: str,
    session: int,
    when: float | None,
    raw: object,
    ids: set[str],
    notes: list[Note],
) -> Turn | None:
    if not isinstance(raw, dict):
        notes.append(Note(where, "skipped", f"the turn: a {type(raw).__name__}, not an object"))
        return None
    dia_id, text, speaker = raw.get("dia_id"), raw.get("text"), raw.get("speaker")
    if not isinstance(dia_id, str) or not _ID.fullmatch(dia_id.strip()):
        notes.append(Note(where, "skipped", f"the turn: no usable dia_id ({dia_id!r})"))
        return None
    dia_id = dia_id.strip()
    if dia_id in ids:
        notes.append(Note(where, "skipped", f"the turn: dia_id {dia_id} appears twice"))
        return None
    caption = raw.get("blip_caption")
    parts = [text.strip() if isinstance(text, str) else ""]
    if isinstance(caption, str) and caption.strip():
        parts.append(f"[shares {caption.strip()}]")
    body = " ".join(p for p in parts if p)
    if not body:
        notes.append(Note(where, "skipped", f"the turn {dia_id}: no text"))
        return None
    return Turn(dia_id, str(speaker or "unknown"), body, session, when)


def _session_time(name: str, number: int, value: object, notes: list[Note]) -> float | None:
    if not isinstance(value, str):
        notes.append(Note(name, "repaired", f"session_{number}: no date; turns carry no time"))
        return None
    try:
        return datetime.strptime(value.strip(), _DATE_FORMAT).replace(tzinfo=UTC).timestamp()
    except ValueError:
        detail = f"session_{number}: unreadable date {value!r}; turns carry no time"
        notes.append(Note(name, "repaired", detail))
        return None


def _questions(name: str, raw: object, ids: set[str], notes: list[Note]) -> list[Question]:
    if not isinstance(raw, list):
        notes.append(Note(name, "skipped", "every question: 'qa' is not a list"))
        return []
    out: list[Question] = []
    for index, item in enumerate(raw):
        where = f"{name} qa#{index}"
        if not isinstance(item, dict):
            notes.append(Note(where, "skipped", f"the question: a {type(item).__name__}"))
            continue
        question, category = item.get("question"), item.get("category")
        if not isinstance(question, str) or not question.strip():
            notes.append(Note(where, "skipped", "the question: no question text"))
            continue
        if isinstance(category, bool) or not isinstance(category, int):
            notes.append(Note(where, "skipped", f"the question: category {category!r}"))
            continue
        evidence = _evidence(where, item.get("evidence"), ids, notes)
        if not evidence:
            notes.append(Note(where, "skipped", "the question: no usable evidence"))
            continue
        answer = item.get("answer")
        text = None if answer is None or isinstance(answer, dict | list) else str(answer)
        out.append(Question(index, question.strip(), text, category, evidence))
    return out


def _evidence(where: str, raw: object, ids: set[str], notes: list[Note]) -> tuple[str, ...]:
    if raw is None:
        return ()
    values: Sequence[object] = (
        [raw] if isinstance(raw, str) else raw if isinstance(raw, list) else []
    )
    out: list[str] = []
    for value in values:
        if not isinstance(value, str):
            notes.append(Note(where, "dropped", f"evidence {value!r}: not a string"))
            continue
        found, repaired, malformed = split_evidence(value)
        if len(found) + len(malformed) > 1:
            notes.append(Note(where, "split", f"evidence {value!r} into {found + malformed}"))
        for bad in repaired:
            clean = split_evidence(bad)[0][0]
            notes.append(Note(where, "repaired", f"evidence id {bad!r} as {clean}"))
        for bad in malformed:
            notes.append(Note(where, "dropped", f"evidence id {bad!r}: malformed"))
        for dia_id in found:
            if dia_id not in ids:
                notes.append(Note(where, "dropped", f"evidence id {dia_id}: no such turn"))
            elif dia_id not in out:
                out.append(dia_id)
    return tuple(out)


def _ranges(numbers: Sequence[int]) -> str:
    """``session_20-35`` for a run, comma-separated runs otherwise."""
    runs: list[list[int]] = []
    for n in sorted(numbers):
        if runs and n == runs[-1][-1] + 1:
            runs[-1].append(n)
        else:
            runs.append([n])
    return ", ".join(f"session_{r[0]}" if len(r) == 1 else f"session_{r[0]}-{r[-1]}" for r in runs)
