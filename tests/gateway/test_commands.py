"""Slash commands: parsing, effects, deduplication, and the busy table."""

from __future__ import annotations

import asyncio

import pytest
from gateway_support import settle

from sessiongate.core.transcript import build_model_context
from sessiongate.errors import MessageIdConflictError
from sessiongate.gateway.commands import (
    BUSY_REPLY,
    COMMANDS,
    UNKNOWN_REPLY,
    BusyPolicy,
    parse_command,
)

TRIGGERS = ["/new", "/reset"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("/new", ("new", "")),
        ("/NEW  Hello there ", ("new", "Hello there")),
        ("@bot /new hi", ("new", "hi")),
        ("/reset soft", ("reset", "soft")),
        ("/status@my_bot", ("status", "")),
        ("/queue line one\nline two", ("queue", "line one\nline two")),
        ("/undo 2", ("undo", "2")),
        # A `/cmd@bot` suffix and any whitespace count for the reset triggers as for the rest.
        ("/new@mybot", ("new", "")),
        ("/new@mybot hello", ("new", "hello")),
        ("/reset@bot", ("reset", "")),
        ("/reset@bot soft", ("reset", "soft")),
        ("/new\tx", ("new", "x")),
        ("/NEW@Bot\nfirst line", ("new", "first line")),
        # A Slack or Discord mention is a mention too.
        ("<@U123> /new", ("new", "")),
        ("<@!42>  /reset soft", ("reset", "soft")),
        ("<@U123|ann> /status", ("status", "")),
        ("/newer", ("newer", "")),
        ("/new@", None),
        ("<@U123> hello", None),
        ("/unknown thing", ("unknown", "thing")),
        ("/usr/bin/env", None),
        ("hello /new", None),
        ("@bot hello", None),
        ("", None),
    ],
)
def test_parse_command(text, expected):
    parsed = parse_command(text, reset_triggers=TRIGGERS)
    assert (None if parsed is None else (parsed.name, parsed.args)) == expected


def test_a_slash_word_that_is_no_command_is_parsed_as_unknown_unless_the_agent_has_it():
    typo = parse_command("/stauts", reset_triggers=TRIGGERS)
    assert typo is not None
    assert (typo.name, typo.known) == ("stauts", False)
    assert parse_command("/status", reset_triggers=TRIGGERS).known
    for listed in (["/shrug"], ["shrug"], ["/SHRUG "]):
        assert parse_command("/shrug ok", reset_triggers=TRIGGERS, agent_commands=listed) is None


async def test_an_unknown_command_is_answered_and_never_reaches_the_agent(gw):
    receipt = await gw.adapter.receive("/stauts")
    assert receipt.status == "command"
    assert receipt.reply == UNKNOWN_REPLY.format(name="stauts")
    assert "/help" in receipt.reply
    assert gw.hub.requests == []
    # Answered once: a redelivery of the same message is a duplicate, not a second answer.
    first = await gw.adapter.receive("/hepl", message_id="m-1")
    again = await gw.adapter.receive("/hepl", message_id="m-1")
    assert (first.status, again.status) == ("command", "duplicate")
    assert again.reply == first.reply


async def test_model_is_a_command_that_an_echo_agent_answers_without_a_model(gw):
    receipt = await gw.adapter.receive("/model gpt-4o")
    assert receipt.status == "command"
    assert receipt.reply == "This conversation's agent (main, echo) uses no model."
    assert gw.hub.requests == []


async def test_an_agent_command_goes_to_the_agent_as_text(make_gateway):
    gw = await make_gateway(agent_commands=["/shrug"])
    receipt = await gw.adapter.receive("/shrug fine")
    assert receipt.status == "replied"
    assert gw.hub.user_texts() == ["/shrug fine"]


async def test_sessions_lists_titles(gw):
    await gw.adapter.receive("plan the trip")
    await gw.adapter.receive("/new")
    await gw.adapter.receive("/title Budget")
    lines = (await gw.adapter.receive("/sessions")).reply.splitlines()
    assert lines[0].startswith("1. Budget · ")
    assert lines[1].startswith("2. plan the trip · ")


def test_reset_words_come_from_the_configured_triggers():
    assert parse_command("/new", reset_triggers=["start over"]) is None
    parsed = parse_command("Start Over please", reset_triggers=["start over"])
    assert (parsed.name, parsed.args) == ("new", "please")


def test_the_busy_table_lets_control_commands_through():
    policies = {name: spec.busy for name, spec in COMMANDS.items()}
    assert policies["stop"] is policies["status"] is policies["queue"] is BusyPolicy.RUN
    assert policies["new"] is policies["reset"] is BusyPolicy.INTERRUPT
    assert policies["undo"] is policies["retry"] is policies["resume"] is BusyPolicy.REFUSE


async def test_new_starts_a_session_and_the_old_one_keeps_its_transcript(gw):
    first = await gw.adapter.receive("hello")
    receipt = await gw.adapter.receive("/new")
    assert receipt.status == "command"
    assert receipt.session_id != first.session_id
    assert gw.adapter.texts()[-1] == "Started a new session."
    assert [m["content"] for m in gw.store.load_transcript(first.session_id)] == [
        "hello",
        "re: hello",
    ]
    after = await gw.adapter.receive("again")
    assert after.session_id == receipt.session_id
    assert gw.hub.requests[-1].messages == [{"role": "user", "content": "again"}]


async def test_new_with_text_runs_it_as_the_first_turn(gw):
    first = await gw.adapter.receive("hello")
    receipt = await gw.adapter.receive("/new plan a trip")
    assert receipt.status == "replied"
    assert receipt.reply == "re: plan a trip"
    assert receipt.session_id != first.session_id
    assert gw.hub.requests[-1].messages == [{"role": "user", "content": "plan a trip"}]


async def test_new_while_busy_interrupts_and_drops_what_was_waiting(make_gateway):
    gw = await make_gateway(busy_input_mode="queue")
    gw.hub.blocking = True
    running = asyncio.ensure_future(gw.adapter.receive("long"))
    started = await gw.hub.next_started()
    waiting = asyncio.ensure_future(gw.adapter.receive("follow-up"))
    await gw.adapter.receive("/queue later", wait=False)
    await settle()
    gw.hub.blocking = False
    receipt = await gw.adapter.receive("/new")
    assert "2 waiting message(s) were dropped" in receipt.reply
    assert (await running).status == "interrupted"
    assert (await waiting).status == "interrupted"
    assert gw.hub.cancelled == [started.turn_id]
    assert gw.runner.queue_depth(receipt.session_key) == 0
    await gw.runner.wait_idle()
    assert gw.hub.user_texts() == ["long"]  # nothing dropped ran afterwards
    old = gw.store.load_transcript(started.session_id)
    assert [m["content"] for m in old] == ["long"]


async def test_a_command_id_is_scoped_to_its_sender_and_lane(make_gateway):
    gw = await make_gateway(group_sessions_per_user=False)  # one shared lane for the group
    group = {"chat_id": "g", "chat_type": "group"}
    await gw.adapter.receive("/status", message_id="1", user_id="alice", **group)
    bob = await gw.adapter.receive("/status", message_id="1", user_id="bob", **group)
    assert bob.status == "command"
    # The same sender reusing the id for another command is refused, and nothing runs.
    with pytest.raises(MessageIdConflictError):
        await gw.adapter.receive("/new", message_id="1", user_id="bob", **group)
    again = await gw.adapter.receive("/status", message_id="1", user_id="bob", **group)
    assert (again.status, again.reply) == ("duplicate", bob.reply)


async def test_reset_soft_keeps_the_id_and_starts_the_context_over(gw):
    first = await gw.adapter.receive("hello")
    receipt = await gw.adapter.receive("/reset soft")
    assert receipt.session_id == first.session_id
    await gw.adapter.receive("fresh")
    assert gw.hub.requests[-1].messages == [{"role": "user", "content": "fresh"}]


async def test_a_redelivered_new_resets_only_once(gw):
    await gw.adapter.receive("hello")
    once = await gw.adapter.receive("/new", message_id="n1")
    twice = await gw.adapter.receive("/new", message_id="n1")
    assert twice.status == "duplicate"
    assert twice.reply == once.reply
    assert len(gw.store.sessions_for_key(once.session_key)) == 2


async def test_stop_interrupts_the_running_turn(make_gateway):
    gw = await make_gateway(busy_input_mode="queue")
    gw.hub.blocking = True
    running = asyncio.ensure_future(gw.adapter.receive("long"))
    await gw.hub.next_started()
    await gw.adapter.receive("next", wait=False)
    receipt = await gw.adapter.receive("/stop")
    assert receipt.reply == "Stopped the current reply. 1 waiting message(s) will run next."
    assert (await running).status == "interrupted"
    gw.hub.release_all()
    await gw.runner.wait_idle()
    assert gw.transcript() == [("user", "long"), ("user", "next"), ("assistant", "re: next")]
    assert (await gw.adapter.receive("/stop")).reply == "Nothing is running."


async def test_status_answers_at_once_while_busy(gw):
    gw.hub.blocking = True
    await gw.adapter.receive("long", wait=False)
    await gw.hub.next_started()
    receipt = await gw.adapter.receive("/status")
    assert receipt.status == "command"
    assert "State: replying, 0 waiting" in receipt.reply
    assert receipt.session_id in receipt.reply


@pytest.mark.parametrize("command", ["/undo", "/retry", "/resume"])
async def test_transcript_commands_are_refused_while_busy(gw, command):
    await gw.adapter.receive("hello")
    gw.hub.blocking = True
    await gw.adapter.receive("long", wait=False)
    await gw.hub.next_started()
    receipt = await gw.adapter.receive(command, message_id="c1")
    assert receipt.reply == BUSY_REPLY.format(name=command[1:])
    gw.hub.release_all()
    await gw.runner.wait_idle()
    assert len(gw.transcript()) == 4
    # Refused, so not remembered: the same message works once the lane is idle.
    assert (await gw.adapter.receive(command, message_id="c1")).status != "duplicate"


async def test_undo_takes_back_turns(gw):
    for text in ("one", "two", "three"):
        await gw.adapter.receive(text)
    receipt = await gw.adapter.receive("/undo 2")
    assert receipt.reply == "Took back 2 turn(s)."
    assert gw.transcript() == [("user", "one"), ("assistant", "re: one")]
    assert (await gw.adapter.receive("/undo 9")).reply == "Took back 1 turn(s)."
    assert (await gw.adapter.receive("/undo")).reply == "Nothing to take back."


@pytest.mark.parametrize("arg", ["0", "all", "abc", "-1", "1.5", "\u00b2"])
async def test_undo_with_anything_but_a_positive_count_only_shows_usage(gw, arg):
    for text in ("one", "two"):
        await gw.adapter.receive(text)
    receipt = await gw.adapter.receive(f"/undo {arg}", message_id="u1")
    assert receipt.reply == "Usage: /undo [n]"
    assert len(gw.transcript()) == 4
    # Not remembered: the same message id is free for a corrected command.
    assert (await gw.adapter.receive("/undo 1", message_id="u1")).status == "command"


async def test_undo_caps_a_huge_count(gw):
    for text in ("one", "two"):
        await gw.adapter.receive(text)
    receipt = await gw.adapter.receive("/undo " + "9" * 5000)
    assert receipt.reply == "Took back 2 turn(s)."
    assert gw.transcript() == []


async def test_retry_answers_the_last_message_again(make_gateway):
    gw = await make_gateway(group_sessions_per_user=False)
    common = {"chat_id": "g", "chat_type": "group", "user_id": "a", "user_name": "Ann"}
    await gw.adapter.receive("hi", **common)
    receipt = await gw.adapter.receive("/retry", **common)
    assert receipt.status == "replied"
    assert receipt.reply == "re: [Ann] hi"  # the stored text, not prefixed twice
    session_id = receipt.session_id
    contents = [m["content"] for m in gw.store.load_transcript(session_id)]
    assert contents == ["[Ann] hi", "re: [Ann] hi"]


async def test_resume_goes_back_to_the_previous_session(gw):
    first = await gw.adapter.receive("hello")
    await gw.adapter.receive("/new")
    receipt = await gw.adapter.receive("/resume")
    assert receipt.session_id == first.session_id
    assert receipt.reply.startswith(f"Resumed session {first.session_id}. Tokens: ")
    after = await gw.adapter.receive("where were we")
    assert after.session_id == first.session_id
    contents = [m["content"] for m in gw.store.load_transcript(first.session_id)]
    assert contents == ["hello", "re: hello", "where were we", "re: where were we"]


async def test_token_counters_follow_the_session_through_new_and_resume(gw):
    first = await gw.adapter.receive("hello there, a longer first message")
    counted = gw.store.get_session(first.session_key)
    assert counted.input_tokens > 0
    await gw.adapter.receive("/new")
    status = await gw.adapter.receive("/status")
    assert "Tokens: 0 in, 0 out" in status.reply  # the new session has used nothing yet
    await gw.adapter.receive("hi")
    second = gw.store.get_session(first.session_key)
    resumed = await gw.adapter.receive("/resume")
    own = f"Tokens: {counted.input_tokens} in, {counted.output_tokens} out"
    assert resumed.reply.endswith(own)
    assert own in (await gw.adapter.receive("/status")).reply
    row = gw.store.get_session(first.session_key)
    assert (row.input_tokens, row.output_tokens, row.total_tokens) == (
        counted.input_tokens,
        counted.output_tokens,
        counted.total_tokens,
    )
    # And forward again: the second session's counters, not the first's nor zero.
    back = await gw.adapter.receive(f"/resume {second.session_id}")
    assert back.reply.endswith(f"Tokens: {second.input_tokens} in, {second.output_tokens} out")
    assert gw.store.get_session(first.session_key).input_tokens == second.input_tokens


async def test_resume_by_number_from_the_session_list(gw):
    first = await gw.adapter.receive("hello")
    await gw.adapter.receive("/new")
    listing = await gw.adapter.receive("/sessions")
    assert listing.reply.splitlines()[1].startswith(f"2. hello · {first.session_id} · 2 messages")
    assert "(current)" in listing.reply.splitlines()[0]
    assert (await gw.adapter.receive("/resume 2")).session_id == first.session_id
    assert "No session with that number" in (await gw.adapter.receive("/resume 7")).reply


async def test_resume_refuses_another_persons_session(make_gateway):
    gw = await make_gateway()
    group = {"chat_id": "g", "chat_type": "group"}
    ann = await gw.adapter.receive("secret plans", user_id="ann", **group)
    bob = await gw.adapter.receive(f"/resume {ann.session_id}", user_id="bob", **group)
    assert bob.reply == "That session cannot be resumed from here."
    assert bob.session_id != ann.session_id


async def test_a_persons_ended_session_resumes_in_another_thread_but_never_in_two(make_gateway):
    gw = await make_gateway()
    group = {"chat_id": "g", "chat_type": "group", "user_id": "ann"}
    first = await gw.adapter.receive("hello", **group)
    await gw.adapter.receive("/new", **group)
    # Ann herself, in another thread of the same chat, may resume what the group left.
    mine = await gw.adapter.receive(f"/resume {first.session_id}", thread_id="t1", **group)
    assert mine.session_id == first.session_id
    # The group may not take it back (by number) while the thread is in it.
    receipt = await gw.adapter.receive("/resume 2", **group)
    assert receipt.reply.startswith("That session is open in another conversation")
    assert gw.store.get_session(first.session_key).session_id != first.session_id


async def test_resume_refuses_a_session_another_conversation_is_in(make_gateway):
    gw = await make_gateway()
    group = {"chat_id": "g", "chat_type": "group", "user_id": "ann"}
    live = await gw.adapter.receive("in the group", **group)
    thread = await gw.adapter.receive("in a thread", thread_id="t1", **group)
    receipt = await gw.adapter.receive(
        f"/resume {live.session_id}", thread_id="t1", message_id="r1", **group
    )
    assert receipt.reply == (
        "That session is open in another conversation; send /new there first to free it."
    )
    assert receipt.session_id == thread.session_id
    assert gw.store.get_session(thread.session_key).session_id == thread.session_id
    # Two lanes never run turns on one transcript.
    await gw.adapter.receive("next", thread_id="t1", **group)
    contents = [m["content"] for m in gw.store.load_transcript(live.session_id)]
    assert contents == ["in the group", "re: in the group"]


async def test_title_shows_and_sets(gw):
    await gw.adapter.receive("hello")
    assert (await gw.adapter.receive("/title")).reply == "Title: (none)"
    receipt = await gw.adapter.receive("/title Trip\nplanning")
    assert receipt.reply == "Title set: Trip planning"
    assert gw.store.get_session(receipt.session_key).display_name == "Trip planning"


async def test_queue_without_text_shows_usage(gw):
    receipt = await gw.adapter.receive("/queue")
    assert receipt.reply == "Usage: /queue <text>"
    assert gw.hub.requests == []


async def test_help_lists_every_command(gw):
    reply = (await gw.adapter.receive("/help")).reply
    assert all(spec.usage in reply for spec in COMMANDS.values())


async def test_a_bot_suffixed_reset_runs_its_text_as_the_first_turn(gw):
    first = await gw.adapter.receive("hello")
    receipt = await gw.adapter.receive("/new@mybot plan a trip")
    assert receipt.status == "replied"
    assert receipt.session_id != first.session_id
    assert gw.hub.user_texts()[-1] == "plan a trip"


@pytest.mark.parametrize("command", ["/new", "/reset", "/reset soft", "/resume"])
async def test_a_conversation_boundary_tears_down_the_cached_agent(gw, clock, command):
    await gw.adapter.receive("hello")
    if command == "/resume":
        await gw.adapter.receive("/new")
        await gw.adapter.receive("in the new session")
    closed = gw.hub.closed
    clock.advance(1)  # a real clock always moves between a session's start and its reset
    await gw.adapter.receive(command)
    await gw.adapter.receive("again")
    assert gw.hub.closed == closed + 1
    assert gw.runner.statistics().agent_cache_size == 1


async def test_a_deleted_lane_never_hands_its_agent_to_the_next_conversation(gw):
    first = await gw.adapter.receive("hello")
    assert gw.store.delete_session(first.session_key)
    await gw.adapter.receive("again")
    assert gw.hub.closed == 1


async def test_turns_of_one_conversation_keep_their_agent(gw):
    for text in ("one", "two", "three"):
        await gw.adapter.receive(text)
    await gw.adapter.receive("/title Trip")
    await gw.adapter.receive("four")
    assert gw.hub.closed == 0


async def test_a_mentioned_command_in_a_group_runs(gw):
    await gw.adapter.receive("hi", chat_id="g", chat_type="group", user_id="u")
    receipt = await gw.adapter.receive("@bot /new", chat_id="g", chat_type="group", user_id="u")
    assert receipt.reply == "Started a new session."


async def test_model_context_after_undo_drops_the_rewound_turns(gw):
    await gw.adapter.receive("one")
    await gw.adapter.receive("two")
    receipt = await gw.adapter.receive("/undo")
    context = build_model_context(gw.store.load_events(receipt.session_id))
    assert [m["content"] for m in context.messages] == ["one", "re: one"]
