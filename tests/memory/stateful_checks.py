"""The checks of every read of the model-based memory test against the model.

Each ``check_*`` compares one read (the data `tests/memory/stateful_runner.py` observed) with
the model (`tests/memory/stateful_model.py`): nothing deleted, nothing of another user or
session, nothing missing that was flushed (the budget holds every session whole), and the report
is a partition of what was offered. A failed check raises AssertionError from its own line, so
hypothesis tells the classes of failures apart.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import replace
from typing import Any

from ctxbudget.core.items import Tier
from ctxbudget.memory.log.analytics import is_memory_tier
from tests.memory.stateful_model import ALL_CITIES, Logged, Model, Offerable, tokens

SCOPED = re.compile(r"^ctxbudget:(session|user|entity):(\[.*\])$")
NEVER_LEFT_OUT = {"over_budget", "tier_cap", "over_limit"}  # the budget holds everything


def check_item(allowed: Offerable, item: list[Any], query: str | None) -> None:
    """One offered item ``[id, tier, text, ...]`` is something the model says may be offered."""
    item_id, tier, text = str(item[0]), int(item[1]), str(item[2])
    if tier in (Tier.SYSTEM, Tier.QUERY):
        assert query is None or text == query or not tokens(text), f"query item {item}"
        return
    if item_id in allowed.exact:
        assert text == allowed.exact[item_id], (
            f"{item_id!r} offered as {text!r}, stored {allowed.exact[item_id]!r}"
        )
        return
    if item_id in allowed.quoting:
        stray = tokens(text) - allowed.quoting[item_id]
        assert not stray, f"summary {item_id!r} quotes {sorted(stray)} not of its session: {text!r}"
        return
    scoped = SCOPED.match(item_id)
    if scoped and scoped.group(1) == "entity" and allowed.entity_tokens is not None:
        owner = json.loads(scoped.group(2))[0]
        assert owner == allowed.session, f"entity card {item_id!r} of another session"
        stray = tokens(text) - allowed.entity_tokens
        assert not stray, f"entity card {item_id!r} quotes deleted or foreign {sorted(stray)}"
        named = {c for c in ALL_CITIES if c in text} - allowed.entity_cities
        assert not named, f"entity card {item_id!r} names {sorted(named)}, not in the session"
        return
    raise AssertionError(f"offered an item the model does not hold: {item}")


def check_assembly(allowed: Offerable, observed: dict[str, Any], query: str | None) -> None:
    """An assembly offers only what may be offered, all of it, and reports a partition."""
    included, pruned = observed["included"], observed["pruned"]
    for item in [*included, *pruned]:
        check_item(allowed, item, query)
    kept = [str(i[0]) for i in included]
    assert len(kept) == len(set(kept)), f"an id included twice: {kept}"
    twice = {str(p[0]) for p in pruned if p[3] != "duplicate"} & set(kept)
    assert not twice, f"included and pruned: {sorted(twice)}"
    for tier, (offered, n_kept, n_pruned) in observed["tiers"].items():
        assert offered == n_kept + n_pruned, f"tier {tier}: {offered} != {n_kept} + {n_pruned}"
        assert n_kept == sum(int(i[1]) == int(tier) for i in included), f"tier {tier} kept"
    assert observed["tokens_used"] <= observed["tokens_available"]
    offered_ids = set(kept) | {str(p[0]) for p in pruned}
    missing = (allowed.messages | allowed.summaries) - offered_ids
    assert not missing, f"flushed records not offered: {sorted(missing)}"
    left_out = allowed.pinned - set(kept)
    assert not left_out, f"pinned facts not included: {sorted(left_out)}"
    cut = [p for p in pruned if str(p[0]) in allowed.messages and p[3] in NEVER_LEFT_OUT]
    assert not cut, f"messages cut though everything fits: {cut}"


def check_candidates(allowed: Offerable, observed: dict[str, Any], user: str | None) -> None:
    """Candidates hold only what may be offered, and every message, summary and pin."""
    for item in observed["items"]:
        check_item(allowed, item, None)
    ids = {str(i[0]) for i in observed["items"]}
    missing = (allowed.messages | allowed.summaries | allowed.pinned) - ids
    assert not missing, f"flushed records not among the candidates: {sorted(missing)}"
    assert observed["user_id"] == user, f"candidates for {observed['user_id']!r}, not {user!r}"


def check_history(model: Model, session: str, observed: dict[str, Any], limit: int | None) -> None:
    """A session's history is its stored messages in order, exactly (the last ``limit``)."""
    stored = model.sessions[session].messages
    if "records" in observed:
        expected = [["message", session, m.user, m.id, m.text, m.role] for m in stored]
        if limit is not None:
            expected = expected[-limit:] if limit else []
        assert observed["records"] == expected
    elif "messages" in observed:  # LangChain
        assert observed["messages"] == [[m.id, m.text] for m in stored]
    else:  # LlamaIndex
        assert observed["texts"] == [m.text for m in stored]


def check_search(
    model: Model,
    observed: dict[str, Any],
    *,
    session: str | None,
    user: str | None,
    messages_only: bool,
) -> None:
    """Hits are stored records of the scope, with their text and user; every message is found.

    A session's scope is every record of it, whoever wrote it; a user's is only what carries
    the user's id: their messages in any session (in those other users started too), the
    summaries carrying them, their user-wide pins (never a session's pins: they carry no user).
    """
    exact: dict[tuple[str, str | None, str], tuple[str, str | None]] = {}
    quoting: dict[tuple[str, str | None, str], tuple[frozenset[str], str]] = {}
    for name, s in model.sessions.items():
        if session is not None and name != session:
            continue
        exact.update(
            {
                ("message", name, m.id): (m.text, m.user)
                for m in s.messages
                if user is None or m.user == user
            }
        )
        if user is None:
            exact.update({("pinned", name, pid): (t, None) for pid, t in s.pins.items()})
        quoting.update(
            {
                ("summary", name, sid): (x.quotes if user is None else x.own, x.user)
                for sid, x in s.summaries.items()
                if user is None or x.user == user
            }
        )
    if session is None and user is not None:
        exact.update({("pinned", None, pid): (t, user) for pid, t in model.user_pins[user].items()})
    hits = observed["hits"]
    for kind, sid, uid, rid, text, _role in hits:
        key = (kind, sid, rid)
        if key in exact:
            assert (text, uid) == exact[key], f"hit {key} is {(text, uid)}, stored {exact[key]}"
        elif key in quoting:
            quotes, carries = quoting[key]
            stray = tokens(text) - quotes
            assert not stray, f"summary hit {key} quotes {sorted(stray)}"
            assert uid == carries, f"summary hit {key} carries {uid!r}, not {carries!r}"
        else:
            raise AssertionError(f"hit {key} ({text!r}) is not a stored record of the scope")
    if messages_only:
        found = {(k, s, r) for k, s, _u, r, _t, _ro in hits}
        missing = {k for k in exact if k[0] == "message"} - found
        assert not missing, f"stored messages not found: {sorted(missing)}"


def check_contexts(model: Model, session: str, observed: dict[str, Any]) -> list[Logged]:
    """The log holds the session's assemblies (newest first); access counts sum it.

    Every one, but for those a delete may have taken back while queued (`Logged.doubtful`).
    Returns the session's log as read (oldest first), what it holds from now on.
    """
    records = observed["records"]
    made = [(e, [e.user, [list(p) for p in e.included]]) for e in reversed(model.logs[session])]
    held: list[Logged] = []
    for entry, row in made:
        if len(held) < len(records) and records[len(held)] == row:
            held.append(replace(entry, pending=False, doubtful=False))
        else:
            assert entry.doubtful, (
                f"logged assemblies of {session} differ from those made: {records} != "
                f"{[row for _, row in made]}"
            )
    assert len(held) == len(records), f"logged assemblies of {session} not made: {records}"
    counts: Counter[str] = Counter()
    for entry in held:
        counts.update({i for i, tier in entry.included if is_memory_tier(tier)})
    assert observed["access"] == dict(counts), (
        f"access counts of {session} are {observed['access']}, its logged assemblies {counts}"
    )
    return held[::-1]


def check_entities(model: Model, session: str, observed: dict[str, Any]) -> None:
    """A session's entities are the cities its messages name, counted in its messages now."""
    messages = model.sessions[session].messages
    names = set()
    for name, mentions, turns in observed["entities"]:
        names.add(name)
        naming = [m.id for m in messages if name in m.text]
        assert mentions == len(naming), f"{name}: {mentions} mentions, stored {len(naming)}"
        assert set(turns) <= set(naming), f"{name}: turns {turns}, stored {naming}"
    named = {c for m in messages for c in ALL_CITIES if c in m.text}
    assert names == named, f"entities {sorted(names)}, the messages name {sorted(named)}"
