"""Documents as chunk records: options checked, each document cut, ids given or derived.

`Writer.documents` stores what `document_records` makes. A document given without an id is
named by what it holds (`ctxbudget.memory.writing.chunking.document_id`), so the same document
added again, in another call or twice in one, is stored once under the same chunk ids.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from numbers import Integral
from typing import Any

from ctxbudget.core.numbers import MAX_COUNT, shown
from ctxbudget.errors import StoreInputError
from ctxbudget.memory.inputs import document_parts
from ctxbudget.memory.writing.chunking import chunk_text, document_id
from ctxbudget.store.records import Record, first_surrogate, require_name
from ctxbudget.tokens.counter import TokenCounter

__all__ = ["document_records"]


def document_records(
    documents: Iterable[str | Mapping[str, Any] | tuple[str, str]],
    *,
    namespace: str,
    collection: str,
    chunk_tokens: int,
    overlap: int,
    source: str | None,
    counter: TokenCounter,
) -> tuple[list[Record], list[str]]:
    """The chunk records to store, and the chunk ids of each document in order.

    A document given twice without an id has its chunks once in the records and its ids
    twice in the list.

    Raises:
        StoreInputError: not a list of documents, a bad collection or chunking option, or a
            malformed document (named by its index).
    """
    if isinstance(documents, str | bytes | Mapping) or not isinstance(documents, Iterable):
        msg = (
            f"documents must be a list of documents, got a {type(documents).__name__}; "
            "for one document pass [document]"
        )
        raise StoreInputError(msg)
    if not isinstance(collection, str) or not collection:
        msg = f"collection must be a non-empty str (a document collection), got {shown(collection)}"
        raise StoreInputError(msg)
    if source is not None:
        require_name("source", source)
    problem = first_surrogate(collection)
    if problem is not None:
        msg = f"collection {problem}"
        raise StoreInputError(msg)
    for name, value, least in (("chunk_tokens", chunk_tokens, 4), ("overlap", overlap, 0)):
        if (
            isinstance(value, bool)
            or not isinstance(value, Integral)
            or not least <= value <= MAX_COUNT
        ):
            msg = f"{name} must be an int of at least {least}, got {shown(value)}"
            if name == "chunk_tokens":
                msg += " (one character can take 4 tokens)"
            raise StoreInputError(msg)
    chunk_tokens, overlap = int(chunk_tokens), int(overlap)
    if overlap >= chunk_tokens:
        msg = f"overlap ({overlap}) must be below chunk_tokens ({chunk_tokens})"
        raise StoreInputError(msg)
    records: list[Record] = []
    ids: list[str] = []
    derived: dict[str, list[str]] = {}  # chunk ids of the documents given without an id
    for index, document in enumerate(documents):
        doc_id, text, doc_source, metadata = document_parts(index, document)
        if not doc_id:  # named by what it holds: the same document again is stored once
            how = [doc_source or source, metadata, chunk_tokens, overlap, counter.name]
            doc_id = document_id(collection, text, how)
            if doc_id in derived:  # twice in this call: its chunks once
                ids += derived[doc_id]
                continue
        chunks = chunk_text(text, max_tokens=chunk_tokens, overlap=overlap, count=counter.count)
        chunk_ids = derived[doc_id] = [f"{doc_id}#{number}" for number in range(len(chunks))]
        ids += chunk_ids
        records += [
            Record(
                id=chunk_id,
                kind="document",
                text=chunk,
                namespace=namespace,
                source=doc_source or source,
                metadata={**metadata, "doc_namespace": collection, "doc_id": doc_id},
            )
            for chunk_id, chunk in zip(chunk_ids, chunks, strict=True)
        ]
    return records, ids
