"""`sessiongate backup` / `restore`: a round trip through the real command, and every refusal.

The backup is taken while a store on the same home keeps writing (the gateway's situation);
the restored home must hold exactly the rows the backup's snapshot held, and serve them.
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import sqlite3
import tarfile
from typing import TYPE_CHECKING

from sessiongate import GatewayConfig, Platform, SessionSource, SessionStore
from sessiongate.gateway.recovery import HomeLock

if TYPE_CHECKING:
    from pathlib import Path


def _tables(db: Path) -> dict[str, list[tuple[object, ...]]]:
    """Every canonical table's rows (the full-text index is derived, and left out)."""
    with contextlib.closing(sqlite3.connect(db)) as conn:
        names = [
            row[0]
            for row in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'fts%' "
                "AND name NOT LIKE 'sqlite_%' ORDER BY name"
            )
        ]
        # Table names from sqlite_master, not from input.
        query = 'SELECT * FROM "{}"'
        tables = {name: sorted(conn.execute(query.format(name)), key=repr) for name in names}
    # The mirror's stamp is the store's own bookkeeping, rewritten whenever the mirror is.
    tables["meta"] = [row for row in tables["meta"] if row[0] != "mirror_stamp"]
    return tables


def test_a_backup_taken_while_writing_restores_into_a_new_home(sg, home, seeded, tmp_path):
    store = SessionStore(home / "sessions", GatewayConfig())
    try:
        # A writer holds the database open and has written since the seed: what it has
        # committed is in the backup.
        entry = store.get_or_create_session(
            SessionSource(platform=Platform.TELEGRAM, chat_id="carol", user_id="carol")
        )
        store.append_messages(entry.session_id, [{"role": "user", "content": "carol writes"}])
        backup_file = tmp_path / "out" / "home.tar.gz"
        done = sg("backup", str(backup_file), "--home", str(home), "--json")
        assert done.returncode == 0, done.stderr
        summary = json.loads(done.stdout)
        assert summary["sessions"] == 3
        assert backup_file.stat().st_mode & 0o777 == 0o600
        before = _tables(home / "sessions" / "state.db")
    finally:
        store.close()

    new_home = tmp_path / "restored"
    restored = sg("restore", str(backup_file), "--home", str(new_home))
    assert restored.returncode == 0, restored.stderr
    assert "3 sessions" in restored.stdout
    assert _tables(new_home / "sessions" / "state.db") == before

    listed = sg("sessions", "list", "--home", str(new_home), "--json")
    assert listed.returncode == 0, listed.stderr
    assert {row["session_key"] for row in json.loads(listed.stdout)["sessions"]} == {
        "agent:main:telegram:dm:alice",
        "agent:main:telegram:dm:bob",
        "agent:main:telegram:dm:carol",
    }
    found = sg("sessions", "search", "quick brown", "--home", str(new_home), "--json")
    assert found.returncode == 0, found.stderr
    assert json.loads(found.stdout)["results"], "the restored store answers searches"


def test_a_restore_never_overwrites_a_store(sg, home, seeded, tmp_path):
    backup_file = tmp_path / "b.tar.gz"
    assert sg("backup", str(backup_file), "--home", str(home)).returncode == 0
    before = (home / "sessions" / "state.db").read_bytes()
    refused = sg("restore", str(backup_file), "--home", str(home))
    assert refused.returncode == 1
    assert "already exists" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert (home / "sessions" / "state.db").read_bytes() == before


def test_a_restore_is_refused_while_a_gateway_holds_the_home(sg, home, seeded, tmp_path):
    backup_file = tmp_path / "b.tar.gz"
    assert sg("backup", str(backup_file), "--home", str(home)).returncode == 0
    target = tmp_path / "held"
    lock = HomeLock(target)
    lock.acquire()
    try:
        refused = sg("restore", str(backup_file), "--home", str(target))
    finally:
        lock.release()
    assert refused.returncode == 1
    assert "in use" in refused.stderr
    assert not (target / "sessions" / "state.db").exists()


def _rewrite(source: Path, target: Path, change) -> None:
    """`source`'s members into `target`, each passed through `change(name, data)`."""
    with tarfile.open(source, "r:gz") as old, tarfile.open(target, "w:gz") as new:
        for member in old.getmembers():
            data = old.extractfile(member).read()
            data = change(member.name, data)
            if data is None:
                continue
            info = tarfile.TarInfo(member.name)
            info.size = len(data)
            new.addfile(info, io.BytesIO(data))


def test_a_damaged_or_foreign_backup_is_refused_and_writes_nothing(sg, home, seeded, tmp_path):
    good = tmp_path / "good.tar.gz"
    assert sg("backup", str(good), "--home", str(home)).returncode == 0

    def flip(name, data):
        if name != "state.db":
            return data
        return data[:-100] + bytes(b ^ 0xFF for b in data[-100:])

    def foreign(name, data):
        if name != "manifest.json":
            return data
        manifest = json.loads(data)
        manifest["format"] = "something-else/9"
        return json.dumps(manifest).encode()

    def no_manifest(name, data):
        return None if name == "manifest.json" else data

    cases = {"flipped.tar.gz": flip, "foreign.tar.gz": foreign, "bare.tar.gz": no_manifest}
    for name, change in cases.items():
        _rewrite(good, tmp_path / name, change)
    (tmp_path / "garbage.tar.gz").write_bytes(b"not a tar file at all")
    for name, reason in (
        ("flipped.tar.gz", "sha256"),
        ("foreign.tar.gz", "another format"),
        ("bare.tar.gz", "not a sessiongate backup"),
        ("garbage.tar.gz", "not a readable backup"),
        ("missing.tar.gz", "no such backup file"),
    ):
        target = tmp_path / f"home-{name}"
        refused = sg("restore", str(tmp_path / name), "--home", str(target), "--json")
        assert refused.returncode == 1, name
        error = json.loads(refused.stderr)["error"]
        assert reason in error["message"], (name, error)
        assert name in error["message"]
        assert error["code"] == "backup_failed"
        assert not (target / "sessions" / "state.db").exists()


def test_on_postgres_backup_explains_pg_dump(sg, env, home):
    secret_url = "postgresql://sg:hunter2-secret@db.invalid:5432/sg"
    done = sg("backup", "x.tar.gz", "--home", str(home), env=env(SESSIONGATE_STORE__URL=secret_url))
    assert done.returncode == 2
    assert "pg_dump" in done.stderr
    assert "hunter2" not in done.stderr + done.stdout


def test_a_home_without_a_store_has_nothing_to_back_up(sg, home, tmp_path):
    done = sg("backup", str(tmp_path / "b.tar.gz"), "--home", str(home))
    assert done.returncode == 1
    assert "no store to back up" in done.stderr
    shutil.rmtree(home, ignore_errors=True)
