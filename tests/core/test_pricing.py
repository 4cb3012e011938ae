"""Turn cost from usage and the model's price."""

from __future__ import annotations

import pytest

from sessiongate.core.config import GatewayConfig, ModelPrice
from sessiongate.core.pricing import estimate_cost_usd, price_of, turn_cost

PRICE = ModelPrice(input_per_million=2.0, output_per_million=8.0, cache_read_per_million=0.5)


def test_cached_input_is_charged_at_the_cache_price():
    cost = estimate_cost_usd(
        PRICE, input_tokens=1_000_000, output_tokens=500_000, cache_read_tokens=400_000
    )
    assert cost == pytest.approx(600_000 * 2e-6 + 500_000 * 8e-6 + 400_000 * 0.5e-6)


def test_cache_writes_default_to_the_input_price():
    cost = estimate_cost_usd(PRICE, input_tokens=100, output_tokens=0, cache_write_tokens=100)
    assert cost == pytest.approx(100 * 2e-6)


def test_a_provider_prefix_falls_back_to_the_bare_model_name():
    table = {"gpt-4o": PRICE}
    assert price_of("openai/gpt-4o", table) is PRICE
    assert price_of("gpt-4o", table) is PRICE
    assert price_of("other", table) is None
    assert price_of(None, table) is None


def test_the_turn_is_priced_by_the_session_model_else_the_agent_model():
    config = GatewayConfig(
        agents={"support": {"kind": "openai", "model": "cheap"}},
        pricing={"cheap": {"input_per_million": 1, "output_per_million": 1}, "big": PRICE},
    )
    key = "agent:support:api:dm:a"
    usage = {"input_tokens": 1000, "output_tokens": 1000}
    assert turn_cost(config, key, None, **usage) == pytest.approx(0.002)
    assert turn_cost(config, key, "big", **usage) == pytest.approx(0.01)
    assert turn_cost(config, key, "unlisted", **usage) is None
    # The echo agent (main here) has no model: its own figure stands.
    assert turn_cost(config, "agent:main:api:dm:a", None, **usage, reported=0.0) == 0.0
