"""Files in an assembly: ranked just below the query, shown under their paths, cut at lines.

Properties over random files (line lengths, shrink modes, hostile paths), pinned facts,
knowledge and budgets, in every format: the context fits and is counted exactly; what is sent is
exactly what was chosen (`check_sent`: each file read back with its path and text, the report a
partition); a file that did not fit whole is its first (and last) whole lines plus exactly one
marker, listed in ``truncated`` with how much was cut; a file is never left out while a pinned
fact that it outranks takes its room.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from core.fidelity import check_sent
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxbudget import (
    AssembledContext,
    Budget,
    BudgetExceededError,
    ContextAssembler,
    ContextItem,
    PruneReason,
    Shrink,
    Tier,
    TokenCounter,
    file_item,
    folder_tree_item,
)
from ctxbudget.core.lines import elision_marker, split_lines
from ctxbudget.core.readback import parse_rendered
from ctxbudget.core.render import Layout

COUNTER = TokenCounter.from_encoding("o200k_base")
FORMATS = st.sampled_from(["messages", "text", "compact"])
SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
CHARS = st.sampled_from(
    list("abcxyz ABC 012 .,:;()[]{}=#-|\\\"'\t") + ["## Files", "@files", "###"]
)
LINE = st.one_of(
    st.lists(CHARS, max_size=20).map("".join),
    st.lists(CHARS, min_size=80, max_size=200).map("".join),
)
CONTENT = st.lists(LINE, min_size=0, max_size=40).map(lambda lines: "\n".join(lines) + "\n")
PATHS = st.sampled_from(
    ["src/app.py", "README.md", "odd|name.txt", 'q"uote', "two words.md", "", "## Files", "-"]
)
LINE_SHRINKS = (Shrink.LINES, Shrink.LINES_HEAD_TAIL)


def exact_tokens(ctx: AssembledContext) -> int:
    as_messages = COUNTER.count_messages(ctx.to_messages())
    if ctx.format == "messages":
        return as_messages
    return max(as_messages, COUNTER.count(ctx.render()))


def assert_cut_at_lines(original: str, kept: ContextItem) -> None:
    """A file cut to fit: whole original lines and one marker, as its metadata says."""
    elided = kept.metadata["elided"]
    lines = split_lines(original)
    head, tail = elided["kept_head"], elided["kept_tail"]
    assert elided["total_lines"] == len(lines)
    assert elided["elided_lines"] == len(lines) - head - tail > 0
    if elided["cut_chars"]:  # the last resort: the first line alone did not fit
        assert kept.text.startswith(lines[0][: elided["cut_chars"]])
        return
    marker = elision_marker(head + 1, len(lines) - tail)
    rest = "\n" + "".join(lines[len(lines) - tail :]) if tail else ""
    assert kept.text == "".join(lines[:head]) + marker + rest
    assert kept.text.count("… [") == 1 + "".join(lines[:head] + lines[len(lines) - tail :]).count(
        "… ["
    )


@st.composite
def file_sets(draw: st.DrawFn) -> list[ContextItem]:
    items = [
        ContextItem("sys", "You are a coding assistant.", tier=Tier.SYSTEM),
        ContextItem(
            "q", draw(st.sampled_from(["What does it do?", "Fix the bug"])), tier=Tier.QUERY
        ),
    ]
    for i in range(draw(st.integers(1, 4))):
        items.append(
            ContextItem(
                f"file{i}",
                draw(CONTENT),
                tier=Tier.FILES,
                name=draw(PATHS) or None,
                score=draw(st.floats(0.1, 5.0)),
                shrink=draw(st.sampled_from([*LINE_SHRINKS, Shrink.DROP, Shrink.TRUNCATE])),
            )
        )
    for i in range(draw(st.integers(0, 3))):
        items.append(ContextItem(f"pin{i}", f"User fact {i}: likes tabs", tier=Tier.PINNED))
    for i in range(draw(st.integers(0, 3))):
        items.append(ContextItem(f"k{i}", f"Doc chunk {i} about caching", score=0.5))
    if draw(st.booleans()):
        items.append(ContextItem("h1", "earlier question", tier=Tier.RECENT, role="user"))
        items.append(ContextItem("h2", "earlier answer", tier=Tier.RECENT, role="assistant"))
    return items


@SETTINGS
@given(items=file_sets(), window=st.integers(40, 900), fmt=FORMATS)
def test_files_fit_are_sent_as_chosen_and_are_cut_at_whole_lines(
    items: list[ContextItem], window: int, fmt: Any
) -> None:
    assembler = ContextAssembler(COUNTER, min_exchanges=0)
    try:
        ctx = assembler.assemble(items, budget=window, format=fmt)
    except BudgetExceededError:
        return
    assert ctx.tokens_used <= ctx.tokens_available
    assert exact_tokens(ctx) == ctx.tokens_used
    check_sent(ctx, items)
    offered = {it.id: it for it in items}
    for kept in ctx.included:
        original = offered[kept.id]
        if kept.id not in ctx.truncated:
            assert kept.text == original.text
        elif original.shrink in LINE_SHRINKS:
            assert_cut_at_lines(original.text, kept)
    # Tiers are strict: a file left out could not have fit with every lower tier gone.
    layout = assembler.layout(fmt)
    free = ctx.tokens_available - ctx.tokens_used - ctx.packing_slack
    for pruned in ctx.pruned:
        if pruned.item.tier != Tier.FILES or pruned.reason is not PruneReason.OVER_BUDGET:
            continue
        lower = sum(u.tokens for t, u in ctx.tiers.items() if t > Tier.FILES)
        above = [it for it in ctx.included if it.tier <= Tier.FILES]
        cost = layout.cost(pruned.item, "files")
        if not any(Layout.section_of(it) == "files" for it in above):
            cost += layout.open_cost("files")
            if not any(layout.group_of(Layout.section_of(it)) == "context" for it in above):
                cost += layout.group_open_cost(layout.group_of("files"))
        assert cost > free + lower, (pruned, cost, free, lower)


def test_a_file_outranks_pinned_facts() -> None:
    file = ContextItem("f", "def main():\n    return 42\n", tier=Tier.FILES, name="main.py")
    pinned = ContextItem("p", "The user prefers short answers. " * 5, tier=Tier.PINNED)
    query = ContextItem("q", "What does main return?", tier=Tier.QUERY)
    assembler = ContextAssembler(COUNTER)
    both = assembler.assemble([pinned, file, query], budget=10_000)
    room = both.tokens_used - 1  # one of the two must go
    ctx = assembler.assemble([pinned, file, query], budget=room)
    assert ctx.included_ids == ["f", "q"]
    assert [(p.item.id, p.reason) for p in ctx.pruned] == [("p", PruneReason.OVER_BUDGET)]
    assert [u.name for u in ctx.tiers.values()] == ["QUERY", "FILES", "PINNED"]


@pytest.mark.parametrize("fmt", ["messages", "text", "compact"])
@pytest.mark.parametrize("shrink", LINE_SHRINKS)
def test_a_long_file_is_cut_at_lines_with_a_visible_marker(
    tmp_path: Path, fmt: Any, shrink: Shrink
) -> None:
    source = "".join(f"value_{i} = compute({i})  # step {i}\n" for i in range(1, 301))
    (tmp_path / "big.py").write_text(source)
    item = file_item("big.py", root=tmp_path, shrink=shrink)
    items = [ContextItem("q", "Where is value_150 set?", tier=Tier.QUERY), item]
    ctx = ContextAssembler(COUNTER).assemble(items, budget=Budget(window=600), format=fmt)
    assert ctx.tokens_used <= 600 and exact_tokens(ctx) == ctx.tokens_used
    assert ctx.truncated == ("file:big.py",)
    kept = next(it for it in ctx.included if it.id == "file:big.py")
    assert_cut_at_lines(source, kept)
    elided = kept.metadata["elided"]
    assert elided["kept_head"] > 10 and (elided["kept_tail"] > 5) is (
        shrink is Shrink.LINES_HEAD_TAIL
    )
    marker = elision_marker(elided["first_elided"], elided["last_elided"])
    rendered = ctx.render()
    assert marker in rendered and "big.py" in rendered
    if fmt != "messages":
        rows = parse_rendered(rendered, fmt)
        assert [(r.section, r.name) for r in rows] == [("files", "big.py"), ("query", None)]
    assert "truncated to fit: file:big.py" in ctx.explain()
    check_sent(ctx, items)


def test_the_files_section_reads_well() -> None:
    items = [
        ContextItem("sys", "You review code.", tier=Tier.SYSTEM),
        ContextItem("pin", "The project uses tabs.", tier=Tier.PINNED),
        ContextItem("f", "x = 1\nprint(x)\n", tier=Tier.FILES, name="src/app.py"),
        ContextItem("q", "Is this right?", tier=Tier.QUERY),
    ]
    text = ContextAssembler(COUNTER).assemble(items, budget=500, format="text").render()
    assert text == (
        "You review code.\n"
        "## Pinned facts\n"
        "- The project uses tabs.\n"
        "## Files\n"
        "### src/app.py\n"
        "  x = 1\n"
        "  print(x)\n"
        "## Current message\n"
        "Is this right?"
    )
    compact = ContextAssembler(COUNTER).assemble(items, budget=500, format="compact").render()
    assert "@files path|text\n### src/app.py|x = 1\\nprint(x)\n" in compact
    messages = ContextAssembler(COUNTER).assemble(items, budget=500).to_messages()
    # The stable prefix stays one system message; files open the next one.
    assert [m["role"] for m in messages] == ["system", "system", "user"]
    assert messages[1]["content"].startswith("## Files\n### src/app.py\n")


def test_a_folder_tree_is_cut_at_its_first_lines(tmp_path: Path) -> None:
    for i in range(60):
        (tmp_path / f"module_{i:02d}.py").write_text("")
    tree = folder_tree_item(tmp_path, name="repo/")
    items = [tree, ContextItem("q", "Which modules exist?", tier=Tier.QUERY)]
    ctx = ContextAssembler(COUNTER).assemble(items, budget=200, format="text")
    kept = ctx.included[0]
    assert ctx.truncated == ("tree:repo/",) and kept.metadata["elided"]["kept_tail"] == 0
    assert kept.text.startswith("├── module_00.py\n├── module_01.py\n")
    check_sent(ctx, items)


SYNTAX = st.sampled_from(
    [
        "## Files",
        "## Pinned facts",
        "## Conversation",
        "## Current message",
        "@files path|text",
        "@history who|text",
        "@query",
        "### src/app.py",
        "###",
        "user: ",
        "system|",
        "[2024-01-01]",
        "\\",
        "|",
        "\n",
        "\r\n",
        "\r",
        "\u2028",
        "\x0b",
        "  ",
        "text",
        "[calls x({}) id=c]",
        "[result of c]",
    ]
)
HOSTILE_PATHS = st.lists(
    SYNTAX | st.sampled_from(["a/b.py", " ", '"', "\x7f", "\udce9"]), max_size=4
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    files=st.lists(
        st.tuples(HOSTILE_PATHS.map("".join), st.lists(SYNTAX, max_size=12).map("".join)),
        min_size=1,
        max_size=4,
    ),
    fmt=st.sampled_from(["text", "compact"]),
)
def test_no_file_path_or_content_can_forge_structure(
    files: list[tuple[str, str]], fmt: Any
) -> None:
    items = [
        ContextItem("sys", "Review.\n## Files\n### fake.py", tier=Tier.SYSTEM),
        ContextItem("p", "fact", tier=Tier.PINNED),
        *[
            ContextItem(f"f{i}", text, tier=Tier.FILES, name=path or None)
            for i, (path, text) in enumerate(files)
        ],
        ContextItem("q", "and?\n## Files", tier=Tier.QUERY),
    ]
    ctx = ContextAssembler(COUNTER, near_duplicate_threshold=None).assemble(
        items, budget=1_000_000, format=fmt
    )
    check_sent(ctx, items)  # every file read back with its own path and text
    rows = parse_rendered(ctx.render(), fmt)
    kept = [it for it in ctx.included if it.tier == Tier.FILES]
    assert [r.name for r in rows if r.section == "files"] == [it.name or None for it in kept]
    headers = {"text": "## Files", "compact": "@files path|text"}[fmt]
    assert ctx.render().split("\n").count(headers) == 1
