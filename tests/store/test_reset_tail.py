"""A reset that keeps a tail: at most the last 6 user/assistant messages, from a user message."""

from __future__ import annotations

import pytest

from sessiongate import SessionSource

SOURCE = SessionSource(platform="telegram", chat_id="c1")


def _talk(store, session_id: str, turns: int) -> None:
    for n in range(turns):
        store.append_messages(
            session_id,
            [{"role": "user", "content": f"u{n}"}, {"role": "assistant", "content": f"a{n}"}],
        )


@pytest.mark.parametrize("mode", ["boundary", "new_session"])
def test_the_last_three_exchanges_survive_the_reset(store, mode):
    entry = store.get_or_create_session(SOURCE)
    _talk(store, entry.session_id, 5)
    after = store.reset_session(entry.session_key, mode=mode, keep_tail=True)
    assert (after.session_id == entry.session_id) is (mode == "boundary")
    context = store.model_context(after.session_id)
    assert [m["content"] for m in context.messages] == ["u2", "a2", "u3", "a3", "u4", "a4"]


def test_a_new_sessions_tail_starts_at_a_user_message_and_carries_no_tool_rows(store):
    entry = store.get_or_create_session(SOURCE)
    _talk(store, entry.session_id, 1)
    store.append_messages(
        entry.session_id,
        [
            {"role": "user", "content": "look it up"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "c1", "function": {"name": "f", "arguments": "{}"}}],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "found"},
            {"role": "assistant", "content": "here"},
            {"role": "assistant", "content": "and more"},
            {"role": "assistant", "content": "done"},
            {"role": "assistant", "content": "really"},
        ],
    )
    after = store.reset_session(entry.session_key, keep_tail=True)
    # The last six user/assistant messages start at "look it up" (the tool call counts as an
    # assistant message); the new session keeps their text, without the tool exchange.
    assert [m["content"] for m in store.model_context(after.session_id).messages] == [
        "look it up",
        "here",
        "and more",
        "done",
        "really",
    ]


def test_without_keep_tail_nothing_is_kept(store):
    entry = store.get_or_create_session(SOURCE)
    _talk(store, entry.session_id, 3)
    after = store.reset_session(entry.session_key)
    assert store.model_context(after.session_id).messages == []
