"""Text SQLite cannot store (lone surrogates) is refused as bad input and writes nothing."""

from __future__ import annotations

import pytest

from sessiongate import SessionSource
from sessiongate.errors import InvalidEntryError

SOURCE = SessionSource(platform="telegram", chat_id="c1")


def test_a_lone_surrogate_in_a_message_refuses_the_whole_append(store):
    entry = store.get_or_create_session(SOURCE)
    store.append_messages(entry.session_id, [{"role": "user", "content": "kept"}])
    with pytest.raises(InvalidEntryError, match="lone surrogates"):
        store.append_messages(
            entry.session_id,
            [{"role": "user", "content": "fine"}, {"role": "user", "content": "bad \ud800"}],
        )
    assert [m["content"] for m in store.load_transcript(entry.session_id)] == ["kept"]


def test_a_lone_surrogate_in_a_label_is_refused(store):
    entry = store.get_or_create_session(SOURCE)
    with pytest.raises(InvalidEntryError, match="lone surrogates"):
        store.patch_session(entry.session_key, label="x\udc00")
    assert store.get_session(entry.session_key).label is None
