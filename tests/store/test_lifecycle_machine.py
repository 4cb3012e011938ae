"""A state-machine test of the session lifecycle against a simple model of what must hold.

Random sequences of messages, resets, suspends, resume markings, rewinds, forks, prunes and
restarts (closing and reopening the store on the same files) run against the real store.
"""

from __future__ import annotations

import shutil
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from hypothesis import settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from sessiongate import GatewayConfig, SessionSource, SessionStore
from sessiongate.core.clock import FakeClock

CHATS = st.sampled_from(["a", "b", "c"])


class Lifecycle(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="sg-machine-"))
        self.clock = FakeClock(datetime(2026, 1, 1, tzinfo=UTC))
        self.config = GatewayConfig(mirror_sessions_json=False)
        self.store = SessionStore(self.dir, self.config, clock=self.clock)
        # Model: key -> current session id, flags; session id -> texts on the active path.
        self.current: dict[str, str] = {}
        self.suspended: set[str] = set()
        self.pending: set[str] = set()
        self.transcripts: dict[str, list[str]] = {}
        self.counter = 0

    def teardown(self) -> None:
        self.store.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def key(self, chat: str) -> str:
        return f"agent:main:telegram:dm:{chat}"

    @rule(chat=CHATS)
    def message(self, chat: str) -> None:
        key = self.key(chat)
        entry = self.store.get_or_create_session(SessionSource(platform="telegram", chat_id=chat))
        assert entry.session_key == key
        if key in self.current and key not in self.suspended:
            assert entry.session_id == self.current[key]
        else:
            assert entry.session_id not in self.transcripts
            self.transcripts[entry.session_id] = []
        self.suspended.discard(key)
        if entry.session_id != self.current.get(key):
            self.pending.discard(key)
        assert entry.resume_pending == (key in self.pending)
        self.current[key] = entry.session_id
        self.counter += 1
        text = f"m{self.counter}"
        self.store.append_messages(
            entry.session_id,
            [
                {"role": "user", "content": text, "message_id": text},
                {"role": "assistant", "content": "r" + text},
            ],
        )
        self.transcripts[entry.session_id] += [text, "r" + text]
        self.clock.advance(1)

    @precondition(lambda self: self.current)
    @rule(data=st.data())
    def reset(self, data: st.DataObject) -> None:
        key = data.draw(st.sampled_from(sorted(self.current)))
        entry = self.store.reset_session(key)
        assert entry is not None
        assert entry.session_id != self.current[key]
        assert entry.is_fresh_reset
        self.current[key] = entry.session_id
        self.transcripts[entry.session_id] = []
        self.suspended.discard(key)
        self.pending.discard(key)

    @precondition(lambda self: self.current)
    @rule(data=st.data())
    def suspend(self, data: st.DataObject) -> None:
        key = data.draw(st.sampled_from(sorted(self.current)))
        assert self.store.suspend_session(key)
        self.suspended.add(key)

    @precondition(lambda self: self.current)
    @rule(data=st.data())
    def mark_resume(self, data: st.DataObject) -> None:
        key = data.draw(st.sampled_from(sorted(self.current)))
        marked = self.store.mark_resume_pending(key, reason="restart_interrupted")
        assert marked == (key not in self.suspended)
        if marked:
            self.pending.add(key)

    @precondition(lambda self: self.current)
    @rule(data=st.data())
    def clear_resume(self, data: st.DataObject) -> None:
        key = data.draw(st.sampled_from(sorted(self.current)))
        assert self.store.clear_resume_pending(key) == (key in self.pending)
        self.pending.discard(key)

    @precondition(lambda self: self.current)
    @rule(data=st.data(), n=st.integers(min_value=1, max_value=3))
    def rewind(self, data: st.DataObject, n: int) -> None:
        key = data.draw(st.sampled_from(sorted(self.current)))
        sid = self.current[key]
        texts = self.transcripts[sid]
        turns = len(texts) // 2
        result = self.store.rewind_session(sid, n)
        undone = min(n, turns)
        assert result["turns_undone"] == undone
        assert result["rewound_count"] == 2 * undone
        if undone:
            assert result["target_text"] == texts[-2 * undone]
            self.transcripts[sid] = texts[: -2 * undone]

    @precondition(lambda self: self.current)
    @rule(data=st.data())
    def fork(self, data: st.DataObject) -> None:
        key = data.draw(st.sampled_from(sorted(self.current)))
        child, _ = self.store.fork_session(key)
        texts = [m["content"] for m in self.store.load_transcript(child.session_id)]
        assert texts == self.transcripts[self.current[key]]

    @rule()
    def prune(self) -> None:
        self.clock.advance(10 * 86400)
        pruned = self.store.prune_old_entries(5)
        gone = [k for k in self.current if k not in self.suspended]
        assert pruned >= len(gone)
        for key in gone:
            del self.current[key]
            self.pending.discard(key)

    @rule()
    def restart(self) -> None:
        self.store.close()
        self.store = SessionStore(self.dir, self.config, clock=self.clock)

    @invariant()
    def store_matches_model(self) -> None:
        for key, sid in self.current.items():
            entry = self.store.get_session(key)
            assert entry is not None
            assert entry.session_id == sid
            assert entry.suspended == (key in self.suspended)
            texts = [m["content"] for m in self.store.load_transcript(sid)]
            assert texts == self.transcripts[sid]
        ids = [self.current[k] for k in self.current]
        assert len(ids) == len(set(ids))


Lifecycle.TestCase.settings = settings(max_examples=25, stateful_step_count=25, deadline=None)
test_lifecycle = Lifecycle.TestCase
