"""A node's tier from its metadata: control metadata neither the LLM nor the embedder sees.

`CtxBudgetNodePostprocessor` reads a node's tier from its metadata key ``ctxbudget_tier``
(`TIER_KEY`; ``tier_key=`` renames it). The key steers packing only, so it is never part of the
text an LLM reads or an embedding is made from: `set_tier` tags a node or document with the key
in both ``excluded_llm_metadata_keys`` and ``excluded_embed_metadata_keys`` (tag before
indexing: the embedding text is fixed then), and the postprocessor hides the key from the LLM in
the nodes it returns (`hide_key`).
"""

from __future__ import annotations

from llama_index.core.schema import BaseNode, NodeWithScore

from ctxbudget import Tier
from ctxbudget.core.numbers import count, shown
from ctxbudget.errors import InvalidItemError

__all__ = ["TIER_KEY", "hide_key", "node_tier", "parse_tier", "set_tier"]

TIER_KEY = "ctxbudget_tier"
"""The metadata key naming a node's tier (the postprocessor's default ``tier_key``)."""

_DIGITS = 100  # the most digits a tier written as text may have (10**100: the core's counts)
_HINT = "give a tier name (PINNED, RETRIEVED...) or an int"


def parse_tier(value: object, where: str) -> int:
    """A tier from a metadata value: a `Tier` name (any case) or an int, checked.

    Raises:
        InvalidItemError: not a tier, or SYSTEM, QUERY or RECENT (tiers nodes cannot take).

    >>> parse_tier("pinned", "node 'n1'")
    20
    """
    if isinstance(value, str) and not value.lstrip("-").isdigit():
        try:
            tier = int(Tier[value.upper()])
        except KeyError as exc:
            names = [t.name for t in Tier if t not in (Tier.SYSTEM, Tier.QUERY, Tier.RECENT)]
            msg = f"{where}: {value!r} is not a tier; use one of {names} or an int"
            raise InvalidItemError(msg) from exc
    elif isinstance(value, str):  # digits: the number they write, if a tier can be one
        try:  # "²" is a digit int() refuses; past 4,300 digits int() refuses any
            written = int(value) if len(value) <= _DIGITS else None
        except ValueError:
            written = None
        if written is None:
            msg = f"{where}: {shown(value)} is not a tier; {_HINT}"
            raise InvalidItemError(msg)
        tier = written
    else:  # the core's number boundary: numpy ints taken; True or 30.0 refused
        tier = count(value, where, least=None, error=InvalidItemError, hint=_HINT)
    if tier <= Tier.QUERY or tier == Tier.RECENT:
        msg = (
            f"{where}: {value!r} is a tier nodes cannot take (SYSTEM, QUERY and RECENT hold the "
            "prompt, the query and the chat history); use PINNED (20) or a larger number"
        )
        raise InvalidItemError(msg)
    return tier


def node_tier(node: NodeWithScore, key: str | None) -> int:
    """The tier of ``node`` from its metadata ``key`` (RETRIEVED without one).

    Raises:
        InvalidItemError: the value is not a tier nodes can take.
    """
    value = None if key is None else node.node.metadata.get(key)
    if value is None:
        return int(Tier.RETRIEVED)
    return parse_tier(value, f"node {node.node_id!r}: metadata {key}")


def set_tier(node: BaseNode, tier: int | str, *, key: str = TIER_KEY) -> None:
    """Tag ``node`` (a node or `Document`) with its tier, hidden from the LLM and the embedder.

    Sets ``node.metadata[key]`` and adds ``key`` to the node's ``excluded_llm_metadata_keys``
    and ``excluded_embed_metadata_keys``, so the tag steers `CtxBudgetNodePostprocessor`
    without being printed into a prompt or embedded. Tag documents before they are indexed.

    Args:
        node: the node or document to tag (changed in place).
        tier: a `Tier`, its name (``"PINNED"``, ``"ENTITY"``...) or an int.
        key: the metadata key (the postprocessor's ``tier_key``).

    Raises:
        InvalidItemError: not a tier nodes can take (SYSTEM, QUERY, RECENT or unknown).

    >>> from llama_index.core import Document
    >>> doc = Document(text="House rule: no peanuts.")
    >>> set_tier(doc, "PINNED")
    >>> doc.metadata, doc.excluded_llm_metadata_keys, doc.excluded_embed_metadata_keys
    ({'ctxbudget_tier': 'PINNED'}, ['ctxbudget_tier'], ['ctxbudget_tier'])
    """
    value = tier.name if isinstance(tier, Tier) else tier
    parse_tier(value, f"set_tier({node.node_id!r})")
    node.metadata[key] = value
    for excluded in (node.excluded_llm_metadata_keys, node.excluded_embed_metadata_keys):
        if key not in excluded:
            excluded.append(key)


def hide_key(node: NodeWithScore, key: str | None) -> NodeWithScore:
    """``node``, or a copy whose ``key`` is hidden from the LLM and the embedder when it has it.

    The node's own object is left as it is (it may be the docstore's).
    """
    inner = node.node
    if key is None or key not in inner.metadata:
        return node
    update = {
        name: [*excluded, key]
        for name, excluded in (
            ("excluded_llm_metadata_keys", inner.excluded_llm_metadata_keys),
            ("excluded_embed_metadata_keys", inner.excluded_embed_metadata_keys),
        )
        if key not in excluded
    }
    if not update:
        return node
    return NodeWithScore(node=inner.model_copy(update=update), score=node.score)
