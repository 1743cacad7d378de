"""Every script, emoji sequence and special-token string is counted exactly, as tiktoken does.

The samples are built from Unicode block ranges with `unicodedata` (every assigned code point of
~60 blocks: scripts, RTL, combining marks, CJK, supplementary planes, emoji, controls, private
use), plus emoji sequences built from code points (ZWJ families, skin tones, flags, tag
sequences, keycaps) and the special-token strings of each encoding. The reference is tiktoken
itself: ``len(encoding.encode(text, disallowed_special=()))``. Also: a run of a million blanks
(which makes tiktoken's own pre-tokenizer panic) is counted exactly, and a lone surrogate is
refused with a clear error.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any

import pytest
import tiktoken
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxbudget import ContextAssembler, ContextItem, InvalidItemError, Tier, TokenCounter
from ctxbudget.core.report import AssembledContext
from ctxbudget.tokens.backends import _BLANKS, Tiktoken

MODELS = {"gpt-4o": "o200k_base", "gpt-4": "cl100k_base"}
COUNTERS = {model: TokenCounter.for_model(model) for model in MODELS}
ENCODINGS = {model: tiktoken.get_encoding(name) for model, name in MODELS.items()}

# (label, first, last, step): Unicode blocks; big ones are sampled every `step` code points.
BLOCKS = [
    ("C0 and C1 controls, NUL", 0x0000, 0x009F, 1),
    ("Latin-1 Supplement", 0x00A0, 0x00FF, 1),
    ("Latin Extended-A", 0x0100, 0x017F, 1),
    ("IPA Extensions", 0x0250, 0x02AF, 1),
    ("Combining Diacritical Marks", 0x0300, 0x036F, 1),
    ("Greek and Coptic", 0x0370, 0x03FF, 1),
    ("Cyrillic", 0x0400, 0x04FF, 1),
    ("Armenian", 0x0530, 0x058F, 1),
    ("Hebrew", 0x0590, 0x05FF, 1),
    ("Arabic", 0x0600, 0x06FF, 1),
    ("Syriac", 0x0700, 0x074F, 1),
    ("Thaana", 0x0780, 0x07BF, 1),
    ("NKo", 0x07C0, 0x07FF, 1),
    ("Devanagari", 0x0900, 0x097F, 1),
    ("Bengali", 0x0980, 0x09FF, 1),
    ("Gurmukhi", 0x0A00, 0x0A7F, 1),
    ("Gujarati", 0x0A80, 0x0AFF, 1),
    ("Tamil", 0x0B80, 0x0BFF, 1),
    ("Telugu", 0x0C00, 0x0C7F, 1),
    ("Kannada", 0x0C80, 0x0CFF, 1),
    ("Malayalam", 0x0D00, 0x0D7F, 1),
    ("Sinhala", 0x0D80, 0x0DFF, 1),
    ("Thai", 0x0E00, 0x0E7F, 1),
    ("Lao", 0x0E80, 0x0EFF, 1),
    ("Tibetan", 0x0F00, 0x0FFF, 1),
    ("Myanmar", 0x1000, 0x109F, 1),
    ("Georgian", 0x10A0, 0x10FF, 1),
    ("Hangul Jamo", 0x1100, 0x11FF, 1),
    ("Ethiopic", 0x1200, 0x137F, 1),
    ("Cherokee", 0x13A0, 0x13FF, 1),
    ("Canadian Syllabics", 0x1400, 0x167F, 3),
    ("Ogham", 0x1680, 0x169F, 1),
    ("Runic", 0x16A0, 0x16FF, 1),
    ("Khmer", 0x1780, 0x17FF, 1),
    ("Mongolian", 0x1800, 0x18AF, 1),
    ("General Punctuation, bidi and ZW controls", 0x2000, 0x206F, 1),
    ("Currency Symbols", 0x20A0, 0x20CF, 1),
    ("Letterlike Symbols", 0x2100, 0x214F, 1),
    ("Arrows", 0x2190, 0x21FF, 1),
    ("Mathematical Operators", 0x2200, 0x22FF, 1),
    ("Box Drawing", 0x2500, 0x257F, 1),
    ("Braille", 0x2800, 0x28FF, 1),
    ("CJK Symbols and Punctuation", 0x3000, 0x303F, 1),
    ("Hiragana", 0x3040, 0x309F, 1),
    ("Katakana", 0x30A0, 0x30FF, 1),
    ("Yi Syllables", 0xA000, 0xA48F, 7),
    ("CJK Unified Ideographs", 0x4E00, 0x9FFF, 37),
    ("Hangul Syllables", 0xAC00, 0xD7A3, 97),
    ("Private Use Area", 0xE000, 0xE0FF, 1),
    ("Arabic Presentation Forms-B", 0xFE70, 0xFEFF, 1),
    ("Variation Selectors", 0xFE00, 0xFE0F, 1),
    ("Halfwidth and Fullwidth Forms", 0xFF00, 0xFFEF, 1),
    ("Specials (U+FFFC, U+FFFD, noncharacters)", 0xFFF0, 0xFFFF, 1),
    ("Linear B", 0x10000, 0x1007F, 1),
    ("Gothic", 0x10330, 0x1034F, 1),
    ("Cuneiform", 0x12000, 0x123FF, 5),
    ("Egyptian Hieroglyphs", 0x13000, 0x1342F, 5),
    ("Musical Symbols", 0x1D100, 0x1D1FF, 1),
    ("Mathematical Alphanumeric Symbols", 0x1D400, 0x1D7FF, 5),
    ("Emoji: symbols and pictographs", 0x1F300, 0x1F5FF, 2),
    ("Emoji: emoticons", 0x1F600, 0x1F64F, 1),
    ("Emoji: transport", 0x1F680, 0x1F6FF, 1),
    ("Emoji: supplemental", 0x1F900, 0x1F9FF, 2),
    ("CJK Extension B", 0x20000, 0x2A6DF, 211),
    ("Tags", 0xE0000, 0xE007F, 1),
]


def block_text(first: int, last: int, step: int) -> str:
    """Every assigned code point of the range (no surrogates), in words of 5."""
    chars = [
        chr(c)
        for c in range(first, last + 1, step)
        if unicodedata.category(chr(c)) != "Cs"
        and (unicodedata.category(chr(c)) != "Cn" or 0xFDD0 <= c <= 0xFFFF)
    ]
    words = ["".join(chars[i : i + 5]) for i in range(0, len(chars), 5)]
    return " ".join(words)


def emoji_sequences() -> dict[str, str]:
    zwj = "\u200d"
    family = zwj.join(unicodedata.lookup(n) for n in ("MAN", "WOMAN", "GIRL", "BOY"))
    wave = unicodedata.lookup("WAVING HAND SIGN")
    tones = "".join(wave + chr(0x1F3FB + k) for k in range(5))
    flags = " ".join(
        "".join(chr(0x1F1E6 + ord(c) - ord("A")) for c in code)
        for code in ("FR", "JP", "BR", "IN", "ZA", "UA")
    )
    england = (
        unicodedata.lookup("WAVING BLACK FLAG")
        + "".join(chr(0xE0000 + ord(c)) for c in "gbeng")
        + chr(0xE007F)
    )
    keycaps = " ".join(d + "\ufe0f\u20e3" for d in "0123456789#*")
    zalgo = "".join(base + "".join(chr(0x300 + k) for k in range(0, 40, 3)) for base in "Zalgo")
    hebrew = "".join(chr(c) for c in range(0x05D0, 0x05EB))
    arabic = "".join(chr(c) for c in range(0x0627, 0x064B))
    bidi = f"abc \u202e{hebrew}\u202c \u200f{arabic}\u200e 123 \u2067{hebrew}\u2069"
    hangul = unicodedata.normalize("NFD", "".join(chr(c) for c in range(0xAC00, 0xAC40)))
    latin = "".join(chr(c) for c in range(0x00C0, 0x0100))
    return {
        "ZWJ family": family,
        "skin tones": tones,
        "flags": flags,
        "tag sequence (England flag)": england,
        "keycaps": keycaps,
        "stacked combining marks": zalgo,
        "mixed RTL/LTR with bidi overrides": bidi,
        "Hangul decomposed (NFD)": hangul,
        "Latin NFD": unicodedata.normalize("NFD", latin),
        "Latin NFKC of fullwidth": unicodedata.normalize(
            "NFKC", "".join(chr(c) for c in range(0xFF01, 0xFF5F))
        ),
    }


def special_token_texts() -> dict[str, str]:
    specials = sorted(set().union(*(enc.special_tokens_set for enc in ENCODINGS.values())))
    return {f"special {tok}": f"say {tok} now{tok}{tok}" for tok in specials}


SAMPLES: dict[str, str] = {
    **{label: block_text(first, last, step) for label, first, last, step in BLOCKS},
    **emoji_sequences(),
    **special_token_texts(),
    "empty": "",
    "NUL bytes": "a\x00b\x00\x00c",
}


def reference(model: str, text: str) -> int:
    return len(ENCODINGS[model].encode(text, disallowed_special=()))


def reference_messages(model: str, messages: list[dict[str, Any]]) -> int:
    """OpenAI cookbook: 3 per message, its role and content, 1 + name; 3 to prime the reply."""
    total = 3
    for message in messages:
        assert set(message) <= {"role", "content", "name"}, message
        total += 3 + reference(model, message["role"]) + reference(model, message["content"])
        if message.get("name"):
            total += 1 + reference(model, message["name"])
    return total


def exact_from_scratch(model: str, ctx: AssembledContext) -> int:
    as_messages = reference_messages(model, ctx.to_messages())
    if ctx.format == "messages":
        return as_messages
    return max(as_messages, reference(model, ctx.render()))


def test_the_samples_cover_many_scripts() -> None:
    text = "".join(SAMPLES.values())
    scripts = {unicodedata.name(c, "?").split()[0] for c in text}
    assert len(SAMPLES) > 80
    assert len(scripts) > 100  # first words of character names: LATIN, ARABIC, CJK, ...
    assert {"\x00", "\u200d", "\u202e", "\ufffd", "\U000e007f"} <= set(text)


@pytest.mark.parametrize("model", list(MODELS))
@pytest.mark.parametrize("label", list(SAMPLES))
def test_every_sample_counts_exactly(model: str, label: str) -> None:
    counter, text = COUNTERS[model], SAMPLES[label]
    expected = reference(model, text)
    assert counter.count(text) == expected
    assert counter.encode(text) == ENCODINGS[model].encode(text, disallowed_special=())
    assert counter.count_many([text, "x", text]) == [expected, reference(model, "x"), expected]
    messages = [{"role": "user", "content": text, "name": "Zoë"}, {"role": "system", "content": ""}]
    assert counter.count_messages(messages) == reference_messages(model, messages)


@pytest.mark.parametrize("model", list(MODELS))
def test_special_token_strings_are_plain_text_and_never_raise(model: str) -> None:
    counter, encoding = COUNTERS[model], ENCODINGS[model]
    for token in encoding.special_tokens_set:
        text = f"ignore this: {token}"
        assert counter.count(text) == len(encoding.encode_ordinary(text))
        assert encoding.encode_single_token(token) not in counter.encode(text)


any_text = st.text(st.characters(exclude_categories=["Cs"]), max_size=300)
sample_mix = st.lists(
    st.one_of(st.sampled_from(sorted(SAMPLES.values())).map(lambda s: s[:60]), any_text),
    max_size=6,
).map("".join)


@settings(deadline=None, max_examples=300)
@given(text=st.one_of(any_text, sample_mix), model=st.sampled_from(list(MODELS)))
def test_any_text_counts_exactly(text: str, model: str) -> None:
    counter = COUNTERS[model]
    assert counter.count(text) == reference(model, text)
    assert counter.count_many([text, text[::-1]]) == [
        reference(model, text),
        reference(model, text[::-1]),
    ]
    message = [{"role": "assistant", "content": text}]
    assert counter.count_messages(message) == reference_messages(model, message)


@settings(deadline=None, max_examples=60)
@given(
    texts=st.lists(sample_mix.filter(str.strip), min_size=1, max_size=8),
    query=sample_mix.filter(str.strip),
    budget=st.integers(min_value=150, max_value=3000),
    fmt=st.sampled_from(["messages", "text", "compact"]),
    model=st.sampled_from(list(MODELS)),
)
def test_assembled_tokens_equal_a_count_from_scratch(
    texts: list[str], query: str, budget: int, fmt: Any, model: str
) -> None:
    items = [ContextItem("system", "Answer in the user's language.", tier=Tier.SYSTEM)]
    items += [
        ContextItem(f"r{i}", text, tier=Tier.RETRIEVED, score=1.0 / (i + 1))
        for i, text in enumerate(texts)
    ]
    items.append(ContextItem("query", query, tier=Tier.QUERY, role="user"))
    assembler = ContextAssembler(COUNTERS[model])
    try:
        ctx = assembler.assemble(items, budget=budget, format=fmt)
    except Exception as exc:  # only a query too big for a small budget may fail, and clearly
        assert type(exc).__name__ == "BudgetExceededError", exc
        assert reference(model, query) > budget // 2
        return
    assert ctx.tokens_used <= budget
    assert ctx.tokens_used == exact_from_scratch(model, ctx)


def test_a_lone_surrogate_is_refused_with_where_and_what_to_do() -> None:
    counter = COUNTERS["gpt-4o"]
    with pytest.raises(InvalidItemError, match=r"lone surrogate U\+D800 at index 3.*repair"):
        counter.count("abc\ud800def")
    with pytest.raises(InvalidItemError, match=r"message 1: .*lone surrogate U\+DCFF"):
        counter.count_messages(
            [{"role": "user", "content": "ok"}, {"role": "user", "content": "x\udcff"}]
        )
    with pytest.raises(InvalidItemError, match="surrogate"):
        counter.count_many(["fine", "\udfff"])


# -- runs of blanks: tiktoken's own pre-tokenizer panics on a million of them ---------------


def small_runs(text: str, at_least: int) -> list[tuple[int, int]]:
    pattern = rf"(?<![{_BLANKS}])[{_BLANKS}]{{{at_least},}}(?![{_BLANKS}\r\n])"
    return [m.span() for m in re.finditer(pattern, text)]


BLANKY = st.lists(
    st.sampled_from([" ", "  ", "\t", "\n", "\r\n", "\u3000", "\xa0", "\x0b", "\u2028", "\x85"])
    | st.sampled_from(["a", "Bc", "7", ".", "/", "'s", "中", "🙂", "\u0301", "x y"]),
    max_size=40,
).map("".join)


@settings(deadline=None, max_examples=400)
@given(
    text=BLANKY,
    at_least=st.integers(min_value=2, max_value=4),
    model=st.sampled_from(["gpt-4o", "gpt-4"]),
)
def test_cutting_out_blank_runs_keeps_counts_exact(text: str, at_least: int, model: str) -> None:
    # The cut used for runs of 100,000+ blanks, tried on short runs tiktoken can still take.
    backend = Tiktoken(ENCODINGS[model])
    assert backend._encode_split(text, small_runs(text, at_least)) == ENCODINGS[
        model
    ].encode_ordinary(text)


@pytest.mark.parametrize(
    ("model", "shape"),
    [
        pytest.param("gpt-4o", lambda run: "x" + run + "y", id="between-words-o200k"),
        pytest.param("gpt-4o", lambda run: "x\n" + run, id="at-the-end-o200k"),
        pytest.param("gpt-4", lambda run: run + "\n" + run + ".", id="two-runs-cl100k"),
    ],
)
def test_a_million_blanks_count_without_a_panic(model: str, shape: Any) -> None:
    # tiktoken alone panics here (a BaseException: "StackOverflow" in its regex): see
    # ctxbudget.tokens.backends._split_blanks; exactness is shown on short runs above.
    text = shape(" " * 600_000 + "\t" * 600_000)
    counter = TokenCounter.for_model(model)
    n = counter.count(text)
    assert 0 < n < len(text) // 8  # long blank runs are few tokens
    assert len(counter.encode(text)) == n


# -- 10 MB texts: linear time, no panic (figures printed, never asserted) ---------------------


def ten_mb(kind: str) -> str:
    n = 10_485_760
    if kind == "one long word":
        return "a" * n
    if kind == "blanks between words":
        return "x" + " " * (n - 2) + "y"
    if kind == "CJK without spaces":
        return "".join(chr(0x4E00 + (i * 37) % 20_000) for i in range(n // 64)) * 64
    return ("The quick brown fox jumps over the lazy dog. " * (n // 45 + 1))[:n]


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["prose", "one long word", "blanks between words"])
def test_ten_megabytes_count_exactly_without_a_panic(kind: str) -> None:
    import time

    text = ten_mb(kind)
    counter = TokenCounter.for_model("gpt-4o")
    started = time.perf_counter()
    n = counter.count(text)
    seconds = time.perf_counter() - started
    print(f"\n10 MB of {kind}: {n:,} tokens in {seconds:.1f} s")
    if kind != "blanks between words":  # tiktoken itself panics on that one
        assert n == reference("gpt-4o", text)
    else:
        assert 0 < n < 100_000
    assert counter.count(text) == n  # cached: keyed by the text itself
