"""Two real `sessiongate run` processes on one PostgreSQL schema serve one Telegram bot by long
polling (the Bot API stub runs in this test's process): exactly one of them polls; SIGKILL it,
and the other takes the poll over, and every update is answered exactly once.

Skips without a PostgreSQL server (see tests/postgres_support.py).
"""

from __future__ import annotations

import asyncio
import collections
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from sessiongate.testing.stubs import telegram as tg
from sg_process import GatewayProcess, poll_until

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

pytestmark = pytest.mark.torture

ROLE = "telegram:polling"


@pytest.fixture
async def bot_api() -> AsyncIterator[tuple[tg.BotApiStub, str]]:
    stub = tg.BotApiStub()
    async with tg.serve_stub(stub) as url:
        yield stub, url


def _gateway(work: Path, store_url: str, api_url: str, token: str) -> GatewayProcess:
    work.mkdir(parents=True)
    config = work / "config.yaml"
    config.write_text(
        "store:\n"
        f"  url: '{store_url}'\n"
        "  lease_ttl_seconds: 3\n"
        "  heartbeat_seconds: 1\n"
        "platforms:\n"
        "  telegram:\n"
        f"    token: '{token}'\n"
        f"    base_url: '{api_url}'\n"
        "    poll_timeout_seconds: 1\n"
        "    allow_from: ['*']\n"
        "agent:\n"
        "  restart_drain_timeout: 1\n"
    )
    # A log of its own per instance (the default is beside the home).
    return GatewayProcess(work / "home", extra_args=("--config", str(config)))


async def _instances(url: str) -> list[dict[str, Any]]:
    async with httpx.AsyncClient() as client:
        answer = await client.get(f"{url}/v1/instances")
    answer.raise_for_status()
    return list(answer.json()["instances"])


async def _leaders(url: str) -> list[int]:
    """The pids of the live instances leading the Telegram poll."""
    return [
        int(i["pid"])
        for i in await _instances(url)
        if ROLE in i["leader_of"] and i["state"] == "live"
    ]


async def _wait_for_leader(url: str, among: list[GatewayProcess]) -> GatewayProcess:
    pids: list[int] = []

    async def one_leader() -> bool:
        nonlocal pids
        pids = await _leaders(url)
        return len(pids) == 1

    async with asyncio.timeout(60):
        while not await one_leader():  # noqa: ASYNC110 (another process's state)
            await asyncio.sleep(0.1)
    (leader,) = [g for g in among if g.proc is not None and g.proc.pid == pids[0]]
    return leader


async def test_one_instance_polls_and_a_killed_pollers_successor_answers_each_update_once(
    tmp_path, pg_schema, bot_api
):
    stub, api_url = bot_api
    a = _gateway(tmp_path / "a", pg_schema.url, api_url, stub.token)
    b = _gateway(tmp_path / "b", pg_schema.url, api_url, stub.token)
    try:
        url_a = await a.start()
        url_b = await b.start()
        leader = await _wait_for_leader(url_a, [a, b])
        follower = b if leader is a else a
        follower_url = url_b if leader is a else url_a
        sent = [f"before {n}" for n in range(5)]
        for n, text in enumerate(sent):
            stub.push_message(text, chat_id=100 + n, user_id=100 + n)
        await poll_until(lambda: len(stub.texts()) >= len(sent))
        assert (
            "leading the singular connection" not in follower.log_text()
        )  # the follower never led, nor polled

        assert await leader.kill() == -9
        after = [f"after {n}" for n in range(5)]
        for n, text in enumerate(after):
            # Old chats and new ones, while no instance polls.
            stub.push_message(text, chat_id=102 + n, user_id=102 + n)
        await poll_until(lambda: len(stub.texts()) >= len(sent) + len(after))
        assert await _leaders(follower_url) == [follower.proc.pid]  # type: ignore[union-attr]
        async with httpx.AsyncClient() as client:
            metrics = (await client.get(f"{follower_url}/metrics")).text
        assert 'sessiongate_leader{connection="telegram:polling"} 1.0' in metrics
        # The replies of any turn still to deliver are out before the count is final.
        assert await follower.terminate() == 0
    finally:
        await a.aclose()
        await b.aclose()
    answered = collections.Counter(stub.texts())
    assert answered == collections.Counter(f"echo: {t}" for t in sent + after)
    # Never two long polls at once: one poller before the kill, one after.
    assert stub.max_polls_in_flight == 1
    assert "leading the singular connection" in follower.log_text()
