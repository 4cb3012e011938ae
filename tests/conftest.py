"""Fixtures shared by the whole suite.

Add a fixture here only when several test packages need it; one package's helpers stay in that
package's own `conftest.py`.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime

import pytest
from hypothesis import settings

from sessiongate.core.clock import FakeClock

# No per-example time limit: these machines are shared, and a property test fails on what it
# finds, never on how long an example took (speed is measured in `sessiongate bench`).
settings.register_profile("sessiongate", deadline=None)
settings.load_profile("sessiongate")

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
