"""Renamed options: the old name still works for one release, with a `DeprecationWarning`.

The adapters share one vocabulary (docs/adapters.md): ``budget`` for the tokens a component may
use, ``counter`` for the `TokenCounter`, ``k``/``fetch_k`` for results returned and candidates
fetched, ``collections`` for document collections. Older names are mapped here, once.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

from ctxbudget.errors import ConfigurationError

__all__ = ["renamed"]


def renamed(given: Mapping[str, Any], renames: Mapping[str, str], where: str) -> dict[str, Any]:
    """`given` with each old option name of `renames` (old -> new) replaced by its new name.

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
            stacklevel=4,
        )
        out[new] = out.pop(old)
    return out
