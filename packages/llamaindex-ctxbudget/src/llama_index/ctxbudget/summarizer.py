"""`LLMSummarizer`: a ctxbudget `Summarizer` backed by any LlamaIndex LLM."""

from __future__ import annotations

from collections.abc import Sequence

from llama_index.core.llms.llm import LLM
from llama_index.core.prompts import BasePromptTemplate, PromptTemplate

from ctxbudget import TokenCounter
from ctxbudget.core.prompts import DEFAULT_SUMMARY_PROMPT, check_summary_prompt, summary_fields
from ctxbudget.core.summaries import truncate_to_tokens
from ctxbudget.errors import ConfigurationTypeError

__all__ = ["DEFAULT_SUMMARY_PROMPT", "LLMSummarizer"]  # the prompt is the core's, re-exported


class LLMSummarizer:
    """Summaries written by a LlamaIndex LLM, cut to the token limit they are asked for.

    Use it wherever ctxbudget takes a `Summarizer`: ``ContextMemory(summarizer=...)``,
    ``CtxBudgetMemory.summarize(...)``, ``ContextAssembler(summarizer=...)``. The reply is
    trimmed at a sentence boundary when the model writes more than ``max_tokens``.

    Args:
        llm: any LlamaIndex LLM.
        model: the model whose tokenizer enforces ``max_tokens`` (when ``counter`` is None).
        counter: the token counter instead.
        prompt: a prompt with ``{texts}`` and optionally ``{max_words}``/``{max_tokens}``,
            as LangChain's `ChatModelSummarizer` takes (`ctxbudget.core.prompts`); default
            `DEFAULT_SUMMARY_PROMPT`. A ``PromptTemplate``'s template is used.

    Raises:
        ConfigurationTypeError: ``llm`` is not a LlamaIndex LLM, or ``prompt`` not a template.

    >>> from llama_index.core.llms import MockLLM
    >>> LLMSummarizer(MockLLM(max_tokens=3)).summarize(["We met in Lisbon."], 10)
    'text text text'
    """

    def __init__(
        self,
        llm: LLM,
        *,
        model: str = "gpt-4o",
        counter: TokenCounter | None = None,
        prompt: str | BasePromptTemplate = DEFAULT_SUMMARY_PROMPT,
    ) -> None:
        if not callable(getattr(llm, "predict", None)):  # refused here, not on the first summary
            msg = (
                f"LLMSummarizer needs a LlamaIndex LLM (with .predict), got {type(llm).__name__}; "
                "pass e.g. OpenAI(model='gpt-4o-mini') or Settings.llm"
            )
            raise ConfigurationTypeError(msg)
        if not isinstance(prompt, str | BasePromptTemplate):
            msg = (
                f"LLMSummarizer(prompt=) must be a str or a PromptTemplate with a {{texts}} field, "
                f"got {type(prompt).__name__}"
            )
            raise ConfigurationTypeError(msg)
        text = prompt if isinstance(prompt, str) else prompt.get_template()
        self.llm = llm
        self.counter = counter or TokenCounter.for_model(model)
        self.prompt = PromptTemplate(check_summary_prompt(text, "LLMSummarizer"))

    def summarize(self, texts: Sequence[str], max_tokens: int) -> str:
        """Summarize ``texts`` (in order) in at most ``max_tokens`` tokens (empty when none fit)."""
        if max_tokens <= 0 or not any(t.strip() for t in texts):
            return ""
        reply = self.llm.predict(self.prompt, **summary_fields(texts, max_tokens))
        return truncate_to_tokens(reply.strip(), max_tokens, self.counter.count) or ""
