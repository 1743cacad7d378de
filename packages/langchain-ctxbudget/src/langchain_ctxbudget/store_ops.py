"""LangGraph's store operations for `CtxBudgetStore`: checked, and answered as LangGraph items.

LangGraph's namespace rules raised as `InvalidNamespaceError` (ctxbudget's and LangGraph's),
the store's options (``ttl``: a ``default_ttl`` of at most `MAX_TTL_MINUTES`, a sweep interval
of at most a year; ``index``) checked, a listing's match conditions, the core's checks of a
batch's writes, ``limit=0`` (`nothing_asked`), the sweeper's wait (`waited`), and `StoredValue`
to ``Item``/``SearchItem``.
"""

from __future__ import annotations

import functools
import inspect
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from typing import Any, Literal, ParamSpec, TypeVar

from langgraph.store import base as lg
from langgraph.store.base import (
    GetOp,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    SearchItem,
    SearchOp,
    TTLConfig,
)

from ctxbudget.compat import refuse_unknown
from ctxbudget.core.numbers import count, flag, real
from ctxbudget.errors import ConfigurationError, InvalidValueError
from ctxbudget.memory.context import ContextMemory
from ctxbudget.memory.values import StoredValue, ValuePut
from ctxbudget.memory.values.asked import listing_args, search_args
from ctxbudget.memory.values.model import (
    MAX_TTL_MINUTES,
    check_key,
    check_namespace,
    check_prefix,
    index_arg,
    json_text,
    ttl_arg,
)
from ctxbudget.store.records import require_name
from langchain_ctxbudget.store_paths import path_problem

__all__ = [
    "check_read",
    "InvalidNamespaceError",
    "check_namespaces",
    "check_puts",
    "conditions",
    "index_fields",
    "index_paths",
    "item_of",
    "memory_options",
    "nothing_asked",
    "search_item_of",
    "sweep_minutes",
    "translated",
    "translated_async",
    "ttl_config",
    "waited",
]

P = ParamSpec("P")
R = TypeVar("R")
_TTL_OPTIONS = frozenset(
    {"refresh_on_read", "default_ttl", "sweep_interval_minutes", "omit_expired"}
)
_MAX_LIMIT = 10_000  # the core's largest page
_OWN_OPTIONS = frozenset({"memory", "user_at", "ttl", "index"})  # CtxBudgetStore's own
MAX_SWEEP_MINUTES = 525_600
"""The longest interval between TTL sweeps: a year."""


class InvalidNamespaceError(InvalidValueError, lg.InvalidNamespaceError):
    """A namespace refused (empty, a label empty, not a string, with a period or a NUL).

    LangGraph's rules, and ctxbudget's: a label must be valid Unicode (no lone surrogate).

    Both a ctxbudget error (`InvalidValueError`) and LangGraph's ``InvalidNamespaceError``, so
    code written for any LangGraph store catches it. Nothing was read or written.
    """


def translated(method: Callable[P, R]) -> Callable[P, R]:
    """``method`` raising LangGraph's namespace refusals as `InvalidNamespaceError`."""

    @functools.wraps(method)
    def call(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return method(*args, **kwargs)
        except lg.InvalidNamespaceError as exc:
            if isinstance(exc, InvalidNamespaceError):
                raise
            raise InvalidNamespaceError(str(exc)) from exc

    return call


def translated_async(method: Callable[P, Awaitable[R]]) -> Callable[P, Coroutine[Any, Any, R]]:
    """Async `translated`."""

    @functools.wraps(method)
    async def call(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return await method(*args, **kwargs)
        except lg.InvalidNamespaceError as exc:
            if isinstance(exc, InvalidNamespaceError):
                raise
            raise InvalidNamespaceError(str(exc)) from exc

    return call


def item_of(value: StoredValue) -> Item:
    """A stored value as LangGraph's ``Item``."""
    return Item(
        value=value.value,
        key=value.key,
        namespace=value.namespace,
        created_at=value.created_at,
        updated_at=value.updated_at,
    )


def search_item_of(value: StoredValue) -> SearchItem:
    """A found value as LangGraph's ``SearchItem`` (with its score)."""
    return SearchItem(
        value.namespace, value.key, value.value, value.created_at, value.updated_at, value.score
    )


def check_puts(user: str | None, puts: Sequence[ValuePut]) -> None:
    """The core's checks of a write (`ContextMemory.put_values` runs them again)."""
    if user is not None:
        require_name("user_id", user)
    for put in puts:
        space = check_namespace(put.namespace)
        key = check_key(put.key, space)
        if put.value is not None:
            json_text(put.value, space, key)
            index_arg(put.index, f"namespace {space!r}, key {key!r}")
            ttl_arg(put.ttl, f"namespace {space!r}, key {key!r}")


def check_namespaces(op: Op) -> None:
    """LangGraph's namespace rules and the core's, raised as `InvalidNamespaceError`.

    The core's label checks (valid Unicode, no NUL...) run here, before the user is taken
    from the namespace: a bad label at the ``user_at`` position is refused as the namespace
    label it is, not as a ``user_id`` the caller never passed.
    """
    try:
        lg.validate_op_namespace(op)
    except lg.InvalidNamespaceError as exc:
        raise InvalidNamespaceError(str(exc)) from exc
    if isinstance(op, GetOp | PutOp) and not op.namespace:
        verb = "put" if isinstance(op, PutOp) else "get"
        msg = f"Namespace cannot be empty: {verb} key {op.key!r} under a namespace of 1+ labels"
        raise InvalidNamespaceError(msg)
    try:
        if isinstance(op, GetOp | PutOp):
            check_namespace(op.namespace)
        elif isinstance(op, SearchOp):
            check_prefix(op.namespace_prefix)
    except InvalidNamespaceError:
        raise
    except InvalidValueError as exc:
        raise InvalidNamespaceError(str(exc)) from exc


def index_paths(index: Sequence[str] | bool | None, where: str) -> Sequence[str] | bool | None:
    """A put's ``index`` with ``""`` read as the whole value (``"$"``), as LangGraph reads it.

    LangGraph's stores embed the whole value for an empty path (``get_text_at_path``); the
    core names the whole value ``"$"``. A malformed path (`path_problem`) is refused
    (`InvalidValueError` naming ``where``); anything else is passed on as given (the core
    checks it).
    """
    if not isinstance(index, list | tuple):
        return index
    for path in index:
        problem = path_problem(path) if isinstance(path, str) else None
        if problem is not None:
            msg = f"index of {where} holds {path!r:.80}: {problem}"
            raise InvalidValueError(msg)
    if "" in index:
        return ["$" if path == "" else path for path in index]
    return index


def conditions(op: ListNamespacesOp) -> tuple[tuple[str, ...] | None, tuple[str, ...] | None]:
    """The one prefix and one suffix of a listing (None: not given)."""
    found: dict[Literal["prefix", "suffix"], tuple[str, ...]] = {}
    for condition in op.match_conditions or ():
        kind = condition.match_type
        if kind not in ("prefix", "suffix") or kind in found:
            msg = (
                f"list_namespaces takes one prefix and one suffix condition, got "
                f"{[c.match_type for c in op.match_conditions or ()]}"
            )
            raise ConfigurationError(msg)
        try:
            found[kind] = check_prefix(condition.path, f"list_namespaces({kind}=)")
        except InvalidValueError as exc:  # e.g. prefix="memories": a str, not a tuple
            raise InvalidNamespaceError(str(exc)) from exc
    return found.get("prefix"), found.get("suffix")


def check_read(op: SearchOp | ListNamespacesOp) -> None:
    """Refuse a search's or listing's arguments as running it would, without reading.

    A batch checks every operation before any runs: a get before a refused search would
    otherwise have refreshed its items' ttls.
    """
    if nothing_asked(op.limit):  # limit=0: no item, whatever else is asked
        return
    if isinstance(op, SearchOp):
        query = op.query
        if isinstance(query, str) and not query.strip():
            query = None  # LangGraph's stores treat "" (and a blank query) as no query
        search_args(op.namespace_prefix, query, op.filter, op.limit, op.offset)
    else:
        prefix, suffix = conditions(op)
        listing_args(prefix, suffix, op.max_depth, op.limit, op.offset)


def ttl_config(ttl: TTLConfig | None) -> TTLConfig | None:
    """A ``TTLConfig`` checked (`ConfigurationError` naming the option and what to do)."""
    if ttl is None:
        return None
    if not isinstance(ttl, Mapping):
        msg = f"CtxBudgetStore(ttl=) must be a TTLConfig dict, got {type(ttl).__name__}"
        raise ConfigurationError(msg)
    refuse_unknown(ttl, _TTL_OPTIONS, "CtxBudgetStore(ttl=)")
    checked: TTLConfig = {}
    if "refresh_on_read" in ttl:
        checked["refresh_on_read"] = flag(ttl["refresh_on_read"], "ttl['refresh_on_read']")
    if ttl.get("default_ttl") is not None:
        default = real(ttl["default_ttl"], "CtxBudgetStore(ttl=)['default_ttl'] (minutes)", above=0)
        if default > MAX_TTL_MINUTES:
            msg = (
                f"CtxBudgetStore(ttl=)['default_ttl'] is {default:g} minutes, more than "
                f"{MAX_TTL_MINUTES:,} (about 1,900 years: a later expiry cannot be dated); "
                "leave it out (or None) for items that never expire"
            )
            raise ConfigurationError(msg)
        checked["default_ttl"] = default
    if ttl.get("sweep_interval_minutes") is not None:
        where = "CtxBudgetStore(ttl=)['sweep_interval_minutes']"
        minutes = sweep_minutes(ttl["sweep_interval_minutes"], where)
        checked["sweep_interval_minutes"] = minutes  # type: ignore[typeddict-item]
    if "omit_expired" in ttl:
        if not flag(ttl["omit_expired"], "ttl['omit_expired']"):
            msg = (
                "CtxBudgetStore never returns expired items: ttl['omit_expired'] may only be "
                "True (or left out)"
            )
            raise ConfigurationError(msg)
        checked["omit_expired"] = True
    return checked


def sweep_minutes(minutes: object, where: str) -> float:
    """An interval between TTL sweeps in minutes: more than 0, at most a year."""
    checked = real(minutes, where, above=0, hint="e.g. 5")
    if checked > MAX_SWEEP_MINUTES:
        msg = (
            f"{where} is {checked:g} minutes, more than a year ({MAX_SWEEP_MINUTES:,}); give "
            "a shorter interval (expired items are never returned anyway: sweeping frees space)"
        )
        raise ConfigurationError(msg)
    return checked


def index_fields(index: Mapping[str, Any] | None) -> list[str] | None:
    """The ``fields`` of ``index=`` (None: the whole value); ``embed`` and ``dims`` refused."""
    if index is None:
        return None
    if not isinstance(index, Mapping):
        msg = (
            f"CtxBudgetStore(index=) must be a dict like {{'fields': ['text']}}, got {index!r:.80}"
        )
        raise ConfigurationError(msg)
    if "embed" in index or "dims" in index:
        msg = (
            "CtxBudgetStore(index=) takes only 'fields': items are embedded with the memory's "
            "embedder (pass ContextMemory(embedder=...) to choose it), so drop 'embed' and 'dims'"
        )
        raise ConfigurationError(msg)
    refuse_unknown(index, {"fields"}, "CtxBudgetStore(index=)")
    fields = index.get("fields")
    if fields is None:
        return None
    if isinstance(fields, str) or not isinstance(fields, Sequence) or not fields:
        msg = (
            f"CtxBudgetStore(index=)['fields'] must be a non-empty list of paths, "
            f"got {fields!r:.80}"
        )
        raise ConfigurationError(msg)
    # "" is the whole value in LangGraph's stores (as "$" is): kept as the core's "$".
    return [_field(f) or "$" for f in fields]


def _field(field: object) -> str:
    """One path of ``index['fields']``, checked (`path_problem`)."""
    if not isinstance(field, str):
        msg = f"CtxBudgetStore(index=)['fields'] holds {field!r:.80}: each path must be a str"
        raise ConfigurationError(msg)
    problem = path_problem(field)
    if problem is not None:
        msg = f"CtxBudgetStore(index=)['fields'] holds {field!r:.80}: {problem}"
        raise ConfigurationError(msg)
    return field


def memory_options() -> frozenset[str]:
    """What `CtxBudgetStore` takes: its own options and the `ContextMemory` ones it opens with.

    Checked before the memory is opened, so a misspelled option (``pth=``) is refused as a
    `ConfigurationTypeError` naming it and every option, not as ``ContextMemory``'s TypeError.
    """
    opened = inspect.signature(ContextMemory.__init__).parameters
    return frozenset(name for name in opened if name != "self") | _OWN_OPTIONS


def nothing_asked(limit: object) -> bool:
    """Whether a search or listing asks for no item (``limit=0``); a bad limit is refused."""
    return count(limit, "limit", least=0, most=_MAX_LIMIT, error=InvalidValueError) == 0


def waited(stop: threading.Event, seconds: float) -> bool:
    """Wait ``seconds`` (in slices a platform's timer holds) or until ``stop``; whether stopped."""
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        if stop.wait(min(left, threading.TIMEOUT_MAX, 86_400.0)):
            return True
    return stop.is_set()
