"""`ContextMemory`: keep every message, fact and document; assemble what fits on every turn.

One object most users touch. It writes to a `ChromaStore` (embedded by default, a Chroma server
with ``chroma_url=`` or ``CTXBUDGET_CHROMA_URL``), gathers candidates for a question from every
source, scores them (see `ctxbudget.memory.scoring`), and hands them to the core `ContextAssembler`.

The session's messages are found two ways at once: by meaning (the store's vectors) and by
words (a BM25 index of the session kept in this object, built on first use and extended as
messages arrive). Recent history is not privileged by default: it gets the share of the budget
that the query's own best matches point to (see `MemoryConfig.recent_share`).
"""

from __future__ import annotations

import math
import os
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

import numpy as np

from ctxbudget.core.assemble import ContextAssembler
from ctxbudget.core.budget import Budget
from ctxbudget.core.ids import internal_id
from ctxbudget.core.items import ROLES, ContextItem, Shrink, Tier
from ctxbudget.core.render import Format, Layout
from ctxbudget.core.report import AssembledContext
from ctxbudget.core.summaries import ExtractiveSummarizer, Summarizer
from ctxbudget.embed.base import Embedder, as_embedder
from ctxbudget.errors import InvalidItemError, StoreError, StoreInputError
from ctxbudget.memory.candidates import Candidates, ScoredHit, SearchScope, fit_history
from ctxbudget.memory.chunking import chunk_text
from ctxbudget.memory.config import MemoryConfig
from ctxbudget.memory.inputs import (
    check_message_id,
    document_parts,
    documents_arg,
    extra_items,
    message_calls,
    to_timestamp,
    user_metadata,
)
from ctxbudget.memory.record_items import (
    history_item,
    item_id,
    prime,
    retrieved_item,
    task_node,
    tool_items,
    with_tokens,
)
from ctxbudget.memory.scoring import Floats, hit_relevance, lexical_terms, record_score
from ctxbudget.memory.session_index import Query, SessionIndex, span_of, without_names
from ctxbudget.memory.tasks import TaskNode, task_items
from ctxbudget.store.chroma_store import ChromaStore, Hit, MetadataValue, Record
from ctxbudget.store.filters import document_filter
from ctxbudget.store.records import require_name, same_content, scope_of
from ctxbudget.tokens.counter import TokenCounter

__all__ = []

_PROGRESS_AT = 200
_INDEXED_SESSIONS = 32  # lexical indexes kept per ContextMemory (least recently used go)
_POOL_FACTOR = 4  # candidates searched per query: this many times what the budget can hold
_TOP_MATCHES = 10  # best matches that decide the share of recent history
_CACHED_VECTORS = 64  # vectors of earlier user turns kept for multi-query search
_UNWRITTEN = "; nothing was written"


class ContextMemory:
    """Memory for an LLM app: store everything, assemble what matters within a token budget.

    Args:
        path: folder of the embedded store (default ``./.ctxbudget``).
        chroma_url: a Chroma server instead (or set ``CTXBUDGET_CHROMA_URL``).
        client: any chromadb client instead.
        store: a ready `ChromaStore` (then path, url and client are not used).
        embedder: an `Embedder`, a LangChain ``Embeddings``, a LlamaIndex embedding or a callable
            (default: the local all-MiniLM-L6-v2, offline).
        namespace: the tenant; nothing crosses namespaces.
        model: the default model (its tokenizer counts, its window bounds budgets).
        config: candidate gathering settings (`MemoryConfig`).
        summarizer: used by `summarize` and for ``shrink="summarize"`` items (default:
            extractive, no LLM).

    Ids: a record id is unique within its scope (its session; a user-wide pin: its user; a
    document: its collection), so sessions and users never touch each other's records, and
    `unpin` names the scope. Ids starting with ``ctxbudget:`` are ctxbudget's own and refused
    from callers. In `assemble`, every item has its own id: the system prompt, query and tool
    schemas are ``ctxbudget:system``, ``ctxbudget:query`` and ``ctxbudget:tool:<name>``; the
    current session's records (messages, pins, summaries) keep their ids, so ``included_ids``
    shows them as stored; every other record's id is qualified with its scope
    (`ctxbudget.store.records.scoped_item_id`: ``ctxbudget:user:["u1","diet"]``,
    ``ctxbudget:session:["s2","m4"]``, ``ctxbudget:collection:["kb","guide#0"]``); tasks are
    ``ctxbudget:task:<n>``. An ``extra`` item with the id of a current-session record is
    taken as that record (the core keeps one).

    Tool calls: `add_messages` takes calls as dicts (OpenAI or LangChain form, normalized by
    `ctxbudget.core.toolcalls`) or as plain ids. Dict calls are kept canonical, as a JSON list in
    ``record.metadata["_tool_calls"]``, arguments as the model produced them (valid JSON or
    not: read them with `ctxbudget.core.toolcalls.parse_arguments`). A turn that only calls tools
    has ``record.text == ""``; it is embedded through a description of its calls.

    >>> mem = ContextMemory(path=tmp_path)  # doctest: +SKIP
    >>> mem.add_message("s1", "user", "I moved to Lisbon in May", id="m1")  # doctest: +SKIP
    'm1'
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        chroma_url: str | None = None,
        client: Any = None,
        store: ChromaStore | None = None,
        embedder: object = None,
        namespace: str = "default",
        model: str = "gpt-4o",
        config: MemoryConfig | None = None,
        summarizer: Summarizer | None = None,
    ) -> None:
        if store is None:
            chosen: Embedder | None = None if embedder is None else as_embedder(embedder)
            store = ChromaStore(path, url=chroma_url, client=client, embedder=chosen)
        self.store = store
        self.namespace = namespace
        self.model = model
        self.config = config or MemoryConfig()
        self._counters: dict[str, TokenCounter] = {}
        self.counter = self.counter_for(model)
        self.summarizer: Summarizer = summarizer or ExtractiveSummarizer(self.counter.count)
        self._indexes: OrderedDict[str, SessionIndex] = OrderedDict()
        self._indexes_lock = threading.Lock()
        self._turn_vectors: OrderedDict[str, list[float]] = OrderedDict()

    # -- writing ---------------------------------------------------------------------------
    def counter_for(self, model: str | None) -> TokenCounter:
        """The (cached) token counter of ``model`` (the default model when None)."""
        name = model or self.model
        counter = self._counters.get(name) if isinstance(name, str) else None  # for_model checks
        if counter is None:
            counter = self._counters[name] = TokenCounter.for_model(name)
        return counter

    def add_message(
        self,
        session_id: str,
        role: str,
        text: str,
        *,
        id: str | None = None,  # noqa: A002 - the name users pass
        user_id: str | None = None,
        timestamp: float | datetime | str | None = None,
        metadata: Mapping[str, MetadataValue] | None = None,
        name: str | None = None,
        tool_calls: Sequence[Mapping[str, Any]] | Sequence[str] = (),
        tool_call_id: str | None = None,
    ) -> str:
        """Store one message of a session; returns its id (the one given, or a new one)."""
        message = {
            "role": role,
            "text": text,
            "id": id,
            "timestamp": timestamp,
            "metadata": metadata,
            "name": name,
            "tool_calls": tool_calls,
            "tool_call_id": tool_call_id,
        }
        return self.add_messages(session_id, [message], user_id=user_id, progress=False)[0]

    def add_messages(
        self,
        session_id: str,
        messages: Iterable[Mapping[str, Any] | tuple[str, str]],
        *,
        user_id: str | None = None,
        progress: bool | None = None,
        batch_size: int = 256,
    ) -> list[str]:
        """Store messages in order (dicts with role and text/content, or ``(role, text)``).

        Everything is checked before anything is written; a bad message raises an error naming
        its index. A progress bar shows on long imports (``progress=None``: over 200 messages).
        """
        if isinstance(messages, str | bytes | Mapping) or not isinstance(messages, Iterable):
            msg = (
                f"messages must be a list of message dicts or (role, text) tuples, got a "
                f"{type(messages).__name__}; for one message use add_message"
            )
            raise StoreInputError(msg)
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            msg = f"batch_size must be a positive int, got {batch_size!r}"
            raise StoreInputError(msg)
        require_name("session_id", session_id)
        records = [
            self._message_record(session_id, index, message, user_id)
            for index, message in enumerate(messages)
        ]
        return self._write(records, "message", progress, batch_size)

    def _write(
        self, records: list[Record], noun: str, progress: bool | None, batch_size: int = 256
    ) -> list[str]:
        """Check every record, count tokens once, then store in batches with a progress bar."""
        try:
            self.store.check(records)  # all of them, before the first batch is written
        except StoreInputError as exc:
            problem = str(exc).replace("record ", noun + " ", 1).removesuffix(_UNWRITTEN)
            msg = problem.replace("in one add()", "in one call") + _UNWRITTEN
            raise StoreInputError(msg) from exc
        self._refuse_changes(records, noun)
        self._remember_counts(records)
        bar = _progress(len(records), f"storing {noun}s", progress)
        ids: list[str] = []
        for start in range(0, len(records), batch_size):
            chunk = records[start : start + batch_size]
            try:
                ids.extend(r.id for r in self.store.add(chunk))
            except StoreError as exc:
                if not ids:
                    raise
                msg = (
                    f"{exc} (for {noun}s {start} to {start + len(chunk) - 1}); the {start} "
                    f"before were stored (ids {ids[0]!r} to {ids[-1]!r}): add {noun}s {start} "
                    "on again"
                )
                raise type(exc)(msg) from exc
            if bar is not None:
                bar.update(len(chunk))
        if bar is not None:
            bar.close()
        return ids

    def _message_record(
        self, session_id: str, index: int, message: object, user_id: str | None
    ) -> Record:
        if isinstance(message, tuple) and len(message) == 2:
            message = {"role": message[0], "text": message[1]}
        if not isinstance(message, Mapping):
            msg = (
                f"message {index} is a {type(message).__name__}; pass dicts with 'role' and "
                "'text' (or 'content'), or (role, text) tuples"
            )
            raise StoreInputError(msg)
        role = message.get("role")
        if not isinstance(role, str) or role not in ROLES:
            msg = f"message {index}: role must be one of {sorted(ROLES)}, got {role!r}"
            raise StoreInputError(msg)
        text = message.get("text", message.get("content"))
        if not isinstance(text, str):
            msg = f"message {index}: text must be a str, got {type(text).__name__}"
            raise StoreInputError(msg)
        self._check_length(f"message {index}", text)
        metadata = user_metadata(f"message {index}", message.get("metadata"))
        call_ids = message_calls(index, message.get("tool_calls"), metadata)
        if message.get("name"):
            metadata["_name"] = str(message["name"])
        if (
            not text.strip()
            and not call_ids
            and not (role == "tool" and message.get("tool_call_id"))
        ):
            msg = (
                f"message {index} has empty text; store only messages with content (a turn "
                "that calls tools, or a tool result, may be empty)"
            )
            raise StoreInputError(msg)
        try:
            timestamp = to_timestamp(message.get("timestamp"))
        except InvalidItemError as exc:
            msg = f"message {index}: {exc}"
            raise StoreInputError(msg) from exc
        given = message.get("id")
        if (
            given is not None
            and given != ""
            and (isinstance(given, bool) or not isinstance(given, str | int))
        ):
            msg = f"message {index}: id must be a str (or None for a new one), got {given!r}"
            raise StoreInputError(msg)
        if given not in (None, ""):
            check_message_id(str(given), f"message {index}")
        return Record(
            id=str(given) if given not in (None, "") else f"{session_id}:{uuid.uuid4().hex[:16]}",
            kind="message",
            # A turn that only calls tools has no text: no placeholder is stored or sent.
            text=text if text.strip() else "",
            namespace=self.namespace,
            session_id=session_id,
            user_id=user_id or message.get("user_id"),
            role=role,
            timestamp=timestamp,
            tool_calls=call_ids,
            tool_call_id=message.get("tool_call_id"),
            metadata=metadata,
        )

    def _check_length(self, what: str, text: str) -> None:
        limit = self.config.max_message_chars
        if len(text) > limit:
            msg = (
                f"{what} is {len(text):,} characters; the limit is {limit:,} "
                "(MemoryConfig.max_message_chars): store long text with add_documents (it is cut "
                "into chunks), or raise the limit"
            )
            raise StoreInputError(msg)

    def _refuse_changes(self, records: list[Record], noun: str) -> None:
        """Refuse ids stored with other content before the first batch (not batch by batch).

        Only the records' own scopes are read: an id another session or user uses is not a
        conflict, and nothing about it is revealed.
        """
        by_scope: dict[tuple[str, str], list[str]] = {}
        for record in records:
            by_scope.setdefault(scope_of(record), []).append(record.id)
        stored: dict[tuple[tuple[str, str], str], Record] = {}
        for scope, ids in by_scope.items():
            kind, name = scope
            found = self.store.get(
                ids,
                namespace=self.namespace,
                session_id=name if kind == "session" else None,
                user_id=name if kind == "user" else None,
                collection=name if kind == "collection" else None,
            )
            stored.update(((scope, r.id), r) for r in found)
        changed = [
            r.id
            for r in records
            if (old := stored.get((scope_of(r), r.id))) is not None and not same_content(r, old)
        ]
        if changed:
            msg = (
                f"{len(changed)} {noun}(s) are already stored with different content: ids "
                f"{changed[:10]}; give new content a new id (or delete the stored one first)"
                f"{_UNWRITTEN}"
            )
            raise StoreInputError(msg)

    def _remember_counts(self, records: list[Record]) -> None:
        counts = self.counter.count_many([r.text for r in records])
        for index, record in enumerate(records):
            records[index] = with_tokens(record, {self.counter.name: counts[index]})

    def pin(
        self,
        session_id: str | None = None,
        text: str | None = None,
        *,
        user_id: str | None = None,
        id: str | None = None,  # noqa: A002
        metadata: Mapping[str, MetadataValue] | None = None,
    ) -> str:
        """Pin a fact to a session or to a user; pinned facts are offered on every assembly.

        ``pin("s1", "User is vegetarian")`` or ``pin(user_id="u1", text=...)``.

        Raises:
            StoreInputError: no text or no session or user, a text over
                `MemoryConfig.max_message_chars`, reserved or unstorable metadata, or an id
                already pinned with other text. Nothing was written.
        """
        given: object = text
        if not isinstance(given, str) or not given.strip():
            msg = (
                "pin needs the text of the fact as a non-empty str, e.g. "
                f"mem.pin('s1', 'User is vegetarian'); got {given!r:.80}"
            )
            raise StoreInputError(msg)
        self._check_length("the pinned fact", given)
        if session_id is None and user_id is None:
            msg = "pin needs a session_id or a user_id to attach the fact to"
            raise StoreInputError(msg)
        scope = "session" if session_id is not None else "user"
        if id:
            check_message_id(id, "pin")
        record = Record(
            id=id or f"pin:{uuid.uuid4().hex[:16]}",
            kind="pinned",
            text=given,
            namespace=self.namespace,
            session_id=session_id,
            user_id=user_id,
            metadata={**user_metadata("pin", metadata), "_scope": scope},
        )
        return self._write([record], "pinned fact", progress=False)[0]

    def unpin(
        self,
        id: str,  # noqa: A002
        *,
        session_id: str | None = None,
        user_id: str | None = None,
    ) -> bool:
        """Remove a pinned fact of a session or of a user; True when it existed.

        Pin ids are scoped like every record id: name the session (``session_id=``) or the
        user (``user_id=``) the fact was pinned to, as `pin` took it. Only a pinned fact with
        that id in that scope is removed: a message, task, summary or document with the same
        id, and pins of other sessions or users, are never touched.

        Raises:
            StoreInputError: neither or both of ``session_id`` and ``user_id``, or an id in
                ctxbudget's own id space.

        >>> mem.unpin("diet", user_id="u1")  # doctest: +SKIP
        True
        """
        if (session_id is None) == (user_id is None):
            msg = (
                f"unpin({id!r}) needs the scope the fact was pinned to: pass session_id= for a "
                "session's pin or user_id= for a user-wide pin (exactly one)"
            )
            raise StoreInputError(msg)
        require_name("id", id)
        check_message_id(id, "unpin")
        scope = {"session_id": session_id} if session_id is not None else {"user_id": user_id}
        found = self.store.get([id], namespace=self.namespace, **scope)
        pins = [r.id for r in found if r.kind == "pinned" and "_task" not in r.metadata]
        if not pins:
            return False
        return self.store.delete(pins, namespace=self.namespace, kinds=["pinned"], **scope) > 0

    def add_documents(
        self,
        documents: Iterable[str | Mapping[str, Any] | tuple[str, str]],
        *,
        namespace: str = "kb",
        chunk_tokens: int = 200,
        overlap: int = 30,
        source: str | None = None,
        progress: bool | None = None,
    ) -> list[str]:
        """Store documents, cut into chunks of ``chunk_tokens`` tokens with ``overlap``.

        Documents are strings, ``(id, text)`` pairs or dicts with ``text`` (and optional ``id``,
        ``source``, ``metadata``). ``namespace`` names the collection of documents within this
        memory's tenant (``assemble(documents=["kb"])`` restricts to it). Returns chunk ids
        (``<document id>#<n>``). A document of any length is taken: chunking costs time in
        proportion to its length.

        Raises:
            StoreInputError: a malformed document, reserved or unstorable metadata, bad
                chunking options, or a chunk id already stored with other text. Nothing was
                written.
        """
        if isinstance(documents, str | bytes | Mapping) or not isinstance(documents, Iterable):
            msg = (
                f"documents must be a list of documents, got a {type(documents).__name__}; "
                "for one document pass [document]"
            )
            raise StoreInputError(msg)
        if not isinstance(namespace, str) or not namespace:
            msg = f"namespace (the document collection) must be a non-empty str, got {namespace!r}"
            raise StoreInputError(msg)
        for name, value, least in (("chunk_tokens", chunk_tokens, 4), ("overlap", overlap, 0)):
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                msg = f"{name} must be an int of at least {least}, got {value!r}"
                if name == "chunk_tokens":
                    msg += " (one character can take 4 tokens)"
                raise StoreInputError(msg)
        if overlap >= chunk_tokens:
            msg = f"overlap ({overlap}) must be below chunk_tokens ({chunk_tokens})"
            raise StoreInputError(msg)
        records: list[Record] = []
        for index, document in enumerate(documents):
            doc_id, text, doc_source, metadata = document_parts(index, document)
            if doc_id:
                check_message_id(doc_id, f"document {index}")
            doc_id = doc_id or f"doc:{uuid.uuid4().hex[:12]}"
            chunks = chunk_text(
                text, max_tokens=chunk_tokens, overlap=overlap, count=self.counter.count
            )
            for number, chunk in enumerate(chunks):
                records.append(
                    Record(
                        id=f"{doc_id}#{number}",
                        kind="document",
                        text=chunk,
                        namespace=self.namespace,
                        source=doc_source or source,
                        metadata={**metadata, "doc_namespace": namespace, "doc_id": doc_id},
                    )
                )
        return self._write(records, "document chunk", progress)

    # -- reading ---------------------------------------------------------------------------
    def history(self, session_id: str, *, limit: int | None = None) -> list[Record]:
        """The session's messages in order (the last ``limit`` when given)."""
        if limit is not None:
            return self.store.recent(namespace=self.namespace, session_id=session_id, limit=limit)
        return self.store.session_messages(namespace=self.namespace, session_id=session_id)

    def assemble(
        self,
        session_id: str,
        query: str,
        *,
        budget: Budget | int = 4096,
        model: str | None = None,
        system: str | None = None,
        user_id: str | None = None,
        format: Format = "messages",  # noqa: A002 - the public name
        tools: Sequence[Mapping[str, Any] | str] = (),
        documents: bool | str | Sequence[str] = True,
        other_sessions: bool | None = None,
        extra: Sequence[ContextItem] = (),
    ) -> AssembledContext:
        """The context for answering ``query`` in ``session_id``, within ``budget``.

        Candidates: the system prompt, pinned facts (session and user), the task stack, tool
        schemas, the session's recent history (its share of the budget follows the query, see
        `MemoryConfig.recent_share`), the session's other turns that match the query or the last
        user turns by meaning or by words (with their neighbouring turns), the user's other
        sessions (when enabled), documents, and stored summaries; scored by relevance x recency
        x salience (see `ctxbudget.memory.scoring`).

        Args:
            session_id: the conversation.
            query: the current user message (rendered last; not stored here).
            budget: tokens the rendered context may use, or a `Budget`.
            model: the model whose tokenizer counts (default: this memory's model).
            system: the system prompt (never pruned).
            user_id: the user (default: the one stored with the session's messages).
            format: ``"messages"``, ``"text"`` or ``"compact"``.
            tools: tool schemas (dicts or JSON text) the call will carry, counted in the budget.
            documents: search documents (True), none (False), or only these collections.
            other_sessions: search the user's other sessions (default: the config's setting).
            extra: more items to consider, as they are.
        """
        extras = extra_items(extra)
        found = self.candidates(
            session_id,
            query,
            budget=budget,
            model=model,
            user_id=user_id,
            format=format,
            documents=documents,
            other_sessions=other_sessions,
        )
        items: list[ContextItem] = []
        if system:
            items.append(
                ContextItem(internal_id("system"), system, tier=Tier.SYSTEM, source="system")
            )
        items.extend(found.pinned)
        items.extend(tool_items(tools))
        items.extend(found.history)
        items.extend(found.summaries)
        items.extend(found.retrieved)
        items.extend(extras)
        items.append(
            ContextItem(internal_id("query"), query, tier=Tier.QUERY, role="user", source="query")
        )
        plain = not isinstance(budget, Budget)
        budget = Budget.coerce(budget)
        if plain and self.config.retrieved_floor > 0:
            floor = {int(Tier.RETRIEVED): min(1.0, self.config.retrieved_floor)}
            budget = Budget(window=budget.window, floors=floor)
        assembler = ContextAssembler(
            self.counter_for(model),
            summarizer=self.summarizer,
            min_exchanges=self.config.min_exchanges,
        )
        return assembler.assemble(items, budget=budget, format=format)

    def candidates(
        self,
        session_id: str,
        query: str,
        *,
        budget: Budget | int = 4096,
        model: str | None = None,
        user_id: str | None = None,
        format: Format = "messages",  # noqa: A002 - the public name
        documents: bool | str | Sequence[str] = True,
        other_sessions: bool | None = None,
        search_recent: bool = False,
    ) -> Candidates:
        """The scored candidates for ``query`` in ``session_id``, bounded by ``budget``.

        What `assemble` offers the assembler, before anything is packed: pinned facts and
        tasks, the session's newest turns (their share of the budget follows the query), its
        summaries, and its older turns, the user's other sessions and documents that match the
        query (best first; scored by relevance x recency x salience). The search pool is a few
        times what ``budget`` can hold, so the cost follows the budget, not the session's length.

        Args:
            session_id: the conversation.
            query: the current user message.
            budget: the tokens the context may use (sizes the search and the recent share).
            model: the model whose tokenizer counts (default: this memory's model).
            user_id: the user (default: the one stored with the session's messages).
            format: the format the context will be rendered in (its markup is counted).
            documents: search documents (True), none (False), or only these collections.
            other_sessions: search the user's other sessions (default: the config's setting).
            search_recent: also search the newest turns (for a caller that holds the history
                itself, like an agent's state): they come back in ``retrieved`` too when they
                match, with the same ids as in ``history``.
        """
        if not isinstance(query, str) or not query.strip():
            msg = "query must be a non-empty string: the user's current message"
            raise InvalidItemError(msg)
        counter = self.counter_for(model)
        try:
            counter.count(query)  # a lone surrogate is refused here, before it is embedded
        except InvalidItemError as exc:
            msg = f"query: {exc}"
            raise InvalidItemError(msg) from exc
        documents = documents_arg(documents)
        config = self.config
        budget = Budget.coerce(budget)
        layout = ContextAssembler(counter, min_exchanges=config.min_exchanges).layout(format)
        recent = self.store.recent(
            namespace=self.namespace,
            session_id=session_id,
            limit=max(1, config.recent_messages),
        )
        index = self._session_index(session_id, recent)
        if not config.recent_messages:
            recent = []  # one message was read only to see whether the index is current
        skip: set[str] = set()
        if recent and recent[-1].role == "user" and recent[-1].text.strip() == query.strip():
            skip.add(recent[-1].id)  # the query was stored already: it is rendered as the query
            recent = recent[:-1]
        user = user_id or next((r.user_id for r in reversed(recent) if r.user_id), None)
        prime(counter, recent)
        use_other = config.other_sessions if other_sessions is None else other_sessions
        search = SearchScope(
            session_id=session_id,
            user=user,
            query=query,
            counter=counter,
            available=budget.available,
            documents=documents,
            other_sessions=use_other,
        )
        history, retrieved = self._retrieved(search, recent, index, skip, layout, search_recent)
        return Candidates(
            pinned=tuple(self._pinned(session_id, user)),
            history=tuple(history_item(r) for r in history),
            summaries=tuple(self._summaries(session_id)),
            retrieved=tuple(retrieved),
            user_id=user,
        )

    def search(
        self,
        query: str,
        *,
        k: int = 20,
        kinds: Sequence[str] | None = ("document",),
        session_id: str | None = None,
        user_id: str | None = None,
        collections: bool | str | Sequence[str] | None = None,
        vector: Sequence[float] | None = None,
    ) -> list[ScoredHit]:
        """Stored records matching ``query``, scored the way `candidates` scores them.

        For retrievers: one store search (``k`` nearest by meaning, of these ``kinds``, in one
        session, user or document collections), each hit scored by relevance (its similarity
        within the hits' range and its content words shared with the query) x recency x
        salience, best first. ``kinds=None`` searches every kind; ``collections`` narrows
        documents as in `assemble`; ``vector`` is the query's embedding when the caller has it.
        """
        if not isinstance(query, str) or not query.strip():
            return []
        where = None if collections is None else document_filter(collections)
        hits = self.store.search(
            query if vector is None else vector,
            namespace=self.namespace,
            k=k,
            kinds=None if kinds is None else list(kinds),
            session_id=session_id,
            user_id=user_id,
            where=where,
        )
        words = set(lexical_terms(query))
        span = span_of(h.similarity for h in hits)
        now = time.time()
        scoring = self.config.scoring
        scored = []
        for hit in hits:
            relevance = hit_relevance(scoring, hit.record, hit.similarity, 1.0, words, span)
            score = record_score(scoring, hit.record, relevance, now, session_id)
            scored.append(ScoredHit(hit, score))
        scored.sort(key=lambda s: (-s.score, s.hit.record.id))
        return scored

    def _pinned(self, session_id: str, user: str | None) -> list[ContextItem]:
        found = self.store.find(namespace=self.namespace, kinds=["pinned"], session_id=session_id)
        if user is not None:
            found += self.store.find(
                namespace=self.namespace, kinds=["pinned"], user_id=user, where={"_scope": "user"}
            )
        seen: set[str] = set()
        facts: list[ContextItem] = []
        tasks: list[TaskNode] = []
        for record in sorted(found, key=lambda r: (r.timestamp or 0.0, r.id)):
            key = item_id(record, session_id)
            if key in seen:
                continue
            seen.add(key)
            state = record.metadata.get("_task")
            if state is not None:
                tasks.append(task_node(record))
                continue
            # Never pruned: user content (however large or hostile) must not displace a pin.
            facts.append(
                ContextItem(
                    key,
                    record.text,
                    tier=Tier.PINNED,
                    score=1.0,
                    source="pinned",
                    shrink=Shrink.NEVER,
                )
            )
        return facts + task_items(tasks)

    def _summaries(self, session_id: str) -> list[ContextItem]:
        found = self.store.find(namespace=self.namespace, kinds=["summary"], session_id=session_id)
        return [
            ContextItem(
                r.id,
                r.text,
                tier=Tier.SUMMARY,
                score=1.0,
                summary_of=r.summary_of,
                timestamp=r.timestamp,
                source="summary",
            )
            for r in sorted(found, key=lambda r: (int(r.metadata.get("_first_seq", 0)), r.id))
        ]

    def _session_index(self, session_id: str, recent: list[Record]) -> SessionIndex | None:
        """The session's lexical index, brought up to its newest message (None: no messages)."""
        newest = max((r.seq for r in recent if r.seq is not None), default=None)
        if newest is None:
            return None
        with self._indexes_lock:
            index = self._indexes.get(session_id)
            if index is not None and index.gap != self.config.episode_gap:
                index = None  # the configuration changed: episodes are cut anew
            if index is not None and newest <= index.last_seq:
                self._indexes.move_to_end(session_id)
                return index
            if index is None or newest - index.last_seq > 1_000:
                index = SessionIndex(self.config.episode_gap, self.counter.name)
                found = self.store.session_messages(namespace=self.namespace, session_id=session_id)
            else:
                seqs = list(range(index.last_seq + 1, newest + 1))
                found = self.store.find(
                    namespace=self.namespace, kinds=["message"], session_id=session_id, seqs=seqs
                )
            index.extend(found)
            self._indexes[session_id] = index
            self._indexes.move_to_end(session_id)
            while len(self._indexes) > _INDEXED_SESSIONS:
                self._indexes.popitem(last=False)
            return index

    def _retrieved(
        self,
        search: SearchScope,
        recent: list[Record],
        index: SessionIndex | None,
        skip: set[str],
        layout: Layout,
        search_recent: bool = False,
    ) -> tuple[list[Record], list[ContextItem]]:
        """The history to offer and the scored retrieval candidates."""
        config = self.config
        scoring = config.scoring
        ns = self.namespace
        size = len(index) if index is not None else 0
        named = index.named_in(search.query) if index is not None else set()
        turns = [r for r in reversed(recent) if r.role == "user"][: config.query_turns]
        queries = [
            Query(1.0, without_names(search.query, named), lexical_terms(search.query), None)
        ]
        queries += [
            Query(config.query_turn_weight, r.text, lexical_terms(r.text), r.id) for r in turns
        ]
        vectors = self._embed_queries(queries)
        fit = search.available / ((index.mean_tokens if index is not None else 30.0) + 3.0)
        pool = max(config.semantic_k, math.ceil(_POOL_FACTOR * fit))
        records: dict[str, Record] = {}
        # item id (scope-qualified, see item_id) -> record, similarity, weight
        others: dict[str, tuple[Record, float, float]] = {}
        documents_where = document_filter(search.documents)
        # One Chroma call per source for every query together: a filtered query costs about
        # what its filter costs, whatever the number of vectors.
        if size:
            ks = [min(size, pool if n == 0 else config.semantic_k) for n in range(len(queries))]
            found = self.store.search_many(
                vectors, namespace=ns, k=ks, session_id=search.session_id, kinds=["message"]
            )
            for query, hits in zip(queries, found, strict=True):
                query.hits = hits
                records.update((h.record.id, h.record) for h in hits)
        searches: list[tuple[Query, list[Hit]]] = []
        if search.other_sessions and search.user is not None:
            found = self.store.search_many(
                vectors,
                namespace=ns,
                k=config.other_sessions_k,
                user_id=search.user,
                exclude_session_id=search.session_id,
                kinds=["message", "summary"],
            )
            searches += zip(queries, found, strict=True)
        if search.documents is not False and config.document_k:
            found = self.store.search_many(
                vectors,
                namespace=ns,
                k=config.document_k,
                kinds=["document"],
                where=documents_where,
            )
            searches += zip(queries, found, strict=True)
        for query, hits in searches:
            for hit in hits:
                key = item_id(hit.record, search.session_id)
                known = others.get(key)
                if known is None or hit.similarity * query.weight > known[1] * known[2]:
                    others[key] = (hit.record, hit.similarity, query.weight)

        history = list(recent)
        relevance: Floats = np.zeros(size)
        span = (0.0, 0.0)
        if index is not None and size:
            relevance, span = index.relevance(queries, scoring, config.neighbours, named)
            history = fit_history(
                recent,
                self._history_share(index, relevance, recent) * search.available,
                layout,
                config.min_exchanges,
            )
        taken = skip if search_recent else skip | {r.id for r in history}
        items: list[ContextItem] = []
        newest = index.newest if index is not None else None
        if index is not None and size:
            positive = np.flatnonzero(relevance > 0)
            chosen: list[int] = []
            for p in positive[np.argsort(-relevance[positive], kind="stable")]:
                if index.ids[int(p)] not in taken:
                    chosen.append(int(p))
                    if len(chosen) >= pool:
                        break
            missing = [index.ids[p] for p in chosen if index.ids[p] not in records]
            if missing:
                found_missing = self.store.get(missing, namespace=ns, session_id=search.session_id)
                records.update((r.id, r) for r in found_missing)
            for p in chosen:
                record = records.get(index.ids[p])
                if record is None or not record.text.strip():  # deleted; a tool-call-only turn
                    continue
                items.append(self._scored(record, float(relevance[p]), newest, search))
        words = set(lexical_terms(search.query))
        for key, (record, similarity, weight) in others.items():
            if key in taken or not record.text.strip():
                continue
            bounds = span if span[1] > span[0] else span_of(s for _, s, _ in others.values())
            match = hit_relevance(self.config.scoring, record, similarity, weight, words, bounds)
            items.append(self._scored(record, match, newest, search))
        prime(search.counter, [r for r in records.values()])
        items.sort(key=lambda it: (-it.score, it.id))
        return history, items

    def _embed_queries(self, queries: Sequence[Query]) -> list[list[float]]:
        """Vectors of the queries; earlier turns come from a small cache (they recur)."""
        cache = self._turn_vectors
        with self._indexes_lock:
            known = {q.text: cache[q.text] for q in queries if q.own_id and q.text in cache}
        todo = list(dict.fromkeys(q.text for q in queries if q.text not in known))
        known.update(zip(todo, self.store.embedder.embed_documents(todo), strict=True))
        with self._indexes_lock:
            for q in queries:
                if q.own_id is not None:
                    cache[q.text] = known[q.text]
                    cache.move_to_end(q.text)
            while len(cache) > _CACHED_VECTORS:
                cache.popitem(last=False)
        return [known[q.text] for q in queries]

    def _scored(
        self, record: Record, relevance: float, newest: float | None, search: SearchScope
    ) -> ContextItem:
        score = record_score(self.config.scoring, record, relevance, newest, search.session_id)
        return retrieved_item(record, score, search.session_id)

    def _history_share(self, index: SessionIndex, relevance: Floats, recent: list[Record]) -> float:
        """`MemoryConfig.recent_share`: the least, or more when the best matches are recent."""
        least, most = self.config.recent_share
        best = [int(p) for p in np.argsort(-relevance, kind="stable")[:_TOP_MATCHES]]
        best = [p for p in best if relevance[p] > 0]
        if not best:
            return least
        window = {r.id for r in recent}
        recent_matches = sum(index.ids[p] in window for p in best)
        return max(least, most * recent_matches / len(best))

    # -- maintenance -----------------------------------------------------------------------
    def summarize(
        self,
        session_id: str,
        summarizer: Summarizer | None = None,
        *,
        keep_recent: int | None = None,
        stretch: int = 30,
        max_tokens: int = 150,
    ) -> list[str]:
        """Fold old stretches of a session into stored summaries; returns the new summary ids.

        Only whole stretches of ``stretch`` messages older than the newest ``keep_recent`` (the
        recent window by default) that no summary covers yet are folded, so calling this after
        every turn summarizes each stretch once.
        """
        chosen = summarizer or self.summarizer
        messages = self.history(session_id)
        keep = self.config.recent_messages if keep_recent is None else keep_recent
        older = messages[: max(0, len(messages) - keep)]
        done = self.store.find(namespace=self.namespace, kinds=["summary"], session_id=session_id)
        covered = max((int(r.metadata.get("_last_seq", -1)) for r in done), default=-1)
        todo = [m for m in older if (m.seq if m.seq is not None else -1) > covered]
        records: list[Record] = []
        for start in range(0, len(todo) - stretch + 1, stretch):
            part = todo[start : start + stretch]
            lines = [f"{m.metadata.get('_name') or m.role}: {m.text}" for m in part]
            text = chosen.summarize(lines, max_tokens).strip()
            if not text:
                continue
            first, last = part[0].seq or 0, part[-1].seq or 0
            records.append(
                Record(
                    id=internal_id("summary", f"{first}-{last}"),
                    kind="summary",
                    text=text,
                    namespace=self.namespace,
                    session_id=session_id,
                    user_id=part[-1].user_id,
                    timestamp=part[-1].timestamp,
                    summary_of=tuple(m.id for m in part),
                    metadata={"_first_seq": first, "_last_seq": last},
                    tokens={self.counter.name: self.counter.count(text)},
                )
            )
        if records:
            self.store.add(records)
        return [r.id for r in records]

    def push_task(self, session_id: str, goal: str) -> str:
        """Start a (sub-)task under the current one; returns its id."""
        if not goal.strip():
            msg = "push_task needs a goal"
            raise StoreInputError(msg)
        nodes = self._tasks(session_id)
        open_nodes = sorted((n for n in nodes if not n.done), key=lambda n: n.order)
        parent = open_nodes[-1].id if open_nodes else ""
        order = max((n.order for n in nodes), default=-1) + 1
        record = Record(
            id=internal_id("task", order),
            kind="pinned",
            text=goal,
            namespace=self.namespace,
            session_id=session_id,
            metadata={"_task": "open", "_parent": parent, "_order": order, "_scope": "session"},
        )
        return self.store.add([record])[0].id

    def pop_task(self, session_id: str, result: str) -> str:
        """Finish the current task with its result; returns its id."""
        records = self._task_records(session_id)
        open_records = [r for r in records if r.metadata.get("_task") == "open"]
        if not open_records:
            msg = f"session {session_id!r} has no open task; push_task first"
            raise StoreInputError(msg)
        current = max(open_records, key=lambda r: int(r.metadata.get("_order", 0)))
        done = Record(
            id=current.id,
            kind="pinned",
            text=current.text,
            namespace=self.namespace,
            session_id=session_id,
            metadata={**current.metadata, "_task": "done", "_result": result},
        )
        self.store.add([done], replace=True)
        return current.id

    def _task_records(self, session_id: str) -> list[Record]:
        found = self.store.find(namespace=self.namespace, kinds=["pinned"], session_id=session_id)
        return [r for r in found if "_task" in r.metadata]

    def _tasks(self, session_id: str) -> list[TaskNode]:
        return [task_node(r) for r in self._task_records(session_id)]

    def clear(self, session_id: str, *, pins: bool = False) -> int:
        """Forget a session's conversation: its messages and summaries; returns how many.

        Pinned facts and tasks of the session stay unless ``pins=True`` (then everything of
        the session goes, as `delete_session`). User-wide pins and documents are never touched.
        Both adapters clear a session this way (LangChain ``clear()``, LlamaIndex ``reset()``).
        """
        if pins:
            return self.delete_session(session_id)
        found = self.store.find(
            namespace=self.namespace, kinds=["message", "summary"], session_id=session_id
        )
        if not found:
            return 0
        with self._indexes_lock:
            self._indexes.pop(session_id, None)
        self.store.delete([r.id for r in found], namespace=self.namespace, session_id=session_id)
        return len(found)

    def delete_session(self, session_id: str) -> int:
        """Delete every record of a session; returns how many were removed."""
        with self._indexes_lock:
            self._indexes.pop(session_id, None)
        return self.store.delete_session(namespace=self.namespace, session_id=session_id)

    def delete_user(self, user_id: str) -> int:
        """Delete every record of a user; returns how many were removed.

        Their sessions go whole (messages, session pins, tasks, summaries), and so does anything
        else carrying their user id.
        """
        removed = 0
        with self._indexes_lock:
            self._indexes.clear()
        for session in self.store.list_sessions(namespace=self.namespace, user_id=user_id):
            removed += self.store.delete_session(namespace=self.namespace, session_id=session)
        return removed + self.store.delete_user(namespace=self.namespace, user_id=user_id)

    def stats(self) -> dict[str, Any]:
        """Counts per kind, sessions and namespaces of the underlying store."""
        return dict(self.store.stats())

    def close(self) -> None:
        """Release the store's client."""
        self.store.close()

    def __enter__(self) -> ContextMemory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _progress(total: int, label: str, progress: bool | None) -> Any:
    if progress is False or (progress is None and total <= _PROGRESS_AT):
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=label, unit="rec")
