"""Measure what `ContextMemory` puts in the context against simple baselines.

``ctxbudget eval locomo PATH`` runs the LoCoMo benchmark (Maharana et al., ACL 2024; its data
is CC BY-NC 4.0 and is read from where you keep it, never bundled): evidence recall, answer
containment, tokens and latency of ContextMemory's defaults, a vector top-k and a recency
window, under several budgets. ``--speakers`` stores the turns' speakers in ``name``, as a
``Name: `` prefix or not at all, ``--entities`` runs with entity memory off and on; several runs
are put side by side (`compare_markdown`).

>>> from ctxbudget.eval import load_locomo, run_locomo, to_markdown
>>> run = run_locomo(load_locomo("locomo10.json"), max_conversations=1)  # doctest: +SKIP
>>> print(to_markdown(run))  # doctest: +SKIP
"""

from __future__ import annotations

from ctxbudget.eval.compare import compare_json, compare_markdown, compare_summary
from ctxbudget.eval.forms import SPEAKER_FORMS
from ctxbudget.eval.locomo import (
    ADVERSARIAL,
    CATEGORIES,
    Conversation,
    DatasetError,
    LocomoData,
    Note,
    Question,
    Turn,
    load_locomo,
    parse_locomo,
    split_evidence,
)
from ctxbudget.eval.plot import plot_recall, plot_variants
from ctxbudget.eval.report import summarize, to_json, to_markdown
from ctxbudget.eval.runner import (
    DEFAULT_BUDGETS,
    METHODS,
    EvalRun,
    Outcome,
    answer_in,
    normalize_answer,
    run_locomo,
)

__all__ = [
    "ADVERSARIAL",
    "CATEGORIES",
    "DEFAULT_BUDGETS",
    "METHODS",
    "SPEAKER_FORMS",
    "Conversation",
    "DatasetError",
    "EvalRun",
    "LocomoData",
    "Note",
    "Outcome",
    "Question",
    "Turn",
    "answer_in",
    "compare_json",
    "compare_markdown",
    "compare_summary",
    "load_locomo",
    "normalize_answer",
    "parse_locomo",
    "plot_recall",
    "plot_variants",
    "run_locomo",
    "split_evidence",
    "summarize",
    "to_json",
    "to_markdown",
]
