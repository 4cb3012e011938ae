"""The adapter contract: what every platform adapter does, checked against its stub.

Each test runs once per adapter (`conftest.HARNESSES`), through the platform's real SDK over
loopback HTTP. The checklist item of research/adapters.md section 9 a test covers is named in
its docstring.
"""

from __future__ import annotations

import asyncio
import itertools
from dataclasses import replace
from datetime import timedelta

import pytest
from harness import Msg

from sessiongate.core.source import ChatType
from sessiongate.gateway.adapter import SendRefusedError
from sessiongate.store.lanes import TurnState
from sessiongate.store.platform_state import PlatformState


def _has(harness, feature: str) -> bool:
    """A capability a harness may declare missing (`threads = False`); the default is that
    the platform has it."""
    return bool(getattr(harness, feature, True))


def _needs(harness, feature: str) -> None:
    if not _has(harness, feature):
        pytest.skip(f"{harness.name} has no {feature.replace('_', ' ')}")


# ---------------------------------------------------------------------------- sources


async def test_dm_group_thread_and_channel_map_to_their_chat_types(harness):
    """#6, #7: the section 8 mapping; ids are text."""
    dm = harness.source(Msg("hi"))
    group = harness.source(Msg("hi", chat="group", mention=True))
    assert (dm.chat_type, group.chat_type) == (ChatType.DM, ChatType.GROUP)
    assert group.thread_id is None
    sources = [dm, group]
    if _has(harness, "threads"):
        thread = harness.source(Msg("hi", chat="thread", mention=True))
        assert thread.chat_type in (ChatType.GROUP, ChatType.THREAD)
        assert thread.thread_id is not None
        sources.append(thread)
    if _has(harness, "channels"):
        channel = harness.source(Msg("hi", chat="channel", mention=True))
        assert channel.chat_type == ChatType.CHANNEL
        sources.append(channel)
    for source in sources:
        assert isinstance(source.chat_id, str)
        assert source.platform == harness.name


async def test_a_reply_lands_in_the_chat_and_thread_it_answers(harness):
    """#20: answers go to the source's chat and thread."""
    _needs(harness, "threads")
    harness.push(Msg("in the thread", chat="thread", mention=True))
    await harness.settle()
    (posted,) = harness.posted()
    assert posted.chat_id == harness.chat_of("thread")
    assert posted.thread_id is not None
    assert "in the thread" in posted.text


def _long_text(limit: int = 4096) -> str:
    """Paragraphs enough for more than two chunks at `limit`."""
    paragraph = "A sentence that goes on for a while. " * 20
    return "\n\n".join([paragraph] * max(12, 3 * limit // len(paragraph)))


@pytest.mark.parametrize(
    ("mode", "quoted"), [("first", [True, False]), ("all", [True, True]), ("off", [False, False])]
)
async def test_reply_to_mode_decides_which_chunks_quote_the_message(make_harness, mode, quoted):
    """#20: `reply_to_mode` off | first (the default) | all."""
    harness = await make_harness(reply_to_mode=mode)
    if not harness.quotes_replies:
        pytest.skip(f"{harness.name} has no quoted replies")
    event_id = harness.push(Msg(_long_text(harness.limit), chat="group", mention=True))
    await harness.settle()
    posted = harness.posted()
    assert len(posted) > 2
    anchor = harness.message_id_of(event_id)
    assert [p.reply_to == anchor for p in posted[:2]] == quoted
    assert all(p.reply_to in (None, anchor) for p in posted)


async def test_the_default_reply_quotes_the_message_it_answers(harness):
    """#20: the default is `first`."""
    if not harness.quotes_replies:
        pytest.skip(f"{harness.name} has no quoted replies")
    event_id = harness.push(Msg("quote me", chat="group", mention=True))
    await harness.settle()
    (posted,) = harness.posted()
    assert posted.reply_to == harness.message_id_of(event_id)


# ---------------------------------------------------------------------------- one answer


async def test_one_message_gets_exactly_one_answer(harness):
    harness.push(Msg("hello"))
    await harness.settle()
    assert [p.text for p in harness.posted()] == ["echo: hello"]


async def test_a_redelivered_event_starts_no_second_turn(harness):
    """#10: the same platform event delivered twice answers once."""
    event_id = harness.push(Msg("once"))
    await harness.settle()
    harness.push_again(event_id)
    await harness.settle()
    assert [p.text for p in harness.posted()] == ["echo: once"]
    assert len(harness.agent.requests) == 1


async def test_a_concurrent_redelivery_is_claimed_once(harness):
    """#10: two deliveries at the same moment: one claim, one turn, one answer."""
    _, event = harness.event(Msg("twice at once"))
    first, second = await asyncio.gather(harness.adapter.admit(event), harness.adapter.admit(event))
    assert sorted([first.status, second.status]) == ["accepted", "duplicate"]
    await harness.settle()
    assert [p.text for p in harness.posted()] == ["echo: twice at once"]


async def test_a_redelivery_after_a_restart_is_still_one_answer(harness):
    """#10, decision 13: the claim and the gateway's dedup are durable."""
    event_id = harness.push(Msg("before restart"))
    await harness.settle()
    await harness.restart()
    harness.push_again(event_id)
    await harness.settle()
    assert [p.text for p in harness.posted()] == ["echo: before restart"]
    assert len(harness.agent.requests) == 1


async def test_a_claim_left_by_a_dead_process_is_taken_over(harness):
    """#10: a claim whose process died before the hand-off does not swallow the event."""
    _, event = harness.event(Msg("claimed then crashed"))
    state = PlatformState(harness.store)
    assert state.claim_event(harness.name, event.event_id, owner="dead-process")
    admission = await harness.adapter.admit(event)
    assert admission.status == "accepted"
    await harness.settle()
    assert [p.text for p in harness.posted()] == ["echo: claimed then crashed"]


# ---------------------------------------------------------------------------- split messages


def _split_part(harness, n: int) -> str:
    """A paste's part as long as the platform's client cuts it (a full message)."""
    words = f"part{n} " + "word " * harness.limit
    while harness.measure(words) > harness.limit:
        words = words[: -max(1, (harness.measure(words) - harness.limit) // 2 or 1)]
    return words.rstrip()


def _turn_texts(harness) -> list[str]:
    return [str(r.messages[-1]["content"]) for r in harness.agent.requests]


async def test_a_paste_the_client_split_is_one_turn(harness):
    """#13: full-length parts and the short tail, from one sender in quick succession."""
    parts = [_split_part(harness, 1), _split_part(harness, 2), "part3 the end"]
    for text in parts:
        harness.push(Msg(text))
    await _until(lambda: harness.adapter.held_parts() == 3)
    await harness.settle()
    (turn,) = _turn_texts(harness)
    assert turn.index("part1") < turn.index("part2") < turn.index("part3 the end")
    assert harness.adapter.statistics().merged == 2


async def test_the_rest_of_a_split_paste_arriving_later_still_joins(harness):
    """#13: the first part waits the window (on the injected clock) for the rest."""
    harness.push(Msg(_split_part(harness, 1)))
    await _until(lambda: harness.adapter.holding)
    harness.push(Msg("part2 the end"))
    if not harness.polls:
        await _until(lambda: harness.adapter.held_parts() == 2)
    await harness.settle()
    (turn,) = _turn_texts(harness)
    assert "part1" in turn
    assert "part2 the end" in turn
    assert harness.adapter.statistics().events == 2  # each part settled once, by its caller


async def test_a_split_part_delivered_twice_in_one_batch_is_held_once(harness):
    """#10, #13: a redelivered copy of a held part is a duplicate, not a second part."""
    part = _split_part(harness, 1)
    _, first = harness.event(Msg(part))
    _, tail = harness.event(Msg("part2 the end"))
    task = asyncio.ensure_future(harness.adapter.admit_batch([first, first, tail]))
    await _until(lambda: harness.adapter.holding)
    await harness.sleeper.advance(harness.adapter.settings.merge.window)
    admitted = await asyncio.wait_for(task, 10)
    assert [a.status for a in admitted] == ["accepted", "duplicate", "merged"]
    await harness.settle()
    (turn,) = _turn_texts(harness)
    assert turn.count("part1") == 1


@pytest.mark.parametrize("chat", ["dm", "group"])
async def test_an_album_is_one_turn_with_all_its_items(harness, chat):
    """#13: the items of an album (a media group) merged into one message within the window;
    in a group the caption's mention admits the whole album."""
    if not harness.albums:
        pytest.skip(f"{harness.name} has no albums (several files are one message there)")
    harness.push(Msg("our trip", chat=chat, mention=chat == "group", album="A1"))
    await _until(lambda: harness.adapter.holding)
    harness.push(Msg("", chat=chat, album="A1"))
    harness.push(Msg("", chat=chat, album="A1"))
    await harness.settle()
    (request,) = harness.agent.requests
    turn = str(request.messages[-1]["content"])
    assert "our trip" in turn
    assert turn.count(f"{harness.name}://file/") == 3
    assert len(harness.posted()) == 1


async def test_split_parts_never_merge_across_senders_chats_or_threads(harness):
    """#13: only the same sender in the same chat and thread."""
    harness.push(Msg(_split_part(harness, 1), chat="group", mention=True, user="alice"))
    harness.push(Msg(_split_part(harness, 2), chat="group", mention=True, user="bob"))
    harness.push(Msg(_split_part(harness, 3), chat="thread", mention=True, user="alice"))
    harness.push(Msg("/status", chat="group", command_to_bot=True, user="alice"))
    await harness.settle()
    texts = _turn_texts(harness)
    assert len(texts) == 3
    assert not any("part1" in t and "part2" in t for t in texts)
    assert not any("part1" in t and "part3" in t for t in texts)
    assert harness.adapter.statistics().merged == 0


async def test_a_short_message_is_never_held(harness):
    """#13: only a part that looks split waits; ordinary chat is answered at once."""
    before = harness.clock.monotonic()
    harness.push(Msg("short"))
    harness.push(Msg("and another"))
    await harness.settle()
    assert harness.clock.monotonic() == before
    assert len(harness.agent.requests) == 2


async def test_merging_is_off_with_a_zero_window(make_harness):
    """#13: configurable."""
    harness = await make_harness(merge_window_seconds=0)
    harness.push(Msg(_split_part(harness, 1)))
    harness.push(Msg("part2 the end"))
    await harness.settle()
    assert len(harness.agent.requests) == 2


# ---------------------------------------------------------------------------- gating


@pytest.mark.parametrize(
    ("msg", "answered"),
    [
        (Msg("hi", chat="group"), False),
        (Msg("hi", chat="group", mention=True), True),
        (Msg("hi", chat="group", reply_to_bot=True), True),
        (Msg("/status", chat="group", command_to_bot=True), True),
        (Msg("/status", chat="group", command_to_other=True), False),
        (Msg("hi", chat="group", mention=True, from_bot=True), False),
        (Msg("hi", own=True), False),
        (Msg("hi", chat="dm"), True),
    ],
    ids=[
        "chatter",
        "mention",
        "reply-to-bot",
        "command-to-bot",
        "command-to-other-bot",
        "other-bot",
        "own-message",
        "dm",
    ],
)
async def test_groups_answer_only_when_addressed(harness, msg, answered):
    """#8, #16: mention gating; never own or other bots' messages."""
    if msg.from_bot:
        _needs(harness, "bot_senders")
    harness.push(msg)
    await harness.settle()
    assert bool(harness.posted()) is answered


async def test_require_mention_off_answers_group_chatter(make_harness):
    """#16: gating is configurable."""
    harness = await make_harness(require_mention=False)
    harness.push(Msg("plain chatter", chat="group"))
    await harness.settle()
    assert [p.text for p in harness.posted()] == ["echo: plain chatter"]


async def test_a_thread_the_bot_answered_in_needs_no_mention(harness):
    """#16: a thread the bot already joined passes without a mention."""
    _needs(harness, "threads")
    harness.push(Msg("plain", chat="thread"))
    await harness.settle()
    assert harness.posted() == []
    harness.push(Msg("first", chat="thread", mention=True))
    await harness.settle()
    harness.push(Msg("follow-up", chat="thread"))
    await harness.settle()
    texts = [p.text for p in harness.posted()]
    assert len(texts) == 2
    assert texts[0].endswith(" first")
    assert texts[1].endswith(" follow-up")


async def test_edits_start_no_turn_unless_configured(make_harness):
    """#9: an edit is not a new turn by default; `answer_edits` opts in."""
    harness = await make_harness()
    event_id = harness.push(Msg("original"))
    await harness.settle()
    harness.push(Msg("edited", edit_of=event_id))
    await harness.settle()
    assert [p.text for p in harness.posted()] == ["echo: original"]


async def test_bots_answering_each_other_hit_a_cooldown(make_harness, clock):
    """#17: more than N bot messages per chat per window: bots are ignored there for a while;
    humans never are."""
    harness = await make_harness(allow_bots=True, bot_loop_max_messages=2)
    _needs(harness, "bot_senders")
    for n in range(3):
        harness.push(Msg(f"bot says {n}", chat="group", mention=True, from_bot=True))
    harness.push(Msg("a human", chat="group", mention=True))
    await harness.settle()
    # (The gateway's busy lane may merge follow-ups into one turn: read them all together.)
    seen = "\n".join(_turn_texts(harness))
    assert all(f"bot says {n}" in seen for n in (0, 1))
    assert "bot says 2" not in seen
    assert "a human" in seen
    clock.advance(60)
    harness.push(Msg("bot again", chat="group", mention=True, from_bot=True))
    await harness.settle()
    assert "bot again" not in "\n".join(_turn_texts(harness))  # still cooling down
    clock.advance(600)
    harness.push(Msg("bot after the cooldown", chat="group", mention=True, from_bot=True))
    await harness.settle()
    assert "bot after the cooldown" in "\n".join(_turn_texts(harness))


async def test_every_message_carries_the_platforms_own_time(harness):
    """#12: the backlog policy reads the platform's timestamp of each message."""
    _, event = harness.event(Msg("when?"))
    assert event.sent_at is not None
    assert abs(event.sent_at - harness.clock.now().timestamp()) < 1


async def test_a_backlog_older_than_the_horizon_is_not_answered(make_harness, clock):
    """#12: events from before startup follow a documented policy: all are answered by
    default; with `max_backlog_seconds`, older ones are dropped (and never come again)."""
    harness = await make_harness(max_backlog_seconds=3600)
    _, fresh = harness.event(Msg("fresh"))
    _, stale = harness.event(Msg("stale"))
    now = clock.now().timestamp()
    assert (await harness.adapter.admit(replace(fresh, sent_at=now - 60))).status == "accepted"
    dropped = await harness.adapter.admit(replace(stale, sent_at=now - 7200))
    assert (dropped.status, dropped.reason) == ("dropped", "stale_backlog")
    await harness.settle()
    assert _turn_texts(harness) == ["fresh"]


# ---------------------------------------------------------------------------- access


async def test_nobody_is_admitted_when_nothing_is_configured(make_harness):
    """#14: fail closed: no allow list and DMs on allowlist admit no one."""
    harness = await make_harness(allow_from=None, dm_policy="allowlist")
    harness.push(Msg("let me in"))
    harness.push(Msg("us too", chat="group", mention=True))
    await harness.settle()
    assert harness.posted() == []
    assert harness.agent.requests == []


async def test_allow_from_admits_listed_users_and_chats(make_harness):
    """#14: user and chat allow lists work independently."""
    harness = await make_harness(
        allow_from=lambda h: [h.chat_of("group"), h.source(Msg("x", user="bob")).user_id],
        dm_policy="allowlist",
    )
    harness.push(Msg("anyone here", chat="group", mention=True, user="carol"))
    harness.push(Msg("but not my dm", user="carol"))
    harness.push(Msg("bob is listed", user="bob"))
    await harness.settle()
    assert sorted(p.text for p in harness.posted()) == ["echo: anyone here", "echo: bob is listed"]


async def test_open_dm_policy_admits_any_dm_but_no_group(make_harness):
    harness = await make_harness(allow_from=None, dm_policy="open")
    harness.push(Msg("hello"))
    harness.push(Msg("group", chat="group", mention=True))
    await harness.settle()
    assert [p.text for p in harness.posted()] == ["echo: hello"]


async def test_pairing_answers_one_code_and_an_approval_admits(make_harness):
    """#15: one code, not one per message; approval admits the next message; a group does
    not inherit DM pairing."""
    harness = await make_harness(allow_from=None, dm_policy="pairing")
    harness.push(Msg("hello?"))
    harness.push(Msg("anyone?"))
    await harness.settle()
    (notice,) = harness.posted()
    assert "sessiongate pairing approve" in notice.text
    state = PlatformState(harness.store)
    (request,) = state.list_pairing()
    assert request.code in notice.text
    assert harness.agent.requests == []
    assert state.approve_pairing(request.code.lower()) is not None
    harness.push(Msg("now?"))
    harness.push(Msg("and here?", chat="group", mention=True))
    await harness.settle()
    assert [p.text for p in harness.posted()][1:] == ["echo: now?"]


async def test_an_expired_pairing_code_is_replaced_and_cannot_be_approved(make_harness, clock):
    """#15: codes expire."""
    harness = await make_harness(allow_from=None, dm_policy="pairing")
    harness.push(Msg("hello?"))
    await harness.settle()
    state = PlatformState(harness.store)
    (old,) = state.list_pairing()
    clock.advance(timedelta(hours=2).total_seconds())
    assert state.approve_pairing(old.code) is None
    harness.push(Msg("still here"))
    await harness.settle()
    (new,) = state.list_pairing()
    assert new.code != old.code
    assert len(harness.posted()) == 2


# ---------------------------------------------------------------------------- outbound


async def test_a_long_reply_is_split_at_the_platform_limit_by_its_measure(harness):
    """#18: split at the limit measured the platform's way, at paragraph boundaries."""
    paragraph = "Sentence with an emoji 😀 in it. " * 20
    text = "\n\n".join([paragraph.strip()] * max(12, 2 * harness.limit // len(paragraph)))
    harness.push(Msg(text))
    await harness.settle()
    posted = harness.posted()
    assert len(posted) > 1
    assert all(harness.measure(p.text) <= harness.limit for p in posted)
    joined = " ".join(p.text for p in posted)
    assert joined.count("😀") == text.count("😀")


async def test_a_long_code_block_is_split_with_fences_balanced(harness):
    """#18: code fences stay balanced in every chunk."""
    code = "\n".join(f"line_{i} = {i}" for i in range(max(800, harness.limit // 10)))
    harness.push(Msg(f"```python\n{code}\n```"))
    await harness.settle()
    posted = harness.posted()
    assert len(posted) > 1
    assert all(p.markup for p in posted)  # each chunk parsed as markup on its own


async def test_refused_markup_is_resent_as_plain_text(harness):
    """#19: a parse error resends the same reply without markup."""
    if not harness.rejects_markup:
        pytest.skip(f"{harness.name} renders any text; it never refuses markup")
    harness.fail("send", "format")
    harness.push(Msg("**bold** claim"))
    await harness.settle()
    (posted,) = harness.posted()
    assert not posted.markup
    assert posted.text == "echo: bold claim"


async def test_markdown_is_rendered_to_the_platform_format(harness):
    """#19."""
    harness.push(Msg("**bold** and `code`"))
    await harness.settle()
    (posted,) = harness.posted()
    assert posted.markup
    assert harness.rendered_sample in posted.text


async def test_mass_mentions_are_defused(harness):
    """#22: no mass pings."""
    harness.push(Msg("@everyone look"))
    await harness.settle()
    (posted,) = harness.posted()
    assert "@everyone" not in posted.text


async def test_a_rate_limit_is_waited_out_and_the_reply_still_arrives(harness):
    """#23: 429 with retry_after=2, twice: bounded waits, then the answer."""
    harness.fail("send", "rate_limited", times=2)
    harness.push(Msg("patience"))
    await harness.settle()
    assert [p.text for p in harness.posted()] == ["echo: patience"]
    assert harness.sleeper.waits.count(harness.rate_limit_seconds) == 2


async def test_a_rate_limit_on_an_edit_holds_sends_to_that_chat(harness):
    """#23: retry_after is per chat, across sends and edits."""
    _needs(harness, "edits")
    source = harness.source(Msg("x"))
    stream = harness.adapter.open_stream(source, turn_id=7001)
    await stream.update("first words")
    harness.clock.advance(harness.edit_interval)
    harness.fail("edit", "rate_limited")
    await stream.update("first words and more")
    assert harness.adapter.limiter.ready_in(source.chat_id, "send") > 0
    await harness.adapter.send(source, "unrelated notice", turn_id=None)
    assert 2.0 in [round(w, 1) for w in harness.sleeper.waits] or any(
        w > 1.0 for w in harness.sleeper.waits
    )


async def test_a_streamed_reply_is_one_message_edited_in_place(harness):
    """#25: one preview, edits throttled by the platform's interval, the final in place."""
    _needs(harness, "edits")
    source = harness.source(Msg("x"))
    stream = harness.adapter.open_stream(source, turn_id=7002)
    await stream.update("Once")
    for i in range(6):
        harness.clock.advance(0.5)
        await stream.update("Once upon" + " a time" * (i + 1))
    await harness.adapter.send(source, "**Once upon a time**, the end.", turn_id=7002)
    (posted,) = harness.posted()
    assert posted.markup
    assert "the end" in posted.text
    times = harness.edit_times()
    assert len(times) >= 2
    assert all(b - a >= harness.edit_interval for a, b in itertools.pairwise(times))


async def test_a_slow_reply_streams_through_the_gateway_into_one_message(harness):
    """#25 end to end: the gateway streams a reply still being generated after the adapter's
    `stream_after` into one message edited in place, and finishes it there."""
    _needs(harness, "edits")
    pieces = ["Once", " upon", " a", " time", ",", " the", " end."]
    harness.agent.stream = (harness.clock, 0.5, pieces)
    harness.push(Msg("tell me"))
    await harness.settle()
    (posted,) = harness.posted()
    assert posted.text == "Once upon a time, the end."
    assert harness.calls("send") == 1
    assert harness.calls("edit") >= 2  # the previews, and the final text in place


async def test_a_quick_reply_is_one_message_with_no_edits(harness):
    """#25: a reply done before `stream_after` is sent once, never previewed."""
    harness.agent.stream = (harness.clock, 0.1, ["quick", " answer"])
    harness.push(Msg("hi"))
    await harness.settle()
    assert [p.text for p in harness.posted()] == ["quick answer"]
    assert harness.calls("edit") == 0


async def test_a_streamed_reply_whose_final_edit_fails_is_posted_fresh(harness):
    """#25: never a preview and a final both: the preview is deleted."""
    _needs(harness, "edits")
    source = harness.source(Msg("x"))
    stream = harness.adapter.open_stream(source, turn_id=7003)
    await stream.update("draft")
    harness.clock.advance(5)
    harness.fail("edit", "gone")
    await harness.adapter.send(source, "final answer", turn_id=7003)
    assert [p.text for p in harness.posted()] == ["final answer"]


async def test_a_platform_without_edits_gets_the_final_text_only(harness):
    """#26: no preview and no progress where messages cannot be edited: one message, whole."""
    if _has(harness, "edits"):
        pytest.skip(f"{harness.name} edits in place")
    pieces = ["Once", " upon", " a", " time", ",", " the", " end."]
    harness.agent.stream = (harness.clock, 0.5, pieces)
    harness.push(Msg("tell me"))
    await harness.settle()
    assert [p.text for p in harness.posted()] == ["Once upon a time, the end."]
    assert harness.calls("send") == 1
    assert harness.calls("edit") == 0


async def test_typing_shows_while_a_turn_runs_and_stops_with_the_reply(harness):
    """#27: typing starts at admission, refreshes, and stops at the reply."""
    harness.agent.blocking = True
    harness.push(Msg("think hard", chat=harness.typing_chat, mention=True))
    await asyncio.wait_for(harness.agent.started.get(), 10)
    typing = harness.adapter.typing
    await harness.sleeper.advance(1)  # past the grace that spares instant replies
    await _until(lambda: harness.typing_count() >= 1)
    first = typing.sent
    await harness.sleeper.advance(type(harness.adapter).typing_interval)
    await _until(lambda: typing.sent > first)
    harness.agent.release()
    await harness.settle()
    assert typing.active() == 0
    after = typing.sent
    await harness.sleeper.advance(30)
    assert typing.sent == after


async def test_typing_is_refreshed_at_the_platform_interval(harness):
    """#27: refreshed before the platform's indicator expires, on the injected clock."""
    harness.agent.blocking = True
    harness.push(Msg("think hard", chat=harness.typing_chat, mention=True))
    await asyncio.wait_for(harness.agent.started.get(), 10)
    typing = harness.adapter.typing
    interval = type(harness.adapter).typing_interval
    await harness.sleeper.advance(0.5)  # the grace
    await _until(lambda: typing.sent == 1)
    await harness.sleeper.advance(interval - 0.1)
    assert typing.sent == 1
    await harness.sleeper.advance(0.1)
    await _until(lambda: typing.sent == 2)
    harness.agent.release()
    await harness.settle()


async def test_a_fast_reply_shows_no_typing_at_all(harness):
    """#27: the indicator waits a 0.5 s grace, so an instant reply does not flicker."""
    harness.push(Msg("quick", chat=harness.typing_chat, mention=True))
    await harness.settle()
    assert len(harness.posted()) == 1
    await harness.sleeper.advance(30)
    assert harness.typing_count() == 0
    assert harness.adapter.typing.active() == 0


async def test_typing_stops_when_the_turn_fails(harness):
    """#27: stopped on error too (the failure notice ends it)."""
    harness.agent.blocking = True
    harness.agent.fail_next = True
    harness.push(Msg("this will fail", chat=harness.typing_chat, mention=True))
    await asyncio.wait_for(harness.agent.started.get(), 10)
    await harness.sleeper.advance(1)
    await _until(lambda: harness.adapter.typing.sent >= 1)
    harness.agent.release()
    await harness.settle()
    assert harness.agent.requests
    assert harness.posted()  # the failure notice
    assert harness.adapter.typing.active() == 0
    sent = harness.adapter.typing.sent
    await harness.sleeper.advance(60)
    assert harness.adapter.typing.sent == sent


async def _until(condition) -> None:
    """Until `condition()` holds; what it reads is set by a request that crossed HTTP."""
    async with asyncio.timeout(10):
        while not condition():  # noqa: ASYNC110  # no event to wait on
            await asyncio.sleep(0.01)


async def test_oversized_media_gets_a_clear_answer_and_no_turn(harness):
    """#28: size caps with a "too large" reply."""
    harness.push(Msg("look", attachment_bytes=50 * 1_048_576))
    await harness.settle()
    (posted,) = harness.posted()
    assert "too large" in posted.text
    assert harness.agent.requests == []


async def test_media_arrives_as_an_attachment_reference(harness):
    """#28: media in as references, not bytes."""
    harness.push(Msg("look", attachment_bytes=2048))
    await harness.settle()
    (request,) = harness.agent.requests
    assert harness.posted()
    entry = harness.store.list_sessions()[0]
    transcript = harness.store.load_transcript(entry.session_id)
    assert any(f"{harness.name}://file/" in str(m) for m in transcript)
    assert request.messages


# ---------------------------------------------------------------------------- media out

_PNG = bytes.fromhex("89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489")


def _media_dir(tmp_path):
    folder = tmp_path / "outbox"
    folder.mkdir(exist_ok=True)
    (folder / "report.txt").write_bytes(b"quarterly numbers\n" * 100)
    (folder / "chart.png").write_bytes(_PNG)
    return folder


async def test_a_reply_sends_its_files_through_the_platform_upload(make_harness, tmp_path):
    """#28: media out: the `MEDIA:` lines become uploads in the reply's chat and thread."""
    folder = _media_dir(tmp_path)
    harness = await make_harness(media_dirs=[str(folder)])
    harness.push(Msg(f"here\nMEDIA: {folder / 'report.txt'}\nMEDIA: chart.png",
                     chat="thread", mention=True))  # fmt: skip
    await harness.settle()
    (posted,) = harness.posted()
    assert posted.text.endswith("here")
    assert "MEDIA" not in posted.text
    report, chart = harness.uploads()
    assert (report.name, report.data) == ("report.txt", (folder / "report.txt").read_bytes())
    assert (chart.name, chart.data) == ("chart.png", _PNG)
    assert report.kind in ("document", "file")
    assert chart.kind in ("photo", "file")  # an image goes as a photo where that differs
    for upload in (report, chart):
        assert upload.chat_id == harness.chat_of("thread")
        assert (upload.thread_id is not None) is _has(harness, "threads")
    assert harness.adapter.statistics().files == 2


@pytest.mark.parametrize(
    ("config", "name", "reason"),
    [
        ({"max_upload_mb": 0.001}, "report.txt", "over the"),
        ({}, "../secret.txt", "not in a folder"),
        ({}, "missing.txt", "does not exist"),
    ],
    ids=["too-large", "outside-the-folders", "missing"],
)
async def test_a_file_that_cannot_go_gets_a_clear_line_instead(
    make_harness, tmp_path, config, name, reason
):
    """#28: oversize, outside the allowed folders or missing: a text notice, no upload."""
    folder = _media_dir(tmp_path)
    (tmp_path / "secret.txt").write_text("do not send")
    harness = await make_harness(media_dirs=[str(folder)], **config)
    harness.push(Msg(f"take this\nMEDIA: {name}"))
    await harness.settle()
    assert harness.uploads() == []
    texts = [p.text for p in harness.posted()]
    assert texts[0].endswith("take this")
    assert any("could not be sent" in t and reason in t for t in texts)


async def test_a_file_the_platform_refuses_falls_back_to_text(make_harness, tmp_path):
    """#28: a refused upload (413, a missing scope) is answered with a line of text."""
    folder = _media_dir(tmp_path)
    harness = await make_harness(media_dirs=[str(folder)])
    harness.fail("upload", "file_refused")
    harness.push(Msg("take it\nMEDIA: report.txt"))
    await harness.settle()
    assert harness.uploads() == []
    text, notice = harness.posted()
    assert text.text.endswith("take it")
    assert "report.txt could not be sent: the platform refused it" in notice.text


async def test_no_file_is_sent_without_a_configured_folder(harness, tmp_path):
    """#28: default safe: an agent cannot post the host's files."""
    folder = _media_dir(tmp_path)
    harness.push(Msg(f"take it\nMEDIA: {folder / 'report.txt'}"))
    await harness.settle()
    assert harness.uploads() == []
    _text, notice = harness.posted()
    assert "not enabled" in notice.text


# ---------------------------------------------------------------------------- failures


async def test_a_transient_send_failure_is_retried(harness):
    """#24: a send the platform answered with a server error is tried again."""
    harness.fail("send", "transient")
    harness.push(Msg("again"))
    await harness.settle()
    assert [p.text for p in harness.posted()] == ["echo: again"]
    assert harness.calls("send") == 2


async def test_a_reply_whose_anchor_is_gone_is_sent_once_without_it(harness):
    """#21: a deleted, system or non-threadable target: one retry without the anchor (the
    quoted message; on Slack the thread), never a lost reply."""
    harness.fail("send", "reply_target_gone")
    harness.push(Msg("answer me anyway", chat="thread", mention=True))
    await harness.settle()
    (posted,) = harness.posted()
    assert posted.text.endswith("answer me anyway")
    assert posted.reply_to is None
    assert posted.chat_id == harness.chat_of("thread")
    assert harness.calls("send") == 2


async def test_a_chat_that_refuses_the_bot_is_not_retried(harness):
    """#24: a permanent refusal is marked, never retried into a storm."""
    harness.fail("send", "blocked", times=10)
    harness.push(Msg("are you there"))
    await harness.settle()
    assert harness.calls("send") == 1
    # Not delivered, and said so: the delivery is dead with the platform's refusal.
    turn_id = max(t.id for t in harness.runner.lane_store.turns_in_state(TurnState.REPLIED))
    record = PlatformState(harness.store).get_send(harness.name, turn_id)
    assert record is not None
    assert record.state == "refused"
    delivery = harness.runner.deliveries.of_turn(turn_id)
    assert (delivery.status, delivery.reason.startswith("SendRefusedError: refused")) == (
        "dead",
        True,
    )


async def test_an_unconfirmed_send_is_recorded_and_not_resent(harness):
    """#24: a timeout after the request left is unconfirmed, never resent blindly."""
    harness.fail("send", "unconfirmed")
    harness.push(Msg("maybe"))
    await harness.settle()
    assert harness.calls("send") == 1
    turn_id = max(t.id for t in harness.runner.lane_store.turns_in_state(TurnState.REPLIED))
    record = PlatformState(harness.store).get_send(harness.name, turn_id)
    assert record is not None
    assert record.state == "unconfirmed"
    assert harness.runner.deliveries.of_turn(turn_id).status == "dead"


async def test_a_reply_sent_again_after_a_crash_is_dropped(harness):
    """#24: the gateway's at-least-once resend of one turn posts once."""
    source = harness.source(Msg("x"))
    await harness.adapter.send(source, "the reply", turn_id=8001)
    await harness.adapter.send(source, "the reply", turn_id=8001)
    assert [p.text for p in harness.posted()] == ["the reply"]


async def test_a_send_a_crash_interrupted_is_settled_unconfirmed_not_reposted(harness):
    """#24: a turn recorded `sending` by a process that died is not posted again."""
    source = harness.source(Msg("x"))
    PlatformState(harness.store).record_send(harness.name, 8002, "sending")
    with pytest.raises(SendRefusedError, match="unconfirmed"):
        await harness.adapter.send(source, "maybe delivered before the crash", turn_id=8002)
    assert harness.posted() == []
    record = PlatformState(harness.store).get_send(harness.name, 8002)
    assert record is not None
    assert record.state == "unconfirmed"


async def test_a_refused_notice_does_not_stop_the_receiver(make_harness):
    """#5, #15: the kit's own answers (pairing, too large) never take the receiver down."""
    harness = await make_harness(allow_from=None, dm_policy="pairing")
    harness.fail("send", "blocked")
    harness.push(Msg("hello?"))
    await harness.settle()
    assert harness.posted() == []
    harness.push(Msg("me too", user="bob"))
    await harness.settle()
    (notice,) = harness.posted()
    assert "pairing approve" in notice.text


# ---------------------------------------------------------------------------- commands


async def test_the_gateway_commands_are_registered(harness):
    """#29: commands registered at startup (where the platform has a registry)."""
    if not getattr(harness, "registers_commands", True):
        pytest.skip(f"{harness.name} has no command registry; commands are read from the text")
    names = harness.registered_commands()
    assert {"new", "status", "stop"} <= set(names)


async def test_a_failed_command_registration_is_not_fatal(make_harness):
    """#29: registration failure is logged, never fatal."""
    harness = await make_harness(prepare=lambda h: h.fail("commands", "format"))
    harness.push(Msg("still works"))
    await harness.settle()
    assert [p.text for p in harness.posted()] == ["echo: still works"]
    assert harness.registered_commands() == []


async def test_a_command_addressed_to_the_bot_runs_as_a_gateway_command(harness):
    """#30: `/cmd@bot` normalises to the gateway's command path."""
    harness.push(Msg("/status", chat="group", command_to_bot=True))
    await harness.settle()
    (posted,) = harness.posted()
    assert "echo:" not in posted.text


async def test_a_command_from_someone_not_allowed_is_refused_not_run(make_harness):
    """#30: unauthorised users get a refusal (only to them where the platform can), not
    execution."""
    harness = await make_harness(allow_from=lambda h: [h.source(Msg("x", user="bob")).user_id])
    harness.push(Msg("/status", chat="group", command_to_bot=True, user="carol"))
    await harness.settle()
    told = [p.text for p in harness.posted()] + harness.ephemeral()
    assert told == ["You are not allowed to use this bot here."]
    assert harness.agent.requests == []


async def test_a_command_is_acknowledged_and_its_answer_arrives(harness):
    """#30: slash payloads and interactions are acknowledged at once, then run."""
    harness.push(Msg("/status", chat="group", command_to_bot=True))
    await harness.settle()
    acknowledged = harness.ephemeral()
    # Telegram, Matrix, WhatsApp and Signal have no answer for a command's user alone.
    assert len(acknowledged) == (
        0 if harness.name in ("telegram", "matrix", "whatsapp", "signal") else 1
    )
    assert all(text.startswith("Running /status") for text in acknowledged)
    (answer,) = harness.posted()
    assert "echo:" not in answer.text


# ---------------------------------------------------------------------------- lifecycle


async def test_stop_is_idempotent_and_nothing_is_handled_after(harness):
    """#5."""
    await harness.adapter.stop()
    await harness.adapter.stop()
    from sessiongate.adapters.kit import HandoffError

    _, event = harness.event(Msg("late"))
    with pytest.raises(HandoffError):
        await harness.adapter.admit(event)


async def test_home_channel_notices_go_to_the_home_chat(make_harness):
    harness = await make_harness(home_channel="-100777")
    assert await harness.adapter.notify_home("gateway restarted")
    assert [p.chat_id for p in harness.posted()] == ["-100777"]


# ---------------------------------------------------------------------------- approvals


async def test_an_approval_prompt_has_buttons_and_a_press_is_the_pressers_command(harness):
    """Issue 28: Approve and Deny under the prompt where the platform has buttons (declared
    `approval_buttons`); a press arrives as the presser's `/deny <id>`, answered in the chat
    like the typed command (here: no such approval waits)."""
    assert hasattr(harness.adapter, "send_approval") is _has(harness, "approval_buttons")
    _needs(harness, "approval_buttons")
    source = harness.source(Msg("hi"))
    await harness.adapter.send_approval(source, "Approval needed [ab12]: tool({})", "ab12")
    assert harness.approval_buttons() == ["approve:ab12", "deny:ab12"]
    (prompt,) = harness.posted()
    assert "tool({})" in prompt.text
    harness.press("deny:ab12", user="alice")
    await harness.settle()
    answers = [p.text for p in harness.posted()[1:]]
    assert answers == ["No approval ab12 is waiting."]
