"""Where a `CtxBudgetMemory`'s `ContextMemory` comes from: opened, described, re-opened.

`open_memory` is `CtxBudgetMemory.from_defaults`'s: a given `ContextMemory`, or a new one in a
folder. `CtxBudgetMemory.to_dict` writes the memory's fields (``token_limit``, ``session_id``,
``model``, ``user_id``, ``block_tiers``), the names of its memory blocks and, under ``"store"``
(`store_dict`), what re-opens its `ContextMemory`: the embedded Chroma folder, the collection,
the namespace, the default model, the `MemoryConfig` and the embedder's name.
`CtxBudgetMemory.from_dict` re-opens that folder (`from_dict_parts`, `open_store`).

Live objects are not serialized: the embedder and the summarizer (pass ``embedder=`` and
``summarizer=`` to ``from_dict``), memory blocks (they may hold an LLM or a vector store: pass
``memory_blocks=``), and a store on a Chroma server or a given client (pass ``memory=``). Each
missing one is a `ConfigurationError` that says what to pass. An ``llm`` is not needed again:
``from_defaults`` reads it once, and the dict holds the ``token_limit`` and ``model`` it gave
(the constructor and ``from_dict`` refuse one, saying so).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from llama_index.core.memory.memory import BaseMemoryBlock

from ctxbudget.core.summaries import Summarizer
from ctxbudget.embed.base import as_embedder
from ctxbudget.errors import ConfigurationError, ConfigurationTypeError
from ctxbudget.memory.context import ContextMemory
from ctxbudget.memory.policy.config import MemoryConfig
from ctxbudget.memory.policy.presets import as_strategy
from ctxbudget.store.chroma_store import ChromaStore
from ctxbudget.store.records import require_name
from llama_index.ctxbudget.blocks import check_block_tiers, check_blocks
from llama_index.ctxbudget.budget import TOKEN_LIMIT, token_limit_of
from llama_index.ctxbudget.embeddings import CtxBudgetEmbedding

__all__ = [
    "STORE_KEY",
    "checked_settings",
    "context_memory_of",
    "dataclass_from",
    "from_dict_parts",
    "given_blocks",
    "open_memory",
    "open_store",
    "released_on_error",
    "store_dict",
]

STORE_KEY = "store"
"""The key of `store_dict` in `CtxBudgetMemory.to_dict`."""

_D = TypeVar("_D")


def released_on_error(build: Callable[[], _D], memory: ContextMemory, owns: bool) -> _D:
    """``build()``; when it raises (invalid settings), an ``owns``-ed ``memory`` is closed first."""
    built = False
    try:
        result = build()
        built = True
    finally:
        if not built and owns:
            memory.close()
    return result


def checked_settings(data: dict[str, Any]) -> dict[str, Any]:
    """A `CtxBudgetMemory`'s settings as given, checked (before pydantic sees them).

    ``token_limit`` passes the core's budget boundary (`token_limit_of`: numpy ints taken;
    ``True``, ``"3"`` or ``2.0`` refused with the core's message), ``block_tiers`` are tiers,
    and ``strategy`` is valid (kept JSON-ready for ``to_dict``: a preset's name, or a dict).
    An ``llm`` is refused: only ``from_defaults`` reads one (it is not a setting, not kept).

    Raises:
        ConfigurationError: an ``llm`` is given (the message says what to pass instead), or two
            memory blocks share a name (`check_blocks`).
        StoreInputError: ``session_id`` (or ``user_id``) is not a non-empty str of valid Unicode.
    """
    if data.get("llm") is not None:
        msg = (
            "CtxBudgetMemory takes llm= in from_defaults only: it sizes token_limit and names "
            "model there, and is not kept (nor written by to_dict); here pass token_limit= and "
            "model= (from_dict: the dict holds them), or use CtxBudgetMemory.from_defaults(llm=...)"
        )
        raise ConfigurationError(msg)
    data["token_limit"] = token_limit_of(data.get("token_limit"), TOKEN_LIMIT)
    # The store's rule, when the memory is made: "" is no session (never a new random one).
    require_name("session_id", data.get("session_id"))
    if data.get("user_id") is not None:
        require_name("user_id", data["user_id"])
    data["block_tiers"] = check_block_tiers(data.get("block_tiers") or {})
    data["memory_blocks"] = check_blocks(data.get("memory_blocks") or [])
    given = data.get("strategy")
    if given is not None:
        chosen = as_strategy(given)
        data["strategy"] = given if isinstance(given, str) else chosen.as_dict()
    return data


def context_memory_of(value: object, where: str) -> ContextMemory:
    """``value`` if it is a `ContextMemory`.

    Raises:
        ConfigurationTypeError: anything else; a `CtxBudgetMemory` (or another object with a
            ``context_memory``) is named, with the attribute to pass instead.
    """
    if isinstance(value, ContextMemory):
        return value
    hint = "pass a ctxbudget ContextMemory, e.g. ContextMemory('./.ctxbudget')"
    if isinstance(getattr(value, "context_memory", None), ContextMemory):
        hint = f"pass its ContextMemory: memory=<your {type(value).__name__}>.context_memory"
    msg = f"{where} must be a ctxbudget ContextMemory, got a {type(value).__name__}; {hint}"
    raise ConfigurationTypeError(msg)


def open_memory(
    memory: ContextMemory | None,
    *,
    path: str | os.PathLike[str] | None = None,
    model: str = "gpt-4o",
    embedder: object = None,
    config: MemoryConfig | None = None,
    summarizer: Summarizer | None = None,
) -> tuple[ContextMemory, bool]:
    """``(memory, owned)``: ``memory`` as given (not owned), else a new one in ``path`` (owned).

    A new one embeds with ``embedder`` (default: a `CtxBudgetEmbedding`, the local model with
    its vector cache).

    Raises:
        ConfigurationError: ``memory`` with any of the options that would build another.
        ConfigurationTypeError: ``memory`` is not a `ContextMemory` (`context_memory_of`).
    """
    if memory is None:
        chosen = CtxBudgetEmbedding() if embedder is None else embedder
        built = ContextMemory(
            path, embedder=chosen, model=model, config=config, summarizer=summarizer
        )
        return built, True
    memory = context_memory_of(memory, "memory")
    options = {"path": path, "embedder": embedder, "config": config, "summarizer": summarizer}
    given = [name for name, value in options.items() if value is not None]
    if given:
        msg = (
            f"pass either memory= or {', '.join(given)}, not both: a given ContextMemory "
            "already has its store, embedder, config and summarizer"
        )
        raise ConfigurationError(msg)
    return memory, False


def store_dict(memory: ContextMemory) -> dict[str, Any]:
    """What re-opens ``memory``: folder (None off an embedded Chroma), collection, settings."""
    store = memory.store
    return {
        "path": None if store.folder is None else str(store.folder),
        "location": store.location,
        "collection": store.collection,
        "namespace": memory.namespace,
        "model": memory.model,
        "embedder": store.embedder.name,
        "config": _plain(dataclasses.asdict(memory.config)),
    }


def _plain(value: object) -> object:
    """JSON's shape of a value: tuples as lists (what ``json.loads`` gives back)."""
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    return value


def dataclass_from(cls: type[_D], data: Mapping[str, Any], where: str) -> _D:
    """A frozen dataclass (`MemoryConfig`, its `Scoring`) from its `dataclasses.asdict`.

    Lists become tuples where the default is a tuple (JSON has no tuples), nested dataclasses
    are rebuilt; the class checks the values itself.

    Raises:
        ConfigurationError: a key the class does not have, or values it refuses.
    """
    if not isinstance(data, Mapping):
        msg = f"{where} must be a dict, got {type(data).__name__}"
        raise ConfigurationError(msg)
    default = cls()
    names = {f.name for f in dataclasses.fields(default)}  # type: ignore[arg-type]
    unknown = sorted(set(data) - names)
    if unknown:
        msg = f"{where}: unknown settings {unknown}; known: {sorted(names)}"
        raise ConfigurationError(msg)
    values: dict[str, Any] = {}
    for name, value in data.items():
        current = getattr(default, name)
        if dataclasses.is_dataclass(current) and isinstance(value, Mapping):
            value = dataclass_from(type(current), value, f"{where}.{name}")
        elif isinstance(current, tuple) and isinstance(value, list):
            value = tuple(value)
        values[name] = value
    try:
        return cls(**values)
    except (TypeError, ValueError) as exc:
        msg = f"{where}: {exc}"
        raise ConfigurationError(msg) from exc


def open_store(
    entry: object, *, embedder: object = None, summarizer: Summarizer | None = None
) -> ContextMemory:
    """Re-open the `ContextMemory` a `store_dict` describes (an embedded Chroma folder).

    Raises:
        ConfigurationError: the entry is malformed; the store is not a folder (a server or a
            client: pass ``memory=``); or ``embedder`` is not the one the store was written
            with (pass ``embedder=``).
    """
    if not isinstance(entry, Mapping):
        msg = (
            f"{STORE_KEY!r} must be the dict CtxBudgetMemory.to_dict wrote, got "
            f"{type(entry).__name__}; or pass memory=<ContextMemory>"
        )
        raise ConfigurationError(msg)
    path = entry.get("path")
    if not isinstance(path, str) or not path:
        where = entry.get("location") or "not an embedded Chroma folder"
        msg = (
            f"the memory's store is {where}: only an embedded Chroma folder is re-opened from a "
            "dict (a server or a client is a live connection); pass it: "
            "CtxBudgetMemory.from_dict(data, memory=ContextMemory(chroma_url=...))"
        )
        raise ConfigurationError(msg)
    config = dataclass_from(MemoryConfig, entry.get("config") or {}, f"{STORE_KEY}.config")
    chosen = as_embedder(CtxBudgetEmbedding() if embedder is None else embedder)
    written = entry.get("embedder")
    if written is not None and written != chosen.name:
        msg = (
            f"the store in {path} was written with embedder {written!r}, not {chosen.name!r}; "
            "pass that embedder: CtxBudgetMemory.from_dict(data, embedder=...)"
        )
        raise ConfigurationError(msg)
    store = ChromaStore(path, collection=str(entry.get("collection", "ctxbudget")), embedder=chosen)
    memory: ContextMemory | None = None
    try:
        memory = ContextMemory(
            store=store,
            namespace=str(entry.get("namespace", "default")),
            model=str(entry.get("model", "gpt-4o")),
            config=config,
            summarizer=summarizer,
        )
    finally:
        if memory is None:  # an unknown model: release the folder before the error
            store.close()
    return memory


def given_blocks(
    names: object, blocks: Sequence[BaseMemoryBlock[Any]] | None
) -> list[BaseMemoryBlock[Any]]:
    """The memory blocks for `CtxBudgetMemory.from_dict`: ``blocks``, covering the ``names``.

    Raises:
        ConfigurationError: a block the dict names was not passed again.
    """
    recorded = [str(n) for n in names] if isinstance(names, list) else []
    given = list(blocks or [])
    missing = [name for name in recorded if name not in {b.name for b in given}]
    if missing:
        msg = (
            f"memory blocks {missing} are live objects (a block may hold an LLM or a vector "
            "store) and are not serialized; pass them again: "
            "CtxBudgetMemory.from_dict(data, memory_blocks=[...])"
        )
        raise ConfigurationError(msg)
    return given


def from_dict_parts(
    data: Mapping[str, Any], options: dict[str, Any], class_name: str
) -> tuple[ContextMemory, bool, dict[str, Any]]:
    """``(memory, owned, fields)`` for `CtxBudgetMemory.from_dict` of ``data``.

    ``options`` are ``from_dict``'s keywords: ``memory`` (used as is, not owned), else the
    store is re-opened (owned) with ``embedder`` and ``summarizer``; ``memory_blocks``; any
    other is a field that overrides the dict's.

    Raises:
        ConfigurationError: ``data`` describes another class, or something it cannot hold is
            missing (the message says what to pass).
    """
    fields = dict(data)
    options = dict(options)
    name = fields.pop("class_name", class_name)
    if name != class_name:
        msg = f"this dict describes a {name!r}, not a {class_name!r}"
        raise ConfigurationError(msg)
    entry = fields.pop(STORE_KEY, None)
    fields["memory_blocks"] = given_blocks(
        fields.pop("memory_blocks", []), options.pop("memory_blocks", None)
    )
    memory = options.pop("memory", None)
    embedder = options.pop("embedder", None)
    summarizer = options.pop("summarizer", None)
    fields.update(options)
    if memory is None:
        return open_store(entry, embedder=embedder, summarizer=summarizer), True, fields
    given, _ = open_memory(memory, embedder=embedder, summarizer=summarizer)
    return given, False, fields
