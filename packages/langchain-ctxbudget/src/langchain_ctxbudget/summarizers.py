"""`ChatModelSummarizer`: a `ctxbudget.Summarizer` backed by any LangChain chat model."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, HumanMessage
from langchain_core.runnables import Runnable

from ctxbudget import TokenCounter
from ctxbudget.compat import renamed
from ctxbudget.core.numbers import shown
from ctxbudget.core.prompts import DEFAULT_SUMMARY_PROMPT, check_summary_prompt, summary_fields
from ctxbudget.core.summaries import truncate_to_tokens
from ctxbudget.errors import ConfigurationTypeError
from langchain_ctxbudget.convert import resolve_counter

__all__ = ["DEFAULT_SUMMARY_PROMPT", "ChatModelSummarizer", "reply_text"]


class ChatModelSummarizer:
    """A summarizer (`ctxbudget.Summarizer`) that asks a LangChain chat model.

    The model is sent one human message, the prompt with ``{texts}`` replaced by the texts (one
    ``- `` line each, newlines kept) and ``{max_words}`` by ``max(1, 3 * max_tokens // 4)``;
    the default is `DEFAULT_SUMMARY_PROMPT`::

        Summarize the conversation excerpts and notes below for an assistant that will
        continue the work without seeing them again. Keep facts about the user, decisions,
        names, numbers, dates, commitments and open questions; drop greetings and small talk.
        Write plain sentences, at most {max_words} words, and nothing else (no preamble, no
        headings).

        {texts}

    The reply's text is the summary; if it is longer than ``max_tokens`` (counted with
    ``token_counter``) it is cut at a sentence boundary, so the limit always holds.

    Use it with `ctxbudget.memory.context.ContextMemory.summarize`, as the ``summarizer`` of a
    `ctxbudget.ContextAssembler`, or with `CtxBudgetMiddleware(summarizer=...)`.

    Args:
        model: any chat model (or a Runnable taking messages and returning a message).
        prompt: the prompt template, with a ``{texts}`` field (``{max_words}`` optional).
        token_counter: a model name or `ctxbudget.TokenCounter` that counts the limit.

    Raises:
        ValueError: the prompt has no ``{texts}`` field.

    >>> from langchain_core.language_models import FakeListChatModel
    >>> summarizer = ChatModelSummarizer(FakeListChatModel(responses=["User lives in Lisbon."]))
    >>> summarizer.summarize(["I moved to Lisbon in May.", "Nice!"], 20)
    'User lives in Lisbon.'
    """

    def __init__(
        self,
        model: BaseChatModel | Runnable[list[BaseMessage], Any],
        *,
        prompt: str = DEFAULT_SUMMARY_PROMPT,
        counter: str | TokenCounter | None = None,
        token_counter: str | TokenCounter | None = None,
    ) -> None:
        given = {"counter": counter, "token_counter": token_counter}
        counter = renamed(
            {key: value for key, value in given.items() if value is not None},
            {"token_counter": "counter"},
            "ChatModelSummarizer",
        ).get("counter", "gpt-4o")
        self.model = model
        self.prompt = check_summary_prompt(prompt, "ChatModelSummarizer")
        self.counter = resolve_counter(counter, None)

    def messages(self, texts: Sequence[str], max_tokens: int) -> list[BaseMessage]:
        """The messages sent to the model for these texts."""
        return [HumanMessage(self.prompt.format(**summary_fields(texts, max_tokens)))]

    def summarize(self, texts: Sequence[str], max_tokens: int) -> str:
        """Summarize ``texts`` in at most ``max_tokens`` tokens (empty when nothing fits)."""
        if max_tokens <= 0 or not any(t.strip() for t in texts):
            return ""
        reply = self.model.invoke(self.messages(texts, max_tokens))
        return self._fit(reply, max_tokens)

    async def asummarize(self, texts: Sequence[str], max_tokens: int) -> str:
        """Async `summarize`."""
        if max_tokens <= 0 or not any(t.strip() for t in texts):
            return ""
        reply = await self.model.ainvoke(self.messages(texts, max_tokens))
        return self._fit(reply, max_tokens)

    def _fit(self, reply: object, max_tokens: int) -> str:
        text = reply_text(reply, "ChatModelSummarizer").strip()
        if not text:
            return ""
        return truncate_to_tokens(text, max_tokens, self.counter.count) or ""


def reply_text(reply: object, where: str) -> str:
    """The text of a model's ``reply``: a message's text, or a str (a chain's parsed output).

    Anything else (None, a dict of a chain's outputs) is refused: its ``str()`` would be kept
    as a summary in place of what it covers, or read as a model's answer.

    Raises:
        ConfigurationTypeError: the model answered something else (a `TypeError` too).
    """
    if isinstance(reply, BaseMessage):
        return reply.text
    if isinstance(reply, str):
        return reply
    msg = (
        f"{where}: the model must answer a message or a str, got {shown(reply)}; give a chat "
        "model, or a Runnable that returns one (e.g. prompt | llm, or llm | StrOutputParser())"
    )
    raise ConfigurationTypeError(msg)
