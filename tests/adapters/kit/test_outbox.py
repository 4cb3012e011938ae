"""The kit's outbound paths that no platform stub reaches by itself: a vanished reply anchor,
a stream whose final outgrows one message. The sender is an in-memory double of
`PlatformSender` (the platform adapters run the same paths against their stubs)."""

from __future__ import annotations

from sessiongate.adapters.kit import (
    ChatRateLimiter,
    ClockSleep,
    EditStream,
    Outbox,
    Rendering,
    ReplyTargetError,
    Target,
    to_plain_text,
)


class Sender:
    def __init__(self) -> None:
        self.posts: list[tuple[Target, str]] = []
        self.edits: list[tuple[str, str]] = []
        self.refuse_anchor = False

    async def send_text(self, target: Target, text: str, *, markup: bool) -> str:
        if self.refuse_anchor and target.reply_to is not None:
            raise ReplyTargetError("message to be replied not found")
        self.posts.append((target, text))
        return str(len(self.posts))

    async def edit_text(self, target: Target, message_id: str, text: str, *, markup: bool) -> None:
        self.edits.append((message_id, text))

    async def delete_message(self, target: Target, message_id: str) -> None:
        raise AssertionError("nothing is deleted on these paths")

    async def send_typing(self, target: Target) -> None:
        return None


def outbox(clock, sender: Sender, limit: int = 100) -> Outbox:
    sleep = ClockSleep(clock)
    rendering = Rendering(limit=limit, measure=len, render=lambda t: t, plain=to_plain_text)
    limiter = ChatRateLimiter(clock=clock, sleep=sleep, min_interval={"edit": 1.0})
    return Outbox(sender, rendering, limiter, sleep=sleep)


async def test_a_vanished_reply_anchor_is_dropped_and_the_reply_still_sent(clock):
    sender = Sender()
    sender.refuse_anchor = True
    ids = await outbox(clock, sender).deliver(Target("c", reply_to="9"), "the answer")
    assert ids == ["1"]
    assert sender.posts == [(Target("c"), "the answer")]


async def test_only_the_first_chunk_carries_the_anchor(clock):
    sender = Sender()
    await outbox(clock, sender, limit=40).deliver(Target("c", reply_to="9"), "word " * 30)
    anchors = [target.reply_to for target, _ in sender.posts]
    assert anchors[0] == "9"
    assert set(anchors[1:]) == {None}


async def test_a_final_longer_than_one_message_keeps_the_preview_as_chunk_one(clock):
    sender = Sender()
    stream = EditStream(outbox(clock, sender, limit=40), Target("c"))
    await stream.update("Once upon")
    ids = await stream.finish("Once upon a time there was a very long story. " * 3)
    assert ids[0] == "1"
    assert len(ids) > 1
    assert sender.edits[-1][0] == "1"  # chunk 1 went into the preview, in place
    assert len(sender.posts) == len(ids)
