r"""What makes text valid Unicode, said once: the lone surrogate message every check gives.

A lone surrogate (``"\ud800"``, from decoding bytes with ``surrogateescape`` or a JSON
``"\ud800"`` escape) is a Python ``str`` but not Unicode: it can be neither stored nor sent to a
model. The store's checks and the token counter's check refuse it with the same words.

>>> lone_surrogate("caf\ud800e").split(",")[0]
'holds a lone surrogate U+D800 at index 3'
>>> lone_surrogate("café") is None
True
"""

from __future__ import annotations

__all__ = ["lone_surrogate"]


def lone_surrogate(text: str) -> str | None:
    """What is wrong with ``text`` if it holds a lone surrogate (None: valid Unicode).

    The message follows the field's name (``f"{field} {problem}"``): the code point, its
    index, and what to do.
    """
    if text.isascii():
        return None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return (
            f"holds a lone surrogate U+{ord(text[exc.start]):04X} at index {exc.start}, which is "
            "not valid Unicode and can be neither stored nor sent to a model; repair the text "
            "where it was decoded (e.g. text.encode('utf-8', 'replace').decode())"
        )
    return None
