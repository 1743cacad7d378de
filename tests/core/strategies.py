"""Hypothesis strategies for context items: hostile text, whole conversations with tool calls."""

from __future__ import annotations

from hypothesis import strategies as st

from ctxbudget import ContextItem, Shrink, Tier

TEXT_ALPHABET = st.sampled_from(
    list("abcdefghij xyz XYZ 0123456789 .,;:!?'\"-/\\|@#*_()[]{}<>")
    + [
        "\n",
        "\r\n",
        "\t",
        "  ",
        "\u2028",
        "é",
        "ß",
        "日本",
        "語",
        "한",
        "ع",
        "🙂",
        "👩‍👩‍👧",
        "\u200b",
    ]
    + ["<|endoftext|>", "## History", "@history who|time|text", "user:", "'s", "'ll"]
)
texts = st.lists(TEXT_ALPHABET, min_size=0, max_size=25).map("".join)
nonempty_texts = st.lists(TEXT_ALPHABET, min_size=1, max_size=25).map("".join)
scores = st.floats(min_value=-1.0, max_value=10.0, allow_nan=False, allow_infinity=False)


@st.composite
def conversations(draw: st.DrawFn, prefix: str = "h") -> list[ContextItem]:
    """Chronological history: exchanges of user, assistant, tool calls with results."""
    items: list[ContextItem] = []
    n = 0

    def nid() -> str:
        nonlocal n
        n += 1
        return f"{prefix}{n}"

    if draw(st.booleans()) and draw(st.booleans()):  # history that starts mid-exchange
        items.append(ContextItem(nid(), draw(texts), tier=Tier.RECENT, role="assistant"))
    for _ in range(draw(st.integers(0, 8))):
        items.append(ContextItem(nid(), draw(texts), tier=Tier.RECENT, role="user"))
        for _ in range(draw(st.integers(0, 2))):
            calls = tuple(f"c{nid()}" for _ in range(draw(st.integers(0, 2))))
            items.append(
                ContextItem(
                    nid(), draw(texts), tier=Tier.RECENT, role="assistant", tool_calls=calls
                )
            )
            for call in calls:
                items.append(
                    ContextItem(
                        nid(), draw(texts), tier=Tier.RECENT, role="tool", tool_call_id=call
                    )
                )
        if draw(st.integers(0, 9)) == 0:  # an orphan result: its call is nowhere
            items.append(
                ContextItem(nid(), draw(texts), tier=Tier.RECENT, role="tool", tool_call_id="lost")
            )
    return items


@st.composite
def item_sets(draw: st.DrawFn, *, with_system: bool | None = None) -> list[ContextItem]:
    """A realistic mix: system, query, pinned, tools, history, retrieved, entity, summaries."""
    items: list[ContextItem] = []
    if with_system if with_system is not None else draw(st.booleans()):
        items.append(ContextItem("sys", draw(texts), tier=Tier.SYSTEM))
    items.extend(draw(conversations()))
    other_tiers = st.sampled_from(
        [Tier.PINNED, Tier.TOOLS, Tier.RETRIEVED, Tier.ENTITY, Tier.SUMMARY, Tier.OLD, 45, 90]
    )
    for i in range(draw(st.integers(0, 10))):
        items.append(
            ContextItem(
                f"k{i}",
                draw(texts),
                tier=draw(other_tiers),
                score=draw(scores),
                shrink=draw(st.sampled_from([Shrink.DROP, Shrink.DROP, Shrink.TRUNCATE])),
                timestamp=draw(st.none() | st.floats(0, 2e9)),
                role=draw(st.none() | st.sampled_from(["user", "assistant"])),
            )
        )
    if draw(st.booleans()):
        items.append(ContextItem("q", draw(texts), tier=Tier.QUERY, role="user"))
    return items
