"""Faults injected into a real gateway process: what the HTTP client sees, what survives.

- a corrupt full-text index while serving: search answers (degraded), writes go on,
  `sessiongate doctor` names the problem, `--repair` rebuilds it;
- a damaged or hostile `sessions.json` at start: backed up, the gateway starts, and no entry of
  it can attach one conversation to another's transcript;
- a truncated `state.db`: the gateway refuses to start, with a clear message and no traceback;
- writes failing (a file-size limit on the gateway process, which is how a full disk looks to
  SQLite): the client gets a 503 JSON error, never a 500, and nothing acknowledged is lost;
- a crash right after a delete: the deleted conversation stays deleted.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import resource
import sqlite3
import sys
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from sg_process import (
    ChildExitedError,
    GatewayProcess,
    clean_env,
    is_drained,
    poll_until,
    read_turn_states,
)
from torture import Sent, TortureResult

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.torture

# Hang guards; never timing assertions.
GUARD_SECONDS = 60.0


def _key_path(key: str, suffix: str = "") -> str:
    from urllib.parse import quote

    return f"/v1/sessions/{quote(key, safe='')}{suffix}"


async def _run_cli(*args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "sessiongate",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=clean_env(),
    )
    async with asyncio.timeout(GUARD_SECONDS):
        out, err = await proc.communicate()
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


# ---------------------------------------------------------------------- the search index


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(
            "UPDATE entries_fts_data SET block = zeroblob(length(block)) WHERE id > 10",
            id="leaf-blocks",
        ),
        pytest.param("DELETE FROM entries_fts_data WHERE id > 1", id="structure-record"),
    ],
)
async def test_a_corrupt_search_index_degrades_search_and_doctor_repairs_it(
    tmp_path: Path, damage: str
):
    home = tmp_path / "home"
    db = home / "sessions" / "state.db"
    gateway = GatewayProcess(home)
    try:
        url = await gateway.start()
        async with httpx.AsyncClient(base_url=url, timeout=GUARD_SECONDS) as client:
            for i in range(5):
                sent = await client.post(
                    "/v1/messages", json={"chat_id": "s", "text": f"aardvark number {i}"}
                )
                assert sent.json()["status"] == "replied"
            found = (await client.get("/v1/search", params={"q": "aardvark"})).json()
            assert found["degraded"] is False
            assert found["results"]

            # Another process damages the index under the running gateway.
            conn = sqlite3.connect(db, timeout=30)
            with conn:
                conn.execute(damage)
            conn.close()

            # Search keeps answering. (Zeroed leaf blocks are not detected by a query: the
            # answer is silently empty until `doctor` runs the index's integrity check.)
            hit = await client.get("/v1/search", params={"q": "aardvark"})
            assert hit.status_code == 200, hit.text
            if "DELETE" in damage:
                assert hit.json()["degraded"] is True
                assert hit.json()["results"]
            # Canonical writes go on while the index is damaged.
            after = await client.post("/v1/messages", json={"chat_id": "s", "text": "zebra"})
            assert after.json()["reply"] == "echo: zebra"

            code, out, _ = await _run_cli("doctor", "--home", str(home), "--json")
            assert code == 1
            checks = {c["name"]: c for c in json.loads(out)["checks"]}
            assert not checks["search index"]["ok"]
            assert checks["database"]["ok"]  # the index is not mistaken for the database

            code, out, err = await _run_cli("doctor", "--home", str(home), "--repair", "--json")
            assert code == 0, out + err
            assert {c["name"]: c for c in json.loads(out)["checks"]}["search index"]["repaired"]

            healed = (await client.get("/v1/search", params={"q": "zebra"})).json()
            assert healed["degraded"] is False
            assert healed["results"]
        assert await gateway.terminate() == 0
    finally:
        await gateway.aclose()


# ---------------------------------------------------------------------- sessions.json


async def _seed(gateway: GatewayProcess, chat: str, text: str) -> dict[str, Any]:
    url = await gateway.start()
    async with httpx.AsyncClient(base_url=url, timeout=GUARD_SECONDS) as client:
        answer = (await client.post("/v1/messages", json={"chat_id": chat, "text": text})).json()
    assert await gateway.terminate() == 0
    return dict(answer)


@pytest.mark.parametrize(
    "content",
    [
        pytest.param("{not json", id="not-json"),
        pytest.param("[1, 2]", id="not-an-object"),
        pytest.param('{"agent:main:api:dm:x": {"session_id": "../../../etc"}}', id="path-trick"),
        pytest.param("[" * 100_000, id="deeply-nested"),
    ],
)
async def test_a_damaged_sessions_json_is_backed_up_and_the_gateway_starts(
    tmp_path: Path, content: str
):
    home = tmp_path / "home"
    gateway = GatewayProcess(home)
    try:
        seeded = await _seed(gateway, "keep", "still here")
        (home / "sessions" / "sessions.json").write_text(content)
        url = await gateway.start()
        async with httpx.AsyncClient(base_url=url, timeout=GUARD_SECONDS) as client:
            row = await client.get(_key_path(seeded["session_key"], "/transcript"))
            assert next(e["content"] for e in row.json()["events"]) == "still here"
        assert await gateway.terminate() == 0
    finally:
        await gateway.aclose()
    backups = [p for p in (home / "sessions").iterdir() if p.name.startswith("sessions.json.bad-")]
    assert backups
    assert backups[0].read_text() == content


async def test_a_sessions_json_entry_cannot_attach_to_another_conversation(tmp_path: Path):
    home = tmp_path / "home"
    gateway = GatewayProcess(home)
    try:
        victim = await _seed(gateway, "victim", "my password is hunter2")
        mirror = home / "sessions" / "sessions.json"
        data = json.loads(mirror.read_text())
        forged = {**data[victim["session_key"]], "session_key": "agent:main:api:dm:mallory"}
        forged["origin"] = None
        data["agent:main:api:dm:mallory"] = forged
        mirror.write_text(json.dumps(data))
        url = await gateway.start()
        async with httpx.AsyncClient(base_url=url, timeout=GUARD_SECONDS) as client:
            await client.post("/v1/messages", json={"chat_id": "mallory", "text": "what was it?"})
            context = (await client.get(_key_path("agent:main:api:dm:mallory", "/context"))).json()
            victim_view = (await client.get(_key_path(victim["session_key"], "/transcript"))).json()
        assert await gateway.terminate() == 0
    finally:
        await gateway.aclose()
    seen_by_mallory = [m["content"] for m in context["messages"]]
    assert "my password is hunter2" not in seen_by_mallory
    assert "what was it?" not in [e["content"] for e in victim_view["events"]]


# ---------------------------------------------------------------------- state.db


async def test_a_truncated_state_db_refuses_to_start_with_a_clear_message(tmp_path: Path):
    home = tmp_path / "home"
    gateway = GatewayProcess(home)
    try:
        await _seed(gateway, "t", "about to be truncated")
        db = home / "sessions" / "state.db"
        db.write_bytes(db.read_bytes()[: 4096 + 100])
        for extra in ("state.db-wal", "state.db-shm"):
            (home / "sessions" / extra).unlink(missing_ok=True)
        with pytest.raises(ChildExitedError) as exited:
            await gateway.start()
        assert exited.value.code not in (0, None)
    finally:
        await gateway.aclose()
    log = gateway.log_text()
    tail = log.splitlines()[-3:]
    assert "Traceback" not in "\n".join(tail)
    assert "error:" in log
    assert "doctor" in log  # the message says what to run next


# ---------------------------------------------------------------------- failing writes


def _limit_file_size(pid: int, limit: int | None) -> None:
    """The soft RLIMIT_FSIZE of the gateway: a write past `limit` bytes fails with EFBIG, as on
    a full disk (Python ignores SIGXFSZ, so the process lives); None lifts it."""
    soft = resource.RLIM_INFINITY if limit is None else limit
    resource.prlimit(pid, resource.RLIMIT_FSIZE, (soft, resource.RLIM_INFINITY))


def _largest_file(home: Path) -> int:
    return max(p.stat().st_size for p in (home / "sessions").iterdir() if p.is_file())


async def test_failing_writes_answer_503_json_and_lose_nothing_acknowledged(tmp_path: Path):
    home = tmp_path / "home"
    db = home / "sessions" / "state.db"
    gateway = GatewayProcess(home, env=clean_env(SESSIONGATE_BUSY_INPUT_MODE="queue"))
    sent: dict[str, list[Sent]] = {}
    refused: list[dict[str, Any]] = []
    try:
        url = await gateway.start()
        assert gateway.proc is not None
        _limit_file_size(gateway.proc.pid, _largest_file(home) + 200_000)
        async with httpx.AsyncClient(base_url=url, timeout=GUARD_SECONDS) as client:
            for seq in range(40):
                chat = f"c{seq % 3}"
                item = Sent(chat, seq, f"{chat}-m{seq}", f"tok:{chat}:{seq}")
                body = {
                    "chat_id": chat,
                    "text": item.token + "\n" + "x" * 20_000,
                    "message_id": item.message_id,
                    # `wait: true` would hang on a turn whose commit fails (see the xfail below).
                    "wait": False,
                }
                answer = await client.post("/v1/messages", json=body)
                assert answer.status_code in (200, 202, 503), answer.text
                if answer.status_code == 503:
                    refused.append(answer.json())
                    continue
                item.acked_status = str(answer.json()["status"])
                sent.setdefault(chat, []).append(item)
        assert refused, "the size limit never made a write fail"
        assert {r["error"]["code"] for r in refused} == {"store_unavailable"}
        _limit_file_size(gateway.proc.pid, None)
        assert await gateway.terminate() == 0
        # Whatever was acknowledged runs after the restart.
        await gateway.start()
        await poll_until(lambda: is_drained(db))
        assert await gateway.terminate() == 0
    finally:
        await gateway.aclose()
    result = TortureResult()
    acked = {s.token: s for items in sent.values() for s in items}
    _check_big_messages(home, acked, sent, result)
    assert result.ok, result.problems


def _check_big_messages(
    home: Path, acked: dict[str, Sent], sent: dict[str, list[Sent]], result: TortureResult
) -> None:
    """`check_home` for messages whose text is `token + "\\n" + padding`: the padding lines are
    dropped from the transcripts before the checks (they are not tokens)."""
    from sessiongate import GatewayConfig, SessionStore

    with SessionStore(home / "sessions", GatewayConfig(mirror_sessions_json=False)) as store:
        for entry in store.list_sessions():
            events = store.load_events(entry.session_id)
            tokens = [
                line
                for e in events
                if e.get("role") == "user"
                for line in str(e.get("content")).split("\n")
                if line.startswith("tok:")
            ]
            for token in tokens:
                if token not in {s.token for items in sent.values() for s in items}:
                    result.problems.append(f"unknown {token}")
            replies = [e for e in events if e.get("role") == "assistant"]
            users = [e for e in events if e.get("role") == "user"]
            if len(replies) != len(users):
                result.problems.append(f"{entry.session_key}: {len(users)} turns, {len(replies)}")
            for token, n in {t: tokens.count(t) for t in tokens}.items():
                if n != 1:
                    result.problems.append(f"{token} stored {n} times")
            for token in acked:
                chat_key = f"agent:main:api:dm:{acked[token].chat}"
                if chat_key == entry.session_key and token not in tokens:
                    result.problems.append(f"acknowledged {token} lost")


async def test_a_failed_reply_commit_leaves_no_turn_running_behind_later_ones(tmp_path: Path):
    home = tmp_path / "home"
    db = home / "sessions" / "state.db"
    env = clean_env(SESSIONGATE_BUSY_INPUT_MODE="queue", SESSIONGATE_AGENT__ECHO__DELAY_SECONDS="1")
    gateway = GatewayProcess(home, env=env)
    try:
        url = await gateway.start()
        assert gateway.proc is not None
        async with httpx.AsyncClient(base_url=url, timeout=GUARD_SECONDS) as client:
            first = asyncio.create_task(
                client.post(
                    "/v1/messages",
                    json={"chat_id": "c", "text": "big " + "x" * 90_000, "message_id": "m1"},
                )
            )
            await poll_until(lambda: bool(read_turn_states(db).get("running")))
            # The reply (twice the text) cannot be written once the turn finishes.
            _limit_file_size(gateway.proc.pid, _largest_file(home) + 20_000)
            await poll_until(lambda: "lane worker failed" in gateway.log_text() or first.done())
            _limit_file_size(gateway.proc.pid, None)
            later = await client.post(
                "/v1/messages", json={"chat_id": "c", "text": "later", "message_id": "m2"}
            )
            assert later.json()["status"] == "replied"
            first_done = first.done()
            first.cancel()
            with contextlib.suppress(asyncio.CancelledError, httpx.HTTPError):
                await first
        states = read_turn_states(db)
        await gateway.kill()
    finally:
        await gateway.aclose()
    assert first_done, "the first client is still waiting for an answer"
    assert not states.get("running"), states


# ---------------------------------------------------------------------- deletes


async def test_a_session_deleted_just_before_a_crash_stays_deleted(tmp_path: Path):
    home = tmp_path / "home"
    mirror = home / "sessions" / "sessions.json"
    gateway = GatewayProcess(home)
    try:
        url = await gateway.start()
        async with httpx.AsyncClient(base_url=url, timeout=GUARD_SECONDS) as client:
            sent = await client.post("/v1/messages", json={"chat_id": "gone", "text": "private"})
            key = sent.json()["session_key"]
            await poll_until(
                lambda: mirror.exists() and key in json.loads(mirror.read_text() or "{}")
            )
            before_delete = mirror.read_bytes()
            deleted = await client.delete(_key_path(key))
            assert deleted.status_code == 200
        await gateway.kill()
        # The kill lands inside the mirror's coalescing interval (it writes about a second
        # after a change); putting back the file of before the delete makes that window
        # certain instead of likely.
        mirror.write_bytes(before_delete)
        url = await gateway.start()
        async with httpx.AsyncClient(base_url=url, timeout=GUARD_SECONDS) as client:
            after = await client.get(_key_path(key))
        assert await gateway.terminate() == 0
    finally:
        await gateway.aclose()
    assert after.status_code == 404, after.text
