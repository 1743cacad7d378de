"""Renamed options: the old name still works for one release, with a `DeprecationWarning`.

The adapters share one vocabulary (docs/adapters.md): ``budget`` for the tokens a component may
use, ``counter`` for the `TokenCounter`, ``k``/``fetch_k`` for results returned and candidates
fetched, ``collections`` for document collections. Older names are mapped here, once.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Collection, Iterable, Mapping
from types import FrameType
from typing import Any

from ctxbudget.errors import ConfigurationError, ConfigurationTypeError

__all__ = ["refuse_unknown", "renamed"]


def refuse_unknown(given: Iterable[str], known: Collection[str], where: str) -> None:
    """Refuse option names not in ``known`` (a misspelled ``bugdet=``), naming each of them.

    For the adapters' pydantic classes, which would otherwise drop an unknown field silently.

    Raises:
        ConfigurationTypeError: an unknown name (a `TypeError`, as Python's own for a call).
    """
    unknown = sorted(str(name) for name in given if name not in known)
    if unknown:
        msg = (
            f"{where} has no option {', '.join(map(repr, unknown))}: its options are "
            f"{sorted(known)}; check the spelling"
        )
        raise ConfigurationTypeError(msg)


def renamed(
    given: Mapping[str, Any], renames: Mapping[str, str], where: str, *, stacklevel: int = 4
) -> dict[str, Any]:
    """`given` with each old option name of `renames` (old -> new) replaced by its new name.

    ``stacklevel`` points the warning at the caller's line (4, the default, suits pydantic
    validators); 0 points it at the first frame outside ctxbudget and its adapters, however
    many wrappers lie between (Python shows a `DeprecationWarning` of the user's ``__main__``).

    Raises:
        ConfigurationError: both the old and the new name were given.
    """
    out = dict(given)
    for old, new in renames.items():
        if old not in out:
            continue
        if new in out:
            msg = f"{where}: pass {new}= only ({old}= is its old name)"
            raise ConfigurationError(msg)
        warnings.warn(
            f"{where}: {old}= is now {new}= ({old}= goes in the next release)",
            DeprecationWarning,
            stacklevel=stacklevel or _outside(),
        )
        out[new] = out.pop(old)
    return out


_OURS = ("ctxbudget", "langchain_ctxbudget", "llama_index.ctxbudget")


def _outside() -> int:
    """The stacklevel, for `warnings.warn` in `renamed`, of the first frame not ctxbudget's."""
    frame: FrameType | None = sys._getframe(2)  # noqa: SLF001 - renamed's caller (level 2)
    level = 2
    while frame is not None and str(frame.f_globals.get("__name__", "")).startswith(_OURS):
        frame, level = frame.f_back, level + 1
    return level
