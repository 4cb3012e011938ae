"""Rules that keep the transcript tree coherent across rewrite, rewind, fork and `append_entry`:
boundaries survive a rewrite, a rewind never crosses a reset, references point at real entries.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from sessiongate.core.transcript import SUMMARY_PREFIX, estimate_tokens
from sessiongate.errors import InvalidEntryError
from suite_support import lane

if TYPE_CHECKING:
    from sessiongate import SessionStore


def turn(text: str, **extra: Any) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": text, **extra},
        {"role": "assistant", "content": f"re: {text}"},
    ]


def contents(messages: list[dict[str, Any]]) -> list[Any]:
    return [m["content"] for m in messages]


def path_types(store: SessionStore, sid: str) -> list[str]:
    return [e["type"] for e in store.load_events(sid)]


# ---------------------------------------------------------------- rewrite


def test_rewrite_after_soft_reset_keeps_the_boundary(make_store):
    store = make_store(reset_mode="boundary")
    key, sid = lane(store)
    store.append_messages(sid, turn("secret old"))
    store.reset_session(key)
    store.append_messages(sid, turn("new q"))
    loaded = store.load_transcript(sid)
    store.rewrite_transcript(sid, loaded[:-1])
    assert path_types(store, sid) == ["message", "message", "reset", "message"]
    assert contents(store.model_context(sid).messages) == ["new q"]


def test_rewrite_that_edits_the_first_turn_after_a_reset_keeps_the_boundary(make_store):
    store = make_store(reset_mode="boundary")
    key, sid = lane(store)
    store.append_messages(sid, turn("secret old"))
    store.reset_session(key)
    store.append_messages(sid, turn("new q"))
    loaded = store.load_transcript(sid)
    store.rewrite_transcript(sid, [*loaded[:2], {"role": "user", "content": "edited"}])
    assert path_types(store, sid) == ["message", "message", "reset", "message"]
    assert contents(store.model_context(sid).messages) == ["edited"]


def test_rewrite_keeps_a_compaction_inside_the_common_prefix(store: SessionStore):
    _, sid = lane(store)
    ids = store.append_messages(sid, turn("one") + turn("two"))
    store.append_entry(
        sid,
        {"type": "compaction", "summary": "S", "first_kept_entry_id": ids[2], "tokens_before": 9},
    )
    store.append_messages(sid, turn("three"))
    loaded = store.load_transcript(sid)
    store.rewrite_transcript(sid, [*loaded[:-1], {"role": "assistant", "content": "better"}])
    context = store.model_context(sid)
    assert contents(context.messages) == [
        f"{SUMMARY_PREFIX}\nS",
        "two",
        "re: two",
        "three",
        "better",
    ]
    # Only the replaced reply left the path; the kept prefix was not copied.
    assert len(store.load_events(sid, branch="all")) == 8


def test_rewrite_with_identical_messages_changes_nothing(store: SessionStore):
    _, sid = lane(store)
    store.append_messages(sid, turn("one", message_id="m1"))
    before = store.load_events(sid, branch="all")
    generation = store.transcript_generation(sid)
    store.rewrite_transcript(sid, store.load_transcript(sid))
    assert store.load_events(sid, branch="all") == before
    assert store.transcript_generation(sid) == generation


def test_rewrite_reuses_message_ids_of_the_rows_it_replaces(store: SessionStore):
    _, sid = lane(store)
    store.append_messages(sid, turn("one", message_id="m1") + turn("two", message_id="m2"))
    store.rewrite_transcript(
        sid, [{"role": "user", "content": "one, edited", "message_id": "m1"}, *turn("two")]
    )
    assert contents(store.load_transcript(sid)) == ["one, edited", "two", "re: two"]
    assert store.load_transcript(sid)[0]["message_id"] == "m1"


def test_rewrite_takes_message_ids_back_from_other_branches(store: SessionStore):
    _, sid = lane(store)
    store.append_messages(sid, turn("one"))
    tip = store.list_branches(sid)[0]["leaf_entry_id"]
    store.rewind_session(sid, 1)
    store.append_messages(sid, turn("other", message_id="m2"))
    assert store.switch_branch(sid, tip) == "switched"  # "other" keeps its key off the path
    store.rewrite_transcript(
        sid, [*turn("one"), {"role": "user", "content": "x", "message_id": "m2"}]
    )
    assert contents(store.load_transcript(sid)) == ["one", "re: one", "x"]


def test_rewrite_rejects_duplicate_message_ids(store: SessionStore):
    _, sid = lane(store)
    store.append_messages(sid, turn("keep"))
    with pytest.raises(InvalidEntryError, match="message_id 'z'"):
        store.rewrite_transcript(
            sid,
            [
                {"role": "user", "content": "x", "message_id": "z"},
                {"role": "user", "content": "y", "message_id": "z"},
            ],
        )
    assert contents(store.load_transcript(sid)) == ["keep", "re: keep"]


# ---------------------------------------------------------------- rewind


def test_message_appended_again_after_a_rewind_reaches_the_active_path(store: SessionStore):
    _, sid = lane(store)
    store.append_messages(sid, turn("hello one", message_id="m1"))
    store.append_messages(sid, turn("hello two", message_id="m2"))
    assert store.rewind_session(sid, 1)["turns_undone"] == 1
    ids = store.append_messages(sid, [{"role": "user", "content": "hello two", "message_id": "m2"}])
    assert ids[0] is not None
    assert contents(store.load_transcript(sid)) == ["hello one", "re: hello one", "hello two"]
    # The key is live again on the new row: a redelivery is still a no-op.
    again = store.append_messages(
        sid, [{"role": "user", "content": "hello two", "message_id": "m2"}]
    )
    assert again == [None]


def test_message_appended_again_after_rewind_to_reaches_the_active_path(store: SessionStore):
    _, sid = lane(store)
    ids = store.append_messages(sid, turn("one", message_id="m1") + turn("two", message_id="m2"))
    assert ids[2] is not None
    assert store.rewind_to(sid, ids[2])["status"] == "rewound"
    got = store.append_messages(sid, [{"role": "user", "content": "two", "message_id": "m2"}])
    assert got[0] is not None


def test_branch_switch_keeps_idempotency_keys(store: SessionStore):
    _, sid = lane(store)
    store.append_messages(sid, turn("one"))
    store.append_messages(sid, turn("two", message_id="m2"))
    tip = store.list_branches(sid)[0]["leaf_entry_id"]
    store.rewind_session(sid, 1)
    store.append_messages(sid, turn("two again", message_id="m3"))
    assert store.switch_branch(sid, tip) == "switched"
    assert store.append_messages(sid, [{"role": "user", "content": "x", "message_id": "m3"}]) == [
        None
    ]


def test_undo_after_soft_reset_does_not_cross_the_reset(make_store):
    store = make_store(reset_mode="boundary")
    key, sid = lane(store)
    store.append_messages(sid, turn("one"))
    store.append_messages(sid, turn("two"))
    store.reset_session(key)
    assert store.rewind_session(sid, 1) == {
        "rewound_count": 0,
        "turns_undone": 0,
        "target_text": "",
    }
    assert store.model_context(sid).messages == []
    assert path_types(store, sid)[-1] == "reset"


def test_undo_after_soft_reset_counts_only_later_turns(make_store):
    store = make_store(reset_mode="boundary")
    key, sid = lane(store)
    store.append_messages(sid, turn("one"))
    store.reset_session(key)
    store.append_messages(sid, turn("three"))
    result = store.rewind_session(sid, 5)
    assert result == {"rewound_count": 2, "turns_undone": 1, "target_text": "three"}
    assert path_types(store, sid)[-1] == "reset"
    assert store.model_context(sid).messages == []


def test_rewind_to_an_entry_before_the_latest_reset_is_refused(make_store):
    store = make_store(reset_mode="boundary")
    key, sid = lane(store)
    ids = store.append_messages(sid, turn("one"))
    store.reset_session(key)
    store.append_messages(sid, turn("two"))
    assert ids[0] is not None
    with pytest.raises(InvalidEntryError, match="reset"):
        store.rewind_to(sid, ids[0])
    assert contents(store.model_context(sid).messages) == ["two", "re: two"]


# ---------------------------------------------------------------- append_entry


def test_append_entry_refuses_leaf(store: SessionStore):
    _, sid = lane(store)
    ids = store.append_messages(sid, turn("one"))
    with pytest.raises(InvalidEntryError, match="rewind"):
        store.append_entry(sid, {"type": "leaf", "target_id": ids[0]})
    assert path_types(store, sid) == ["message", "message"]


def test_append_entry_refuses_messages(store: SessionStore):
    _, sid = lane(store)
    with pytest.raises(InvalidEntryError, match="append_messages"):
        store.append_entry(sid, {"type": "message", "role": "user", "content": "x"})
    assert store.load_events(sid) == []


@pytest.mark.parametrize(
    "entry",
    [
        {"type": "compaction", "summary": "S", "first_kept_entry_id": 999_999, "tokens_before": 5},
        {"type": "reset", "reason": "x", "first_kept_entry_id": 999_999},
        {"type": "label", "target_id": 999_999, "label": "x"},
        {"type": "branch_summary", "summary": "x", "from_entry_id": 999_999},
    ],
)
def test_append_entry_refuses_dangling_references(store: SessionStore, entry: dict[str, Any]):
    _, sid = lane(store)
    store.append_messages(sid, turn("one"))
    with pytest.raises(InvalidEntryError, match="999999"):
        store.append_entry(sid, entry)
    assert path_types(store, sid) == ["message", "message"]


def test_append_entry_refuses_references_into_another_session(store: SessionStore):
    _, sid = lane(store)
    _, other = lane(store, "2")
    foreign = store.append_messages(other, turn("elsewhere"))[0]
    with pytest.raises(InvalidEntryError):
        store.append_entry(sid, {"type": "label", "target_id": foreign, "label": "x"})


def test_compaction_must_keep_from_the_active_path(store: SessionStore):
    _, sid = lane(store)
    ids = store.append_messages(sid, turn("one") + turn("two"))
    store.rewind_session(sid, 1)
    off_path = ids[2]
    with pytest.raises(InvalidEntryError, match="active path"):
        store.append_entry(
            sid,
            {
                "type": "compaction",
                "summary": "S",
                "first_kept_entry_id": off_path,
                "tokens_before": 5,
            },
        )
    # Labels and branch summaries may point anywhere in the session's tree.
    assert store.append_entry(sid, {"type": "label", "target_id": off_path, "label": "x"})
    assert store.append_entry(
        sid, {"type": "branch_summary", "summary": "s", "from_entry_id": off_path}
    )


# ---------------------------------------------------------------- forks


def compacted_lane(store: SessionStore) -> tuple[str, str, int]:
    """A lane whose raw path is large but whose context (after a compaction) is small."""
    key, sid = lane(store)
    big = "word " * 400
    ids: list[int | None] = []
    for i in range(6):
        ids += store.append_messages(sid, turn(f"msg {i} {big}"))
    kept = ids[-2]
    assert kept is not None
    store.append_entry(
        sid,
        {
            "type": "compaction",
            "summary": "short",
            "first_kept_entry_id": kept,
            "tokens_before": 3000,
        },
    )
    return key, sid, estimate_tokens(store.model_context(sid).messages)


def test_fork_admission_counts_the_context_not_the_raw_path(store: SessionStore):
    key, sid, context_tokens = compacted_lane(store)
    raw = estimate_tokens(store.load_transcript(sid))
    limit = context_tokens + 50
    assert raw > limit
    child, _ = store.fork_session(key, max_tokens=limit)
    assert not child.extra.get("fork_isolated")
    done, _ = store.fork_session(key, fork_from="last-completed", max_tokens=limit)
    assert store.load_transcript(done.session_id)


def test_fork_keeps_the_compacted_context(store: SessionStore):
    key, sid, _ = compacted_lane(store)
    child, _ = store.fork_session(key)
    assert store.model_context(child.session_id).messages == store.model_context(sid).messages
