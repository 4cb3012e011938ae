"""Fixtures for the gateway tests: a real runner on a real store under tmp_path, a loopback
platform, and `Hub` agents the test drives (see `gateway_support.py`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
from gateway_support import Gateway, Hub

from sessiongate import GatewayConfig, SessionStore
from sessiongate.adapters.loopback import LoopbackAdapter
from sessiongate.gateway import GatewayRunner

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

    from sessiongate.core.clock import FakeClock


@pytest.fixture
async def make_gateway(tmp_path: Path, clock: FakeClock) -> AsyncIterator[Any]:
    """`await make_gateway(**config)`: a started runner; `start=False` to start it yourself,
    `home=` to reopen an existing home (a restart), `hub=`/`adapter=` to share them."""
    made: list[Gateway] = []

    async def make(
        *,
        start: bool = True,
        home: Path | None = None,
        hub: Hub | None = None,
        adapter: LoopbackAdapter | None = None,
        **config: Any,
    ) -> Gateway:
        home = home or tmp_path / "home"
        cfg = GatewayConfig(**config)
        store = SessionStore(home / "sessions", cfg, clock=clock)
        hub = hub or Hub()
        adapter = adapter or LoopbackAdapter()
        runner = GatewayRunner(
            store, cfg, home=home, agent_factory=hub.factory, clock=clock, adapters=[adapter]
        )
        gateway = Gateway(runner, store, adapter, hub, home, cfg)
        made.append(gateway)
        if start:
            await runner.start()
        return gateway

    yield make
    for gateway in made:
        gateway.hub.release_all()
        if gateway.adapter.hold_sends is not None:
            gateway.adapter.hold_sends.set()
        await gateway.runner.stop()
        gateway.store.close()


@pytest.fixture
async def gw(make_gateway: Any) -> Gateway:
    gateway: Gateway = await make_gateway()
    return gateway
