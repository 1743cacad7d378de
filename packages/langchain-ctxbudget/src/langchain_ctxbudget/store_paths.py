"""The paths of `CtxBudgetStore`'s ``index``: checked against what LangGraph's path reader reads.

An index path names the parts of a value whose text is embedded, as LangGraph's stores read it
(``langgraph.store.base.embed.get_text_at_path``; the core reads it the same way,
`ctxbudget.memory.values.model.texts_at`): ``""`` or ``"$"`` for the whole value, else fields
joined by ``.``, each followed by any ``[n]`` (``n`` an integer, negative from the end) or
``[*]`` indexes, ``*`` for every field, and a last ``{a,b.c}`` selecting several fields.

LangGraph's reader never refuses a path: it reads a malformed one some other way, usually as
nothing at all, so a typo (``"a..b"``, ``"items[0"``, ``"tags[first]"``, JSONPath's
``"$.text"``, which is a field named ``$``) left values with no text embedded, found by
filters only, with no word said. `path_problem` says what is wrong with such a path, and what
to write; every path it accepts is read as LangGraph reads it.
"""

from __future__ import annotations

import re

__all__ = ["path_problem"]

_INDEX = re.compile(r"-?[0-9]+|\*")
_CLOSING = {"[": "]", "{": "}"}


def path_problem(path: str) -> str | None:
    """What is wrong with an index path (None: nothing), as a clause naming what to write."""
    if path in ("", "$"):
        return None
    if path[0] == "$" and path[1] in ".[":  # JSONPath's root: LangGraph reads a field named '$'
        return (
            "LangGraph reads '$' as the whole value only alone (here: a field named '$'); "
            f"write {path[1:].removeprefix('.')!r}"
        )
    i = 0
    while i < len(path):
        char = path[i]
        if char in "]}":
            return f"its {char!r} at {i} is unmatched; remove it, or open it with {_opening(char)}"
        if char == ".":
            if i == 0:
                return "it starts with '.'; remove it (e.g. 'a.b', not '.a.b')"
            if i == len(path) - 1:
                return "it ends with '.'; remove it, or name the field after it"
            if path[i - 1] == ".":
                return "it has an empty field ('..'); join fields with one '.' (e.g. 'a.b')"
            i += 1
            continue
        if char in "[{":
            end = path.find(_CLOSING[char], i + 1)
            if end < 0:
                return f"its {char!r} at {i} is never closed; close it with {_CLOSING[char]!r}"
            inside = path[i + 1 : end]
            problem = _index_problem(inside) if char == "[" else _selection_problem(inside)
            if problem:
                return problem
            i = end + 1
            if char == "{" and i < len(path):
                return (
                    f"its selection {path[:i]!r} is not last (LangGraph reads nothing after "
                    "it); end the path there, or name the fields inside it"
                )
            if i < len(path) and path[i] not in ".[{]}":  # a stray ']' or '}': said next
                fixed = f"{path[:i]}.{path[i:]}"
                return f"a field follows {path[:i]!r} with no '.'; write {fixed!r}"
            continue
        i += 1
    return None


def _opening(closing: str) -> str:
    return repr("[" if closing == "]" else "{")


def _index_problem(inside: str) -> str | None:
    if _INDEX.fullmatch(inside):
        return None
    return (
        f"its index [{inside}] is not a number or '*'; write e.g. [0], [-1] or [*] "
        "(to name a field, join it with '.')"
    )


def _selection_problem(inside: str) -> str | None:
    names = [name.strip() for name in inside.split(",")]
    if any(not name for name in names):
        return f"its selection {{{inside}}} has an empty field name; list names like {{a,b.c}}"
    for name in names:
        if any(c in name for c in "[]{}") or any(not part for part in name.split(".")):
            return (
                f"its selection {{{inside}}} holds {name!r}: a selection takes only field "
                "names joined by '.' (like {a,b.c}), no index or empty field"
            )
    return None
