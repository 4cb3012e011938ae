"""The SDK's HTTP transport on aiohttp, through the real `Bot`: answers and failures keep the
meanings the kit relies on (a request that never left is transient, one that may have arrived
is unconfirmed), and a reply anchor and a topic reach the Bot API."""

from __future__ import annotations

import socket
from typing import TYPE_CHECKING

import pytest

from sessiongate.adapters.kit.errors import TransientSendError, UnconfirmedSendError
from sessiongate.adapters.kit.outbound import Target
from sessiongate.adapters.telegram.client import TelegramClient
from sessiongate.testing.stubs import telegram as tg

if TYPE_CHECKING:
    from collections.abc import AsyncIterator


@pytest.fixture
async def bot_api() -> AsyncIterator[tuple[tg.BotApiStub, str]]:
    stub = tg.BotApiStub()
    async with tg.serve_stub(stub) as url:
        yield stub, url


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def test_a_send_carries_its_topic_and_reply_anchor_and_answers_the_message_id(bot_api):
    stub, url = bot_api
    client = TelegramClient(stub.token, base_url=url)
    try:
        await client.open()
        first = await client.send_text(Target(chat_id="42"), "<b>hi</b>", markup=True)
        second = await client.send_text(
            Target(chat_id="-100", thread_id="55", reply_to=first), "again", markup=False
        )
    finally:
        await client.close()
    assert int(second) > int(first)
    assert stub.sent[0]["parse_mode"] == "HTML"
    _, params = [c for c in stub.log if c[0] == "sendMessage"][1]
    assert params["message_thread_id"] == "55"
    assert params["reply_parameters"] == f'{{"message_id": {first}}}'
    assert "parse_mode" not in params


async def test_updates_come_back_as_the_bot_apis_json(bot_api):
    stub, url = bot_api
    update_id = stub.push_message("hello", chat_id=7)
    client = TelegramClient(stub.token, base_url=url, poll_timeout=1)
    try:
        await client.open()
        updates = await client.get_updates(None)
        again = await client.get_updates(update_id + 1)
    finally:
        await client.close()
    assert [u["update_id"] for u in updates] == [update_id]
    assert updates[0]["message"]["text"] == "hello"
    assert updates[0]["message"]["from"]["username"] == "alice"
    assert again == []
    assert stub.confirmed_offset == update_id + 1


async def test_a_request_that_could_not_connect_is_transient():
    client = TelegramClient("1000:TESTTOKEN", base_url=f"http://127.0.0.1:{_closed_port()}")
    # Only the send transport: `open` (getMe) would fail the same way first.
    await client.bot.request.initialize()
    try:
        with pytest.raises(TransientSendError):
            await client.send_text(Target(chat_id="42"), "never left", markup=False)
    finally:
        await client.bot.request.shutdown()


async def test_a_send_whose_answer_never_came_is_unconfirmed(bot_api):
    stub, url = bot_api
    stub.fail("sendMessage", tg.Fault(200, "late", delay_seconds=3))
    client = TelegramClient(stub.token, base_url=url, read_timeout=0.5)
    try:
        await client.open()
        with pytest.raises(UnconfirmedSendError):
            await client.send_text(Target(chat_id="42"), "maybe arrived", markup=False)
    finally:
        await client.close()
    assert stub.texts() == ["maybe arrived"]  # it did arrive: resending would post it twice


async def test_long_polls_are_logged_at_debug_and_sends_at_info(bot_api, caplog):
    stub, url = bot_api
    client = TelegramClient(stub.token, base_url=url, poll_timeout=0)
    caplog.set_level("DEBUG", logger="sessiongate.adapters.telegram.transport")
    try:
        await client.open()
        await client.get_updates(None)
        await client.send_text(Target(chat_id="42"), "hi", markup=False)
    finally:
        await client.close()
    levels = {
        record.getMessage().split()[3].rsplit("/", 1)[-1]: record.levelname
        for record in caplog.records
        if record.name == "sessiongate.adapters.telegram.transport"
    }
    assert levels["getUpdates"] == "DEBUG"
    assert levels["sendMessage"] == "INFO"
    assert stub.token not in caplog.text
