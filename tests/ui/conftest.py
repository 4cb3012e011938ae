"""Fixtures of the dashboard tests (they live in `ui_harness`, which the tests import)."""

from __future__ import annotations

from ui_harness import api, browser, gateway, pages, pytest_runtest_makereport

__all__ = ["api", "browser", "gateway", "pages", "pytest_runtest_makereport"]
