"""Run inside the light venv (ctxbudget + langchain-ctxbudget[agents], no extras): prints JSON."""

from __future__ import annotations

import json
import sys

from langchain.agents import create_agent
from langchain_core.language_models import FakeListChatModel
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

from ctxbudget import ContextAssembler, ContextItem, MissingDependencyError, Tier, TokenCounter
from langchain_ctxbudget import CtxBudgetMiddleware, budget_messages

out: dict[str, object] = {}
history = [SystemMessage("Be brief.")]
for turn in range(40):
    history += [HumanMessage(f"question {turn}: " + "words " * 30), AIMessage(f"answer {turn}")]
history.append(HumanMessage("the last question"))
kept = budget_messages(history, max_tokens=300, model="gpt-4o")
counter = TokenCounter.for_model("gpt-4o")
out["budget_messages"] = {
    "kept": len(kept),
    "offered": len(history),
    "first_is_system": isinstance(kept[0], SystemMessage),
    "last_is_question": kept[-1].text == "the last question",
}

seen: list[int] = []


class Recording(FakeListChatModel):
    def _generate(self, messages, stop=None, run_manager=None, **kwargs):  # type: ignore[no-untyped-def,override]
        seen.append(len(messages))
        return super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs)


agent = create_agent(
    Recording(responses=["fine"]),
    middleware=[CtxBudgetMiddleware(model="gpt-4o", budget=300)],
)
result = agent.invoke({"messages": history[1:]})
out["middleware"] = {"sent": seen, "answer": result["messages"][-1].text}

ctx = ContextAssembler(model="gpt-4o").assemble(
    [ContextItem("q", "hello", tier=Tier.QUERY)], budget=64
)
out["assemble_fits"] = ctx.tokens_used <= ctx.tokens_available

errors = {}
for name, make in {
    "ContextMemory": lambda: __import__("ctxbudget").ContextMemory(),
    "ChromaStore": lambda: __import__("ctxbudget").ChromaStore(),
}.items():
    try:
        make()
    except MissingDependencyError as exc:
        errors[name] = str(exc)
    else:
        errors[name] = "no error"
out["memory_errors"] = errors
out["modules"] = sorted(
    m for m in ("torch", "chromadb", "onnxruntime", "sentence_transformers") if m in sys.modules
)
print(json.dumps(out))
