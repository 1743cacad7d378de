"""Tokenizer backends the counter runs, and the text they take.

tiktoken, Hugging Face tokenizers (loaded here from a ``tokenizer.json`` or a ``Tokenizer``),
and an approximation for models with no known tokenizer. `check_text`: the text they may be given.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import tiktoken

from ctxbudget.core.numbers import shown
from ctxbudget.core.unicode import lone_surrogate
from ctxbudget.errors import InvalidItemError, TokenizerUnavailableError
from ctxbudget.extras import missing_extra

__all__ = ["Approximate", "Backend", "HuggingFace", "Tiktoken", "check_text"]


class Backend(Protocol):
    """A tokenizer as the counter uses it: encode, count many, decode."""

    def encode(self, text: str) -> list[int]:
        """The token ids of `text`."""
        ...

    def count_many(self, texts: list[str]) -> list[int]:
        """The token count of each text."""
        ...

    def decode(self, ids: Sequence[int]) -> str:
        """The text of these token ids."""
        ...


def check_text(text: object) -> str:
    """``text``, if a tokenizer can take it: a str that is valid Unicode.

    Raises:
        InvalidItemError: ``text`` is not a str, or holds a lone surrogate (the message says where).
    """
    if not isinstance(text, str):
        msg = f"token counting needs a str, got {type(text).__name__}: {shown(text)}"
        raise InvalidItemError(msg)
    problem = lone_surrogate(text)
    if problem is not None:
        msg = f"text {problem}"  # the store's words too: one problem, one message
        raise InvalidItemError(msg)
    return text


# tiktoken's pre-tokenizer (fancy-regex) overflows its backtracking stack on a run of about a
# million blanks (whitespace but line breaks) that no line break follows, and panics (a
# BaseException that kills the caller). Such runs are cut out and encoded as the one piece the
# pattern makes of them (`_split_blanks`), so counts stay exact. Blanks: Unicode White_Space
# (Rust's \s) without \r and \n.
_BLANKS = "\t\x0b\x0c \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"


_LONG_BLANKS_AT = 100_000


_LONG_BLANKS = re.compile(rf"(?<![{_BLANKS}])[{_BLANKS}]{{{_LONG_BLANKS_AT},}}(?![{_BLANKS}\r\n])")


_BLANK_RULE = r"|\s+(?!\S)|"  # the rule both cl100k and o200k take such a run by


def _split_blanks(
    text: str, runs: Sequence[tuple[int, int]], *, at_end: bool
) -> list[tuple[str, bool]]:
    r"""``text`` as (part, is one piece) with long blank ``runs`` cut out as single pieces.

    A run followed by a non-space is one piece without its last blank (``\s+(?!\S)``), and
    the pattern restarts at that blank; a run at the end is one piece whole, except for cl100k
    (``at_end=False``: its ``\s++$`` takes the line breaks before the run, so it is left in).
    The pattern never matches across either cut, so the parts add up to the whole.
    """
    parts: list[tuple[str, bool]] = []
    start = 0
    for begin, end in runs:
        if end == len(text) and not at_end:
            continue
        cut = end if end == len(text) else end - 1
        parts += [(text[start:begin], False), (text[begin:cut], True)]
        start = cut
    parts.append((text[start:], False))
    return [(part, whole) for part, whole in parts if part]


class Tiktoken:
    """A tiktoken encoding as a `Backend` (long runs of blanks split to stay linear)."""

    def __init__(self, encoding: tiktoken.Encoding) -> None:
        self._enc = encoding
        pattern = str(getattr(encoding, "_pat_str", ""))
        self._split = _BLANK_RULE in pattern and hasattr(encoding, "_encode_single_piece")
        self._at_end = "\\s++$" not in pattern

    def encode(self, text: str) -> list[int]:
        """The token ids of `text`."""
        if len(text) < _LONG_BLANKS_AT or not self._split:
            return self._enc.encode_ordinary(text)
        return self._encode_split(text, [m.span() for m in _LONG_BLANKS.finditer(text)])

    def _encode_split(self, text: str, runs: Sequence[tuple[int, int]]) -> list[int]:
        ids: list[int] = []
        for part, whole in _split_blanks(text, runs, at_end=self._at_end):
            encode = self._enc._encode_single_piece if whole else self._enc.encode_ordinary
            ids += encode(part)
        return ids

    def count_many(self, texts: list[str]) -> list[int]:
        """The token count of each text."""
        # A plain loop: encode_ordinary_batch (a thread pool) measured 3-13x slower here.
        encode = self._enc.encode_ordinary
        return [len(encode(t) if len(t) < _LONG_BLANKS_AT else self.encode(t)) for t in texts]

    def decode(self, ids: Sequence[int]) -> str:
        """The text of these token ids."""
        try:
            return self._enc.decode(list(ids))
        except (KeyError, ValueError, OverflowError, TypeError) as exc:
            msg = f"cannot decode token ids with {self._enc.name}: {exc}"
            raise InvalidItemError(msg) from exc


class HuggingFace:
    """A Hugging Face ``tokenizers`` tokenizer as a `Backend` (no special tokens added).

    `from_file` and `from_tokenizer` load one to count content as written: no truncation, no
    padding, special-token strings as text. Its ``cache_key`` is ``hf:`` and the sha256 of its
    JSON: the same tokenizer shares one count cache, whatever its file is called.
    """

    def __init__(self, tokenizer: Any, *, cache_key: str) -> None:
        self._tok = tokenizer
        self.cache_key = cache_key

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> HuggingFace:
        """The tokenizer of a ``tokenizer.json`` file.

        Raises:
            TokenizerUnavailableError: the file cannot be read or is not a tokenizer.
            MissingDependencyError: the ``tokenizers`` package is not installed.
        """
        file = Path(path)
        try:
            spec = file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            msg = f"cannot read the tokenizer file {str(file)!r}: {exc}"
            raise TokenizerUnavailableError(msg) from exc
        return cls._load(spec, str(file))

    @classmethod
    def from_tokenizer(cls, tokenizer: Any, label: str) -> HuggingFace:
        """A copy of a loaded ``tokenizers.Tokenizer`` (the caller's is not changed).

        Raises:
            InvalidItemError: ``tokenizer`` is not a ``tokenizers.Tokenizer``.
        """
        to_str = getattr(tokenizer, "to_str", None)
        if not callable(to_str):
            msg = (
                f"from_huggingface expects a tokenizers.Tokenizer, got {type(tokenizer).__name__}"
                " (for a transformers tokenizer pass tokenizer.backend_tokenizer)"
            )
            raise InvalidItemError(msg)
        return cls._load(str(to_str()), label)

    @classmethod
    def _load(cls, spec: str, label: str) -> HuggingFace:
        try:
            from tokenizers import Tokenizer
        except ImportError as exc:
            error = missing_extra("tokenizers", f"counting with the tokenizer.json {label!r}", exc)
            raise error from exc
        try:
            tokenizer = Tokenizer.from_str(spec)
        except Exception as exc:  # tokenizers raises a bare Exception for a malformed file
            msg = f"{label!r} is not a valid Hugging Face tokenizer.json: {exc}"
            raise TokenizerUnavailableError(msg) from exc
        # Count content as written: no truncation, no padding, special-token strings as text.
        tokenizer.no_truncation()
        tokenizer.no_padding()
        tokenizer.encode_special_tokens = True
        digest = hashlib.sha256(spec.encode("utf-8", "surrogatepass")).hexdigest()[:24]
        return cls(tokenizer, cache_key=f"hf:{digest}")

    def encode(self, text: str) -> list[int]:
        """The token ids of `text`."""
        return list(self._tok.encode(text, add_special_tokens=False).ids)

    def count_many(self, texts: list[str]) -> list[int]:
        """The token count of each text."""
        return [len(e) for e in self._tok.encode_batch(texts, add_special_tokens=False)]

    def decode(self, ids: Sequence[int]) -> str:
        """The text of these token ids."""
        return str(self._tok.decode(list(ids), skip_special_tokens=False))


# The approximate rule, in pieces of one token each: a "blob" (24+ characters of base64/hex/id
# alphabet mixing letters and digits: keys, hashes, JWTs) is one token per character; elsewhere a
# capital and up to 3 lowercase letters or up to 2 capitals (with one space before them), a digit,
# up to 4 ASCII whitespace characters, any other ASCII character, and each UTF-8 byte of
# non-ASCII text.
_APPROX_BLOB = re.compile(r"[A-Za-z0-9+/=_-]{24,}")


_APPROX_PIECE = re.compile(
    r" ?(?:[A-Z]?[a-z]{1,3}|[A-Z]{1,2})|[0-9]|[ \t\n\r\x0b\x0c]{1,4}|[\x00-\x7f]|[^\x00-\x7f]+"
)


_DIGIT = re.compile(r"[0-9]")


_LETTER = re.compile(r"[A-Za-z]")


def _approx_pieces(text: str) -> list[str]:
    """ASCII pieces of one token each, and runs of non-ASCII text (one token per UTF-8 byte)."""
    pieces: list[str] = []
    start = 0
    for blob in _APPROX_BLOB.finditer(text):
        pieces += _APPROX_PIECE.findall(text, start, blob.start())
        run = blob.group()
        if _DIGIT.search(run) and _LETTER.search(run):
            pieces += run
        else:
            pieces += _APPROX_PIECE.findall(run)
        start = blob.end()
    pieces += _APPROX_PIECE.findall(text, start)
    return pieces


class Approximate:
    """A `Backend` for models without a known tokenizer: one token per word or byte."""

    def encode(self, text: str) -> list[int]:
        """The token ids of `text`."""
        ids: list[int] = []
        for piece in _approx_pieces(text):
            if piece.isascii():
                ids.append(int.from_bytes(b"\x01" + piece.encode("ascii"), "big"))
            else:  # one id per UTF-8 byte
                ids.extend(0x100 | b for b in piece.encode("utf-8"))
        return ids

    def count_many(self, texts: list[str]) -> list[int]:
        """The token count of each text."""
        return [self._count(t) for t in texts]

    @staticmethod
    def _count(text: str) -> int:
        return sum(1 if p.isascii() else len(p.encode("utf-8")) for p in _approx_pieces(text))

    def decode(self, ids: Sequence[int]) -> str:
        """The text of these token ids."""
        out = bytearray()
        for i in ids:
            raw = b""
            if not isinstance(i, bool) and isinstance(i, int) and i >= 0x100:
                raw = i.to_bytes((i.bit_length() + 7) // 8, "big")
            if raw[:1] != b"\x01":  # every id is 0x01 followed by its piece's bytes
                msg = f"{i!r} is not an id made by an approximate counter's encode()"
                raise InvalidItemError(msg)
            out += raw[1:]
        return out.decode("utf-8", errors="replace")
