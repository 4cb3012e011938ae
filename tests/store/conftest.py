from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from sessiongate import GatewayConfig, SessionStore

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from sessiongate.core.clock import FakeClock


@pytest.fixture
def store_dir(tmp_path: Path) -> Path:
    return tmp_path / "sessions"


@pytest.fixture
def make_store(store_dir: Path, clock: FakeClock) -> Iterator:
    opened: list[SessionStore] = []

    def make(**config: object) -> SessionStore:
        store = SessionStore(store_dir, GatewayConfig(**config), clock=clock)  # type: ignore[arg-type]
        opened.append(store)
        return store

    yield make
    for store in opened:
        store.close()


@pytest.fixture
def store(make_store) -> SessionStore:
    return make_store()
