"""How many tokens the context may use, and how much each tier may take of them.

Token counts pass `ctxbudget.core.numbers.count`: any integral type (numpy's included) is
taken as an int; a float, a bool, a string, zero, a negative count or a reserve that leaves
nothing is refused with `InvalidBudgetError` (a `ConfigurationError`). The only upper bound is
`ctxbudget.core.numbers.MAX_COUNT` (10**100): a budget larger than the model's window is the
caller's to choose (`Budget.for_model` gives the window), and assembly costs the same whatever
the budget, since nothing is allocated per token.

`with_reply_room` keeps room for the reply a model is set to write: a provider checks the prompt
against the window less the reply's limit, so the reserve is at least that limit. Every door
that knows its model's output setting (a LangChain chat model's ``max_tokens``, a LlamaIndex
LLM's ``metadata.num_output``) takes its reserve from it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from numbers import Integral, Real
from types import MappingProxyType

from ctxbudget.core.items import tier_name
from ctxbudget.core.numbers import count, real
from ctxbudget.errors import InvalidBudgetError, UnknownModelError

__all__ = ["Budget", "Share", "with_reply_room"]

Share = int | float
"""A tier floor or cap: an ``int`` is tokens, a ``float`` in (0, 1] a fraction of `available`."""

_EMPTY: Mapping[int, Share] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class Budget:
    """The token budget of one model call: ``window - reserve - safety`` is what context may use.

    Args:
        window: the model's context window in tokens.
        reserve: tokens kept free for the model's response.
        safety: extra tokens kept free (for a counter you do not fully trust, or provider drift).
        floors: per tier, a share kept for that tier even against higher tiers (only as much as the
            tier's items can use: an unused floor flows back to the others).
        caps: per tier, the most that tier may use.

    >>> Budget(window=8192, reserve=1024).available
    7168
    >>> Budget.for_model("gpt-4o", reserve=4096).window
    128000
    """

    window: int
    reserve: int = 0
    safety: int = 0
    floors: Mapping[int, Share] = field(default_factory=dict)
    caps: Mapping[int, Share] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in ("window", "reserve", "safety"):
            value = count(
                getattr(self, name),
                f"Budget.{name}",
                least=None,
                error=InvalidBudgetError,
                hint="a number of tokens, e.g. Budget(window=8192, reserve=1024)",
            )
            object.__setattr__(self, name, value)
        if self.window <= 0:
            msg = (
                f"Budget.window must be a positive number of tokens, got {self.window}; "
                "pass the model's context window (e.g. Budget.for_model('gpt-4o'))"
            )
            raise InvalidBudgetError(msg)
        if self.reserve < 0 or self.safety < 0:
            msg = (
                f"Budget.reserve and Budget.safety cannot be negative "
                f"(got reserve={self.reserve}, safety={self.safety}); use 0 to keep nothing free"
            )
            raise InvalidBudgetError(msg)
        if self.available <= 0:
            msg = (
                f"the budget leaves no room for context: window {self.window:,} - reserve "
                f"{self.reserve:,} - safety {self.safety:,} = {self.available:,} tokens; "
                "lower the reserve or the safety margin, or use a larger window"
            )
            raise InvalidBudgetError(msg)
        object.__setattr__(self, "floors", MappingProxyType(dict(self._check("floors"))))
        object.__setattr__(self, "caps", MappingProxyType(dict(self._check("caps"))))
        total_floor = sum(self.share_tokens(share) for share in self.floors.values())
        if total_floor > self.available:
            msg = (
                f"the tier floors add up to {total_floor:,} tokens but only {self.available:,} "
                "are available; lower the floors"
            )
            raise InvalidBudgetError(msg)
        for tier, floor in self.floors.items():
            cap = self.caps.get(tier)
            if cap is not None and self.share_tokens(floor) > self.share_tokens(cap):
                msg = (
                    f"{tier_name(tier)}: floor {floor!r} is larger than cap {cap!r}; "
                    "a tier cannot be promised more than it may use"
                )
                raise InvalidBudgetError(msg)

    def _check(self, kind: str) -> Mapping[int, Share]:
        shares: Mapping[int, Share] = getattr(self, kind)
        if not isinstance(shares, Mapping):
            msg = f"Budget.{kind} must be a mapping of tier to share, got {shares!r}"
            raise InvalidBudgetError(msg)
        checked: dict[int, Share] = {}
        for tier, share in shares.items():
            key = count(
                tier, f"Budget.{kind}: a key (a tier)", least=None, error=InvalidBudgetError
            )
            where = f"Budget.{kind}[{tier_name(key)}]"
            if isinstance(share, Integral) and not isinstance(share, bool):
                checked[key] = count(share, where, least=0, error=InvalidBudgetError)
                continue
            if isinstance(share, bool) or not isinstance(share, Real):
                msg = f"{where} must be an int or a float, got {share!r}"
                raise InvalidBudgetError(msg)
            fraction = real(share, where, error=InvalidBudgetError)
            if not 0.0 < fraction <= 1.0:
                msg = (
                    f"{where} = {share!r}: a float share is a fraction in (0, 1]; pass an int "
                    "for a number of tokens"
                )
                raise InvalidBudgetError(msg)
            checked[key] = fraction
        return checked

    @property
    def available(self) -> int:
        """Tokens the rendered context may use: ``window - reserve - safety``."""
        return self.window - self.reserve - self.safety

    def share_tokens(self, share: Share) -> int:
        """Convert a floor or cap to tokens (fractions are of `available`, rounded down)."""
        if isinstance(share, float):
            return int(share * self.available)
        return share

    def floor_tokens(self, tier: int) -> int:
        """The floor of ``tier`` in tokens (0 when it has none)."""
        share = self.floors.get(tier)
        return 0 if share is None else self.share_tokens(share)

    def cap_tokens(self, tier: int) -> int | None:
        """The cap of ``tier`` in tokens, or None when it has none."""
        share = self.caps.get(tier)
        return None if share is None else self.share_tokens(share)

    @classmethod
    def for_model(
        cls,
        model: str,
        *,
        window: int | None = None,
        base_url: str | None = None,
        reserve: int | None = None,
        safety: int = 0,
        floors: Mapping[int, Share] | None = None,
        caps: Mapping[int, Share] | None = None,
    ) -> Budget:
        """The budget of a model; ``reserve`` defaults to its output limit, capped.

        ``window`` overrides the registry's (a local server's configured context, e.g.
        Ollama's ``num_ctx``) and makes any model usable, registered or not. Without it,
        ``base_url`` asks the local server there for the window it serves the model with
        (`ctxbudget.detect_window`: Ollama, vLLM, LM Studio; asked once per process). The
        default reserve is the model's maximum output tokens (4,096 when unknown), but at most
        a quarter of the window and at most 4,096 tokens (most replies are far shorter).

        Raises:
            UnknownModelError: the model is not registered and no ``window`` is given.
            InvalidBudgetError: a model a local server serves (``ollama:``, ``ollama/``,
                ``vllm:``, ``hosted_vllm/``, ``lmstudio:``... see `ctxbudget.tokens.names`)
                with neither ``window`` nor ``base_url``: its window is the server's.
            WindowDetectionError: ``base_url`` does not answer or does not serve the model.

        >>> Budget.for_model("ollama:llama3.1:8b", window=8192).window
        8192
        """
        from ctxbudget.tokens.models import lookup_model
        from ctxbudget.tokens.names import parse_model_name, served_window_message

        if window is None and base_url is not None:
            from ctxbudget.tokens.served import detect_window

            window = detect_window(model, base_url=base_url).window

        if window is None:
            parsed = parse_model_name(model, what="Budget.for_model(model)")
            if parsed.server is not None:
                raise InvalidBudgetError(served_window_message(model, parsed.server))
        limit: int | None = None
        try:
            info = lookup_model(model)
        except UnknownModelError:
            if window is None:
                raise
        else:
            limit = info.max_output_tokens
            window = info.context_window if window is None else window
        window = count(window, "window", least=None, error=InvalidBudgetError)
        if reserve is None:
            reserve = min(limit or 4096, 4096, window // 4)
        return cls(
            window=window,
            reserve=reserve,
            safety=safety,
            floors={} if floors is None else floors,
            caps={} if caps is None else caps,
        )

    @classmethod
    def coerce(cls, budget: Budget | int, *, where: str | None = None) -> Budget:
        """A `Budget` from a budget or a plain token count (the whole count is available).

        The one ``budget=`` boundary of every door: ``where`` (the door and argument as its
        caller wrote them, e.g. ``"CtxBudgetMemory(token_limit=)"``) starts a refusal's message.

        Raises:
            InvalidBudgetError: not a `Budget` nor a positive number of tokens.
        """
        if isinstance(budget, Budget):
            return budget
        hint = (
            "a Budget or a number of tokens, e.g. budget=4096 or budget=Budget.for_model('gpt-4o')"
        )
        try:
            window = count(budget, "budget", least=None, error=InvalidBudgetError, hint=hint)
            if window <= 0:  # named as the caller wrote it, not as Budget.window
                msg = f"budget must be a positive number of tokens, got {window}; {hint}"
                raise InvalidBudgetError(msg)
            return cls(window=window)
        except InvalidBudgetError as exc:
            if where is None:
                raise
            msg = f"{where}: {exc}"
            raise InvalidBudgetError(msg) from exc


def with_reply_room(
    budget: Budget,
    output: int | None,
    *,
    source: str = "the model",
    fix: str = "lower its output limit, or use a larger window",
) -> Budget:
    """``budget`` with room for a reply of ``output`` tokens: its reserve is at least that.

    A provider checks the prompt against the window less the reply's limit (Anthropic refuses
    a prompt that leaves less; a local server cuts the prompt's start), so a model set to write
    up to ``output`` tokens needs them free. A larger reserve is kept; safety, floors and caps
    are kept. ``output`` None: the model does not say, and ``budget`` is returned as it is.

    Args:
        budget: the budget of the model's window.
        output: the most tokens the model is set to generate (any integral type, numpy's
            too), or None.
        source: what set ``output``, as the caller would find it (``"the chat model"``,
            ``"llm.metadata.num_output of MockLLM"``): it starts a refusal's message.
        fix: what to do, ending a refusal's message.

    Raises:
        InvalidBudgetError: ``output`` is not a positive count, or leaves no room for the
            prompt in the window (the message gives the numbers).

    >>> with_reply_room(Budget(window=8192), 1024).available
    7168
    >>> with_reply_room(Budget(window=8192, reserve=2048), 1024).reserve
    2048
    """
    if output is None:
        return budget
    output = count(
        output,
        f"the reply's tokens ({source})",
        error=InvalidBudgetError,
        hint="the most tokens the model is set to generate, e.g. 1024",
    )
    if output <= budget.reserve:
        return budget
    if budget.window - output - budget.safety <= 0:
        msg = (
            f"{source} is set to generate up to {output:,} tokens, which leaves no room for the "
            f"prompt in its window of {budget.window:,} (safety {budget.safety:,}); {fix}"
        )
        raise InvalidBudgetError(msg)
    return replace(budget, reserve=output)
