r"""What the store keeps: `Record` and `Hit`, their validation, and how they map to Chroma.

Validation happens before anything is written (Chroma silently drops NaN metadata, reads
``None`` as "delete this key" and refuses nested values, so those are caught here with a
message that names the record and the key). Text is kept as given, NUL characters, any script
and emoji included (they round-trip exactly); a lone surrogate (``"\ud800"``, from decoding
with ``surrogateescape`` or a bad JSON escape) is not Unicode that UTF-8, SQLite or a model can
take, so any string holding one is refused. Records are stored flat: tuples and token counts
as JSON strings, user metadata keys with an ``m.`` prefix.

Ids are scoped: a record's id is unique within its namespace and its `scope_of` (its session,
else its user, else its document collection), and the Chroma id is
``[namespace, scope kind, scope name, id]`` as JSON (`record_key`), so two sessions or two users
may use the same id without touching each other's records. A message that only carries tool
calls has empty text; it is embedded through `embedding_text` (a description of its calls).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any, Literal, TypedDict

from ctxbudget.core.ids import scoped_id
from ctxbudget.core.numbers import shown
from ctxbudget.core.speaker_prefix import without_speaker
from ctxbudget.core.unicode import lone_surrogate
from ctxbudget.errors import StoreInputError
from ctxbudget.store.keys import key_fields

__all__ = [
    "Hit",
    "INT64_RANGE",
    "KINDS",
    "Kind",
    "MetadataValue",
    "Record",
    "SCOPES",
    "Scope",
    "StoreStats",
    "TIMESTAMP_RANGE",
    "USER_PREFIX",
    "decode_record",
    "embedding_text",
    "encode_record",
    "first_surrogate",
    "json_key",
    "may_be_empty",
    "record_key",
    "require_count",
    "require_name",
    "same_content",
    "scope_arg",
    "scope_of",
    "scoped_item_id",
    "stored_scope",
]

Kind = Literal["message", "pinned", "document", "summary"]
KINDS: frozenset[str] = frozenset({"message", "pinned", "document", "summary"})
MetadataValue = str | int | float | bool
Scope = tuple[str, str]
"""Where a record id is unique: ``("session", id)``, ``("user", id)``, ``("collection", name)``."""
SCOPES: tuple[str, ...] = ("session", "user", "collection")

USER_PREFIX = "m."
INT64_RANGE = (-(2**63), 2**63 - 1)
# Timestamps a datetime can show (years 1 to 9999), so every stored one renders as a date.
TIMESTAMP_RANGE = (-62_135_596_800.0, 253_402_300_799.0)


@dataclass(frozen=True, slots=True)
class Record:
    """One stored piece of memory.

    Args:
        id: unique within its namespace and scope (`scope_of`: its session, else its user,
            else its document collection).
        kind: ``"message"``, ``"pinned"``, ``"document"`` or ``"summary"``.
        text: the content; must not be empty, except for a message with ``tool_calls``
            (an assistant turn that only calls tools) or a tool result with no output.
        namespace: the tenant; reads only ever see their own namespace.
        session_id: the conversation; required for messages.
        user_id: the user the record belongs to.
        role: chat role of a message (``system``, ``user``, ``assistant``, ``tool``).
        seq: position of a message in its session, assigned by the store (leave it None).
        timestamp: seconds since the epoch.
        tool_calls: for an assistant message, the ids of the tool calls it makes.
        tool_call_id: for a tool result, the id of the call it answers.
        summary_of: for a summary, the ids of the records it covers.
        source: where the record came from.
        metadata: user fields (str, int, float or bool values), usable in `ChromaStore.search`.
        tokens: token counts of ``text`` per encoding name, kept so reads never re-tokenize.

    >>> Record(id="m1", kind="message", text="hi", session_id="s1", role="user").namespace
    'default'
    """

    id: str
    kind: Kind
    text: str
    namespace: str = "default"
    session_id: str | None = None
    user_id: str | None = None
    role: str | None = None
    seq: int | None = None
    timestamp: float | None = None
    tool_calls: tuple[str, ...] = ()
    tool_call_id: str | None = None
    summary_of: tuple[str, ...] = ()
    source: str | None = None
    metadata: dict[str, MetadataValue] = field(default_factory=dict, hash=False)
    tokens: dict[str, int] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        # Accept lists and mappings where tuples and dicts are stored; add() validates the rest.
        for name in ("tool_calls", "summary_of"):
            value = getattr(self, name)
            if isinstance(value, list):
                object.__setattr__(self, name, tuple(value))
        for name in ("metadata", "tokens"):
            value = getattr(self, name)
            if value is None:
                object.__setattr__(self, name, {})


@dataclass(frozen=True, slots=True)
class Hit:
    """A search result: the record and its cosine similarity to the query, in [-1, 1]."""

    record: Record
    similarity: float


class StoreStats(TypedDict):
    """What `ChromaStore.stats` reports."""

    records: int
    by_kind: dict[str, int]
    namespaces: int
    sessions: int
    embedder: str
    location: str


def json_key(*parts: str) -> str:
    """A Chroma id from its parts: a compact JSON list (unambiguous for any part)."""
    return json.dumps(list(parts), ensure_ascii=False, separators=(",", ":"))


def scope_of(record: Record) -> Scope:
    """The scope a record's id is unique in: its session, else its user, else its collection.

    A record with neither a session nor a user belongs to a collection: its
    ``metadata["doc_namespace"]`` (what `ContextMemory.add_documents` sets), ``""`` without one.

    >>> scope_of(Record(id="m1", kind="message", text="hi", session_id="s1", user_id="u1"))
    ('session', 's1')
    >>> scope_of(Record(id="d#0", kind="document", text="x", metadata={"doc_namespace": "kb"}))
    ('collection', 'kb')
    """
    if record.session_id is not None:
        return ("session", record.session_id)
    if record.user_id is not None:
        return ("user", record.user_id)
    collection = record.metadata.get("doc_namespace") if isinstance(record.metadata, dict) else None
    return ("collection", collection if isinstance(collection, str) else "")


def stored_scope(meta: dict[str, Any]) -> Scope:
    """`scope_of` from a stored record's flat metadata."""
    if "sid" in meta:
        return ("session", str(meta["sid"]))
    if "uid" in meta:
        return ("user", str(meta["uid"]))
    collection = meta.get(USER_PREFIX + "doc_namespace")
    return ("collection", collection if isinstance(collection, str) else "")


def record_key(namespace: str, scope: Scope, record_id: str) -> str:
    """The Chroma id of a record: ``[namespace, scope kind, scope name, id]`` as JSON.

    >>> record_key("default", ("session", "s1"), "m1")
    '["default","session","s1","m1"]'
    """
    return json_key(namespace, scope[0], scope[1], record_id)


def scoped_item_id(scope: Scope, record_id: str) -> str:
    """The id a record of another scope gets in an assembly (`ContextMemory.assemble`).

    Ids are unique per scope, and one assembly may hold records of several scopes (a user's
    pins, other sessions, documents) beside the current session's, whose records keep their own
    ids. Every other record's id is qualified with its scope in ctxbudget's own id space, where
    no caller id can be, so no two items ever share an id.

    >>> scoped_item_id(("user", "u1"), "diet")
    'ctxbudget:user:["u1","diet"]'
    """
    return scoped_id(scope, record_id)


def scope_arg(
    what: str, session_id: str | None, user_id: str | None, collection: str | None
) -> Scope:
    """The one scope a call names with ``session_id=``, ``user_id=`` or ``collection=``."""
    given = [
        (kind, value)
        for kind, value in zip(SCOPES, (session_id, user_id, collection), strict=True)
        if value is not None
    ]
    if len(given) != 1:
        named = ", ".join(f"{kind}={value!r}" for kind, value in given) or "none"
        msg = (
            f"{what} needs exactly one scope for its ids (record ids are unique per session, "
            "user or document collection): pass session_id= for messages, session pins, tasks "
            'and summaries, user_id= for user-wide pins, or collection= for documents ("" for '
            f"records with no session, user or collection); got {named}"
        )
        raise StoreInputError(msg)
    kind, value = given[0]
    if kind == "collection" and isinstance(value, str) and value == "":
        return (kind, value)
    return (kind, require_name(f"{kind}_id" if kind != "collection" else kind, value))


def may_be_empty(record: Record) -> bool:
    """A turn that only calls tools, or a tool result with no output, has empty text."""
    return bool(record.tool_calls) or (record.role == "tool" and record.tool_call_id is not None)


def embedding_text(record: Record) -> str:
    """What is embedded for a record: its text, or for a tool-call-only turn its calls.

    The description names each call and its arguments (from ``metadata["_tool_calls"]``, the
    canonical calls `ContextMemory` keeps), so the turn is found by what it did. A user or
    assistant turn without a name that starts with a speaker prefix (``Caroline: ...``) is
    embedded without it, as a turn whose speaker is in ``name`` is: who said it is matched by
    words (`ctxbudget.memory.reading.speakers`), not by meaning.

    >>> embedding_text(Record(id="a", kind="message", text="", session_id="s", tool_calls=("c1",)))
    'tool call c1'
    """
    if record.text.strip():
        if record.kind != "message" or record.role not in ("user", "assistant"):
            return record.text
        named = str(record.metadata.get("_name") or "").strip()
        return record.text if named else without_speaker(record.text)
    if not record.tool_calls:
        return f"tool result of {record.tool_call_id or 'a call'}: no output"
    raw = record.metadata.get("_tool_calls")
    calls: object = None
    if isinstance(raw, str):
        try:
            calls = json.loads(raw)
        except ValueError:
            calls = None
    parts: list[str] = []
    if isinstance(calls, list):
        for call in calls:
            function = call.get("function") if isinstance(call, dict) else None
            if isinstance(function, dict) and isinstance(function.get("name"), str):
                parts.append(f"{function['name']}({function.get('arguments', '')})")
    if not parts:
        parts = list(record.tool_calls)
    return "tool call " + "; ".join(parts)


def encode_record(record: Record, embedder: str) -> dict[str, Any]:
    """The Chroma metadata of a record written with the embedder named `embedder`.

    With the record's selective keys (`ctxbudget.store.keys`), which reads filter on.
    """
    meta: dict[str, Any] = {
        "ns": record.namespace,
        "rid": record.id,
        "kind": record.kind,
        "emb": embedder,
    }
    optional = {
        "sid": record.session_id,
        "uid": record.user_id,
        "role": record.role,
        "seq": record.seq,
        "ts": None if record.timestamp is None else float(record.timestamp),
        "tcid": record.tool_call_id,
        "src": record.source,
    }
    meta.update({k: v for k, v in optional.items() if v is not None})
    if record.tool_calls:
        meta["tool_calls"] = json.dumps(list(record.tool_calls))
    if record.summary_of:
        meta["summary_of"] = json.dumps(list(record.summary_of))
    if record.tokens:
        meta["tokens"] = json.dumps(record.tokens, sort_keys=True)
    meta.update({USER_PREFIX + k: v for k, v in record.metadata.items()})
    scope = scope_of(record)
    meta.update(
        key_fields(
            record.namespace, scope, record.kind, record.session_id, record.user_id, record.seq
        )
    )
    return meta


def decode_record(document: str, meta: dict[str, Any]) -> Record:
    """The `Record` a Chroma row (document and metadata) stands for."""
    user = {k[len(USER_PREFIX) :]: v for k, v in meta.items() if k.startswith(USER_PREFIX)}
    return Record(
        id=meta["rid"],
        kind=meta["kind"],
        text=document,
        namespace=meta["ns"],
        session_id=meta.get("sid"),
        user_id=meta.get("uid"),
        role=meta.get("role"),
        seq=meta.get("seq"),
        timestamp=meta.get("ts"),
        tool_calls=tuple(json.loads(meta.get("tool_calls", "[]"))),
        tool_call_id=meta.get("tcid"),
        summary_of=tuple(json.loads(meta.get("summary_of", "[]"))),
        source=meta.get("src"),
        metadata=user,
        tokens=json.loads(meta.get("tokens", "{}")),
    )


def same_content(new: Record, stored: Record) -> bool:
    """Whether `new` says what `stored` already holds (seq and token caches aside)."""
    # seq is the store's to assign and tokens are a cache: neither makes a record different.
    if new.seq is not None and new.seq != stored.seq:
        return False
    return dataclasses.replace(new, seq=stored.seq, tokens=stored.tokens) == stored


def require_name(name: str, value: object) -> str:
    """`value` if it is a non-empty str, else a `StoreInputError` naming `name`."""
    if not isinstance(value, str) or not value:
        msg = f"{name} must be a non-empty str, got {shown(value)}"
        raise StoreInputError(msg)
    problem = first_surrogate(value)
    if problem is not None:
        msg = f"{name} {problem}"
        raise StoreInputError(msg)
    return value


def require_count(name: str, value: object) -> int:
    """`value` if it is a non-negative int, else a `StoreInputError` naming `name`."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        msg = f"{name} must be a non-negative int, got {shown(value)}"
        raise StoreInputError(msg)
    return value


def first_surrogate(text: str) -> str | None:
    """What is wrong with ``text`` if it holds a lone surrogate (None: valid Unicode).

    The core's one wording (`ctxbudget.core.unicode.lone_surrogate`), to follow a field's name.
    """
    return lone_surrogate(text)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return (
            f"holds a lone surrogate U+{ord(text[exc.start]):04X} at index {exc.start}, which is "
            "not valid Unicode; repair the text where it was decoded (e.g. "
            "text.encode('utf-8', 'replace').decode())"
        )
    return None
