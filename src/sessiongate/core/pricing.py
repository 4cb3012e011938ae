"""What a turn cost, from its token counts and its model's price (a pure rule).

Prices are US dollars per million tokens (`pricing.<model>` in the configuration). Input
tokens count every prompt token, cached ones included, as OpenAI-compatible APIs report them,
so the cached share is taken out of the input price and charged at the cache prices (which
default to the input price).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Mapping

    from sessiongate.core.config import GatewayConfig, ModelPrice

__all__ = ["estimate_cost_usd", "price_of", "turn_cost"]

_MILLION = 1_000_000


def price_of(model: str | None, table: Mapping[str, ModelPrice]) -> ModelPrice | None:
    """The price of `model`: its own entry, else that of its name without a provider prefix
    (`openai/gpt-4o` is priced as `gpt-4o`); None when neither is listed."""
    if model is None:
        return None
    price = table.get(model)
    if price is None and "/" in model:
        price = table.get(model.rpartition("/")[2])
    return price


def estimate_cost_usd(
    price: ModelPrice,
    *,
    input_tokens: int,
    output_tokens: int,
    cache_read_tokens: int = 0,
    cache_write_tokens: int = 0,
) -> float:
    cache_read = price.cache_read_per_million
    cache_write = price.cache_write_per_million
    uncached = max(0, input_tokens - cache_read_tokens - cache_write_tokens)
    cost = (
        uncached * price.input_per_million
        + output_tokens * price.output_per_million
        + cache_read_tokens * (price.input_per_million if cache_read is None else cache_read)
        + cache_write_tokens * (price.input_per_million if cache_write is None else cache_write)
    )
    return cost / _MILLION


def turn_cost(
    config: GatewayConfig,
    session_key: str,
    model: str | None,
    *,
    input_tokens: int,
    output_tokens: int,
    cache_read_tokens: int = 0,
    cache_write_tokens: int = 0,
    reported: float | None = None,
) -> float | None:
    """A turn's estimated cost: priced from `config.pricing` by the model in use (`model`, the
    session's choice, else its agent's configured model); for a model with no price, what the
    agent `reported` (the echo agent's 0.0), else None (unknown)."""
    if not config.pricing:
        return reported
    price = price_of(model or config.model_of(session_key), config.pricing)
    if price is None:
        return reported
    return estimate_cost_usd(
        price,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        cache_read_tokens=cache_read_tokens,
        cache_write_tokens=cache_write_tokens,
    )
