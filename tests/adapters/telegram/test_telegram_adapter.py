"""The Telegram adapter beyond the contract suite: the webhook route on the gateway's own HTTP
server, thread forks, the poll watchdog, a second poller, and start-up failures."""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import TYPE_CHECKING, Any

import httpx
import pytest
import uvicorn

from sessiongate import GatewayConfig, SessionStore
from sessiongate.adapters.kit import ClockSleep, CredentialsError, PlatformError
from sessiongate.adapters.telegram import TelegramAdapter
from sessiongate.agents import build_agent_factory
from sessiongate.api.app import create_app
from sessiongate.core.config import TelegramConfig
from sessiongate.gateway import GatewayRunner
from sessiongate.testing.stubs import telegram as tg

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

SECRET = "hook-secret-0123456789"
HANG_GUARD = 15.0


@contextlib.asynccontextmanager
async def serving(app: Any) -> AsyncIterator[str]:
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="off")
    )
    task = asyncio.create_task(server.serve())
    try:
        async with asyncio.timeout(HANG_GUARD):
            while not server.started:  # noqa: ASYNC110  # uvicorn offers no event for it
                await asyncio.sleep(0.01)
        yield f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"
    finally:
        server.should_exit = True
        await task


class Gateway:
    def __init__(self, tmp_path: Path, clock, url: str, stub: tg.BotApiStub, **settings: Any):
        section = {"token": stub.token, "base_url": url, "poll_timeout_seconds": 1}
        section["allow_from"] = ["*"]
        shared = settings.pop("group_sessions_per_user", True)
        section.update(settings)
        self.config = GatewayConfig(platforms={"telegram": section}, group_sessions_per_user=shared)
        self.store = SessionStore(tmp_path / "home" / "sessions", self.config, clock=clock)
        platform = self.config.platforms["telegram"]
        assert isinstance(platform, TelegramConfig)
        self.adapter = TelegramAdapter(platform, clock=clock, sleep=ClockSleep(clock))
        self.runner = GatewayRunner(
            self.store,
            self.config,
            home=tmp_path / "home",
            agent_factory=build_agent_factory(self.config),
            clock=clock,
            adapters=[self.adapter],
        )

    async def close(self) -> None:
        await self.runner.stop()
        self.store.close()


@pytest.fixture
async def stub() -> AsyncIterator[tuple[tg.BotApiStub, str]]:
    bot_api = tg.BotApiStub()
    async with tg.serve_stub(bot_api) as url:
        yield bot_api, url


@pytest.fixture
async def webhook(tmp_path, clock, stub) -> AsyncIterator[tuple[tg.BotApiStub, str, Gateway]]:
    bot_api, url = stub
    gateway = Gateway(
        tmp_path,
        clock,
        url,
        bot_api,
        mode="webhook",
        webhook_secret=SECRET,
        webhook_url="https://example.invalid/hooks/telegram",
    )
    await gateway.runner.start()
    app = create_app(gateway.runner, gateway.store, gateway.config)
    app.state.hooks = {"telegram": gateway.adapter}
    try:
        async with serving(app) as base:
            yield bot_api, base, gateway
    finally:
        await gateway.close()


def update(update_id: int, text: str) -> dict[str, Any]:
    return {
        "update_id": update_id,
        "message": {
            "message_id": update_id,
            "from": {"id": 7, "is_bot": False, "first_name": "Ann", "username": "ann"},
            "chat": {"id": 7, "type": "private", "first_name": "Ann"},
            "date": 1767225600,
            "text": text,
        },
    }


async def test_a_signed_webhook_update_is_answered_once_even_when_retried(webhook):
    bot_api, base, gateway = webhook
    assert bot_api.webhook is not None
    assert bot_api.webhook["secret_token"] == SECRET
    headers = {"X-Telegram-Bot-Api-Secret-Token": SECRET}
    async with httpx.AsyncClient(base_url=base, timeout=60.0) as client:
        first = await client.post("/hooks/telegram", json=update(1, "via hook"), headers=headers)
        again = await client.post("/hooks/telegram", json=update(1, "via hook"), headers=headers)
    assert (first.status_code, again.status_code) == (200, 200)
    await asyncio.wait_for(gateway.runner.wait_idle(), HANG_GUARD)
    assert bot_api.texts() == ["echo: via hook"]


@pytest.mark.parametrize(
    "headers",
    [{}, {"X-Telegram-Bot-Api-Secret-Token": "wrong"}, {"Authorization": f"Bearer {SECRET}"}],
    ids=["unsigned", "wrong-secret", "bearer-is-not-a-signature"],
)
async def test_an_unsigned_webhook_is_401_and_its_body_never_parsed(webhook, headers):
    _, base, gateway = webhook
    async with httpx.AsyncClient(base_url=base, timeout=60.0) as client:
        # Not JSON at all: a parser would answer 400; the secret check answers first.
        response = await client.post("/hooks/telegram", content=b"{not json", headers=headers)
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "unauthorized"
    assert gateway.adapter.counters.events == 0


async def test_a_signed_body_that_is_not_an_update_is_400(webhook):
    _, base, _ = webhook
    headers = {"X-Telegram-Bot-Api-Secret-Token": SECRET}
    async with httpx.AsyncClient(base_url=base, timeout=60.0) as client:
        response = await client.post("/hooks/telegram", content=b"[1, 2]", headers=headers)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_update"


async def test_webhook_mode_without_a_secret_refuses_to_start(tmp_path, clock, stub):
    bot_api, url = stub
    gateway = Gateway(tmp_path, clock, url, bot_api, mode="webhook")
    with pytest.raises(CredentialsError, match="webhook_secret"):
        await gateway.runner.start()
    await gateway.close()


async def test_a_refused_token_fails_the_start_without_retrying(tmp_path, clock, stub):
    bot_api, url = stub
    gateway = Gateway(tmp_path, clock, url, bot_api, token="1000:WRONG")
    with pytest.raises(CredentialsError, match="refused the bot token"):
        await gateway.runner.start()
    await gateway.close()
    assert bot_api.unauthorized == 1  # one getMe, no retry loop


async def test_the_first_message_of_a_new_topic_forks_the_group_session(tmp_path, clock, stub):
    bot_api, url = stub
    # A shared group lane: everyone in the topic has seen what it holds, so it may be forked.
    gateway = Gateway(tmp_path, clock, url, bot_api, group_sessions_per_user=False)
    await gateway.runner.start()
    try:
        group = -1001
        mention = [{"offset": 0, "length": 7, "type": "mention"}]
        bot_api.push_message(
            "@sg_bot remember the word kiwi",
            chat_id=group,
            chat_type="supergroup",
            entities=mention,
        )
        await asyncio.wait_for(gateway.adapter.wait_events(1), HANG_GUARD)
        await asyncio.wait_for(gateway.runner.wait_idle(), HANG_GUARD)
        topic_chat = {"id": group, "type": "supergroup", "title": "g", "is_forum": True}
        bot_api.push_message(
            "@sg_bot what was the word?",
            chat_id=group,
            chat_type="supergroup",
            entities=mention,
            chat=topic_chat,
            message_thread_id=55,
            is_topic_message=True,
        )
        await asyncio.wait_for(gateway.adapter.wait_events(2), HANG_GUARD)
        await asyncio.wait_for(gateway.runner.wait_idle(), HANG_GUARD)
        thread = next(s for s in gateway.store.list_sessions() if s.origin.thread_id == "55")
        assert thread.forked_from_parent
        contents = [m["content"] for m in gateway.store.load_transcript(thread.session_id)]
        assert any("kiwi" in str(c) for c in contents)
        # The reply went to the topic.
        assert bot_api.sent[-1]["message_thread_id"] == "55"
    finally:
        await gateway.close()


async def test_a_topic_under_per_user_group_lanes_starts_isolated(tmp_path, clock, stub):
    bot_api, url = stub
    gateway = Gateway(tmp_path, clock, url, bot_api)  # the defaults: per-user group lanes
    await gateway.runner.start()
    try:
        group = -1001
        mention = [{"offset": 0, "length": 7, "type": "mention"}]
        bot_api.push_message(
            "@sg_bot remember the word kiwi", chat_id=group, chat_type="supergroup",
            entities=mention,
        )  # fmt: skip
        await asyncio.wait_for(gateway.adapter.wait_events(1), HANG_GUARD)
        await asyncio.wait_for(gateway.runner.wait_idle(), HANG_GUARD)
        topic_chat = {"id": group, "type": "supergroup", "title": "g", "is_forum": True}
        bot_api.push_message(
            "@sg_bot what was the word?", chat_id=group, chat_type="supergroup",
            entities=mention, chat=topic_chat, message_thread_id=55, is_topic_message=True,
        )  # fmt: skip
        await asyncio.wait_for(gateway.adapter.wait_events(2), HANG_GUARD)
        await asyncio.wait_for(gateway.runner.wait_idle(), HANG_GUARD)
        thread = next(s for s in gateway.store.list_sessions() if s.origin.thread_id == "55")
        assert thread.extra.get("fork_refused") is True
        contents = [m["content"] for m in gateway.store.load_transcript(thread.session_id)]
        assert not any("kiwi" in str(c) for c in contents)
    finally:
        await gateway.close()


async def test_a_wedged_poll_is_rebuilt_by_the_watchdog(tmp_path, clock, stub):
    bot_api, url = stub
    bot_api.hang_get_updates = True
    gateway = Gateway(tmp_path, clock, url, bot_api, poll_stall_seconds=0.2)
    await gateway.runner.start()
    try:
        async with asyncio.timeout(HANG_GUARD):
            while gateway.adapter.counters.stalls < 1:  # noqa: ASYNC110  # a real deadline
                await asyncio.sleep(0.05)
        bot_api.hang_get_updates = False
        bot_api._unhang.set()
        bot_api.push_message("after the stall")
        await asyncio.wait_for(gateway.adapter.wait_events(1), HANG_GUARD)
        await asyncio.wait_for(gateway.runner.wait_idle(), HANG_GUARD)
        assert bot_api.texts() == ["echo: after the stall"]
        assert gateway.adapter.counters.reconnects >= 1
    finally:
        await gateway.close()


async def test_a_second_poller_for_one_token_is_refused(tmp_path, clock, stub):
    bot_api, url = stub
    first = Gateway(tmp_path / "a", clock, url, bot_api)
    second = Gateway(tmp_path / "b", clock, url, bot_api)
    await first.runner.start()
    try:
        with pytest.raises(PlatformError, match="already polling"):
            await second.runner.start()
    finally:
        await second.close()
        await first.close()


async def test_poll_errors_back_off_with_jitter_and_recover(tmp_path, clock, stub):
    bot_api, url = stub
    bot_api.fail("getUpdates", tg.SERVER_ERROR, times=3)
    gateway = Gateway(tmp_path, clock, url, bot_api)
    await gateway.runner.start()
    try:
        bot_api.push_message("after three failures")
        await asyncio.wait_for(gateway.adapter.wait_events(1), HANG_GUARD)
        await asyncio.wait_for(gateway.runner.wait_idle(), HANG_GUARD)
        assert bot_api.texts() == ["echo: after three failures"]
        sleeper = gateway.adapter.sleep
        assert isinstance(sleeper, ClockSleep)
        assert len(sleeper.waits) == 3
        assert sleeper.waits[0] < sleeper.waits[1] < sleeper.waits[2]
    finally:
        await gateway.close()


async def test_a_poll_failing_for_long_reports_degraded_until_it_recovers(tmp_path, clock, stub):
    """#2: after `max_attempts` failures in a row the receiver says so (still retrying, the
    backoff capped), and the first good poll clears it."""
    bot_api, url = stub
    bot_api.fail("getUpdates", tg.SERVER_ERROR, times=12)
    gateway = Gateway(tmp_path, clock, url, bot_api)
    seen: list[bool] = []
    bot_api.on_call = lambda method, _params: (
        seen.append(gateway.adapter.statistics().degraded) if method == "getUpdates" else None
    )
    await gateway.runner.start()
    try:
        bot_api.push_message("after a long outage")
        await asyncio.wait_for(gateway.adapter.wait_events(1), HANG_GUARD)
        await asyncio.wait_for(gateway.runner.wait_idle(), HANG_GUARD)
        assert bot_api.texts() == ["echo: after a long outage"]
        assert seen[:10] == [False] * 10
        assert seen[10:13] == [True, True, True]
        stats = gateway.adapter.statistics()
        assert not stats.degraded
        assert stats.receive_failures == 0
        sleeper = gateway.adapter.sleep
        assert isinstance(sleeper, ClockSleep)
        assert len(sleeper.waits) == 12
        assert max(sleeper.waits) <= gateway.adapter.watchdog.backoff.cap
        assert sleeper.waits[0] < sleeper.waits[4]
    finally:
        await gateway.close()


@pytest.mark.parametrize("drop", [False, True], ids=["kept", "dropped"])
async def test_updates_that_waited_while_down_follow_drop_pending_updates(
    tmp_path, clock, stub, drop
):
    """#12: the backlog at start is answered by default, dropped with drop_pending_updates."""
    bot_api, url = stub
    bot_api.push_message("sent while the gateway was down")
    gateway = Gateway(tmp_path, clock, url, bot_api, drop_pending_updates=drop)
    await gateway.runner.start()
    try:
        bot_api.push_message("sent after the start")
        await asyncio.wait_for(gateway.adapter.wait_events(1 if drop else 2), HANG_GUARD)
        await asyncio.wait_for(gateway.runner.wait_idle(), HANG_GUARD)
        expected = ["echo: sent after the start"]
        if not drop:
            expected.insert(0, "echo: sent while the gateway was down")
        assert bot_api.texts() == expected
    finally:
        await gateway.close()


async def test_a_409_conflict_waits_instead_of_hot_looping(tmp_path, clock, stub):
    bot_api, url = stub
    bot_api.fail("getUpdates", tg.Fault(409, "Conflict: terminated by other getUpdates request"))
    gateway = Gateway(tmp_path, clock, url, bot_api)
    await gateway.runner.start()
    try:
        bot_api.push_message("eventually")
        await asyncio.wait_for(gateway.adapter.wait_events(1), HANG_GUARD)
        sleeper = gateway.adapter.sleep
        assert isinstance(sleeper, ClockSleep)
        assert sleeper.waits[0] >= 15.0
    finally:
        await gateway.close()


async def test_a_file_reference_resolves_through_get_file(tmp_path, clock, stub):
    bot_api, url = stub
    bot_api.files["F1"] = {"file_path": "photos/f1.jpg", "file_size": 10}
    gateway = Gateway(tmp_path, clock, url, bot_api)
    await gateway.runner.start()
    try:
        found = await gateway.adapter.resolve_media("F1")
        assert found == f"{url}/file/bot{bot_api.token}/photos/f1.jpg"
    finally:
        await gateway.close()


def test_the_fixture_updates_are_valid_json_updates():
    # Keeps the fixtures honest: each is one update with an id and exactly one kind.
    from pathlib import Path

    for path in (Path(__file__).parent / "fixtures").glob("*.json"):
        data = json.loads(path.read_text())
        assert isinstance(data["update_id"], int)
        assert len(data) == 2


def _nested(depth: int) -> bytes:
    return b'{"update_id": 5, "message": ' + b"[" * depth + b"]" * depth + b"}"


def _with(message_fields: dict[str, Any], **update_fields: Any) -> bytes:
    body = update(5, "hi")
    body["message"].update(message_fields)
    body.update(update_fields)
    return json.dumps(body).encode()


# Signed (so Telegram's own, or the secret leaked) yet not an update: each names its field.
SIGNED_GARBAGE = {
    "deep nesting": (_nested(100_000), "body"),
    "chat as a string": (_with({"chat": "7"}), "update.message.chat"),
    "from as a string": (_with({"from": "ann"}), "update.message.from"),
    "an entity that is a number": (
        _with({"text": "/x", "entities": [5]}),
        "update.message.entities[0]",
    ),
    "entities as a string": (_with({"entities": "bold"}), "update.message.entities"),
    "reply_to_message as a list": (
        _with({"reply_to_message": [1]}),
        "update.message.reply_to_message",
    ),
    "offset Infinity": (
        _with({"entities": [{"type": "mention", "offset": 0, "length": 1}]}).replace(
            b'"offset": 0', b'"offset": Infinity'
        ),
        "body",
    ),
    "offset 1e300": (
        _with({"entities": [{"type": "mention", "offset": 1e300, "length": 1}]}),
        "update.message.entities[0].offset",
    ),
    "a huge offset": (
        _with({"entities": [{"type": "mention", "offset": 10**30, "length": 1}]}),
        "update.message.entities[0].offset",
    ),
}


@pytest.mark.parametrize("name", list(SIGNED_GARBAGE))
async def test_signed_garbage_is_400_naming_the_field_and_starts_nothing(webhook, caplog, name):
    _, base, gateway = webhook
    body, field = SIGNED_GARBAGE[name]
    headers = {"X-Telegram-Bot-Api-Secret-Token": SECRET, "Content-Type": "application/json"}
    with caplog.at_level("WARNING", logger="sessiongate.adapters.telegram.adapter"):
        async with httpx.AsyncClient(base_url=base, timeout=60.0) as client:
            response = await client.post("/hooks/telegram", content=body, headers=headers)
    assert response.status_code == 400, response.text
    assert response.json()["error"]["code"] == "invalid_update"
    assert field in response.json()["error"]["message"]
    assert any(getattr(r, "field", None) == field for r in caplog.records), caplog.records
    assert gateway.adapter.counters.events == 0
    assert gateway.store.list_sessions() == []


async def test_a_stalled_unsigned_post_is_401_before_its_body(webhook):
    _, base, gateway = webhook
    host, port = base.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(
            b"POST /hooks/telegram HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Content-Type: application/json\r\nContent-Length: 1000000\r\n\r\n{"
        )
        await writer.drain()
        async with asyncio.timeout(HANG_GUARD):  # the body timeout is 30 s away
            status_line = await reader.readline()
    finally:
        writer.close()
    assert status_line.split()[1] == b"401"
    assert gateway.adapter.counters.events == 0


async def test_a_signed_body_over_the_hooks_own_limit_is_413(webhook):
    _, base, gateway = webhook
    headers = {"X-Telegram-Bot-Api-Secret-Token": SECRET}
    body = _with({"text": "x" * 300_000})
    async with httpx.AsyncClient(base_url=base, timeout=60.0) as client:
        response = await client.post("/hooks/telegram", content=body, headers=headers)
    assert response.status_code == 413
    assert gateway.adapter.counters.events == 0
