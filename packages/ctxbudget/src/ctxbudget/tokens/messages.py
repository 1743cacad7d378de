"""How chat messages are counted: OpenAI's per-message rule, content parts, tool calls.

`MessageCounting` is the part of `TokenCounter` that counts messages: ``count_message`` (one
message: ``per_message`` + role + content + name) and ``count_messages`` (a request: its messages,
their tool calls and tool call ids, plus the reply priming). Content is a str, or a list of text
and image parts (images cost what `ctxbudget.tokens.images.image_part` says).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ctxbudget.core.unicode import lone_surrogate
from ctxbudget.errors import InvalidItemError
from ctxbudget.tokens.images import IMAGE_PARTS, TEXT_PARTS, image_part

__all__ = ["MessageCounting"]


class MessageCounting:
    """Counting chat messages: the methods `TokenCounter` inherits from here.

    `TokenCounter` sets the overheads (``per_message``, ``per_name``, ``reply_priming``) and
    counts the text (``count``, from `ctxbudget.tokens.cache.CachedCounting`).
    """

    __slots__ = ()

    _per_message: int
    _per_name: int
    _reply_priming: int

    if TYPE_CHECKING:  # TokenCounter has it from CachedCounting

        def count(self, text: str) -> int: ...  # noqa: D102

    def count_message(
        self, role: str, content: str | Sequence[Any] | None, name: str | None = None
    ) -> int:
        """Tokens one chat message costs, without the reply priming.

        ``per_message + count(role) + content tokens (+ per_name + count(name))``. ``content`` is
        a str, None, or a list of parts: str, ``{"type": "text", "text": ...}`` (also
        ``input_text``/``output_text``) or an image (``image_url``, ``image``, ``input_image``),
        counted by `image_tokens` with the part's ``detail``, ``width`` and ``height`` (also
        read inside ``image_url``, or from the header of inline base64 data) and as
        ``encodings.IMAGE_TOKENS_MAX`` (1,445, the most an image can cost) when the size is unknown.

        Raises:
            InvalidItemError: a malformed role, name or part, or an unknown part type.

        >>> from ctxbudget.tokens.counter import TokenCounter
        >>> TokenCounter.from_encoding("o200k_base").count_message("user", "hello world")
        6
        """
        given_role: object = role
        if not isinstance(given_role, str) or not given_role:
            msg = f"message role must be a non-empty str, got {given_role!r}"
            raise InvalidItemError(msg)
        total = self._per_message + self.count(given_role) + self._content_tokens(content)
        given_name: object = name
        if given_name is not None and not isinstance(given_name, str):
            msg = f"message name must be a str or None, got {type(given_name).__name__}"
            raise InvalidItemError(msg)
        if given_name:
            problem = lone_surrogate(given_name)
            if problem is not None:  # said as the name's, not as some text's
                msg = f"name {problem}"
                raise InvalidItemError(msg)
            total += self._per_name + self.count(given_name)
        return total

    def _content_tokens(self, content: object) -> int:
        if content is None:
            return 0
        if isinstance(content, str):
            return self.count(content)
        if not isinstance(content, Sequence):
            msg = f"message content must be a str, a list of parts or None, got {content!r:.80}"
            raise InvalidItemError(msg)
        total = 0
        for i, part in enumerate(content):
            if isinstance(part, str):
                total += self.count(part)
                continue
            kind = part.get("type") if isinstance(part, Mapping) else None
            known = isinstance(kind, str)  # not absent, not unhashable
            if known and kind in TEXT_PARTS:
                total += self.count(part.get("text"))
            elif known and kind in IMAGE_PARTS:
                total += image_part(part)
            else:
                got = repr(kind) if isinstance(part, Mapping) else type(part).__name__
                msg = (
                    f"content part {i} has unknown type {got:.80}; supported: text, input_text, "
                    "output_text, image_url, image, input_image (convert others to text first)"
                )
                raise InvalidItemError(msg)
        return total

    def count_messages(self, messages: Sequence[Mapping[str, Any]]) -> int:
        """Prompt tokens of an OpenAI-style chat request: its messages plus the reply priming.

        Each message counts as `count_message` of its ``role``, ``content`` and ``name``, plus
        ``tool_calls`` (the JSON of each call's function name and arguments: OpenAI does not
        publish how it renders them, so this is an estimate) and ``tool_call_id`` (its text).
        For plain text messages this is the OpenAI cookbook's rule, which matches the API's
        ``prompt_tokens``. Other keys are ignored.

        Raises:
            InvalidItemError: a message is not a mapping or is malformed; the message says which.

        >>> from ctxbudget.tokens.counter import TokenCounter
        >>> TokenCounter.from_encoding("o200k_base").count_messages(
        ...     [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}])
        15
        """
        if isinstance(messages, str | Mapping) or not isinstance(messages, Sequence):
            msg = f"count_messages expects a sequence of message dicts, got {type(messages)}"
            raise InvalidItemError(msg)
        total = self._reply_priming
        for i, given in enumerate(messages):
            message: object = given
            if not isinstance(message, Mapping):
                msg = f"message {i} must be a mapping, got {type(message).__name__}"
                raise InvalidItemError(msg)
            try:
                total += self.count_message(
                    message.get("role"),  # type: ignore[arg-type]  # checked inside
                    message.get("content"),
                    message.get("name"),
                )
                total += self._tool_call_tokens(message.get("tool_calls"))
                call_id = message.get("tool_call_id")
                if call_id:
                    total += self.count(str(call_id))
            except InvalidItemError as exc:
                msg = f"message {i}: {exc}"
                raise InvalidItemError(msg) from exc
        return total

    def _tool_call_tokens(self, calls: object) -> int:
        if not calls:
            return 0
        if isinstance(calls, str | Mapping) or not isinstance(calls, Sequence):
            msg = f"tool_calls must be a list of calls, got {type(calls).__name__}"
            raise InvalidItemError(msg)
        total = 0
        for call in calls:
            function = call.get("function", call) if isinstance(call, Mapping) else None
            if not isinstance(function, Mapping):
                msg = f"a tool call must be a mapping with a function name, got {call!r:.80}"
                raise InvalidItemError(msg)
            arguments = function.get("arguments", function.get("args", ""))
            try:
                if not isinstance(arguments, str):  # LangChain style: args as a dict
                    arguments = json.dumps(arguments, ensure_ascii=False)
                rendered = json.dumps(
                    {"name": function.get("name"), "arguments": arguments}, ensure_ascii=False
                )
            except (TypeError, ValueError) as exc:
                msg = f"tool call arguments are not JSON serializable: {exc}"
                raise InvalidItemError(msg) from exc
            total += self.count(rendered)
        return total
