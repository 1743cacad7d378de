"""What the command prints: one-line messages, ``--version``, and the ``--json`` documents.

The documents' keys are stable (they are listed in each command's ``--help``): a key is never
renamed or removed, only added.
"""

from __future__ import annotations

import json
import platform
import re
import sys
from collections.abc import Mapping
from importlib import metadata
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ctxbudget.memory.log.analytics import BudgetStats

__all__ = [
    "budget_document",
    "json_text",
    "budget_stats_text",
    "one_line",
    "stats_text",
    "versions",
    "warn",
]

# Every character str.splitlines breaks at: a message stays one line whatever a path, a session
# id or an error quotes.
_BREAKS = re.compile("[\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")

_PACKAGES = ("ctxbudget", "langchain-ctxbudget", "llama-index-ctxbudget")
_RUNTIME = ("chromadb", "onnxruntime", "tiktoken")


def one_line(text: str) -> str:
    """``text`` with each line break shown escaped, as Python writes it in a string."""
    return _BREAKS.sub(lambda m: repr(m.group())[1:-1], text)


def json_text(document: object, **options: Any) -> str:
    """``document`` as JSON for stdout: valid JSON, never an encoding error.

    Its characters as they are when stdout can write them (UTF-8), else as JSON's escapes (a
    Windows code page, ``PYTHONIOENCODING=ascii``).
    """
    text = json.dumps(document, ensure_ascii=False, **options)
    encoding = getattr(sys.stdout, "encoding", None) or "utf-8"
    try:
        text.encode(encoding)
    except (UnicodeEncodeError, LookupError):
        return json.dumps(document, ensure_ascii=True, **options)
    return text


def warn(message: str) -> None:
    """One ``ctxbudget: warning: ...`` line on stderr."""
    print(f"ctxbudget: warning: {one_line(message)}", file=sys.stderr)


def versions() -> str:
    """``--version``: the installed ctxbudget packages, then Python and the main runtimes."""
    lines = []
    for name in _PACKAGES:
        try:
            lines.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            if name == "ctxbudget":  # imported from a source folder that was never installed
                lines.append("ctxbudget (not installed: no package metadata)")
    runtime = [f"python {platform.python_version()}"]
    for name in _RUNTIME:
        try:
            runtime.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            continue  # an extra that is not installed
    lines.append(f"with {', '.join(runtime)}")
    return "\n".join(lines) + "\n"


def stats_text(stats: Mapping[str, Any]) -> str:
    """``ctxbudget stats`` for people: one figure a line."""
    kinds = ", ".join(f"{kind} {n:,}" for kind, n in sorted(stats["by_kind"].items()))
    rows = [
        ("location", str(stats["location"])),
        ("records", f"{stats['records']:,}" + (f" ({kinds})" if kinds else "")),
        ("sessions", f"{stats['sessions']:,}"),
        ("namespaces", f"{stats['namespaces']:,}"),
        ("embedder", str(stats["embedder"])),
    ]
    return "\n".join(f"{label:<12}{one_line(value)}" for label, value in rows)


def budget_stats_text(stats: BudgetStats, *, scope: str, top: int) -> str:
    """``ctxbudget stats --contexts`` for people: totals, a per-tier table, the most pruned."""
    lines = [
        f"{scope}: {stats.assemblies:,} logged assemblies, {stats.errors:,} over-budget errors",
        f"tokens used: p50 {stats.tokens_used_p50:,}, p90 {stats.tokens_used_p90:,}, max "
        f"{stats.tokens_used_max:,} ({stats.used_share_p50:.0%} / {stats.used_share_p90:.0%} / "
        f"{stats.used_share_max:.0%} of the budget)",
    ]
    if stats.tiers:
        lines.append(
            f"{'tier':<11}{'calls':>6}{'p50':>7}{'p90':>7}{'max':>7}  {'share p50/p90/max':<18}"
            f"{'offered':>8}{'kept':>7}{'pruned':>7}{'at cap':>7}{'at floor':>9}"
        )
    for t in stats.tiers:
        share = f"{t.share_p50:.0%}/{t.share_p90:.0%}/{t.share_max:.0%}"
        lines.append(
            f"{one_line(t.name)[:10]:<11}{t.assemblies:>6,}{t.tokens_p50:>7,}{t.tokens_p90:>7,}"
            f"{t.tokens_max:>7,}  {share:<18}{t.offered:>8,}{t.kept:>7,}{t.pruned:>7,}"
            f"{t.cap_hits:>7,}{t.floor_hits:>9,}"
        )
    if stats.pruned_by_reason:
        reasons = ", ".join(f"{reason} {n:,}" for reason, n in stats.pruned_by_reason)
        lines.append(f"pruned by reason: {reasons}")
    if stats.most_pruned:
        lines.append(f"most pruned (top {top}):")
        lines.extend(
            f"  {one_line(p.id)}  pruned in {p.count:,}, mostly {p.reason}"
            for p in stats.most_pruned
        )
    return "\n".join(lines)


def budget_document(
    stats: BudgetStats,
    *,
    namespace: str,
    session: str | None,
    user: str | None,
    plot: str | None,
) -> dict[str, Any]:
    """The ``--json`` document of ``ctxbudget stats --contexts`` (`BudgetStats.to_dict`)."""
    return {
        "namespace": namespace,
        "session": session,
        "user": user,
        **stats.to_dict(),
        "plot": plot,
    }
