"""Fixtures shared by the whole suite.

Add a fixture here only when several test packages need it; one package's helpers stay in that
package's own `conftest.py`.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import settings

from sessiongate import GatewayConfig, SessionStore
from sessiongate.core.clock import FakeClock
from suite_support import Gateway

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Iterator

# No per-example time limit: these machines are shared, and a property test fails on what it
# finds, never on how long an example took (speed is measured in `sessiongate bench`).
settings.register_profile("sessiongate", deadline=None)
settings.load_profile("sessiongate")

# The folders whose files run longest start first, so the suite's four workers do not end
# waiting on one long file begun last (pytest-xdist hands out files in collection order).
LONGEST_FIRST = ("reliability", "bench", "adapters", "ui", "cli")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent

    def rank(item: pytest.Item) -> int:
        parts = item.path.relative_to(here).parts if item.path.is_relative_to(here) else ()
        top = parts[0] if len(parts) > 1 else ""
        return LONGEST_FIRST.index(top) if top in LONGEST_FIRST else len(LONGEST_FIRST)

    items.sort(key=rank)  # stable: a file's tests keep their order


# Where every test's clock starts: fixed, so ids and timestamps in assertions are stable.
CLOCK_START = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture(autouse=True)
def clean_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    """No `SESSIONGATE_*` variable of the developer's shell leaks into a test."""
    for name in list(os.environ):
        if name.startswith("SESSIONGATE_"):
            monkeypatch.delenv(name)


@pytest.fixture
def clock() -> FakeClock:
    """Time that only moves when a test calls `advance()`; nothing sleeps."""
    return FakeClock(CLOCK_START)


@pytest.fixture
def pg_schema():
    """A private PostgreSQL schema for this test (dropped after it); skips without a server."""
    from postgres_support import REQUIRED, Schema, server_problem

    problem = server_problem()
    if problem is not None:
        if REQUIRED:
            pytest.fail(problem)
        pytest.skip(problem)
    schema = Schema()
    yield schema
    schema.drop()


@pytest.fixture(scope="session")
def private_cluster():
    """A PostgreSQL cluster of this run's own (`pg_cluster.py`), which a test may restart or
    crash; skips when this machine cannot make one (the reason says why)."""
    from pg_cluster import PrivateCluster, cluster_problem

    problem = cluster_problem()
    if problem is not None:
        pytest.skip(problem)
    with PrivateCluster() as cluster:
        yield cluster


@pytest.fixture
def backend(request: pytest.FixtureRequest) -> str:
    """The store backend of this test: "sqlite" unless parametrised (indirectly) with
    "postgres"; the store suite runs every test on both (`tests/store/conftest.py`)."""
    return str(getattr(request, "param", "sqlite"))


@pytest.fixture
def store_url(backend: str, request: pytest.FixtureRequest) -> str | None:
    """The `store.url` of this test's stores: None (the embedded default) or its schema."""
    if backend == "sqlite":
        return None
    schema = request.getfixturevalue("pg_schema")
    return str(schema.url)


@pytest.fixture
def store_dir(tmp_path: Path) -> Path:
    return tmp_path / "home" / "sessions"


@pytest.fixture
def make_store(
    store_dir: Path, clock: FakeClock, store_url: str | None
) -> Iterator[Callable[..., SessionStore]]:
    """`make_store(**config)` or `make_store(config)`: a store on this test's backend, closed
    after the test. A given `GatewayConfig` gets the backend's `store.url` when it has none."""
    opened: list[SessionStore] = []

    def make(config: GatewayConfig | None = None, **fields: Any) -> SessionStore:
        if config is None:
            if store_url is not None:
                fields.setdefault("store", {"url": store_url})
            config = GatewayConfig(**fields)
        elif store_url is not None and config.store.url is None:
            config = config.model_copy(
                update={"store": config.store.model_copy(update={"url": store_url})}
            )
        store = SessionStore(store_dir, config, clock=clock)
        opened.append(store)
        return store

    yield make
    for store in opened:
        store.close()


@pytest.fixture
async def make_gateway(
    tmp_path: Path, clock: FakeClock, make_store: Callable[..., SessionStore]
) -> AsyncIterator[Callable[..., Any]]:
    """`await make_gateway(agent, **config)`: a started `GatewayRunner` on this test's store
    backend, with a loopback platform and `agent` (by default a `ScriptedAgent` answering
    "ok") serving every key; stopped after the test. (The gateway package has its own, driven
    by `Hub` agents.)"""
    from sessiongate.gateway import GatewayRunner
    from sessiongate.testing import LoopbackAdapter, ScriptedAgent

    made: list[Gateway] = []

    async def make(agent: Any = None, **fields: Any) -> Gateway:
        agent = ScriptedAgent(default="ok") if agent is None else agent
        store = make_store(**fields)
        adapter = LoopbackAdapter()
        home = tmp_path / "home"
        runner = GatewayRunner(
            store,
            store.config,
            home=home,
            clock=clock,
            agent_factory=lambda key: agent,
            adapters=[adapter],
        )
        gateway = Gateway(runner, store, adapter, agent, home, store.config)
        made.append(gateway)
        await runner.start()
        return gateway

    yield make
    for gateway in made:
        release = getattr(gateway.agent, "release", None)
        if release is not None:
            release.set()
        await gateway.runner.stop()
