"""Importing other systems' homes on every backend: a Hermes home written by Hermes itself
(`tests/fixtures/make_hermes_home.py`), an OpenClaw state directory in its documented
format and an OpenClaw per-agent SQLite database in its source's schema
(`tests/fixtures/make_openclaw_agent_db.py`). Trees, flags, counters and stamps carry over;
a second run changes nothing; a run cut short is finished by the next; a broken session is
refused whole; a database of another schema is refused naming it."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from tests.fixtures import make_openclaw_agent_db as oc_db

from sessiongate.errors import ForeignStoreError
from sessiongate.store.foreign.apply import apply_plan
from sessiongate.store.foreign.hermes import read_hermes_home
from sessiongate.store.foreign.openclaw import read_openclaw_state

if TYPE_CHECKING:
    from sessiongate import SessionStore

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
HERMES = FIXTURES / "hermes" / "home"
OPENCLAW = FIXTURES / "openclaw" / "state"
DM = "agent:main:telegram:dm:1001"
GROUP = "agent:main:telegram:group:-200:1002"


def _branches(store: SessionStore, session_id: str) -> tuple[list[str], list[str]]:
    events = store.load_events(session_id, branch="all")
    on = [str(e.get("content")) for e in events if e["type"] == "message" and e["on_path"]]
    off = [str(e.get("content")) for e in events if e["type"] == "message" and not e["on_path"]]
    return on, off


def test_a_hermes_home_keeps_keys_ids_branches_tool_pairs_flags_and_counters(store):
    plan = read_hermes_home(HERMES)
    summary = apply_plan(store, plan)
    assert summary.skipped == []
    assert summary.sessions_imported == 7
    assert summary.routes_imported == 6

    dm = store.get_session(DM)
    assert dm is not None
    assert dm.input_tokens == 1200
    assert dm.output_tokens == 340
    assert dm.last_prompt_tokens == 321
    on, off = _branches(store, dm.session_id)
    assert off == ["and tomorrow, rewound later?", "Tomorrow: rain (rewound answer)."]
    assert on[-2:] == ["thanks, kept after the rewind", "You are welcome."]
    messages = store.model_context(dm.session_id).messages
    call = next(m for m in messages if m.get("tool_calls"))
    result = next(m for m in messages if m["role"] == "tool")
    assert result["tool_call_id"] == call["tool_calls"][0]["id"] == "call_w1"
    assert not any("rewound" in str(m.get("content")) for m in messages)

    # The reset left an ended session that /resume lists, with its own counters.
    group = store.get_session(GROUP)
    assert group is not None
    with store.database.read() as conn:
        all_ids = conn.session_ids_of_key(GROUP)
        assert len(all_ids) == 2
        ended = next(i for i in all_ids if i != group.session_id)
        row = conn.get_session_row(ended)
        assert row is not None
        assert row.end_reason == "session_reset"
        assert conn.load_counters(row.sid)["input_tokens"] == 77
    # /resume lists it and switches back to it, with its own counters.
    assert [i["session_id"] for i in store.sessions_for_key(GROUP)].count(ended) == 1
    resumed = store.switch_session(GROUP, ended)
    assert resumed is not None
    assert resumed.session_id == ended
    assert resumed.input_tokens == 77
    assert next(m["content"] for m in store.load_transcript(ended)) == (
        "first incarnation of the team lane"
    )

    assert store.get_session("agent:main:telegram:dm:1003").suspended
    pending = store.get_session("agent:main:telegram:dm:1004")
    assert pending is not None
    assert pending.resume_pending
    assert pending.resume_reason == "restart_timeout"
    legacy = store.get_session("agent:main:telegram:dm:1005")
    assert legacy is not None
    assert [m["content"] for m in store.load_transcript(legacy.session_id)] == [
        "legacy jsonl hello",
        "legacy jsonl answer",
    ]
    # Search is rebuilt here from what was imported.
    assert store.search("Lyon")

    # Compacted in place: the old turns stay on the path before a boundary, and the model
    # context is the compacted set, as Hermes loads it; the archived flag carries over.
    compacted = store.get_session("agent:main:telegram:dm:1006")
    assert compacted is not None
    assert compacted.archived_at is not None
    events = store.load_events(compacted.session_id)
    assert [e["type"] for e in events].count("reset") == 1
    assert [m["content"] for m in store.model_context(compacted.session_id).messages] == [
        "[summary] the user told a long story",
        "summary acknowledged",
    ]
    assert "long story part one" in [e.get("content") for e in events]


def test_importing_twice_changes_nothing(store):
    plan = read_hermes_home(HERMES)
    apply_plan(store, plan)
    before = [(e.session_key, e.session_id, e.updated_at) for e in store.list_sessions()]
    again = apply_plan(store, read_hermes_home(HERMES))
    assert again.sessions_imported == 0
    assert again.sessions_present == 7
    assert again.routes_imported == 0
    assert again.completed_before is not None
    assert [(e.session_key, e.session_id, e.updated_at) for e in store.list_sessions()] == before


def test_a_run_cut_short_is_finished_by_the_next(store):
    plan = read_hermes_home(HERMES)
    done: list[str] = []

    def crash_after_two(session_id: str) -> None:
        done.append(session_id)
        if len(done) == 2:
            raise KeyboardInterrupt  # as a kill between two sessions' commits

    with pytest.raises(KeyboardInterrupt):
        apply_plan(store, plan, progress=crash_after_two)
    assert store.list_sessions() == []  # routes come last
    rest = apply_plan(store, read_hermes_home(HERMES))
    assert rest.sessions_present == 2
    assert rest.sessions_imported == 5
    assert len(store.list_sessions()) == 6


def test_a_session_that_cannot_be_stored_is_refused_whole(store):
    plan = read_hermes_home(HERMES)
    broken = next(s for s in plan.sessions if s.session_key == DM)
    broken.nodes[-1].message = {"role": "assistant", "content": 42}  # not storable text
    summary = apply_plan(store, plan)
    assert any(broken.session_id in item["what"] for item in summary.skipped)
    with store.database.read() as conn:
        assert conn.get_session_row(broken.session_id) is None
    assert store.get_session(DM) is None  # its route waits for its session


def test_a_dry_run_counts_and_writes_nothing(store):
    summary = apply_plan(store, read_hermes_home(HERMES), dry_run=True)
    assert summary.sessions_imported == 7
    assert summary.routes_imported == 6
    assert store.list_sessions() == []
    with store.database.read() as conn:
        assert not conn.has_any_sessions()


def test_an_openclaw_state_keeps_the_tree_leaf_stamps_overrides_and_agents(store):
    plan = read_openclaw_state(OPENCLAW)
    summary = apply_plan(store, plan)
    assert summary.sessions_imported == 3
    assert [s["what"] for s in summary.skipped] == [
        "agents/ops/sessions: 'agent:ops:slack:channel:C02'"
    ]
    assert "parent 'zzzzzzzz' does not come before it" in summary.skipped[0]["why"]

    entry = store.get_session("agent:main:telegram:dm:501")
    assert entry is not None
    assert entry.pinned_at is not None
    assert entry.pinned_at.timestamp() == 1767225000
    assert entry.marked_unread_at is not None
    assert entry.model_override == "gpt-4o-mini"
    assert entry.provider_override == "openai"
    assert entry.thinking_level == "high"
    assert entry.input_tokens == 900
    archived = store.get_session("agent:main:discord:group:g77")
    assert archived is not None
    assert archived.archived_at is not None
    # The agent folder names the namespace of a key written without one.
    assert store.get_session("agent:ops:slack:channel:C01") is not None

    events = store.load_events(entry.session_id, branch="all")
    kinds = [e["type"] for e in events]
    for kind in (
        "label",
        "branch_summary",
        "custom",
        "custom_message",
        "model_change",
        "compaction",
    ):
        assert kind in kinds
    off = [e.get("content") for e in events if not e["on_path"]]
    assert off == ["delete them (abandoned branch)", "Deleting is risky."]
    leaf = [e for e in events if e["on_path"]][-1]
    assert leaf["type"] == "custom"
    assert leaf["custom_type"] == "openclaw:session_info"
    context = store.model_context(entry.session_id).messages
    assert "The user listed /tmp" in context[0]["content"]
    assert context[-1]["content"] == "Both files, a.txt and b.txt."
    compaction = next(e for e in events if e["type"] == "compaction")
    kept = next(e for e in events if e.get("content") == "Two files: a.txt and b.txt.")
    assert compaction["first_kept_entry_id"] == kept["id"]
    assert apply_plan(store, read_openclaw_state(OPENCLAW)).sessions_imported == 0


@pytest.mark.parametrize(
    ("mutate", "problem"),
    [
        (lambda home: (home / "state.db").write_bytes(b"not a database at all" * 100), "state.db"),
        (lambda home: (home / "sessions" / "sessions.json").write_text("{broken"), "sessions.json"),
        (
            lambda home: (
                (home / "state.db").unlink() or (home / "sessions" / "sessions.json").unlink()
            ),
            "not a Hermes home",
        ),
    ],
)
def test_a_corrupt_or_foreign_hermes_home_is_refused_naming_the_file(tmp_path, mutate, problem):
    home = tmp_path / "hermes"
    shutil.copytree(HERMES, home)
    mutate(home)
    with pytest.raises(ForeignStoreError, match=problem):
        read_hermes_home(home)


def test_a_foreign_sqlite_file_is_not_taken_for_a_hermes_database(tmp_path):
    import sqlite3

    home = tmp_path / "hermes"
    home.mkdir()
    conn = sqlite3.connect(home / "state.db")
    conn.execute("CREATE TABLE sessions (id TEXT)")
    conn.commit()
    conn.close()
    with pytest.raises(ForeignStoreError, match="not a Hermes state database"):
        read_hermes_home(home)


def test_an_openclaw_index_that_is_not_an_object_is_refused(tmp_path):
    state = tmp_path / "oc"
    shutil.copytree(OPENCLAW, state)
    (state / "agents" / "main" / "sessions" / "sessions.json").write_text(json.dumps([1, 2]))
    with pytest.raises(ForeignStoreError, match=r"sessions\.json: not an OpenClaw routing index"):
        read_openclaw_state(state)
    with pytest.raises(ForeignStoreError, match="no agents/"):
        read_openclaw_state(tmp_path)


def test_a_sqlite_file_that_is_not_the_agent_database_is_listed_not_read(tmp_path):
    state = tmp_path / "oc"
    shutil.copytree(OPENCLAW, state)
    (state / "agents" / "main" / "sessions" / "sessions.sqlite").write_bytes(b"")
    plan = read_openclaw_state(state)
    [listed] = [s for s in plan.skipped if s.what.endswith("sessions.sqlite")]
    assert "openclaw-agent.sqlite" in listed.why
    assert len(plan.sessions) == 3


def _agent_state(tmp_path: Path) -> Path:
    state = tmp_path / "oc-db"
    oc_db.write_agent_db(state)
    return state


def test_a_per_agent_database_keeps_the_tree_leaf_stamps_overrides_and_agent(store, tmp_path):
    state = _agent_state(tmp_path)
    summary = apply_plan(store, read_openclaw_state(state))
    assert (summary.sessions_imported, summary.routes_imported) == (2, 2)
    [unnamed] = summary.skipped
    assert oc_db.UNNAMED_ID in unnamed["what"]
    assert "openclaw-agent.sqlite" in unnamed["what"]

    entry = store.get_session(oc_db.MAIN_KEY)
    assert entry is not None
    assert entry.session_id == oc_db.MAIN_ID
    assert entry.chat_type == "dm"
    assert entry.pinned_at is not None
    assert entry.pinned_at.timestamp() * 1000 == oc_db.T0 + 500
    assert entry.marked_unread_at is not None
    assert entry.model_override == "claude-opus"
    assert entry.provider_override == "anthropic"
    assert entry.input_tokens == 300
    side = store.get_session(oc_db.SIDE_KEY)
    assert side is not None
    assert side.archived_at is not None
    assert side.archived_at.timestamp() * 1000 == oc_db.T0 + 30000
    assert side.chat_type == "channel"

    events = store.load_events(oc_db.MAIN_ID, branch="all")
    kinds = {e["type"] for e in events}
    assert {"label", "branch_summary", "custom", "custom_message", "compaction"} <= kinds
    off = [e.get("content") for e in events if not e["on_path"]]
    assert off == ["remove it (abandoned branch)"]
    leaf = [e for e in events if e["on_path"]][-1]
    assert leaf["content"] == "Still just app."
    compaction = next(e for e in events if e["type"] == "compaction")
    kept = next(e for e in events if e.get("content") == "One folder: app.")
    assert compaction["first_kept_entry_id"] == kept["id"]
    tool = next(e for e in events if e.get("role") == "tool")
    assert tool["tool_call_id"] == "call_1"
    context = store.model_context(oc_db.MAIN_ID).messages
    assert "The user listed /srv." in context[0]["content"]
    assert context[-1]["content"] == "Still just app."


def test_a_per_agent_database_imported_twice_changes_nothing(store, tmp_path):
    state = _agent_state(tmp_path)
    apply_plan(store, read_openclaw_state(state))
    before = [(e.session_key, e.session_id, e.updated_at) for e in store.list_sessions()]
    tree = store.load_events(oc_db.MAIN_ID, branch="all")
    again = apply_plan(store, read_openclaw_state(state))
    assert (again.sessions_imported, again.routes_imported) == (0, 0)
    assert again.sessions_present == 2
    assert [(e.session_key, e.session_id, e.updated_at) for e in store.list_sessions()] == before
    assert store.load_events(oc_db.MAIN_ID, branch="all") == tree


def test_a_per_agent_database_dry_run_counts_and_writes_nothing(store, tmp_path):
    summary = apply_plan(store, read_openclaw_state(_agent_state(tmp_path)), dry_run=True)
    assert (summary.sessions_imported, summary.routes_imported) == (2, 2)
    assert store.list_sessions() == []
    with store.database.read() as conn:
        assert not conn.has_any_sessions()


def _drop_events(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.execute("DROP TABLE transcript_event_identities")
    conn.execute("DROP TABLE transcript_events")
    conn.commit()
    conn.close()


def _drop_entry_json(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.execute("ALTER TABLE session_entries DROP COLUMN entry_json")
    conn.commit()
    conn.close()


def _other_owner(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.execute("UPDATE schema_meta SET agent_id = 'intruder'")
    conn.commit()
    conn.close()


@pytest.mark.parametrize(
    ("mutate", "problem"),
    [
        (lambda path: path.write_bytes(b"not a database at all" * 100), "not a readable SQLite"),
        (_drop_events, "missing table transcript_events"),
        (_drop_entry_json, "missing column session_entries.entry_json"),
        (_other_owner, "belongs to agent 'intruder'"),
    ],
)
def test_a_corrupt_or_foreign_agent_database_is_refused_naming_it(store, tmp_path, mutate, problem):
    state = _agent_state(tmp_path)
    mutate(state / "agents" / "coder" / "agent" / "openclaw-agent.sqlite")
    with pytest.raises(ForeignStoreError, match=problem) as refused:
        read_openclaw_state(state)
    assert "agents/coder/agent/openclaw-agent.sqlite" in refused.value.message
    assert store.list_sessions() == []


def test_a_key_in_both_stores_is_taken_from_the_database(store, tmp_path):
    state = _agent_state(tmp_path)
    sessions = state / "agents" / "coder" / "sessions"
    sessions.mkdir(parents=True)
    legacy = "0a0a0a0a-0000-4000-8000-00000000000a"
    (sessions / "sessions.json").write_text(
        json.dumps({oc_db.MAIN_KEY: {"sessionId": legacy, "updatedAt": oc_db.T0}})
    )
    (sessions / f"{legacy}.jsonl").write_text(json.dumps({"type": "session", "id": legacy}))
    plan = read_openclaw_state(state)
    assert [s.session_id for s in plan.sessions if s.session_key == oc_db.MAIN_KEY] == [
        oc_db.MAIN_ID
    ]
    assert any("superseded" in s.why for s in plan.skipped)


def test_a_per_agent_database_import_cut_short_is_finished_by_the_next(store, tmp_path):
    state = _agent_state(tmp_path)

    def crash_after_one(session_id: str) -> None:
        raise KeyboardInterrupt  # as a kill after the first session's commit

    with pytest.raises(KeyboardInterrupt):
        apply_plan(store, read_openclaw_state(state), progress=crash_after_one)
    rest = apply_plan(store, read_openclaw_state(state))
    assert (rest.sessions_present, rest.sessions_imported, rest.routes_imported) == (1, 1, 2)
    assert store.get_session(oc_db.MAIN_KEY) is not None
    assert store.get_session(oc_db.SIDE_KEY) is not None


def test_a_broken_event_row_refuses_its_session_whole_naming_the_seq(store, tmp_path):
    state = _agent_state(tmp_path)
    conn = sqlite3.connect(state / "agents" / "coder" / "agent" / "openclaw-agent.sqlite")
    conn.execute(
        "UPDATE transcript_events SET event_json = '{broken' WHERE session_id = ? AND seq = 5",
        (oc_db.MAIN_ID,),
    )
    conn.commit()
    conn.close()
    summary = apply_plan(store, read_openclaw_state(state))
    assert summary.sessions_imported == 1
    [refused] = [s for s in summary.skipped if oc_db.MAIN_KEY in s["what"]]
    assert "seq 5 is not JSON" in refused["why"]
    assert store.get_session(oc_db.MAIN_KEY) is None
    with store.database.read() as conn_:
        assert conn_.get_session_row(oc_db.MAIN_ID) is None
