"""`SessionStore.preview`: a session's message count and last message, from one read, on
every backend."""

from __future__ import annotations

from sessiongate import SessionSource
from sessiongate.store.transcript_ops import PREVIEW_CHARS


def test_preview_counts_the_active_branch_and_gives_the_last_first_line(store):
    entry = store.get_or_create_session(SessionSource(platform="api", chat_id="p", user_id="p"))
    assert store.preview(entry.session_id) == {"message_count": 0, "last_message": None}
    store.append_messages(
        entry.session_id,
        [
            {"role": "user", "content": "question"},
            {"role": "assistant", "content": "\n  first line  \nsecond line"},
        ],
    )
    preview = store.preview(entry.session_id)
    assert preview["message_count"] == 2
    last = preview["last_message"]
    assert (last["role"], last["text"], last["notice"]) == ("assistant", "first line", None)
    assert last["timestamp"]
    store.append_messages(
        entry.session_id,
        [
            {"role": "user", "content": [{"type": "text", "text": "x" * 400}]},
            {
                "role": "assistant",
                "content": "Sorry, something went wrong.",
                "metadata": {"exclude_from_context": True, "gateway_notice": "failed"},
            },
        ],
    )
    last = store.preview(entry.session_id)["last_message"]
    assert last["notice"] == "failed"
    store.rewind_session(entry.session_id, 1)
    preview = store.preview(entry.session_id)
    assert preview["message_count"] == 2  # the rewound turn is off the active branch
    assert store.preview("no-such-session") is None


def test_a_long_first_line_is_cut(store):
    entry = store.get_or_create_session(SessionSource(platform="api", chat_id="q", user_id="q"))
    store.append_messages(entry.session_id, [{"role": "user", "content": "y" * 500}])
    text = store.preview(entry.session_id)["last_message"]["text"]
    assert len(text) == PREVIEW_CHARS
    assert text.endswith("…")
