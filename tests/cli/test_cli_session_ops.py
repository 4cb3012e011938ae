"""`sessiongate sessions context|branches|rewind|fork|switch|compact|reset` and
`pin|unpin|archive|unarchive|read|unread|label|delete`, run as the real command on a real
state.db. Each test groups several invocations: a subprocess costs about half a second."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import pytest

from sessiongate import GatewayConfig, Platform, SessionSource, SessionStore
from sessiongate.core.clock import FakeClock
from sessiongate.core.transcript import SUMMARY_PREFIX
from sessiongate.store.lanes import Inbound, InboxKind, LaneStore

if TYPE_CHECKING:
    from pathlib import Path

SEED_TIME = datetime(2020, 1, 1, tzinfo=UTC)


def _source(name: str) -> SessionSource:
    return SessionSource(platform=Platform.TELEGRAM, chat_id=name, user_id=name, chat_name=name)


def _open(home: Path) -> SessionStore:
    return SessionStore(home / "sessions", GatewayConfig(), clock=FakeClock(SEED_TIME))


def _seed(home: Path, name: str, turns: int, *, filler: int = 0) -> str:
    """A session of `turns` user/assistant pairs (entries 1..2*turns); returns its key."""
    store = _open(home)
    try:
        entry = store.get_or_create_session(_source(name))
        messages = []
        for i in range(turns):
            messages += [
                {"role": "user", "content": f"question {i}\n" + "q" * filler},
                {"role": "assistant", "content": f"answer {i}" + "a" * filler},
            ]
        store.append_messages(entry.session_id, messages)
        return entry.session_key
    finally:
        store.close()


def _ok(result) -> dict:
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def _refused(result, code: int, words: str) -> None:
    assert result.returncode == code, (result.stdout, result.stderr)
    assert words in result.stderr
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_rewind_branches_switch_and_fork_walk_the_tree(sg, home):
    key = _seed(home, "alice", 3)
    h = ("--home", str(home))

    rewound = _ok(sg("sessions", "rewind", key, "--turns", "2", *h, "--json"))
    assert rewound == {"status": "rewound", "editor_text": "question 1\n", "rewound_count": 4}

    tips = _ok(sg("sessions", "branches", key, *h, "--json"))["branches"]
    assert [(t["leaf_entry_id"], t["active"]) for t in tips] == [(2, True), (6, False)]

    assert _ok(sg("sessions", "switch", key, "6", *h, "--json")) == {"status": "switched"}
    _refused(sg("sessions", "switch", key, "3", *h), 1, "is not a branch tip")
    _refused(sg("sessions", "rewind", key, "--entry", "2", *h), 1, "is not a user message")

    forked = _ok(sg("sessions", "fork", key, "--entry", "3", *h, "--json"))
    assert forked["editor_text"] == "question 1\n"

    store = _open(home)
    try:
        entry = store.get_session(key)
        assert entry is not None
        assert store.model_context(entry.session_id).messages[-1]["content"] == "answer 2"
        child = store.get_session(forked["session_key"])
        assert child is not None
        assert child.parent_session_key == key
        assert len(store.model_context(child.session_id).messages) == 2
    finally:
        store.close()


def test_compact_summarises_a_short_conversation_when_asked(sg, home):
    # Two small turns, far under the default window's threshold: asked for, it compacts.
    key = _seed(home, "amy", 2)
    h = ("--home", str(home))
    done = _ok(sg("sessions", "compact", key, *h, "--json"))
    assert (done["compacted"], done["reason"]) == (True, None)
    context = _ok(sg("sessions", "context", key, *h, "--json"))
    assert [m["content"] for m in context["messages"][1:]] == ["question 1\n", "answer 1"]
    again = sg("sessions", "compact", key, *h)
    assert again.returncode == 0, again.stderr
    assert "not compacted (nothing to compact)" in again.stdout


def test_compact_summarises_without_a_model_and_reset_starts_afresh(sg, home):
    # The smallest window the config allows keeps a quarter of it (250 tokens) verbatim.
    home.mkdir(parents=True)
    (home / "config.yaml").write_text("agent:\n  context_window: 1000\n", encoding="utf-8")
    key = _seed(home, "bob", 6, filler=400)
    h = ("--home", str(home))
    # A stuck-loop counter in the database and in the file recovery merges from.
    store = _open(home)
    try:
        LaneStore(store).merge_restart_counts({key: 3, "agent:main:other": 2})
    finally:
        store.close()
    counts_file = home / "restart_counts.json"
    counts_file.write_text(json.dumps({key: 3, "agent:main:other": 2}), encoding="utf-8")

    done = _ok(sg("sessions", "compact", key, *h, "--json"))
    assert done["compacted"] is True
    assert done["tokens_after"] < done["tokens_before"]

    context = _ok(sg("sessions", "context", key, *h, "--json"))
    summary = context["messages"][0]["content"]
    assert summary.startswith(SUMMARY_PREFIX)
    assert "- question 0" in summary
    assert context["boundary_entry_id"] is not None

    again = _ok(sg("sessions", "compact", key, *h, "--json"))
    assert (again["compacted"], again["reason"]) == (False, "nothing_to_compact")

    store = _open(home)
    try:
        old = store.get_session(key)
        assert old is not None
        assert old.compaction_count == 1
        old_id = old.session_id
    finally:
        store.close()
    new_id = _ok(sg("sessions", "reset", key, *h, "--json"))["session_id"]
    assert new_id != old_id

    store = _open(home)
    try:
        entry = store.get_session(key)
        assert entry is not None
        assert entry.session_id == new_id
        assert entry.compaction_count == 0  # a new incarnation starts its counters afresh
        assert store.session_info(old_id) is not None  # the old conversation is kept
        assert LaneStore(store).restart_counts() == {"agent:main:other": 2}
    finally:
        store.close()
    assert json.loads(counts_file.read_text(encoding="utf-8")) == {"agent:main:other": 2}


@pytest.fixture
def busy(home: Path) -> str:
    """alice with two turns and a third journalled as running (as a live gateway leaves it)."""
    key = _seed(home, "alice", 2)
    store = _open(home)
    try:
        entry = store.get_session(key)
        assert entry is not None
        _, claim = LaneStore(store).accept_and_claim(
            Inbound(source=_source("alice"), text="still thinking"),
            entry=entry,
            kind=InboxKind.SLOT,
            cap=32,
        )
        assert claim is not None
    finally:
        store.close()
    return key


def test_moves_of_the_transcript_are_refused_while_a_turn_runs(sg, home, busy):
    h = ("--home", str(home))
    for args in (
        ("rewind", busy),
        ("switch", busy, "2"),
        ("fork", busy),
        ("fork", busy, "--entry", "3"),
        ("reset", busy),
        ("compact", busy),
        ("delete", busy, "--yes"),
    ):
        _refused(sg("sessions", *args, *h), 1, "while a turn is running")

    # The one fork allowed beside a turn copies only what the turn cannot change.
    forked = _ok(sg("sessions", "fork", busy, "--from", "last-completed", *h, "--json"))

    store = _open(home)
    try:
        entry = store.get_session(busy)
        assert entry is not None
        assert len(store.load_events(entry.session_id)) == 4  # nothing moved or was added
        assert store.list_branches(entry.session_id)[0]["leaf_entry_id"] == 4
        child = store.get_session(forked["session_key"])
        assert child is not None
        assert len(store.model_context(child.session_id).messages) == 4
    finally:
        store.close()


def test_row_commands_pin_label_mark_and_archive(sg, home, seeded):
    alice, bob = seeded["alice"], seeded["bob"]
    h = ("--home", str(home))

    assert _ok(sg("sessions", "pin", alice, *h, "--json"))["pinned"] is True
    assert _ok(sg("sessions", "label", alice, "work [/] stuff", *h, "--json"))["label"] == (
        "work [/] stuff"
    )
    _refused(sg("sessions", "label", bob, "work [/] stuff", *h), 1, "already used")
    assert _ok(sg("sessions", "unread", alice, *h, "--json"))["unread"] is True
    assert _ok(sg("sessions", "read", alice, *h, "--json"))["unread"] is False
    _refused(sg("sessions", "archive", alice, "--expected-session-id", "stale", *h), 1, "moved on")
    archived = _ok(sg("sessions", "archive", alice, *h, "--json"))
    assert (archived["archived"], archived["pinned"]) == (True, False)
    _refused(sg("sessions", "compact", alice, *h), 1, "archived")
    assert _ok(sg("sessions", "unarchive", alice, *h, "--json"))["archived"] is False

    result = sg("sessions", "label", alice, "--clear", *h)
    assert result.returncode == 0, result.stderr
    assert "cleared the label" in result.stdout
    store = _open(home)
    try:
        entry = store.get_session(alice)
        assert entry is not None
        assert (entry.label, entry.archived, entry.unread) == (None, False, False)
    finally:
        store.close()


def test_delete_asks_first_and_archives_the_transcript(sg, home, seeded):
    alice = seeded["alice"]
    h = ("--home", str(home))

    _refused(sg("sessions", "delete", alice, *h, input="n\n"), 1, "not deleted")
    result = sg("sessions", "delete", alice, *h, "--json", input="y\n")
    assert _ok(result) == {"deleted": True, "session_key": alice}
    assert "[y/N]" in result.stderr  # the question goes to stderr, stdout stays JSON
    _refused(sg("sessions", "delete", alice, "--yes", *h), 1, "was deleted")
    assert list((home / "sessions" / "archive").glob("*.json.gz"))


def test_bad_and_unknown_keys_are_one_line_errors(sg, home, seeded):
    h = ("--home", str(home))
    _refused(sg("sessions", "pin", "not a [/] key", *h), 2, "invalid session key")
    _refused(sg("sessions", "rewind", "\udcff", *h), 2, "not valid UTF-8")
    _refused(sg("sessions", "reset", "agent:main:telegram:dm:nobody", *h), 1, "no session")
    _refused(
        sg("sessions", "fork", seeded["bob"], "--entry", "1", "--from", "active", *h), 2, "not both"
    )


def test_archive_is_refused_while_a_turn_runs_or_messages_wait(sg, home, busy):
    # An archived lane drops its waiting rows unrun, and those messages were acknowledged.
    h = ("--home", str(home))
    _refused(sg("sessions", "archive", busy, *h), 1, "while a turn is running")
    waiting = _seed(home, "bob", 1)
    store = _open(home)
    try:
        entry = store.get_session(waiting)
        assert entry is not None
        LaneStore(store).accept(
            Inbound(source=_source("bob"), text="not run yet", message_id="b-1"),
            session_key=waiting,
            session_id=entry.session_id,
            kind=InboxKind.QUEUED,
            cap=32,
        )
    finally:
        store.close()
    _refused(sg("sessions", "archive", waiting, *h), 1, "messages wait")
    store = _open(home)
    try:
        for key in (busy, waiting):
            entry = store.get_session(key)
            assert entry is not None
            assert entry.archived is False
        assert LaneStore(store).queue_depth(waiting) == 1
    finally:
        store.close()


def test_model_choice_and_a_reset_that_keeps_the_tail(sg, home):
    key = _seed(home, "carol", 4)
    h = ("--home", str(home))
    row = _ok(
        sg("sessions", "model", key, "--model", "m-1", "--thinking-level", "low", *h, "--json")
    )
    assert (row["model_override"], row["thinking_level"]) == ("m-1", "low")
    _refused(sg("sessions", "model", key, *h), 2, "give --model")
    kept = _ok(sg("sessions", "reset", key, "--mode", "boundary", "--keep-tail", *h, "--json"))
    context = _ok(sg("sessions", "context", key, *h, "--json"))
    assert context["session_id"] == kept["session_id"]
    assert context["messages"][0]["content"].startswith("question 1")
    assert len(context["messages"]) == 6
    default = _ok(sg("sessions", "model", key, "--model", "default", *h, "--json"))
    assert default["model_override"] is None


def test_branches_json_marks_the_empty_start_active_after_rewinding_everything(sg, home, seeded):
    import json

    key = seeded["alice"]
    assert sg("sessions", "rewind", key, "--turns", "9", "--home", str(home)).returncode == 0
    result = sg("sessions", "branches", key, "--home", str(home), "--json")
    assert result.returncode == 0, result.stderr
    branches = json.loads(result.stdout)["branches"]
    assert (branches[0]["leaf_entry_id"], branches[0]["active"]) == (None, True)
    assert sum(b["active"] for b in branches) == 1
