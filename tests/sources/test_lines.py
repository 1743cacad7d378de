"""Cutting at line boundaries: whole original lines and one marker, always within the limit.

Properties over random line lengths (empty lines, very long ones, CRLF) and limits, counted with
a real tiktoken encoding: the result fits; it is the first (and with ``tail`` the last) whole
lines of the original with exactly one marker naming the lines left out, in order; one more
line would not fit; only when not even the first line fits whole is that line cut at a
character, and the marker says so.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxbudget import TokenCounter
from ctxbudget.core.lines import LineCut, cut_lines, elision_marker, split_lines

COUNT = TokenCounter.from_encoding("o200k_base").count
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# No "…" in the content: every marker in a result is the one cut_lines put there.
CHARS = st.sampled_from(list("abcdefxyz ABC 0123 .,;:()[]{}=+-*/#'\"\t\\é日🙂") + ["    ", "\r"])
LINE = st.one_of(
    st.lists(CHARS, max_size=30).map("".join),
    st.lists(CHARS, min_size=200, max_size=600).map("".join),  # a long line now and then
)
TEXTS = st.tuples(st.lists(LINE, min_size=1, max_size=60), st.booleans(), st.booleans()).map(
    lambda t: ("\r\n" if t[2] else "\n").join(t[0]) + ("\n" if t[1] else "")
)


def rebuild(text: str, cut: LineCut) -> str:
    """What a cut of whole lines must be: head, the one marker, tail."""
    lines = split_lines(text)
    newline = "\r\n" if lines[0].endswith("\r\n") else "\n"
    marker = elision_marker(cut.first, cut.last)
    tail = newline + "".join(lines[len(lines) - cut.tail :]) if cut.tail else ""
    return "".join(lines[: cut.head]) + marker + tail


@SETTINGS
@given(text=TEXTS, limit=st.integers(1, 400), tail=st.booleans())
def test_a_cut_is_whole_lines_and_one_marker_within_the_limit(
    text: str, limit: int, tail: bool
) -> None:
    cut = cut_lines(text, limit, COUNT, tail=tail)
    lines = split_lines(text)
    if cut is None:
        # Nothing fits: not even the marker after one character of the first line.
        line = lines[0].rstrip("\r\n")
        smallest = line[:1] + "\n" + elision_marker(1, len(lines), cut=(1, max(len(line), 2)))
        assert COUNT(smallest) > limit or len(line) < 2
        return
    assert COUNT(cut.text) <= limit
    assert cut.total == len(lines)
    if cut.elided == 0:
        assert cut.text == text and COUNT(text) <= limit
        return
    assert "…" not in text and cut.text.count("… [") == 1  # exactly one marker
    if cut.chars:  # the last resort: the first line did not fit whole
        line = lines[0].removesuffix("\n").removesuffix("\r")
        assert cut.head == cut.tail == 0 and 0 < cut.chars < len(line)
        marker = elision_marker(1, len(lines), cut=(cut.chars, len(line)))
        newline = "\r\n" if lines[0].endswith("\r\n") else "\n"
        assert cut.text == line[: cut.chars] + newline + marker
        assert COUNT(lines[0] + elision_marker(2, len(lines))) > limit or len(lines) == 1
        return
    assert cut.text == rebuild(text, cut)
    assert cut.head + cut.tail < len(lines)
    if not tail:
        assert cut.tail == 0 and cut.head >= 1
    # Maximal: one more line of the head does not fit.
    if cut.head + cut.tail < len(lines) - 1:
        longer = LineCut("", cut.total, cut.head + 1, cut.tail)
        assert COUNT(rebuild(text, longer)) > limit


@SETTINGS
@given(text=TEXTS, limit=st.integers(1, 400))
def test_a_tail_cut_keeps_the_last_lines_once_the_head_has_its_share(text: str, limit: int) -> None:
    cut = cut_lines(text, limit, COUNT, tail=True)
    if cut is None or not cut.elided or cut.chars:
        return
    lines = split_lines(text)
    # The tail could not take one more line either.
    if cut.head + cut.tail < len(lines) - 1:
        longer = LineCut("", cut.total, cut.head, cut.tail + 1)
        assert COUNT(rebuild(text, longer)) > limit


def test_markers_name_the_lines_left_out() -> None:
    assert elision_marker(88, 229) == "… [142 lines elided: 88-229] …"
    assert elision_marker(5, 5) == "… [1 line elided: 5] …"
    assert elision_marker(1, 1, cut=(3, 9)) == "… [line 1 cut at 3 of 9 characters] …"
    assert (
        elision_marker(1, 2, cut=(3, 9)) == "… [line 1 cut at 3 of 9 characters; line 2 elided] …"
    )


def test_a_huge_text_costs_what_the_kept_part_costs() -> None:
    seen: list[int] = []

    def count(text: str) -> int:
        seen.append(len(text))
        return COUNT(text)

    text = "".join(f"line number {i}\n" for i in range(200_000))
    cut = cut_lines(text, 100, count)
    assert cut is not None and cut.head > 5
    # Besides the one count of the whole text, no candidate is much longer than the result.
    assert sorted(seen)[-2] < 4 * len(cut.text)


def test_split_lines_keeps_line_ends() -> None:
    assert split_lines("") == []
    assert split_lines("a") == ["a"]
    assert split_lines("a\n") == ["a\n"]
    assert split_lines("a\r\n\nb") == ["a\r\n", "\n", "b"]
