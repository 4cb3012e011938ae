"""The jobs and dead-letter pages in a real Chromium against the shared gateway process.

A job is added through the page's form (a bad cron first: the API's own words show beside the
form and nothing is written), paused, run now and removed, each checked through the API too. A
dead delivery is written into the gateway's database as its delivery worker would write one,
listed with its reason, and retried from the page.
"""

from __future__ import annotations

import re
import uuid
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from playwright.sync_api import expect

from sessiongate import GatewayConfig, SessionStore
from sessiongate.core.source import SessionSource
from sessiongate.store.deliveries import DeliveryKind, DeliveryStore
from test_dashboard import chat, key_of

if TYPE_CHECKING:
    from sg_process import SyncGateway
    from ui_harness import Api, Pages


def test_a_job_is_added_in_the_form_paused_run_now_and_removed(pages: Pages, api: Api) -> None:
    chat_id = chat("job")
    api.send(chat_id, "hello")
    job_id = f"digest-{uuid.uuid4().hex[:6]}"
    page: Any = pages.new()
    page.goto(f"{pages.url}/ui/#/jobs")
    expect(page.locator("[data-nav=jobs]")).to_have_attribute("aria-current", "page")
    form = page.locator("#job-form")
    form.locator("[name=id]").fill(job_id)
    form.locator("[name=schedule_kind]").select_option("cron")
    form.locator("[name=schedule]").fill("* * *")
    form.locator("[name=target]").fill(key_of(chat_id))
    form.locator("[name=prompt]").fill("what happened today?")
    form.locator("button[type=submit]").click()
    error = page.locator("#job-error")
    expect(error).to_be_visible()
    expect(error).to_contain_text("cron: '* * *' has 3 fields")
    expect(error).to_contain_text("invalid_job")
    assert api.client.get(f"/v1/jobs/{job_id}").status_code == 404

    form.locator("[name=schedule]").fill("0 9 * * *")
    form.locator("button[type=submit]").click()
    row = page.locator(f'#job-list tr[data-job="{job_id}"]')
    expect(row).to_contain_text("cron 0 9 * * *")
    expect(row.locator(".job-state")).to_have_text("active")
    expect(row.locator(".last-run")).to_have_text("never")
    expect(error).to_be_hidden()
    created = api.client.get(f"/v1/jobs/{job_id}").json()
    assert (created["session_key"], created["prompt"]) == (key_of(chat_id), "what happened today?")

    row.get_by_role("button", name="Pause").click()
    expect(row.locator(".job-state")).to_have_text("paused")
    assert api.client.get(f"/v1/jobs/{job_id}").json()["paused"] is True

    row.get_by_role("button", name="Run now").click()
    history = page.locator(f'#job-history[data-job="{job_id}"]')
    expect(history.locator("#run-list tbody tr[data-run]")).to_have_count(1)
    (run,) = api.client.get(f"/v1/jobs/{job_id}/runs").json()["runs"]
    # The run's turn finishes (`job.finished` refreshes the page): delivered, here and in the list.
    expect(history.locator(".turn-state")).to_have_text(f"#{run['turn_id']} delivered")
    expect(row.locator(".last-run")).to_contain_text("delivered")
    # The run's turn is an ordinary one in the chat's lane: its reply reaches the transcript.
    page.goto(f"{pages.url}/ui/#/s/{quote(key_of(chat_id), safe='')}")
    page.wait_for_selector(".message.assistant >> text=echo: what happened today?")

    page.goto(f"{pages.url}/ui/#/jobs")
    row = page.locator(f'#job-list tr[data-job="{job_id}"]')
    row.get_by_role("button", name="Resume").click()
    expect(row.locator(".job-state")).to_have_text("active")
    row.get_by_role("button", name="Remove").click()
    page.click("#confirm-ok")
    expect(row).to_have_count(0)
    assert api.client.get(f"/v1/jobs/{job_id}").status_code == 404


def dead_delivery(gateway: SyncGateway, chat_id: str, text: str) -> int:
    """A delivery the platform refused for the last time, written into the gateway's store."""
    store = SessionStore(gateway.home / "sessions", GatewayConfig(mirror_sessions_json=False))
    try:
        rows = DeliveryStore(store)
        source = SessionSource(platform="api", chat_id=chat_id)
        # Not due for a retry of the gateway's own while it is being refused here.
        record = rows.open(DeliveryKind.NOTICE, source, text, first_try_after=3600)
        dead = rows.mark_failed(
            record,
            "HTTPError: 403 Forbidden: bot was blocked",
            max_attempts=1,
            backoff=1,
            backoff_max=1,
        )
        assert str(dead.status) == "dead"
        return dead.id
    finally:
        store.close()


def test_a_dead_delivery_is_listed_with_its_reason_and_retried(
    pages: Pages, api: Api, gateway: SyncGateway
) -> None:
    first = dead_delivery(gateway, chat("dead"), "the report you asked for")
    second = dead_delivery(gateway, chat("dead"), "another one")
    page: Any = pages.new()
    page.goto(f"{pages.url}/ui/#/deliveries")
    row = page.locator(f'#dead-letters tr[data-delivery="{first}"]')
    expect(row).to_contain_text("HTTPError: 403 Forbidden: bot was blocked")
    expect(row).to_contain_text("the report you asked for")
    expect(row.locator(".age")).to_have_text(re.compile(r"^\d+ (s|min)$"))
    expect(row).to_have_attribute("data-status", "dead")
    row.get_by_role("button", name="Retry").click()
    expect(row).to_have_count(0)
    sent = api.client.get("/v1/deliveries?status=sent").json()["deliveries"]
    assert first in [d["id"] for d in sent]
    other = page.locator(f'#dead-letters tr[data-delivery="{second}"]')
    expect(other).to_have_count(1)
    page.click("#retry-all")
    expect(other).to_have_count(0)
    expect(page.locator("#retry-all")).to_be_disabled()
    listed = api.client.get("/v1/deliveries?status=failed").json()["deliveries"]
    assert {first, second}.isdisjoint(d["id"] for d in listed)
