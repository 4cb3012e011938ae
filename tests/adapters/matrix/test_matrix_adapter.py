"""The Matrix adapter beyond the contract suite: the `since` token (stored, moved only after
acceptance, resumed after a restart), the first start's history, invites, encrypted rooms,
malformed events, the shape of what it sends, and start-up refusals."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

import pytest

from sessiongate import GatewayConfig, SessionStore
from sessiongate.adapters.kit import ClockSleep, CredentialsError, PlatformError
from sessiongate.adapters.matrix import MatrixAdapter
from sessiongate.adapters.matrix.client import MatrixClient
from sessiongate.agents import build_agent_factory
from sessiongate.core.config import MatrixConfig
from sessiongate.core.platform import Platform
from sessiongate.core.source import ChatType, SessionSource
from sessiongate.gateway import GatewayRunner
from sessiongate.gateway.messages import Receipt, ReceiptStatus
from sessiongate.store.platform_state import PlatformState
from sessiongate.testing.stubs import matrix as mx

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

HANG_GUARD = 15.0
S = mx.SERVER
ALICE, MALLORY = f"@alice:{S}", f"@mallory:{S}"
DM = f"!dm-alice:{S}"


class Gateway:
    def __init__(self, home: Path, clock, url: str, stub: mx.HomeserverStub, **settings: Any):
        section: dict[str, Any] = {"homeserver": url, "access_token": stub.token,
                                   "user_id": stub.user_id, "allow_from": [ALICE]}  # fmt: skip
        section.update(settings)
        self.config = GatewayConfig(platforms={"matrix": section})
        self.store = SessionStore(home / "sessions", self.config, clock=clock)
        platform = self.config.platforms["matrix"]
        assert isinstance(platform, MatrixConfig)
        client = MatrixClient(url, stub.token, read_timeout=5.0, sync_timeout_ms=200)
        self.adapter = MatrixAdapter(platform, clock=clock, sleep=ClockSleep(clock), client=client)
        self.runner = GatewayRunner(
            self.store,
            self.config,
            home=home,
            agent_factory=build_agent_factory(self.config),
            clock=clock,
            adapters=[self.adapter],
        )

    async def __aenter__(self) -> Gateway:
        await self.runner.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.runner.stop()
        self.store.close()

    async def settled(self, count: int) -> None:
        async with asyncio.timeout(HANG_GUARD):
            await self.adapter.wait_events(count)
            await self.runner.wait_idle()


@pytest.fixture
async def served() -> AsyncIterator[tuple[mx.HomeserverStub, str]]:
    stub = mx.HomeserverStub()
    stub.add_room(DM, [ALICE], direct=True)
    async with mx.serve_stub(stub) as url:
        yield stub, url


async def _until(condition) -> None:
    async with asyncio.timeout(HANG_GUARD):
        while not condition():  # noqa: ASYNC110  # what it reads is set by an HTTP request
            await asyncio.sleep(0.01)


async def test_since_is_stored_after_acceptance_and_a_restart_resumes_there(tmp_path, clock,
                                                                             served):  # fmt: skip
    stub, url = served
    stub.push_text(DM, ALICE, "from before the first start")
    async with Gateway(tmp_path, clock, url, stub) as gw:
        # The first start learns the rooms; the history it finds is not answered.
        stub.push_text(DM, ALICE, "hello")
        await gw.settled(1)
        assert stub.texts(DM) == ["echo: hello"]
        stored = PlatformState(gw.store).get_cursor("matrix", stub.user_id)
        assert stored == gw.adapter.since == f"s{len(stub.log_entries)}"
    stub.push_text(DM, ALICE, "while it was down")
    async with Gateway(tmp_path, clock, url, stub) as gw:
        await gw.settled(1)
        assert stub.texts(DM) == ["echo: hello", "echo: while it was down"]


async def test_a_batch_the_gateway_did_not_take_is_synced_again_and_answered_once(
    tmp_path, clock, served
):
    stub, url = served
    async with Gateway(tmp_path, clock, url, stub) as gw:
        handle = gw.runner.handle_message
        refused: list[str] = []
        since_at_retry: list[str | None] = []

        async def stopping_once(event, *, wait=True):
            if not refused:
                refused.append(event.text)
                return Receipt(event.source.chat_id, None, ReceiptStatus.UNAVAILABLE, None, None)
            since_at_retry.append(gw.adapter.since)
            return await handle(event, wait=wait)

        gw.runner.handle_message = stopping_once  # type: ignore[method-assign]
        before = gw.adapter.since
        stub.push_text(DM, ALICE, "take me")
        await gw.settled(1)  # a refused event is released, not settled
        # The batch came again from the same `since`: it was not moved past the refusal.
        assert refused == ["take me"]
        assert since_at_retry == [before]
        assert stub.texts(DM) == ["echo: take me"]
        assert gw.adapter.since != before


async def test_an_allowed_invite_is_joined_and_others_are_ignored(tmp_path, clock, served):
    stub, url = served
    async with Gateway(tmp_path, clock, url, stub, dm_policy="allowlist") as gw:
        stub.invite(f"!from-alice:{S}", ALICE, direct=True)
        stub.invite(f"!from-mallory:{S}", MALLORY, direct=True)
        stub.push_text(DM, ALICE, "after the invites")
        await gw.settled(1)
        assert stub.joins == [f"!from-alice:{S}"]


async def test_invites_waiting_at_the_first_start_are_taken(tmp_path, clock, served):
    stub, url = served
    stub.invite(f"!early:{S}", ALICE, direct=True)
    async with Gateway(tmp_path, clock, url, stub):
        assert stub.joins == [f"!early:{S}"]


async def test_an_encrypted_invite_is_told_why_and_left(tmp_path, clock, served, caplog):
    stub, url = served
    async with Gateway(tmp_path, clock, url, stub):
        stub.invite(f"!secret:{S}", ALICE, direct=True, encrypted=True)
        await _until(lambda: stub.leaves)
    assert stub.joins == [f"!secret:{S}"]
    (notice,) = stub.texts(f"!secret:{S}")
    assert ALICE in notice
    assert "end-to-end encrypted" in notice


async def test_encrypted_messages_are_reported_once_never_heard_silently(
    tmp_path, clock, served, caplog
):
    stub, url = served
    room = f"!was-plain:{S}"
    stub.add_room(room, [ALICE, f"@bob:{S}"])
    async with Gateway(tmp_path, clock, url, stub) as gw:
        with caplog.at_level(logging.WARNING, logger="sessiongate.adapters.matrix.adapter"):
            for n in range(2):
                stub.push_event(room, {"type": "m.room.encrypted", "sender": ALICE,
                                       "origin_server_ts": n, "content": {
                                           "algorithm": "m.megolm.v1.aes-sha2",
                                           "ciphertext": "AwgAEn..."}})  # fmt: skip
            await gw.settled(2)
            await _until(lambda: stub.texts(room))
    assert len(stub.texts(room)) == 1
    assert "end-to-end encrypted" in stub.texts(room)[0]
    assert any(r.chat_id == room for r in caplog.records if "decrypt" in r.getMessage())


async def test_a_malformed_event_is_logged_with_its_field_and_starts_nothing(
    tmp_path, clock, served, caplog
):
    stub, url = served
    async with Gateway(tmp_path, clock, url, stub) as gw:
        with caplog.at_level(logging.WARNING, logger="sessiongate.adapters.matrix.adapter"):
            stub.push_event(DM, {"type": "m.room.message", "sender": ALICE,
                                 "origin_server_ts": "noon", "content": {"body": "x"}})  # fmt: skip
            stub.push_text(DM, ALICE, "and a good one")
            await gw.settled(2)
    assert stub.texts(DM) == ["echo: and a good one"]
    (record,) = [r for r in caplog.records if "not understood" in r.getMessage()]
    assert record.field == "origin_server_ts"  # type: ignore[attr-defined]


async def test_a_streamed_reply_is_edited_by_m_replace_with_html_and_a_plain_body(
    tmp_path, clock, served
):
    stub, url = served
    async with Gateway(tmp_path, clock, url, stub) as gw:
        source = SessionSource(platform=Platform.MATRIX, chat_id=DM, chat_type=ChatType.DM,
                               user_id=ALICE)  # fmt: skip
        stream = gw.adapter.open_stream(source, turn_id=1)
        await stream.update("Once upon")
        clock.advance(2)
        await gw.adapter.send(source, "**Once upon a time**", turn_id=1)
    ((sent,), (edit,)) = stub.sent, stub.edits
    assert sent["content"]["formatted_body"] == "<b>Once upon a time</b>"
    assert sent["content"]["body"] == "Once upon a time"
    relates = edit["content"]["m.relates_to"]
    assert relates == {"rel_type": "m.replace", "event_id": sent["event_id"]}
    assert edit["content"]["m.new_content"]["format"] == "org.matrix.custom.html"


async def test_a_refused_token_fails_the_start(tmp_path, clock, served):
    stub, url = served
    gw = Gateway(tmp_path, clock, url, stub, access_token="wrong")
    gw.adapter.client = MatrixClient(url, "wrong")
    gw.adapter.outbox.sender._client = gw.adapter.client  # type: ignore[attr-defined]
    with pytest.raises(CredentialsError, match="refused the access token"):
        await gw.adapter.start(gw.runner)
    gw.store.close()
    assert "wrong" not in repr(gw.config)


async def test_a_token_of_another_account_fails_the_start(tmp_path, clock, served):
    stub, url = served
    gw = Gateway(tmp_path, clock, url, stub, user_id=f"@someone_else:{S}")
    with pytest.raises(CredentialsError, match="belongs to"):
        await gw.adapter.start(gw.runner)
    gw.store.close()


async def test_typing_is_taken_down_with_the_reply(tmp_path, clock, served):
    stub, url = served
    async with Gateway(tmp_path, clock, url, stub) as gw:
        source = SessionSource(platform=Platform.MATRIX, chat_id=DM, chat_type=ChatType.DM,
                               user_id=ALICE)  # fmt: skip
        await gw.adapter.client.send_typing(gw.adapter.target_for(source))
        await gw.adapter.send(source, "done", turn_id=None)
    assert [t["typing"] for t in stub.typing] == [True, False]
    assert stub.typing[0]["timeout"] == 6000


async def test_a_hung_sync_is_rebuilt_by_the_watchdog(tmp_path, clock, served):
    stub, url = served
    async with Gateway(tmp_path, clock, url, stub, sync_stall_seconds=0.2) as gw:
        stub.hang_sync = True  # the receiver's next sync hangs
        await _until(lambda: gw.adapter.counters.stalls >= 1)
        stub.hang_sync = False
        stub._unhang.set()
        stub.push_text(DM, ALICE, "after the stall")
        await gw.settled(1)
        assert stub.texts(DM) == ["echo: after the stall"]
        assert gw.adapter.counters.reconnects >= 1


async def test_a_limited_timeline_is_filled_from_messages_so_nothing_is_skipped(
    tmp_path, clock, served
):
    stub, url = served
    stub.timeline_limit = 3
    async with Gateway(tmp_path, clock, url, stub) as gw:
        await gw.adapter.stop()  # the receiver rests; the events pile up as during an outage
        for n in range(8):
            stub.push_text(DM, ALICE, f"missed {n}")
    async with Gateway(tmp_path, clock, url, stub) as gw:
        await gw.settled(8)
        texts = stub.texts(DM)
    assert stub.calls["messages"] >= 1
    # Every message was answered once (follow-ups may share a turn on a busy lane).
    answered = "\n".join(texts)
    assert all(answered.count(f"missed {n}") == 1 for n in range(8))


async def test_a_start_that_fails_after_connecting_leaves_nothing_open(tmp_path, clock, served):
    stub, url = served
    stub.fail("sync", mx.FORBIDDEN)
    failed = Gateway(tmp_path / "a", clock, url, stub)
    with pytest.raises(PlatformError, match="not invited"):
        await failed.adapter.start(failed.runner)
    failed.store.close()
    assert failed.adapter.client.api is not None
    assert failed.adapter.client.api.api.session.closed
    # The account is free again: the next start in this process is not refused as a twin.
    async with Gateway(tmp_path / "b", clock, url, stub) as gw:
        assert gw.adapter.connected


async def test_an_attachment_is_a_reference_the_adapter_downloads(tmp_path, clock, served):
    stub, url = served
    stub.media["report1"] = (b"quarterly numbers", "text/plain")
    async with Gateway(tmp_path, clock, url, stub) as gw:
        stub.push_text(DM, ALICE, "report.txt", msgtype="m.file", url=f"mxc://{S}/report1",
                       info={"size": 17, "mimetype": "text/plain"})  # fmt: skip
        await gw.settled(1)
        (entry,) = gw.store.list_sessions()
        transcript = str(gw.store.load_transcript(entry.session_id))
        assert f"matrix://file/mxc%3A%2F%2F{S}%2Freport1" in transcript
        assert await gw.adapter.download(f"mxc://{S}/report1") == b"quarterly numbers"
    assert stub.calls["download"] == 1


async def test_a_missing_file_is_a_clear_refusal(tmp_path, clock, served):
    stub, url = served
    async with Gateway(tmp_path, clock, url, stub) as gw:
        with pytest.raises(PlatformError, match="refused the download: 404"):
            await gw.adapter.download(f"mxc://{S}/nothing")
