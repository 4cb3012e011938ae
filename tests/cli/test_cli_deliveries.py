"""`sessiongate deliveries list|retry` (the real command in a subprocess) over a home whose
store holds a sent, a failed and a dead delivery."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from sessiongate import GatewayConfig, SessionSource, SessionStore
from sessiongate.core.clock import FakeClock
from sessiongate.store.deliveries import STALE_REASON, DeliveryKind, DeliveryStore

# As tests/cli/conftest.py seeds its sessions: far in the past.
SEED_TIME = datetime(2020, 1, 1, tzinfo=UTC)


@pytest.fixture
def deliveries(home) -> dict[str, int]:
    store = SessionStore(home / "sessions", GatewayConfig(), clock=FakeClock(SEED_TIME))
    try:
        rows = DeliveryStore(store)
        source = SessionSource(platform="telegram", chat_id="c1", user_id="u1")
        sent = rows.open(DeliveryKind.NOTICE, source, "ok")
        rows.mark_sent(sent, "m-1")
        failed = rows.open(DeliveryKind.NOTICE, source, "refused")
        rows.mark_failed(failed, "HTTPError: 502", max_attempts=3, backoff=60, backoff_max=600)
        dead = rows.open(DeliveryKind.JOB, source, "late")
        rows.mark_dead(dead, STALE_REASON)
        return {"sent": sent.id, "failed": failed.id, "dead": dead.id}
    finally:
        store.close()


def test_the_dead_letter_list_and_its_retries(sg, home, deliveries):
    every = json.loads(sg("deliveries", "list", "--json", "--home", str(home)).stdout)
    assert [d["status"] for d in every["deliveries"]] == ["dead", "failed", "sent"]
    assert every["deliveries"][2]["message_id"] == "m-1"
    failed = sg("deliveries", "list", "--failed", "--home", str(home))
    assert failed.returncode == 0, failed.stderr
    lines = failed.stdout.splitlines()
    assert len(lines) == 2
    assert "stale" in lines[0]
    assert "HTTPError: 502" in lines[1]

    one = sg("deliveries", "retry", str(deliveries["dead"]), "--home", str(home))
    assert one.returncode == 0, one.stderr
    assert "1 deliveries queued" in one.stdout
    rest = sg("deliveries", "retry", "--all", "--home", str(home))
    assert "1 deliveries queued" in rest.stdout
    listed = json.loads(sg("deliveries", "list", "--json", "--home", str(home)).stdout)
    assert [d["status"] for d in listed["deliveries"]] == ["pending", "pending", "sent"]


def test_retry_refuses_what_it_cannot_do(sg, home, deliveries):
    sent = sg("deliveries", "retry", str(deliveries["sent"]), "--home", str(home))
    assert (sent.returncode, "sent already" in sent.stderr) == (1, True)
    both = sg("deliveries", "retry", "1", "--all", "--home", str(home))
    assert both.returncode == 2
