"""A real gateway process, a real Chromium, and signed-in pages for the dashboard tests.

The browser is Debian's Chromium driven by Playwright (`executable_path`); Playwright's own
browser download is never used. Where Chromium is not installed the tests skip with the line
that installs it. A failing test leaves a screenshot under `test-artifacts/ui/`.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest

# The gateway-process helper the reliability tests use.
sys.path.insert(0, str(Path(__file__).parents[1] / "reliability"))

from sg_process import SyncGateway, clean_env

if TYPE_CHECKING:
    from collections.abc import Iterator

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
TOKEN = "ui-test-token-4f9d"
ARTIFACTS = Path(__file__).parents[2] / "test-artifacts" / "ui"

if not Path(CHROMIUM).exists():
    pytest.skip(
        "Chromium is not installed: apt-get install chromium (.ci/run does this)",
        allow_module_level=True,
    )
sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright (dev extra)")


class Api:
    """The gateway's JSON API with the bearer token, for arranging and checking state."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.client = httpx.Client(
            base_url=url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30
        )

    def send(self, chat_id: str, text: str, **fields: Any) -> dict[str, Any]:
        body = {"chat_id": chat_id, "chat_type": "dm", "user_id": chat_id, "text": text, **fields}
        response = self.client.post("/v1/messages", json=body)
        response.raise_for_status()
        result: dict[str, Any] = response.json()
        return result

    def row(self, key: str) -> dict[str, Any]:
        response = self.client.get(f"/v1/sessions/{quote(key)}")
        response.raise_for_status()
        result: dict[str, Any] = response.json()
        return result

    def patch(self, key: str, **body: Any) -> dict[str, Any]:
        response = self.client.patch(f"/v1/sessions/{quote(key)}", json=body)
        response.raise_for_status()
        result: dict[str, Any] = response.json()
        return result


def quote(key: str) -> str:
    from urllib.parse import quote as _quote

    return _quote(key, safe="")


@pytest.fixture(scope="session")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SyncGateway]:
    home = tmp_path_factory.mktemp("ui") / "home"
    env = clean_env(SESSIONGATE_API__TOKEN=TOKEN)
    process = SyncGateway(home, env=env)
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture(scope="session")
def api(gateway: SyncGateway) -> Iterator[Api]:
    client = Api(gateway.url)
    yield client
    client.client.close()


# One browser per test file, not per run: Playwright's sync API keeps an event loop running
# on the main thread while it is open, and the asyncio tests of any file after it (the suite
# runs files in any order across workers) could not start their own.
@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
        )
        yield chromium
        chromium.close()


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    setattr(item, f"report_{report.when}", report)
    return report


class Pages:
    """Browser tabs of one test; each is screenshotted if the test fails."""

    def __init__(self, browser: Any, url: str) -> None:
        self.browser = browser
        self.url = url
        self.contexts: list[Any] = []
        self.dialogs: list[str] = []

    def new(self, *, sign_in: bool = True, width: int = 1280, height: int = 800) -> Any:
        context = self.browser.new_context(viewport={"width": width, "height": height})
        self.contexts.append(context)
        page = context.new_page()
        page.set_default_timeout(15_000)
        # An alert is what a successful script injection would do: record any dialog.
        page.on("dialog", lambda d: (self.dialogs.append(d.message), d.dismiss()))
        if sign_in:
            self.sign_in(page)
        return page

    def tab(self, page: Any) -> Any:
        """Another tab of the same signed-in browser."""
        other = page.context.new_page()
        other.set_default_timeout(15_000)
        return other

    def sign_in(self, page: Any) -> None:
        page.goto(f"{self.url}/ui/")
        page.fill("#token", TOKEN)
        page.click("button[type=submit]")
        page.wait_for_selector("#main h1")

    def close(self, failed_name: str | None) -> None:
        for n, context in enumerate(self.contexts):
            if failed_name is not None:
                ARTIFACTS.mkdir(parents=True, exist_ok=True)
                for m, page in enumerate(context.pages):
                    page.screenshot(path=str(ARTIFACTS / f"{failed_name}-{n}-{m}.png"))
            context.close()


@pytest.fixture
def pages(browser: Any, gateway: SyncGateway, request: pytest.FixtureRequest) -> Iterator[Pages]:
    tabs = Pages(browser, gateway.url)
    yield tabs
    report = getattr(request.node, "report_call", None)
    failed = report is not None and report.failed
    tabs.close(request.node.name if failed else None)
