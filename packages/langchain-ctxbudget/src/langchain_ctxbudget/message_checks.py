"""Checks of a message before it is counted, each naming the message and the field at fault.

`langchain_ctxbudget.convert` runs them: a lone surrogate anywhere a model would be sent it,
and tool call arguments that are not JSON (a numpy number), which LangChain's converter
reports as content it cannot convert. `framework_summary` tells a message the middleware does
not store.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage

from ctxbudget.core.unicode import lone_surrogate
from ctxbudget.errors import InvalidItemError

__all__ = ["check_call_args", "check_unicode", "framework_summary"]


def check_call_args(message: BaseMessage, where: str) -> None:
    """Name a tool call whose arguments are not JSON (a numpy number, NaN...), if there is one.

    NaN and infinity are refused as the core refuses them in arguments given as a mapping:
    LangChain's converter writes them as a bare ``NaN``, which no provider reads (until
    2026-12-02 the middleware sent and stored ``{"x": NaN}``).
    """
    if not isinstance(message, AIMessage):
        return
    for number, call in enumerate(message.tool_calls):
        try:
            json.dumps(call.get("args"), allow_nan=False)
        except (TypeError, ValueError) as exc:
            if "not JSON compliant" in str(exc):
                msg = (
                    f"{where}: the arguments of tool call {number} ({call.get('name')!r}) hold "
                    "NaN or infinity, which JSON cannot write and providers refuse; give null "
                    "or a string for that value"
                )
                raise InvalidItemError(msg) from exc
            msg = (
                f"{where}: the arguments of tool call {number} ({call.get('name')!r}) are not "
                f"JSON ({exc}), and a chat model sends them as JSON; give them as JSON values "
                "(str, int, float, bool, None, lists and dicts: e.g. int() or float() of a "
                "numpy number)"
            )
            raise InvalidItemError(msg) from exc


def check_unicode(data: Mapping[str, Any], where: str) -> None:
    """Refuse a message with a lone surrogate in any field sent, naming the message."""
    content = data.get("content")
    texts: list[tuple[str, object]] = [
        ("name", data.get("name")),
        ("tool_call_id", data.get("tool_call_id")),
        ("text", content if isinstance(content, str) else None),
    ]
    if isinstance(content, list):
        texts.extend((f"content block {n}", b.get("text")) for n, b in enumerate(content))
    for number, call in enumerate(data.get("tool_calls") or ()):
        function = call.get("function") or {}
        texts.append((f"tool call {number}'s id", call.get("id")))
        texts.append((f"tool call {number}'s name", function.get("name")))
        texts.append((f"tool call {number}'s arguments", function.get("arguments")))
    for field, value in texts:
        problem = lone_surrogate(value) if isinstance(value, str) else None
        if problem is not None:
            msg = f"{where}: {field} {problem}"
            raise InvalidItemError(msg)


def framework_summary(message: BaseMessage) -> bool:
    """Whether ``message`` is ``SummarizationMiddleware``'s summary of the messages it removed.

    The middleware does not store it: the messages it summarizes were stored as the state held
    them, and stored as the user's turn it would come back as something the user said.
    """
    return message.additional_kwargs.get("lc_source") == "summarization"
