"""The Discord adapter beyond the contract suite, on discord.py against the gateway stub:
RESUME after a drop, RECONNECT, a socket whose heartbeats go unanswered, the watchdog, thread
forks, command sync by diff, slash commands, role admits, discord.py's own 429 wait, and a
refused token."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

import pytest

from sessiongate import GatewayConfig, SessionStore
from sessiongate.adapters.discord import DiscordAdapter
from sessiongate.adapters.discord.client import DiscordClient
from sessiongate.adapters.kit import ClockSleep, CredentialsError, PlatformError
from sessiongate.agents import build_agent_factory
from sessiongate.core.config import DiscordConfig
from sessiongate.gateway import GatewayRunner
from sessiongate.testing.stubs import discord as dc

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable
    from pathlib import Path

HANG_GUARD = 15.0
GUILD = "2000000000000000001"
TEXT = "3000000000000000001"
THREAD = "3000000000000000003"
ROLE = "6000000000000000001"
ANN = dc.user("5000000000000000001", "ann")
_CHANNEL = {
    "id": TEXT,
    "type": 0,
    "guild_id": GUILD,
    "name": "general",
    "position": 0,
    "parent_id": None,
    "nsfw": False,
    "permissions": "0",
    "flags": 0,
    "topic": None,
    "rate_limit_per_user": 0,
}


class Gateway:
    def __init__(
        self, tmp_path: Path, clock, stub: dc.DiscordStub, url: str, **settings: Any
    ) -> None:
        section: dict[str, Any] = {"token": stub.token, "api_base_url": url, "allow_from": ["*"]}
        heartbeat_timeout = settings.pop("heartbeat_timeout", 60.0)
        shared = settings.pop("group_sessions_per_user", True)
        section.update(settings)
        self.config = GatewayConfig(platforms={"discord": section}, group_sessions_per_user=shared)
        self.store = SessionStore(tmp_path / "home" / "sessions", self.config, clock=clock)
        platform = self.config.platforms["discord"]
        assert isinstance(platform, DiscordConfig)
        self.sleeper = ClockSleep(clock)
        client = DiscordClient(
            str(section["token"]), api_base_url=url, heartbeat_timeout=heartbeat_timeout
        )
        self.adapter = DiscordAdapter(
            platform, clock=clock, sleep=self.sleeper, tick=self.sleeper.tick, client=client
        )
        self.runner = GatewayRunner(
            self.store,
            self.config,
            home=tmp_path / "home",
            agent_factory=build_agent_factory(self.config),
            clock=clock,
            adapters=[self.adapter],
        )

    async def start(self, stub: dc.DiscordStub) -> None:
        await self.runner.start()
        async with asyncio.timeout(HANG_GUARD):
            await stub.session_ready.wait()

    async def settle(self, events: int) -> None:
        async with asyncio.timeout(HANG_GUARD):
            await self.adapter.wait_events(events)
            await self.runner.wait_idle()

    async def close(self) -> None:
        await self.runner.stop()
        self.store.close()


async def until(condition: Callable[[], bool]) -> None:
    async with asyncio.timeout(HANG_GUARD):
        while not condition():  # noqa: ASYNC110  # the stub records over the network
            await asyncio.sleep(0.01)


@pytest.fixture
async def stub() -> AsyncIterator[tuple[dc.DiscordStub, str]]:
    api = dc.DiscordStub()
    api.channels[TEXT] = {"id": TEXT, "type": 0, "guild_id": GUILD, "name": "general"}
    api.channels[THREAD] = {"id": THREAD, "type": 11, "guild_id": GUILD, "name": "t",
                            "parent_id": TEXT}  # fmt: skip
    async with dc.serve_stub(api) as url:
        yield api, url


def message(stub: dc.DiscordStub, text: str, *, channel: str = TEXT, **extra: Any):
    data: dict[str, Any] = {
        "id": stub.snowflake(), "channel_id": channel, "guild_id": GUILD, "type": 0,
        "content": f"<@{stub.bot_id}> {text}", "author": ANN,
        "member": {"roles": extra.pop("roles", []), "nick": None},
        "timestamp": "2026-01-01T00:00:00.000000+00:00", "edited_timestamp": None,
        "tts": False, "mention_everyone": False, "mentions": [dc.user(stub.bot_id, "sg_bot")],
        "mention_roles": [], "attachments": [], "embeds": [], "pinned": False, "flags": 0,
    }  # fmt: skip
    data.update(extra)
    return data


def texts(stub: dc.DiscordStub) -> list[str]:
    return [str(m["content"]) for m in stub.sent]


async def test_messages_missed_during_a_drop_are_replayed_by_resume_once(tmp_path, clock, stub):
    api, url = stub
    gateway = Gateway(tmp_path, clock, api, url)
    await gateway.start(api)
    try:
        first = message(api, "before the drop")
        api.dispatch("MESSAGE_CREATE", first)
        await gateway.settle(1)
        await api.drop()
        api.dispatch("MESSAGE_CREATE", message(api, "while away"))
        await until(lambda: api.resumes >= 1)
        api.dispatch("MESSAGE_CREATE", first)  # a zombie or a replay delivering it again
        await gateway.settle(3)
        assert [t.rsplit("] ", 1)[-1] for t in texts(api)] == [
            "echo: before the drop",
            "echo: while away",
        ] or texts(api) == ["echo: before the drop", "echo: while away"]
        assert api.identifies == 1  # resumed, not a new session
        assert len(api.live) == 1  # one live socket per token
    finally:
        await gateway.close()


async def test_a_reconnect_request_resumes_and_keeps_receiving(tmp_path, clock, stub):
    api, url = stub
    gateway = Gateway(tmp_path, clock, api, url)
    await gateway.start(api)
    try:
        api.request_reconnect()
        await until(lambda: api.resumes >= 1 and api.session_ready.is_set())
        api.dispatch("MESSAGE_CREATE", message(api, "after reconnect"))
        await gateway.settle(1)
        assert texts(api) == ["echo: after reconnect"]
        assert 7 not in api.opcodes  # RECONNECT is the server's opcode; the client RESUMEd
        assert 6 in api.opcodes
    finally:
        await gateway.close()


async def test_unanswered_heartbeats_close_the_socket_and_reconnect(tmp_path, clock, stub):
    api, url = stub
    api.heartbeat_interval_ms = 100
    gateway = Gateway(tmp_path, clock, api, url, heartbeat_timeout=0.5)
    await gateway.start(api)
    try:
        api.acks = False  # a socket gone deaf: heartbeats go out, nothing comes back
        await until(lambda: api.connections >= 2)
        api.acks = True
        await until(lambda: api.session_ready.is_set())
        api.dispatch("MESSAGE_CREATE", message(api, "alive again"))
        await gateway.settle(1)
        assert texts(api) == ["echo: alive again"]
    finally:
        await gateway.close()


async def test_the_watchdog_reconnects_a_gateway_that_went_silent(tmp_path, clock, stub):
    api, url = stub
    gateway = Gateway(tmp_path, clock, api, url)
    await gateway.start(api)
    try:
        await gateway.sleeper.advance(gateway.adapter.watchdog.stall_seconds + 1)
        await until(lambda: api.connections >= 2 and api.session_ready.is_set())
        assert gateway.adapter.counters.stalls == 1
        api.dispatch("MESSAGE_CREATE", message(api, "heard"))
        await gateway.settle(1)
        assert texts(api) == ["echo: heard"]
    finally:
        await gateway.close()


async def test_the_first_message_of_a_thread_forks_the_channel_session(tmp_path, clock, stub):
    api, url = stub
    # A shared channel lane: everyone in the thread has seen what it holds, so it may be forked.
    gateway = Gateway(tmp_path, clock, api, url, group_sessions_per_user=False)
    await gateway.start(api)
    try:
        api.dispatch("MESSAGE_CREATE", message(api, "remember the word kiwi"))
        await gateway.settle(1)
        api.dispatch("MESSAGE_CREATE", message(api, "what was the word?", channel=THREAD))
        await gateway.settle(2)
        thread = next(s for s in gateway.store.list_sessions() if s.origin.thread_id == THREAD)
        assert thread.forked_from_parent
        contents = [m["content"] for m in gateway.store.load_transcript(thread.session_id)]
        assert any("kiwi" in str(c) for c in contents)
        assert api.sent[-1]["channel_id"] == THREAD  # the reply went to the thread
        assert api.sent[-1]["allowed_mentions"] == {"parse": ["users"], "replied_user": True}
    finally:
        await gateway.close()


async def test_a_shared_thread_under_a_per_user_channel_lane_starts_isolated(tmp_path, clock, stub):
    api, url = stub
    gateway = Gateway(tmp_path, clock, api, url)  # the defaults: per-user channel lanes
    await gateway.start(api)
    try:
        api.dispatch("MESSAGE_CREATE", message(api, "remember the word kiwi"))
        await gateway.settle(1)
        api.dispatch("MESSAGE_CREATE", message(api, "what was the word?", channel=THREAD))
        await gateway.settle(2)
        thread = next(s for s in gateway.store.list_sessions() if s.origin.thread_id == THREAD)
        assert thread.extra.get("fork_refused") is True
        contents = [m["content"] for m in gateway.store.load_transcript(thread.session_id)]
        assert not any("kiwi" in str(c) for c in contents)
    finally:
        await gateway.close()


async def test_commands_sync_by_diff_and_keep_their_ids(tmp_path, clock, stub):
    api, url = stub
    api.commands["77"] = {"id": "77", "name": "status", "description": "stale words"}
    api.commands["78"] = {"id": "78", "name": "obsolete", "description": "gone"}
    gateway = Gateway(tmp_path, clock, api, url)
    await gateway.start(api)
    await gateway.close()
    names = {c["name"]: c["id"] for c in api.commands.values()}
    assert names["status"] == "77"  # edited in place, not re-created
    assert "obsolete" not in names
    assert {"new", "stop"} <= set(names)
    writes = api.command_writes
    again = Gateway(tmp_path / "again", clock, api, url)
    await again.start(api)
    await again.close()
    assert api.command_writes == writes  # nothing changed: nothing written


def interaction(stub: dc.DiscordStub) -> dict[str, Any]:
    return {
        "id": "1270000000000000001", "application_id": stub.app_id, "type": 2,
        "token": "itoken", "version": 1, "locale": "en-US", "guild_id": GUILD,
        "channel_id": TEXT, "channel": _CHANNEL, "app_permissions": "0",
        "data": {"id": "900", "name": "status", "type": 1}, "entitlements": [],
        "authorizing_integration_owners": {}, "attachment_size_limit": 10485760,
        "member": {"user": ANN, "roles": [], "joined_at": "2025-01-01T00:00:00+00:00",
                   "deaf": False, "mute": False, "permissions": "0", "flags": 0},
    }  # fmt: skip


async def test_a_slash_command_is_acknowledged_at_once_and_runs(tmp_path, clock, stub):
    api, url = stub
    gateway = Gateway(tmp_path, clock, api, url)
    await gateway.start(api)
    try:
        api.dispatch("INTERACTION_CREATE", interaction(api))
        await gateway.settle(1)
        await until(lambda: bool(api.callbacks))
        (callback,) = api.callbacks
        assert callback["type"] == 4
        assert callback["data"]["flags"] == 64  # ephemeral: only its user sees it
        assert "Running /status" in callback["data"]["content"]
        (reply,) = api.sent
        assert "echo:" not in reply["content"]
    finally:
        await gateway.close()


async def test_a_slash_command_from_someone_not_allowed_is_refused(tmp_path, clock, stub):
    api, url = stub
    gateway = Gateway(tmp_path, clock, api, url, allow_from=None, dm_policy="allowlist")
    await gateway.start(api)
    try:
        api.dispatch("INTERACTION_CREATE", interaction(api))
        await gateway.settle(1)
        await until(lambda: bool(api.callbacks))
        (callback,) = api.callbacks
        assert "not allowed" in callback["data"]["content"]
        assert api.sent == []
    finally:
        await gateway.close()


async def test_allow_roles_admits_members_of_a_role(tmp_path, clock, stub):
    api, url = stub
    gateway = Gateway(
        tmp_path, clock, api, url, allow_from=None, dm_policy="allowlist", allow_roles=[ROLE]
    )
    await gateway.start(api)
    try:
        api.dispatch("MESSAGE_CREATE", message(api, "no role"))
        api.dispatch("MESSAGE_CREATE", message(api, "with role", roles=[ROLE]))
        await gateway.settle(2)
        assert [t.rsplit("] ", 1)[-1] for t in texts(api)] == ["echo: with role"] or texts(api) == [
            "echo: with role"
        ]
        (entry,) = gateway.store.list_sessions()
        assert entry.origin.role_authorized
    finally:
        await gateway.close()


async def test_a_short_rate_limit_is_waited_out_by_the_sdk(tmp_path, clock, stub):
    api, url = stub
    api.fail("send", dc.Fault(429, 0, "You are being rate limited.", retry_after=0.2))
    gateway = Gateway(tmp_path, clock, api, url)
    await gateway.start(api)
    try:
        api.dispatch("MESSAGE_CREATE", message(api, "patience"))
        await gateway.settle(1)
        assert texts(api) == ["echo: patience"]
        assert api.calls["send"] == 2
    finally:
        await gateway.close()


async def test_a_refused_token_fails_the_start_without_retrying(tmp_path, clock, stub):
    api, url = stub
    gateway = Gateway(tmp_path, clock, api, url, token="wrong")
    with pytest.raises(CredentialsError, match="refused the bot token"):
        await gateway.runner.start()
    await gateway.close()
    assert api.calls["me"] == 1
    assert api.identifies == 0


def test_the_adapter_needs_a_token():
    with pytest.raises(CredentialsError, match="token"):
        DiscordAdapter(DiscordConfig())


async def test_the_token_never_reaches_the_log_even_at_debug(tmp_path, clock, stub, caplog):
    api, url = stub
    caplog.set_level(logging.DEBUG)
    gateway = Gateway(tmp_path, clock, api, url)
    await gateway.start(api)
    try:
        api.dispatch("MESSAGE_CREATE", message(api, "hello"))
        await gateway.settle(1)
    finally:
        await gateway.close()
    assert "IDENTIFY" in caplog.text  # discord.py did log its gateway traffic
    assert api.token not in caplog.text


async def test_a_second_gateway_for_one_token_is_refused(tmp_path, clock, stub):
    api, url = stub
    first = Gateway(tmp_path / "a", clock, api, url)
    await first.start(api)
    second = Gateway(tmp_path / "b", clock, api, url)
    try:
        with pytest.raises(PlatformError, match="already has a gateway"):
            await second.runner.start()
    finally:
        await second.close()
        await first.close()
    assert api.identifies == 1
