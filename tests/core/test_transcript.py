import copy
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given, settings, strategies as st

from sessiongate.core.transcript import (
    BRANCH_SUMMARY_PREFIX,
    SUMMARY_PREFIX,
    EntryType,
    build_model_context,
    choose_compaction_cut,
    deterministic_summary,
    estimate_tokens,
    repair_tool_pairing,
    select_reset_tail,
    validate_entry,
    validate_message,
)
from sessiongate.errors import InvalidEntryError

TS = "2026-03-01T09:30:00+00:00"


def chain(*entries):
    """A root→leaf path: ids 1.., each the parent of the next."""
    out = []
    for number, entry in enumerate(entries, start=1):
        event = {"id": number, "parent_id": number - 1 or None, "timestamp": TS}
        event.setdefault("type", "message")
        event.update(entry)
        out.append(event)
    return out


def user(text, **kw):
    return {"type": "message", "role": "user", "content": text, **kw}


def assistant(text=None, calls=(), **kw):
    msg = {"type": "message", "role": "assistant", "content": text, **kw}
    if calls:
        msg["tool_calls"] = [
            {"id": c, "type": "function", "function": {"name": "run", "arguments": "{}"}}
            for c in calls
        ]
    return msg


def tool(call_id, text="ok"):
    return {"type": "message", "role": "tool", "tool_call_id": call_id, "content": text}


def contents(ctx):
    return [m["content"] for m in ctx.messages]


# --- validate_message ---------------------------------------------------------------------


def test_validate_message_normalises():
    msg = validate_message(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c1", "function": {"name": "f", "arguments": {"a": 1}}}],
            "message_id": 77,
            "timestamp": "2026-03-01T10:30:00+01:00",
            "metadata": {"exclude_from_context": False, "k": [1, 2]},
        }
    )
    assert msg == {
        "timestamp": "2026-03-01T09:30:00+00:00",
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}}
        ],
        "message_id": "77",
        "metadata": {"exclude_from_context": False, "k": [1, 2]},
    }


def test_validate_message_accepts_parts_and_stored_event_fields():
    msg = validate_message(
        {
            "id": 4,
            "parent_id": None,
            "type": "message",
            "role": "user",
            "content": [{"type": "text", "text": "hi"}, {"type": "image_url", "image_url": {}}],
            "timestamp": "2026-03-01T09:30:00Z",
        }
    )
    assert msg["id"] == 4
    assert msg["parent_id"] is None
    assert msg["content"][0] == {"type": "text", "text": "hi"}
    assert msg["timestamp"] == TS


@pytest.mark.parametrize(
    ("message", "complaint"),
    [
        ("hello", "must be an object"),
        ({"role": "robot", "content": "x"}, "unknown role"),
        ({"content": "x"}, "unknown role"),
        ({"role": "tool", "content": "x"}, "tool_call_id"),
        ({"role": "user", "content": "x", "tool_call_id": "c"}, "only tool messages"),
        ({"role": "user", "content": 5}, "content must be"),
        ({"role": "user", "content": None}, "needs content"),
        ({"role": "user", "content": ["text"]}, "each content part"),
        ({"role": "user", "content": [{"type": "text", "text": 3}]}, "text part"),
        ({"role": "user", "content": "x", "metadata": [1]}, "metadata must be"),
        (
            {"role": "user", "content": "x", "metadata": {"exclude_from_context": "yes"}},
            "exclude_from_context",
        ),
        ({"role": "user", "content": "x", "timestamp": "yesterday"}, "ISO-8601"),
        ({"role": "user", "content": "x", "timestamp": 1700000000}, "ISO-8601"),
        ({"role": "user", "content": "x", "tool_calls": []}, "only assistant"),
        ({"role": "assistant", "content": "x", "tool_calls": {}}, "must be a list"),
        (
            {"role": "assistant", "content": "", "tool_calls": [{"id": "c", "function": {}}]},
            "function name",
        ),
        (
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {"id": "c", "function": {"name": "f"}},
                    {"id": "c", "function": {"name": "g"}},
                ],
            },
            "repeat",
        ),
        ({"role": "user", "content": "x", "colour": "red"}, "unknown message fields: colour"),
        ({"role": "user", "content": "x", "type": "custom"}, "not a message"),
        ({"role": "user", "content": "x", "id": -1}, "id must be"),
        ({"role": "user", "content": "x", "message_id": ""}, "message_id"),
        ({"role": "user", "content": "x", "metadata": {"n": float("nan")}}, "JSON"),
    ],
)
def test_validate_message_rejects(message, complaint):
    with pytest.raises(InvalidEntryError, match=complaint) as info:
        validate_message(message)
    assert isinstance(info.value, ValueError)
    assert info.value.code == "invalid_entry"


@pytest.mark.parametrize(
    "timestamp",
    [
        "0001-01-01T00:00:00+14:00",
        "9999-12-31T23:59:59-14:00",
        datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=14))),
    ],
)
def test_out_of_range_timestamp_is_an_invalid_entry(timestamp):
    # Converting to UTC would leave datetime's year range: an input error, not an OverflowError.
    with pytest.raises(InvalidEntryError, match="out of range"):
        validate_message({"role": "user", "content": "x", "timestamp": timestamp})
    with pytest.raises(InvalidEntryError, match="out of range"):
        validate_entry({"type": "reset", "reason": "x", "timestamp": timestamp})


# --- validate_entry -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        (
            {"type": "custom_message", "content": "note"},
            {
                "type": "custom_message",
                "content": "note",
                "display": True,
                "role": "user",
                "metadata": None,
            },
        ),
        (
            {"type": "custom", "custom_type": "ext.state", "data": {"n": 1}},
            {"type": "custom", "custom_type": "ext.state", "data": {"n": 1}},
        ),
        (
            {"type": "compaction", "summary": "s", "first_kept_entry_id": 3, "tokens_before": 9},
            {
                "type": "compaction",
                "summary": "s",
                "first_kept_entry_id": 3,
                "tokens_before": 9,
                "tokens_after": None,
            },
        ),
        (
            {"type": "reset", "reason": "new"},
            {"type": "reset", "reason": "new", "first_kept_entry_id": None},
        ),
        (
            {"type": "branch_summary", "summary": "s", "from_entry_id": 2},
            {"type": "branch_summary", "summary": "s", "from_entry_id": 2},
        ),
        (
            {"type": "label", "target_id": 2, "label": "bookmark"},
            {"type": "label", "target_id": 2, "label": "bookmark"},
        ),
        (
            {"type": "model_change", "model": "gpt-x", "provider": "openai"},
            {"type": "model_change", "model": "gpt-x", "provider": "openai"},
        ),
        (
            {"type": "thinking_level_change", "thinking_level": "high"},
            {"type": "thinking_level_change", "thinking_level": "high"},
        ),
        ({"type": "leaf", "target_id": 5}, {"type": "leaf", "target_id": 5}),
        (
            {"type": "message", "role": "user", "content": "hi", "id": 1, "parent_id": None},
            {"type": "message", "id": 1, "parent_id": None, "role": "user", "content": "hi"},
        ),
    ],
)
def test_validate_entry_accepts_each_type(entry, expected):
    assert validate_entry(entry) == expected


@pytest.mark.parametrize(
    ("entry", "complaint"),
    [
        ({"type": "bogus"}, "unknown entry type"),
        ({}, "unknown entry type"),
        ({"type": "custom"}, "needs custom_type"),
        ({"type": "custom", "custom_type": "x", "data": {1, 2}}, "JSON"),
        ({"type": "compaction", "summary": "s"}, "needs tokens_before"),
        ({"type": "compaction", "summary": "s", "tokens_before": "9"}, "tokens_before"),
        ({"type": "compaction", "summary": 1, "tokens_before": 9}, "summary must be"),
        ({"type": "reset"}, "needs reason"),
        ({"type": "reset", "reason": "x", "first_kept_entry_id": True}, "first_kept_entry_id"),
        ({"type": "branch_summary", "summary": "s"}, "needs from_entry_id"),
        ({"type": "label", "label": "x"}, "needs target_id"),
        ({"type": "model_change", "model": ""}, "model"),
        ({"type": "custom_message", "content": "x", "display": "yes"}, "display"),
        ({"type": "custom_message", "content": "x", "role": "tool"}, "role must be"),
        ({"type": "leaf", "target_id": 1, "extra": 1}, "unknown leaf fields: extra"),
        ({"type": "reset", "reason": "x", "timestamp": "nope"}, "ISO-8601"),
    ],
)
def test_validate_entry_rejects(entry, complaint):
    with pytest.raises(InvalidEntryError, match=complaint):
        validate_entry(entry)


def test_entry_types_are_the_documented_set():
    assert {t.value for t in EntryType} == {
        "message",
        "custom_message",
        "custom",
        "compaction",
        "reset",
        "branch_summary",
        "label",
        "model_change",
        "thinking_level_change",
        "leaf",
    }


# --- build_model_context ------------------------------------------------------------------


def test_plain_conversation_becomes_chat_messages():
    path = chain(user("hi", message_id="m1", metadata={"a": 1}), assistant("hello"))
    ctx = build_model_context(path)
    assert ctx.messages == [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"},
    ]
    assert ctx.boundary_entry_id is None


def test_custom_and_excluded_never_enter_custom_message_does():
    path = chain(
        user("one"),
        {"type": "custom", "custom_type": "ext", "data": {"secret": "CUSTOM"}},
        user("shown only", metadata={"exclude_from_context": True}),
        {"type": "custom_message", "content": "injected", "display": False},
        {"type": "custom_message", "content": "sys note", "role": "system"},
        {"type": "label", "target_id": 1, "label": "x"},
    )
    ctx = build_model_context(path)
    assert ctx.messages == [
        {"role": "user", "content": "one"},
        {"role": "user", "content": "injected"},
        {"role": "system", "content": "sys note"},
    ]


def test_compaction_emits_summary_then_kept_entries_then_the_rest():
    path = chain(
        user("old 1"),  # 1
        assistant("old 2"),  # 2
        user("kept 3"),  # 3
        assistant("kept 4"),  # 4
        {"type": "compaction", "summary": "S", "first_kept_entry_id": 3, "tokens_before": 99},
        user("after 6"),  # 6
    )
    ctx = build_model_context(path)
    assert contents(ctx) == [f"{SUMMARY_PREFIX}\nS", "kept 3", "kept 4", "after 6"]
    assert ctx.messages[0]["role"] == "user"
    assert ctx.boundary_entry_id == 5


def test_compaction_without_kept_entries_keeps_only_the_summary_and_after():
    path = chain(
        user("old"),
        {"type": "compaction", "summary": "S", "tokens_before": 9},
        user("new"),
    )
    assert contents(build_model_context(path)) == [f"{SUMMARY_PREFIX}\nS", "new"]


def test_reset_keeps_only_its_tail_and_what_follows():
    path = chain(
        user("a"),
        assistant("b"),
        user("c"),
        assistant("d"),
        {"type": "reset", "reason": "new", "first_kept_entry_id": 3},
        user("e"),
    )
    assert contents(build_model_context(path)) == ["c", "d", "e"]
    bare = chain(user("a"), {"type": "reset", "reason": "new"}, user("z"))
    assert contents(build_model_context(bare)) == ["z"]


def test_the_later_boundary_wins():
    compaction_then_reset = chain(
        user("a"),
        {"type": "compaction", "summary": "S", "tokens_before": 1},
        user("b"),
        {"type": "reset", "reason": "new"},
        user("c"),
    )
    assert contents(build_model_context(compaction_then_reset)) == ["c"]
    reset_then_compaction = chain(
        user("a"),
        {"type": "reset", "reason": "new"},
        user("b"),
        assistant("c"),
        {"type": "compaction", "summary": "S", "first_kept_entry_id": 4, "tokens_before": 1},
        user("d"),
    )
    assert contents(build_model_context(reset_then_compaction)) == [
        f"{SUMMARY_PREFIX}\nS",
        "c",
        "d",
    ]


def test_a_later_compaction_supersedes_an_earlier_summary():
    path = chain(
        user("a"),  # 1
        {"type": "compaction", "summary": "S1", "tokens_before": 1},  # 2
        user("b"),  # 3
        assistant("c"),  # 4
        {"type": "compaction", "summary": "S2", "first_kept_entry_id": 3, "tokens_before": 1},
        user("d"),
    )
    assert contents(build_model_context(path)) == [f"{SUMMARY_PREFIX}\nS2", "b", "c", "d"]


def test_branch_summary_enters_as_a_user_message():
    path = chain(user("a"), {"type": "branch_summary", "summary": "tried X", "from_entry_id": 1})
    assert contents(build_model_context(path))[-1] == f"{BRANCH_SUMMARY_PREFIX}\ntried X"


def test_model_and_thinking_level_come_from_the_whole_path():
    path = chain(
        {"type": "model_change", "provider": "openai", "model": "m1"},
        {"type": "thinking_level_change", "thinking_level": "low"},
        {"type": "model_change", "provider": "local", "model": "m2"},
        user("a"),
        {"type": "reset", "reason": "new"},
        user("b"),
    )
    ctx = build_model_context(path)
    assert (ctx.model, ctx.provider, ctx.thinking_level) == ("m2", "local", "low")
    assert build_model_context([]).model is None


def test_context_is_a_copy():
    path = chain(user([{"type": "text", "text": "hi"}]))
    ctx = build_model_context(path)
    ctx.messages[0]["content"][0]["text"] = "changed"
    assert path[0]["content"][0]["text"] == "hi"


# --- tool pairing -------------------------------------------------------------------------


def test_tool_pairing_keeps_answered_calls_only():
    path = chain(
        user("go"),
        assistant("working", calls=["c1", "c2"]),
        tool("c1"),
        tool("c9"),  # no such call: orphan
        tool("c1"),  # answered already
        user("next"),
        tool("c2"),  # too late: the run of results ended
    )
    ctx = build_model_context(path)
    assert ctx.messages == [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": "working",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "run", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "ok"},
        {"role": "user", "content": "next"},
    ]


def test_an_assistant_with_only_unanswered_calls_is_dropped():
    path = chain(user("go"), assistant(None, calls=["c1"]), assistant("", calls=["c2"]))
    assert build_model_context(path).messages == [{"role": "user", "content": "go"}]


def test_an_assistant_with_text_keeps_the_text_without_calls():
    path = chain(user("go"), assistant("thinking", calls=["c1"]))
    assert build_model_context(path).messages[-1] == {"role": "assistant", "content": "thinking"}


def test_a_kept_tail_that_starts_with_tool_results_drops_them():
    path = chain(
        user("a"),
        assistant(None, calls=["c1"]),
        tool("c1"),  # 3
        assistant("done"),
        {"type": "reset", "reason": "new", "first_kept_entry_id": 3},
    )
    assert build_model_context(path).messages == [{"role": "assistant", "content": "done"}]


def test_repair_tool_pairing_does_not_mutate_its_input():
    messages = [{"role": "assistant", "content": "x", "tool_calls": [{"id": "c", "function": {}}]}]
    assert repair_tool_pairing(messages) == [{"role": "assistant", "content": "x"}]
    assert "tool_calls" in messages[0]


# --- property tests -----------------------------------------------------------------------

CALL_IDS = ["c0", "c1", "c2", "c3"]

_step = st.one_of(
    st.builds(lambda t: ("user", t), st.sampled_from(["u", "v"])),
    st.builds(
        lambda calls, text: ("assistant", calls, text),
        st.lists(st.sampled_from(CALL_IDS), max_size=3, unique=True),
        st.sampled_from([None, "", "text"]),
    ),
    st.builds(lambda c: ("tool", c), st.sampled_from(CALL_IDS)),
    st.just(("custom",)),
    st.just(("custom_message",)),
    st.just(("excluded",)),
    st.builds(lambda k: ("reset", k), st.integers(-1, 40)),
    st.builds(lambda k: ("compaction", k), st.integers(-1, 40)),
)


def _build(steps):
    entries = []
    for step in steps:
        kind = step[0]
        if kind == "user":
            entries.append(user(step[1]))
        elif kind == "assistant":
            entries.append(assistant(step[2], calls=step[1]))
        elif kind == "tool":
            entries.append(tool(step[1]))
        elif kind == "custom":
            entries.append({"type": "custom", "custom_type": "x", "data": "CUSTOM-DATA"})
        elif kind == "custom_message":
            entries.append({"type": "custom_message", "content": "cm"})
        elif kind == "excluded":
            entries.append(user("EXCLUDED", metadata={"exclude_from_context": True}))
        else:
            # -1: no kept entries; a number past the end: an id not on the path.
            kept = None if step[1] < 0 else step[1]
            extra = (
                {"tokens_before": 1, "summary": "S"} if kind == "compaction" else {"reason": "r"}
            )
            entries.append({"type": kind, "first_kept_entry_id": kept, **extra})
    return chain(*entries)


def assert_well_paired(messages):
    for index, message in enumerate(messages):
        if message["role"] == "assistant" and "tool_calls" in message:
            ids = [c["id"] for c in message["tool_calls"]]
            assert ids, "an empty tool_calls list is left behind"
            assert len(set(ids)) == len(ids)
            run = []
            for later in messages[index + 1 :]:
                if later.get("role") != "tool":
                    break
                run.append(later["tool_call_id"])
            assert sorted(run) == sorted(ids), "a call without exactly one result"
        if message["role"] == "tool":
            back = index - 1
            while back >= 0 and messages[back]["role"] == "tool":
                back -= 1
            assert back >= 0, "an orphan tool result at the start"
            owner = messages[back]
            assert owner["role"] == "assistant"
            assert message["tool_call_id"] in [c["id"] for c in owner.get("tool_calls", [])]


@settings(max_examples=400, deadline=None, database=None)
@given(st.lists(_step, max_size=30))
def test_model_context_is_always_well_paired_and_free_of_custom_entries(steps):
    path = _build(steps)
    ctx = build_model_context(path)
    assert_well_paired(ctx.messages)
    for message in ctx.messages:
        assert "CUSTOM-DATA" not in str(message)
        assert "EXCLUDED" not in str(message)
        assert set(message) <= {"role", "content", "tool_calls", "tool_call_id", "name"}


@settings(max_examples=300, deadline=None, database=None)
@given(st.lists(_step, max_size=30))
def test_an_owned_path_gives_the_same_context_and_a_copied_one_shares_nothing(steps):
    path = _build(steps)
    pristine = copy.deepcopy(path)
    copied = build_model_context(path)
    # Mutating the copied context leaves the path as it was.
    for message in copied.messages:
        for call in message.get("tool_calls", []):
            call["id"] = "MUTATED"
            call.setdefault("function", {})["name"] = "MUTATED"
    assert path == pristine
    # Handed over (events fresh from a read), the path gives the same context.
    assert build_model_context(copy.deepcopy(pristine), owned=True) == build_model_context(pristine)


@settings(max_examples=200, deadline=None, database=None)
@given(st.lists(_step, max_size=30), st.integers(0, 200))
def test_compacting_at_the_chosen_cut_stays_well_paired(steps, budget):
    path = _build(steps)
    cut = choose_compaction_cut(path, budget)
    if cut is not None:
        assert next(e for e in path if e["id"] == cut).get("role") != "tool"
    compaction = {
        "id": len(path) + 1,
        "parent_id": len(path) or None,
        "type": "compaction",
        "summary": "S",
        "first_kept_entry_id": cut,
        "tokens_before": 1,
    }
    ctx = build_model_context([*path, compaction])
    assert_well_paired(ctx.messages)
    assert estimate_tokens(ctx.messages[1:]) <= max(budget, 0) or cut is None


@settings(max_examples=200, deadline=None, database=None)
@given(st.lists(_step, max_size=30))
def test_reset_tail_starts_at_a_user_message(steps):
    path = _build(steps)
    first_kept = select_reset_tail(path)
    if first_kept is not None:
        entry = next(e for e in path if e["id"] == first_kept)
        assert entry["role"] == "user"
    reset = {
        "id": len(path) + 1,
        "parent_id": None,
        "type": "reset",
        "reason": "r",
        "first_kept_entry_id": first_kept,
    }
    ctx = build_model_context([*path, reset])
    assert_well_paired(ctx.messages)
    talk = [m for m in ctx.messages if m["role"] in ("user", "assistant")]
    assert len(talk) <= 6 + sum(1 for s in steps if s[0] == "custom_message")


# --- reset tail and compaction cut --------------------------------------------------------


def test_select_reset_tail_takes_the_last_six_starting_at_a_user_message():
    path = chain(*[user(f"u{i}") if i % 2 == 0 else assistant(f"a{i}") for i in range(10)])
    # The last six are u4 a5 u6 a7 u8 a9; u4 is entry 5.
    assert select_reset_tail(path) == 5
    # The last three start with an assistant message: the tail starts at the next user.
    assert select_reset_tail(path, max_messages=3) == 9
    assert select_reset_tail(path, max_messages=0) is None


def test_select_reset_tail_keeps_tool_exchanges_inside_the_tail():
    path = chain(
        user("a"),
        assistant(None, calls=["c"]),
        tool("c"),
        assistant("b"),
        user("c"),
    )
    # The last four user/assistant messages are 1, 2, 4 and 5 (the tool result is inside).
    assert select_reset_tail(path, max_messages=3) == 5
    first = select_reset_tail(path, max_messages=4)
    assert first == 1
    reset = {"id": 6, "parent_id": 5, "type": "reset", "reason": "r", "first_kept_entry_id": 1}
    assert len(build_model_context([*path, reset]).messages) == 5


def test_select_reset_tail_looks_only_at_the_current_context():
    path = chain(user("old"), assistant("x"), {"type": "reset", "reason": "r"}, assistant("y"))
    assert select_reset_tail(path) is None
    assert select_reset_tail([]) is None


def test_choose_compaction_cut_never_splits_a_call_from_its_results():
    big = "x" * 400  # about 100 tokens each
    path = chain(
        user(big),  # 1
        assistant(None, calls=["c1"]),  # 2
        tool("c1", big),  # 3
        tool("c1", big),  # 4 (a duplicate, still not a cut point)
        assistant(big),  # 5
        user(big),  # 6
    )
    # The token cost of each entry as the context builder renders it (ids 1..6).
    t = {
        1: estimate_tokens([{"role": "user", "content": big}]),
        2: estimate_tokens([assistant(None, calls=["c1"])]),
        3: estimate_tokens([{"role": "tool", "content": big, "tool_call_id": "c1"}]),
        5: estimate_tokens([{"role": "assistant", "content": big}]),
    }
    t[4], t[6] = t[3], t[1]
    assert choose_compaction_cut(path, t[6]) == 6
    assert choose_compaction_cut(path, t[6] + t[5] - 1) == 6
    assert choose_compaction_cut(path, t[6] + t[5]) == 5
    # Room for the tool results but not for their call: the cut stays after them.
    assert choose_compaction_cut(path, t[6] + t[5] + t[4] + t[3]) == 5
    assert choose_compaction_cut(path, t[6] + t[5] + t[4] + t[3] + t[2]) == 2
    assert choose_compaction_cut(path, sum(t.values())) == 1  # all fits: nothing to compact
    assert choose_compaction_cut(path, 0) is None
    assert choose_compaction_cut(path, t[6] - 1) is None


def test_choose_compaction_cut_counts_only_the_current_context():
    path = chain(
        user("x" * 4000),
        {"type": "reset", "reason": "r"},
        user("small"),
        assistant("reply"),
    )
    assert choose_compaction_cut(path, 1000) == 3


# --- estimate and summary -----------------------------------------------------------------


def test_estimate_tokens_is_chars_over_four_plus_overhead():
    assert estimate_tokens([]) == 0
    one = estimate_tokens([{"role": "user", "content": "x" * 400}])
    assert one == (400 + 16 + len("user") + 3) // 4
    parts = estimate_tokens([{"role": "user", "content": [{"type": "text", "text": "x" * 400}]}])
    assert parts == one
    calls = [{"id": "c", "function": {"name": "f", "arguments": "{}"}}]
    assert estimate_tokens([{"role": "assistant", "content": None, "tool_calls": calls}]) > 5


def test_deterministic_summary_is_first_lines_of_user_messages():
    messages = [
        {"role": "system", "content": "ignored"},
        {"role": "user", "content": "\n  Plan the trip  \nmore detail"},
        {"role": "assistant", "content": "Sure"},
        {"role": "user", "content": [{"type": "text", "text": "Book hotels"}]},
        {"role": "user", "content": "y" * 500},
    ]
    summary = deterministic_summary(messages)
    assert summary == deterministic_summary(messages)
    lines = summary.splitlines()
    assert lines[:2] == ["- Plan the trip", "- Book hotels"]
    assert lines[2] == "- " + "y" * 159 + "…"
    assert deterministic_summary([]) == "(no earlier user messages)"


def test_deterministic_summary_carries_an_earlier_summary_and_caps_lines():
    earlier = {"role": "user", "content": f"{SUMMARY_PREFIX}\n- first topic\n- second topic"}
    summary = deterministic_summary([earlier, {"role": "user", "content": "third"}])
    assert summary.splitlines() == ["- first topic", "- second topic", "- third"]
    many = [{"role": "user", "content": f"m{i}"} for i in range(100)]
    assert deterministic_summary(many, max_lines=3).splitlines() == ["- m97", "- m98", "- m99"]
