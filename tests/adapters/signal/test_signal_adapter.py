"""The Signal adapter beyond the contract suite: the event stream (reconnect with backoff, the
watchdog, resuming from the saved position after a restart), malformed events, the
acknowledgement reaction, numbered chunks with text styles, media, and start-up failures."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

import pytest

from sessiongate import GatewayConfig, SessionStore
from sessiongate.adapters.kit import ClockSleep, CredentialsError, PlatformError
from sessiongate.adapters.registry import build_adapters
from sessiongate.adapters.signal import SignalAdapter
from sessiongate.adapters.signal.client import SignalClient
from sessiongate.agents import build_agent_factory
from sessiongate.core.config import SignalConfig
from sessiongate.core.platform import Platform
from sessiongate.core.source import SessionSource
from sessiongate.gateway import GatewayRunner
from sessiongate.gateway.adapter import PlatformAdapter, StreamingAdapter
from sessiongate.testing.stubs import signal as sg

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable
    from pathlib import Path

HANG_GUARD = 15.0
ALICE = ("+15550000011", "a11ce000-0000-4000-8000-000000000011")
GROUP = "R3JvdXAgaWQgb2YgdGhlIHRlc3Qgb2YgdGhlIHNpZ25hbCBhZGFwdGVy"


class Gateway:
    def __init__(self, tmp_path: Path, clock, url: str, stub: sg.SignalCliStub, **settings: Any):
        section: dict[str, Any] = {"url": url, "account": stub.account, "allow_from": ["*"]}
        section.update(settings)
        self.config = GatewayConfig(platforms={"signal": section})
        self.store = SessionStore(tmp_path / "home" / "sessions", self.config, clock=clock)
        platform = self.config.platforms["signal"]
        assert isinstance(platform, SignalConfig)
        self.sleeper = ClockSleep(clock)
        client = SignalClient(url, stub.account, timeout=2.0)
        self.adapter = SignalAdapter(platform, clock=clock, sleep=self.sleeper, client=client)
        self.runner = GatewayRunner(
            self.store,
            self.config,
            home=tmp_path / "home",
            agent_factory=build_agent_factory(self.config),
            clock=clock,
            adapters=[self.adapter],
        )

    async def start(self, stub: sg.SignalCliStub) -> None:
        opened = stub.streams_opened
        await self.runner.start()
        await until(lambda: stub.streams_opened > opened and stub.open_streams > 0)

    async def settle(self, events: int) -> None:
        async with asyncio.timeout(HANG_GUARD):
            await self.adapter.wait_events(events)
            await self.runner.wait_idle()

    async def close(self) -> None:
        await self.runner.stop()
        self.store.close()


async def until(condition: Callable[[], bool]) -> None:
    """Until `condition()` holds; what it reads is set across loopback HTTP."""
    async with asyncio.timeout(HANG_GUARD):
        while not condition():  # noqa: ASYNC110  # no event to wait on
            await asyncio.sleep(0.01)


@pytest.fixture
async def stub() -> AsyncIterator[tuple[sg.SignalCliStub, str]]:
    daemon = sg.SignalCliStub()
    async with sg.serve_stub(daemon) as url:
        yield daemon, url


@pytest.fixture
async def gateway(tmp_path, clock, stub) -> AsyncIterator[Gateway]:
    daemon, url = stub
    made = Gateway(tmp_path, clock, url, daemon)
    await made.start(daemon)
    try:
        yield made
    finally:
        await made.close()


_stamps = iter(range(1767225600000, 1767225600000 + 10**6, 7))


def dm(text: str, **data: Any) -> dict[str, Any]:
    return sg.data_envelope(text, number=ALICE[0], uuid=ALICE[1], timestamp=next(_stamps),
                            name="Alice", **data)  # fmt: skip


# ---------------------------------------------------------------------------- the stream


async def test_a_dropped_stream_reconnects_with_backoff_and_misses_nothing(stub, gateway):
    """#2: refused three times and more, the stream comes back; what was sent meanwhile is
    asked for with Last-Event-ID and answered once."""
    daemon, _url = stub
    first = daemon.push(dm("before the outage"))
    await gateway.settle(1)
    daemon.down = True
    daemon.drop_streams()
    daemon.push(dm("during the outage"))
    await until(lambda: gateway.adapter.watchdog.failures >= 3)
    assert not gateway.adapter.receiving
    daemon.down = False
    await gateway.settle(2)
    assert daemon.texts() == ["echo: before the outage", "echo: during the outage"]
    assert daemon.resumed_from[-1] == first
    waits = gateway.sleeper.waits
    for attempt, wait in enumerate(waits[:3], 1):
        assert 2.0 * 2 ** (attempt - 1) * 0.8 <= wait <= 2.0 * 2 ** (attempt - 1) * 1.2
    assert gateway.adapter.statistics().receive_failures == 0  # a good stream resets them
    assert gateway.adapter.statistics().reconnects >= 3
    assert daemon.max_open_streams == 1  # never two streams for one account


async def test_a_silent_stream_is_probed_and_reopened(tmp_path, clock, stub):
    """#3: connected but deaf (no event, no keep-alive): the watchdog reopens it."""
    daemon, url = stub
    # A stall period well above what a loaded machine takes to hand an event over: each
    # reopened stream is silent until the event comes, and must not be declared dead first.
    gateway = Gateway(tmp_path, clock, url, daemon, stream_stall_seconds=1.0)
    await gateway.start(daemon)
    try:
        daemon.hang = True
        opened = daemon.streams_opened
        await until(lambda: daemon.streams_opened > opened)
        daemon.release_hang()
        daemon.push(dm("are you awake"))
        await gateway.settle(1)
        assert daemon.texts() == ["echo: are you awake"]
        assert gateway.adapter.statistics().stalls >= 1
    finally:
        await gateway.close()


async def test_keep_alives_keep_a_quiet_stream_open(tmp_path, clock, stub):
    """Comments count as signs of life: a quiet stream with keep-alives is never reopened."""
    daemon, url = stub
    daemon.keepalive_seconds = 0.02
    gateway = Gateway(tmp_path, clock, url, daemon, stream_stall_seconds=1.0)
    await gateway.start(daemon)
    try:
        # Many times the stall period passes with keep-alives only (a margin of 50 to 1).
        await until(lambda: daemon.keepalives >= 100)
        assert gateway.adapter.statistics().stalls == 0
        assert daemon.streams_opened == 1
    finally:
        await gateway.close()


async def test_a_restart_resumes_after_the_saved_position(tmp_path, clock, stub):
    """Decision 13: the position advances only past claimed events and survives a restart:
    what arrived while the gateway was down is answered, nothing twice."""
    daemon, url = stub
    first = Gateway(tmp_path, clock, url, daemon)
    await first.start(daemon)
    seen = daemon.push(dm("while up"))
    await first.settle(1)
    await first.close()
    daemon.push(dm("while down"))
    second = Gateway(tmp_path, clock, url, daemon)
    await second.start(daemon)
    try:
        await second.settle(1)
        assert daemon.resumed_from[-1] == seen
        assert daemon.texts() == ["echo: while up", "echo: while down"]
    finally:
        await second.close()


async def test_a_daemon_restart_replays_its_kept_events_and_none_is_answered_twice(
    tmp_path, clock, stub
):
    """After the daemon restarted, the saved id is unknown and it sends all it keeps: the
    claims make the old ones no second turn."""
    daemon, url = stub
    gateway = Gateway(tmp_path, clock, url, daemon)
    await gateway.start(daemon)
    try:
        daemon.push(dm("one"))
        daemon.push(dm("two"))
        await gateway.settle(2)
        daemon.prefix = "9999-"  # a new daemon run: ids of the old one match nothing
        daemon.drop_streams()
        await gateway.settle(4)  # both replayed, both duplicates
        daemon.push(dm("three"))
        await gateway.settle(5)
        assert daemon.texts() == ["echo: one", "echo: two", "echo: three"]
        assert gateway.adapter.statistics().duplicates == 2
    finally:
        await gateway.close()


async def test_a_malformed_event_is_logged_with_its_field_and_starts_nothing(stub, gateway, caplog):
    daemon, _url = stub
    caplog.set_level(logging.WARNING, logger="sessiongate.adapters.signal.adapter")
    daemon.push_raw("{not json")
    bad = dm("x")
    bad["envelope"]["timestamp"] = "yesterday"
    daemon.push(bad)
    daemon.push(dm("still answered"))
    await gateway.settle(1)
    assert daemon.texts() == ["echo: still answered"]
    assert gateway.adapter.malformed == 2
    fields = [getattr(r, "field", None) for r in caplog.records]
    assert fields == ["data", "envelope.timestamp"]


# ---------------------------------------------------------------------------- outbound


async def test_an_accepted_message_gets_the_acknowledgement_reaction_once(stub, gateway):
    daemon, _url = stub
    event = dm("hello")
    daemon.push(event)
    await gateway.settle(1)
    daemon.push(event)  # a redelivery: no second turn, no second reaction
    await gateway.settle(2)
    await until(lambda: gateway.adapter.acks == 1)
    stamp = event["envelope"]["timestamp"]
    assert daemon.reactions == [{"recipient": ALICE[1], "emoji": "\N{EYES}",
                                 "targetAuthor": ALICE[1], "targetTimestamp": stamp}]  # fmt: skip


async def test_a_group_reply_quotes_its_message_and_the_reaction_names_the_group(
    tmp_path, clock, stub
):
    daemon, url = stub
    gateway = Gateway(tmp_path, clock, url, daemon, ack_reaction="\N{THUMBS UP SIGN}")
    await gateway.start(daemon)
    try:
        mention = [{"name": "Bot", "number": daemon.account, "uuid": daemon.uuid,
                    "start": 0, "length": 1}]  # fmt: skip
        stamp = next(_stamps)
        event = sg.data_envelope("\ufffc hi all", number=ALICE[0], uuid=ALICE[1],
                                 timestamp=stamp, group_id=GROUP, mentions=mention)  # fmt: skip
        daemon.push(event)
        await gateway.settle(1)
        await until(lambda: gateway.adapter.acks == 1)
        (sent,) = daemon.sent
        stamp = event["envelope"]["timestamp"]
        assert (sent["groupId"], sent["message"]) == (GROUP, "echo: hi all")
        assert (sent["quoteTimestamp"], sent["quoteAuthor"]) == (stamp, ALICE[1])
        (reaction,) = daemon.reactions
        assert (reaction["groupId"], reaction["emoji"]) == (GROUP, "\N{THUMBS UP SIGN}")
    finally:
        await gateway.close()


async def test_no_reaction_when_it_is_switched_off(tmp_path, clock, stub):
    daemon, url = stub
    gateway = Gateway(tmp_path, clock, url, daemon, ack_reaction="")
    await gateway.start(daemon)
    try:
        daemon.push(dm("quiet please"))
        await gateway.settle(1)
        assert daemon.reactions == []
    finally:
        await gateway.close()


async def test_a_long_reply_goes_in_numbered_chunks_with_their_styles(stub, gateway):
    """#18, #19: 8,000 UTF-16 units a message, numbered; Markdown as body ranges."""
    daemon, _url = stub
    to = SessionSource(platform=Platform.SIGNAL, chat_id=ALICE[1], user_id=ALICE[0])
    paragraph = "**Bold** start, then a sentence with 😀 that goes on. " * 40
    await gateway.adapter.send(to, "\n\n".join([paragraph] * 8), turn_id=None)
    chunks = daemon.sent
    assert len(chunks) == 3
    for n, chunk in enumerate(chunks, 1):
        text = chunk["message"]
        assert text.endswith(f"({n}/3)")
        assert len(text.encode("utf-16-le")) // 2 <= 8000
        assert "**" not in text
        assert chunk["textStyle"][0] == "0:4:BOLD"
        assert "quoteTimestamp" not in chunk


def test_signal_is_not_a_streaming_adapter(tmp_path):
    config = SignalConfig(account="+15550000001")
    adapter = SignalAdapter(config)
    assert isinstance(adapter, PlatformAdapter)
    assert not isinstance(adapter, StreamingAdapter)


# ---------------------------------------------------------------------------- media


async def test_inbound_media_is_fetched_from_the_daemon_or_found_in_its_folder(
    tmp_path, clock, stub
):
    daemon, url = stub
    folder = tmp_path / "attachments"
    folder.mkdir()
    (folder / "abc.jpg").write_bytes(b"jpeg bytes")
    daemon.attachments["abc.jpg"] = b"jpeg bytes"
    gateway = Gateway(tmp_path, clock, url, daemon, attachments_dir=str(folder))
    await gateway.start(daemon)
    try:
        assert await gateway.adapter.fetch_media("abc.jpg") == b"jpeg bytes"
        assert await gateway.adapter.resolve_media("abc.jpg") == str(folder / "abc.jpg")
        with pytest.raises(PlatformError):
            await gateway.adapter.resolve_media("../home/sessions/state.db")
        with pytest.raises(PlatformError):
            await gateway.adapter.fetch_media("missing.bin")
    finally:
        await gateway.close()


# ---------------------------------------------------------------------------- start-up


async def test_a_daemon_that_does_not_answer_fails_the_start(tmp_path, clock, stub):
    daemon, url = stub
    daemon.down = True
    gateway = Gateway(tmp_path, clock, url, daemon)
    try:
        with pytest.raises(PlatformError, match="does not answer"):
            await gateway.runner.start()
    finally:
        await gateway.close()


async def test_an_account_the_daemon_does_not_know_is_refused(tmp_path, clock, stub):
    daemon, url = stub
    config = SignalConfig(url=url, account="+15559990000", allow_from=["*"])
    gateway = Gateway(tmp_path, clock, url, daemon)
    gateway.adapter = SignalAdapter(config, client=SignalClient(url, "+15559990000"))
    try:
        with pytest.raises(CredentialsError, match="does not know this account"):
            await gateway.adapter.connect()
    finally:
        await gateway.adapter.client.close()
        gateway.store.close()


async def test_one_event_stream_per_account_in_a_process(stub, gateway):
    _daemon, url = stub
    second = SignalAdapter(
        gateway.adapter.config, client=SignalClient(url, gateway.adapter.account)
    )
    try:
        with pytest.raises(PlatformError, match="already has an event stream"):
            await second.connect()
    finally:
        await second.client.close()


def test_config_checks_the_account_and_url():
    with pytest.raises(ValueError, match=r"E\.164"):
        SignalConfig(account="alice")
    with pytest.raises(ValueError, match="without /api/v1"):
        SignalConfig(account="+15550000001", url="http://127.0.0.1:8080/api/v1")
    with pytest.raises(CredentialsError, match="account is not set"):
        SignalAdapter(SignalConfig())


def test_the_registry_builds_the_signal_adapter():
    config = GatewayConfig(platforms={"signal": {"account": "+15550000001"}})
    (adapter,) = build_adapters(config)
    assert isinstance(adapter, SignalAdapter)
