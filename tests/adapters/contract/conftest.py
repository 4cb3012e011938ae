"""The `harness` fixture: the contract suite runs once per adapter in `HARNESSES`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
from discord_harness import DiscordHarness
from matrix_harness import MatrixHarness
from signal_harness import SignalHarness
from slack_harness import SlackHarness
from telegram_harness import TelegramHarness
from whatsapp_harness import WhatsAppHarness

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable
    from pathlib import Path

    from harness import Harness

    from sessiongate.core.clock import FakeClock

# name -> factory(tmp_path, clock). Slack and Discord add theirs here.
HARNESSES: dict[str, Callable[[Path, FakeClock], Any]] = {
    "discord": DiscordHarness,
    "matrix": MatrixHarness,
    "signal": SignalHarness,
    "slack": SlackHarness,
    "telegram": TelegramHarness,
    "whatsapp": WhatsAppHarness,
}


@pytest.fixture(params=sorted(HARNESSES))
async def make_harness(
    request: pytest.FixtureRequest, tmp_path: Path, clock: FakeClock
) -> AsyncIterator[Callable[..., Any]]:
    """`await make_harness(**platform_config)`: a started harness for the adapter."""
    made: list[Harness] = []

    async def make(
        prepare: Callable[[Harness], None] | None = None, **platform_config: Any
    ) -> Harness:
        """A config value may be a callable of the harness (to name its chats)."""
        harness: Harness = HARNESSES[request.param](tmp_path / f"h{len(made)}", clock)
        made.append(harness)
        if prepare is not None:
            prepare(harness)
        config = {k: v(harness) if callable(v) else v for k, v in platform_config.items()}
        await harness.start(**config)
        return harness

    yield make
    for harness in made:
        await harness.close()


@pytest.fixture
async def harness(make_harness: Callable[..., Any]) -> Harness:
    h: Harness = await make_harness()
    return h
