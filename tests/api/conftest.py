"""An app over a real store (SQLite under tmp_path) and a real runner with the echo agent."""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient

from sessiongate import GatewayConfig, SessionStore
from sessiongate.agents import build_agent_factory
from sessiongate.api.app import create_app
from sessiongate.gateway import GatewayRunner

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path

    from sessiongate.core.clock import FakeClock

TOKEN = "s3cret-token"


def path_of(key: str, suffix: str = "") -> str:
    """The URL path of a session key (percent-encoded, `/` included)."""
    return f"/v1/sessions/{quote(key, safe='')}{suffix}"


@pytest.fixture
def key_path() -> Callable[..., str]:
    return path_of


@pytest.fixture
def config() -> GatewayConfig:
    return GatewayConfig()


@pytest.fixture
def store(config: GatewayConfig, make_store: Callable[..., SessionStore]) -> SessionStore:
    """The app's store, on the test's backend (the root conftest's `make_store`)."""
    return make_store(config)


@pytest.fixture
def runner(tmp_path: Path, store: SessionStore, config: GatewayConfig, clock: FakeClock):
    return GatewayRunner(
        store,
        config,
        home=tmp_path / "home",
        clock=clock,
        agent_factory=build_agent_factory(config),
    )


@pytest.fixture
def app(runner, store: SessionStore, config: GatewayConfig):
    return create_app(runner, store, config)


@pytest.fixture
def client(app, runner) -> Iterator[TestClient]:
    """A TestClient whose event loop also runs the runner (started and stopped around it)."""
    with TestClient(app, base_url="http://127.0.0.1", raise_server_exceptions=False) as client:
        portal = client.portal
        assert portal is not None
        portal.call(runner.start)
        try:
            yield client
        finally:
            portal.call(runner.stop)


@pytest.fixture
def send(client: TestClient) -> Callable[..., dict]:
    """POST /v1/messages and return the JSON body (asserting a 2xx)."""

    def send(text: str, chat_id: str = "alice", **fields: object) -> dict:
        response = client.post("/v1/messages", json={"chat_id": chat_id, "text": text, **fields})
        assert response.status_code < 300, response.text
        return response.json()

    return send
