"""The store suite runs on every backend: each store test gets `backend` = "sqlite" and
"postgres" (one private schema per test), unless marked `sqlite_only` because it reaches
into SQLite's own files or connection."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from sessiongate import GatewayConfig, SessionStore

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from sessiongate.core.clock import FakeClock

BACKENDS = ["sqlite", "postgres"]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "backend" in metafunc.fixturenames:
        sqlite_only = metafunc.definition.get_closest_marker("sqlite_only") is not None
        metafunc.parametrize("backend", ["sqlite"] if sqlite_only else BACKENDS, indirect=True)


@pytest.fixture
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def store_url(backend: str, request: pytest.FixtureRequest) -> str | None:
    """The `store.url` of this test's stores: None (the embedded default) or its schema."""
    if backend == "sqlite":
        return None
    schema = request.getfixturevalue("pg_schema")
    return str(schema.url)


@pytest.fixture
def store_dir(tmp_path: Path) -> Path:
    return tmp_path / "sessions"


@pytest.fixture
def make_store(store_dir: Path, clock: FakeClock, store_url: str | None) -> Iterator:
    opened: list[SessionStore] = []

    def make(**config: object) -> SessionStore:
        if store_url is not None:
            config.setdefault("store", {"url": store_url})
        store = SessionStore(store_dir, GatewayConfig(**config), clock=clock)  # type: ignore[arg-type]
        opened.append(store)
        return store

    yield make
    for store in opened:
        store.close()


@pytest.fixture
def store(make_store) -> SessionStore:
    return make_store()
