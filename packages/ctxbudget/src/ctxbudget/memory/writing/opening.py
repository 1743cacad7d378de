"""Where a memory's write journal lives, and its `WriteBehind` attached: `open_write_behind`.

Called once by `ContextMemory` when it opens, with its ``write_behind`` option.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
import weakref
from pathlib import Path
from typing import TYPE_CHECKING

from ctxbudget.errors import ConfigurationTypeError, StoreError
from ctxbudget.memory.writing.behind import WriteBehind
from ctxbudget.store.journal import JOURNAL_FOLDER, WriteJournal, replay

if TYPE_CHECKING:
    from ctxbudget.store.chroma_store import ChromaStore

__all__ = ["drain_siblings", "open_write_behind"]

logger = logging.getLogger(__name__)

# The write-behinds of this process by store (`ChromaStore.key`): a deletion by one memory
# waits for the others' queues (`drain_siblings`). Weak: a collected memory leaves the set.
_SIBLINGS: dict[tuple[str, ...], weakref.WeakSet[WriteBehind]] = {}
_SIBLINGS_GUARD = threading.Lock()


def open_write_behind(
    store: ChromaStore, option: bool | str | os.PathLike[str]
) -> WriteBehind | None:
    """The write-behind of a memory on ``store``, after replaying dead writers' journals.

    ``option`` is `ContextMemory`'s ``write_behind``: True journals in an embedded store's
    folder (``<folder>/ctxbudget-journal/<collection>``; None for a server or a given client,
    which then write synchronously), a folder journals there (one subfolder per store and
    collection), False gives None.

    Raises:
        ConfigurationTypeError: ``option`` is not a bool, str or path.
        StoreError: a dead writer's batches cannot be stored (a journal that cannot be
            created is logged, and the memory writes synchronously).
    """
    if isinstance(option, bool):
        if not option or store.folder is None:
            return None
        # The store replayed this journal folder itself when it opened.
        return _attach(store, store.folder / JOURNAL_FOLDER / store.collection)
    if isinstance(option, str | os.PathLike):
        where = hashlib.sha256(f"{store.location}\0{store.collection}".encode()).hexdigest()
        folder = Path(option) / f"{store.collection}-{where[:12]}"
        replay(folder, store.add, get=store.get)
        return _attach(store, folder)
    msg = f"write_behind must be True, False or a folder, got {type(option).__name__}"
    raise ConfigurationTypeError(msg)


def _attach(store: ChromaStore, folder: Path) -> WriteBehind | None:
    try:
        journal = WriteJournal(folder)
    except StoreError as exc:
        # A folder this process may only read: its writes fail on their own, clearly.
        logger.warning("%s; messages are written synchronously", exc)
        return None
    writer = WriteBehind(store.add, journal, get=store.get)
    store.on_close(writer.close)  # closing the store first still stores the queue
    with _SIBLINGS_GUARD:
        _SIBLINGS.setdefault(store.key, weakref.WeakSet()).add(writer)
    return writer


def drain_siblings(store: ChromaStore, mine: WriteBehind | None, *, strict: bool = True) -> None:
    """Wait until the other memories of this process on ``store`` stored what they acknowledged.

    A deletion calls this first, so that a message another memory acknowledged before it
    cannot land after it (another process's memories share no folder: an embedded store is one
    process's, and a server's memories write synchronously unless given a journal folder).
    Every other read and change calls it not ``strict``: it sees what the others acknowledged,
    and a memory whose store calls keep failing is that memory's to report, not the reader's.

    Raises:
        StoreError: ``strict``, and another memory's store calls kept failing; nothing was
            deleted.
    """
    with _SIBLINGS_GUARD:
        siblings = [w for w in _SIBLINGS.get(store.key, ()) if w is not mine]
    for writer in siblings:
        try:
            writer.drain()
        except StoreError:
            if strict:
                raise
