"""The summary prompt both adapters send a model: one default, one set of placeholders.

Placeholders: ``{texts}`` (required) receives the texts to summarize, one ``- `` line each, in
order; ``{max_words}`` (about three quarters of the token limit) and ``{max_tokens}`` (the limit
itself) are optional. LangChain's `ChatModelSummarizer` and LlamaIndex's `LLMSummarizer` take
the same prompts.
"""

from __future__ import annotations

import string
from collections.abc import Sequence

from ctxbudget.errors import ConfigurationError

__all__ = ["DEFAULT_SUMMARY_PROMPT", "SUMMARY_FIELDS", "check_summary_prompt", "summary_fields"]

DEFAULT_SUMMARY_PROMPT = (
    "Summarize the conversation excerpts and notes below for an assistant that will continue "
    "the work without seeing them again. Keep facts about the user, decisions, names, numbers, "
    "dates, commitments and open questions; drop greetings and small talk. Write plain "
    "sentences, at most {max_words} words, and nothing else (no preamble, no headings).\n\n"
    "{texts}"
)
"""The default summary prompt of every adapter."""

SUMMARY_FIELDS = frozenset({"texts", "max_words", "max_tokens"})
"""The placeholders a summary prompt may use (``texts`` is required)."""


def check_summary_prompt(prompt: str, where: str) -> str:
    """`prompt` if it has a ``{texts}`` field and no field but `SUMMARY_FIELDS`.

    Raises:
        ConfigurationError: a missing ``{texts}``, an unknown field, or a malformed template.
    """
    try:
        fields = {name for _, name, _, _ in string.Formatter().parse(prompt) if name is not None}
    except ValueError as exc:
        msg = f"{where}: the summary prompt is not a valid template ({exc})"
        raise ConfigurationError(msg) from exc
    if "texts" not in fields:
        msg = f"{where}: the summary prompt needs a {{texts}} field where the texts go"
        raise ConfigurationError(msg)
    unknown = sorted(fields - SUMMARY_FIELDS)
    if unknown:
        msg = (
            f"{where}: the summary prompt uses {unknown}; the fields are {sorted(SUMMARY_FIELDS)} "
            "(double a brace to write it literally: {{ }})"
        )
        raise ConfigurationError(msg)
    return prompt


def summary_fields(texts: Sequence[str], max_tokens: int) -> dict[str, str]:
    """The values of the placeholders for these texts and this token limit."""
    lines = "\n".join(f"- {text.strip()}" for text in texts if text.strip())
    return {
        "texts": lines,
        "max_words": str(max(1, 3 * max_tokens // 4)),
        "max_tokens": str(max_tokens),
    }
