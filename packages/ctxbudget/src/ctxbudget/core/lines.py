r"""Cutting text at line boundaries: whole lines kept, one marker for the run left out.

`cut_lines` keeps the first whole lines of a text that fit a token limit (``tail=True``: its
first and its last lines) and puts one marker line where lines were left out, naming them::

    import sys
    … [142 lines elided: 88-229] …
    if __name__ == "__main__":
        main()

The marker is part of the text, so it is counted within the limit. Only when not even one
whole line fits is the first line cut, at a character (code point) boundary, as a last resort;
the marker then says where (``… [line 1 cut at 120 of 5000 characters; lines 2-229
elided] …``).

Lines end at ``"\n"`` (a ``"\r\n"`` line keeps its ``"\r"``), numbered from 1 as editors
number them. Costs are found by galloping then bisecting over the number of lines kept, so
cutting a huge text costs about what counting the part that fits costs, not the whole.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["LineCut", "cut_lines", "elision_marker", "split_lines"]

_TAIL_SHARE = 3  # with tail=True, the head first takes all but 1/3 of the limit


@dataclass(frozen=True, slots=True)
class LineCut:
    r"""What `cut_lines` kept of a text.

    Attributes:
        text: the kept lines, with the marker line where lines were left out.
        total: the lines of the original text.
        head: whole lines kept from the start.
        tail: whole lines kept from the end.
        chars: characters kept of line ``head + 1`` when no whole line fit (else 0).

    >>> text = "".join(f"line {i}\n" for i in range(1, 11))
    >>> cut = cut_lines(text, 50, len)
    >>> cut.head, cut.elided, cut.text.splitlines()[-1]
    (3, 7, '… [7 lines elided: 4-10] …')
    """

    text: str
    total: int
    head: int
    tail: int
    chars: int = 0

    @property
    def elided(self) -> int:
        """Lines not shown whole (a line cut at a character counts as elided)."""
        return self.total - self.head - self.tail

    @property
    def first(self) -> int:
        """The number of the first line not shown whole (1-based)."""
        return self.head + 1

    @property
    def last(self) -> int:
        """The number of the last line not shown whole (1-based)."""
        return self.total - self.tail

    def as_metadata(self) -> dict[str, int]:
        """The figures as a JSON-ready dict (what an item cut this way carries as ``elided``)."""
        return {
            "total_lines": self.total,
            "kept_head": self.head,
            "kept_tail": self.tail,
            "elided_lines": self.elided,
            "first_elided": self.first,
            "last_elided": self.last,
            "cut_chars": self.chars,
        }


def split_lines(text: str) -> list[str]:
    r"""The lines of ``text``, each with its ``"\n"`` (the last one may have none).

    >>> split_lines("a\r\nb\n\nc")
    ['a\r\n', 'b\n', '\n', 'c']
    """
    if not text:
        return []
    lines = [line + "\n" for line in text.split("\n")]
    last = lines.pop()[:-1]
    if last:
        lines.append(last)
    return lines


def elision_marker(first: int, last: int, *, cut: tuple[int, int] | None = None) -> str:
    """The marker that stands for lines ``first`` to ``last`` (1-based, inclusive).

    ``cut=(kept, length)``: line ``first`` is shown cut after ``kept`` of its ``length``
    characters, and only the lines after it are left out whole.

    >>> elision_marker(88, 229)
    '… [142 lines elided: 88-229] …'
    >>> elision_marker(1, 3, cut=(10, 500))
    '… [line 1 cut at 10 of 500 characters; lines 2-3 elided] …'
    """
    if cut is None:
        count = last - first + 1
        where = f"{first}-{last}" if count > 1 else f"{first}"
        return f"… [{count} line{'s' if count > 1 else ''} elided: {where}] …"
    kept, length = cut
    text = f"line {first} cut at {kept} of {length} characters"
    if last == first + 1:
        text += f"; line {last} elided"
    elif last > first + 1:
        text += f"; lines {first + 1}-{last} elided"
    return f"… [{text}] …"


def cut_lines(
    text: str, max_tokens: int, count: Callable[[str], int], *, tail: bool = False
) -> LineCut | None:
    r"""Cut ``text`` to the most whole lines that fit ``max_tokens`` with the marker.

    Its first lines are kept (with ``tail``, its first and its last), and one marker line
    names the lines left out.

    Args:
        text: the text to cut.
        max_tokens: the most the result may cost, marker included.
        count: the cost of a candidate text (the rendered row's tokens, in an assembly).
        tail: keep the last lines too: the head takes up to two thirds of the limit first,
            then the tail what is left, then the head again what the tail did not use.

    Returns:
        The cut (``elided == 0``: the whole text fits), or None when nothing fits: not even
        the marker with one character of the first line.

    >>> text = "".join(f"line {i}\n" for i in range(1, 11))
    >>> cut_lines(text, 60, len, tail=True).text
    'line 1\nline 2\n… [6 lines elided: 3-8] …\nline 9\nline 10\n'
    """
    lines = split_lines(text)
    total = len(lines)
    if count(text) <= max_tokens:
        return LineCut(text, total, total, 0)
    if not lines:
        return None
    newline = "\r\n" if lines[0].endswith("\r\n") else "\n"

    def render(head: int, kept_tail: int) -> str:
        marker = elision_marker(head + 1, total - kept_tail)
        if not kept_tail:
            return "".join(lines[:head]) + marker
        return "".join(lines[:head]) + marker + newline + "".join(lines[total - kept_tail :])

    def fits(head: int, kept_tail: int, limit: int = max_tokens) -> bool:
        return count(render(head, kept_tail)) <= limit

    head = kept_tail = 0
    if tail:
        share = max_tokens - max_tokens // _TAIL_SHARE
        head = max(_longest(lambda h: fits(h, 0, share), 0, total - 1), 0)
        kept_tail = _longest(lambda t: fits(head, t), 0, total - 1 - head)
        if kept_tail < 0:  # not even the marker fits after the head: no head then
            head, kept_tail = 0, max(_longest(lambda t: fits(0, t), 0, total - 1), 0)
        head = max(_longest(lambda h: fits(h, kept_tail), head, total - 1 - kept_tail), head)
    else:
        head = max(_longest(lambda h: fits(h, 0), 1, total - 1), 0)
    if head + kept_tail and fits(head, kept_tail):
        return LineCut(render(head, kept_tail), total, head, kept_tail)
    return _cut_first_line(lines, max_tokens, count, newline)


def _cut_first_line(
    lines: list[str], max_tokens: int, count: Callable[[str], int], newline: str
) -> LineCut | None:
    """The last resort: the first line cut at a character, and the marker for the rest."""
    total = len(lines)
    line = lines[0].removesuffix("\n").removesuffix("\r")

    def render(kept: int) -> str:
        marker = elision_marker(1, total, cut=(kept, len(line)))
        return line[:kept] + newline + marker

    kept = _longest(lambda k: count(render(k)) <= max_tokens, 1, len(line) - 1)
    if kept < 1:
        return None
    return LineCut(render(kept), total, 0, 0, kept)


def _longest(fits: Callable[[int], bool], low: int, high: int) -> int:
    """The largest ``k`` in ``[low, high]`` with ``fits(k)`` (``low - 1``: none).

    Assumes ``fits`` holds up to some ``k`` and not after (costs grow with what is kept).
    Gallops from ``low`` before bisecting, so the largest candidate tried is at most about
    twice the answer: cutting a huge text costs what the part kept costs.
    """
    if high < low or not fits(low):
        return low - 1
    good, step = low, 1
    bad = high + 1
    while good + step <= high:
        if not fits(good + step):
            bad = good + step
            break
        good += step
        step *= 2
    while bad - good > 1:
        middle = (good + bad) // 2
        if fits(middle):
            good = middle
        else:
            bad = middle
    return good
