"""Which messages may be parts of a paste a client split, and how parts merge."""

from __future__ import annotations

from dataclasses import replace

import pytest

from sessiongate.adapters.kit.bursts import MAX_HOLD_WINDOWS, Burst, looks_split, merge_key, merged
from sessiongate.adapters.kit.events import PlatformEvent
from sessiongate.adapters.kit.gating import MessageFacts
from sessiongate.adapters.kit.media import Attachment
from sessiongate.core.platform import Platform
from sessiongate.core.source import ChatType, SessionSource


def _event(text: str, *, user: str = "u1", chat: str = "c1", thread: str | None = None, **kw):
    source = SessionSource(platform=Platform.TELEGRAM, chat_id=chat, user_id=user,
                           thread_id=thread, chat_type=ChatType.GROUP)  # fmt: skip
    facts = MessageFacts(chat_type=ChatType.GROUP, text=text, **kw)
    return PlatformEvent(event_id=f"{chat}{user}{text[:5]}", source=source, facts=facts, text=text)


def test_the_key_is_chat_thread_and_sender():
    keys = {merge_key(_event("x", user=u, chat=c, thread=t))
            for u in ("u1", "u2") for c in ("c1", "c2") for t in (None, "7")}  # fmt: skip
    assert len(keys) == 8


@pytest.mark.parametrize(
    "event",
    [
        _event("/status"),
        _event("!new"),
        _event("edited", is_edit=True),
        _event("   "),
        replace(_event("a photo"), attachments=(Attachment("telegram", "F", "photo"),)),
        replace(_event("slash"), kind="slash_command"),
        replace(_event("anonymous"), source=SessionSource(platform=Platform.TELEGRAM, chat_id="c")),
    ],
    ids=["command", "bang-command", "edit", "blank", "media", "slash", "no-sender"],
)
def test_what_never_merges(event):
    assert merge_key(event) is None
    assert not looks_split(event, min_length=1, measure=len)


def test_only_a_part_as_long_as_the_split_length_looks_split():
    assert looks_split(_event("x" * 100), min_length=100, measure=len)
    assert not looks_split(_event("x" * 99), min_length=100, measure=len)


def test_parts_merge_in_order_under_the_first_parts_ids():
    first, second = _event("one"), replace(_event("two"), message_id="m2")
    first = replace(first, message_id="m1")
    both = merged([first, second])
    assert (both.text, both.message_id, both.event_id) == ("one\ntwo", "m1", first.event_id)


async def test_a_hold_is_bounded_however_many_parts_come():
    burst = Burst.open("k", _event("one"), now=0.0, window=1.0)
    for n in range(20):
        burst.add(_event(f"part {n}"), now=0.5 * n, window=1.0, split=True)
    assert burst.deadline == MAX_HOLD_WINDOWS * 1.0
    short = Burst.open("k", _event("one"), now=0.0, window=1.0)
    short.add(_event("the end"), now=0.5, window=1.0, split=False)
    assert short.deadline == 1.0  # a short tail does not extend the window
