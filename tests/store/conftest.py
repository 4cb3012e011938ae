"""The store suite runs on every backend: each store test gets `backend` = "sqlite" and
"postgres" (one private schema per test), unless marked `sqlite_only` because it reaches
into SQLite's own files or connection. `make_store` and `backend` are the root conftest's."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pathlib import Path

    from sessiongate import SessionStore


BACKENDS = ["sqlite", "postgres"]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "backend" in metafunc.fixturenames:
        sqlite_only = metafunc.definition.get_closest_marker("sqlite_only") is not None
        metafunc.parametrize("backend", ["sqlite"] if sqlite_only else BACKENDS, indirect=True)


@pytest.fixture
def store_dir(tmp_path: Path) -> Path:
    return tmp_path / "sessions"


@pytest.fixture
def store(make_store) -> SessionStore:
    return make_store()
