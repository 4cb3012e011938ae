"""Two processes on one `state.db`: nothing lost, nothing duplicated, no turn interleaved."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from typing import TYPE_CHECKING

from sessiongate import GatewayConfig, SessionSource, SessionStore

if TYPE_CHECKING:
    from pathlib import Path

WRITER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from sessiongate import GatewayConfig, SessionSource, SessionStore

    home, name, shared, turns = Path(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4])
    store = SessionStore(home, GatewayConfig(mirror_sessions_json=False))
    errors = 0
    try:
        for i in range(turns):
            chat = shared if shared != "-" else name
            source = SessionSource(platform="api", chat_id=chat)
            sid = store.get_or_create_session(source).session_id
            turn = [
                {"role": "user", "content": f"{name}:{i}:q", "message_id": f"{name}-{i}"},
                {"role": "tool", "content": f"{name}:{i}:t", "tool_call_id": "x"},
                {"role": "assistant", "content": f"{name}:{i}:a"},
            ]
            try:
                store.append_messages(sid, turn)
            except Exception as exc:  # counted, and the test requires zero
                errors += 1
                print("error", type(exc).__name__, exc, file=sys.stderr)
    finally:
        store.close()
    print(errors)
    """
)


def run_writers(home: Path, shared: str, turns: int) -> list[int]:
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(home), name, shared, str(turns)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in ("w1", "w2")
    ]
    errors = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        errors.append(int(out.strip().splitlines()[-1]))
    return errors


def transcript(home: Path, chat: str) -> list[str]:
    store = SessionStore(home, GatewayConfig(mirror_sessions_json=False))
    try:
        sid = store.get_or_create_session(SessionSource(platform="api", chat_id=chat)).session_id
        return [m["content"] for m in store.load_transcript(sid)]
    finally:
        store.close()


def test_two_writers_on_distinct_sessions(tmp_path: Path):
    assert run_writers(tmp_path, "-", 150) == [0, 0]
    for name in ("w1", "w2"):
        texts = transcript(tmp_path, name)
        assert len(texts) == 450
        assert texts[::3] == [f"{name}:{i}:q" for i in range(150)]


def test_two_writers_on_one_shared_session_never_interleave(tmp_path: Path):
    assert run_writers(tmp_path, "shared", 150) == [0, 0]
    texts = transcript(tmp_path, "shared")
    assert len(texts) == 900  # nothing lost
    assert len(set(texts)) == 900  # nothing duplicated
    for start in range(0, 900, 3):
        turn = texts[start : start + 3]
        prefix = turn[0].rsplit(":", 1)[0]
        assert turn == [f"{prefix}:q", f"{prefix}:t", f"{prefix}:a"]  # one turn, contiguous
    for name in ("w1", "w2"):
        mine = [t for t in texts[::3] if t.startswith(name + ":")]
        assert mine == [f"{name}:{i}:q" for i in range(150)]  # per-writer order kept


def test_redelivered_turns_are_not_duplicated_across_processes(tmp_path: Path):
    store = SessionStore(tmp_path, GatewayConfig(mirror_sessions_json=False))
    sid = store.get_or_create_session(SessionSource(platform="api", chat_id="shared")).session_id
    store.close()
    # Both writers use the same message ids: every turn's user message lands once.
    script = WRITER.replace('f"{name}-{i}"', 'f"same-{i}"')
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script, str(tmp_path), name, "shared", "60"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in ("w1", "w2")
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    texts = transcript(tmp_path, "shared")
    users = [t for t in texts if t.endswith(":q")]
    assert sorted(int(t.split(":")[1]) for t in users) == list(range(60))
    assert sid
