"""Online backups of a SQLite home, and restoring one into a new home.

A backup is one gzipped tar file holding:

- `state.db`: a consistent snapshot of the database, taken with SQLite's online backup API
  while the gateway may go on writing (WAL lets readers and the one writer overlap; the API
  restarts a step that a write overtook, so the copy is one point in time);
- `archive/…`: the archive blobs written when sessions were deleted (`sessions/archive/`);
- `manifest.json`: the format, the sessiongate version, the schema version, the snapshot's
  size and sha256, and its session and entry counts.

`restore` checks all of it (the manifest, the sha256, `PRAGMA integrity_check`, a schema no
newer than this sessiongate's) in a temporary folder first, and only then moves the files into
the home, which must have no database yet: a restore never overwrites a store.
The `sessions.json` mirror is not in the backup; the store writes it again when it opens.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import sqlite3
import tarfile
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sessiongate.errors import SessiongateError
from sessiongate.store.sqlite._schema import MIGRATIONS

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["BACKUP_FORMAT", "BackupError", "BackupSummary", "backup_home", "restore_home"]

BACKUP_FORMAT = "sessiongate-backup/1"
_DB = "state.db"
_ARCHIVE = "archive"
_MANIFEST = "manifest.json"
# Pages copied per step of the online backup: small enough that a writer is never held up
# for long, large enough that progress is not mostly overhead.
_PAGES_PER_STEP = 1024


class BackupError(SessiongateError):
    """A backup or restore that cannot be done; the message says which file and why."""

    code = "backup_failed"


@dataclass(frozen=True, slots=True)
class BackupSummary:
    path: str
    format: str
    sessiongate_version: str
    schema_version: int
    database_bytes: int
    sha256: str
    sessions: int
    entries: int
    archive_blobs: int

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def backup_home(
    sessions_dir: Path,
    target: Path,
    *,
    version: str,
    progress: Callable[[int, int], None] | None = None,
) -> BackupSummary:
    """Write a backup of the store under `sessions_dir` to `target` (replaced atomically)."""
    source_path = sessions_dir / _DB
    if not source_path.is_file():
        raise BackupError(f"no store to back up: {source_path} does not exist")
    target = target.resolve()
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".sg-backup-", dir=target.parent) as tmp:
        snapshot = Path(tmp) / _DB
        _snapshot(source_path, snapshot, progress)
        schema_version, sessions, entries = _describe(snapshot)
        blobs = sorted(p for p in (sessions_dir / _ARCHIVE).glob("*") if p.is_file())
        summary = BackupSummary(
            path=str(target),
            format=BACKUP_FORMAT,
            sessiongate_version=version,
            schema_version=schema_version,
            database_bytes=snapshot.stat().st_size,
            sha256=_sha256(snapshot),
            sessions=sessions,
            entries=entries,
            archive_blobs=len(blobs),
        )
        manifest = Path(tmp) / _MANIFEST
        manifest.write_text(json.dumps(summary.as_dict(), indent=2) + "\n")
        partial = Path(tmp) / "backup.tar.gz"
        with tarfile.open(partial, "w:gz") as tar:
            tar.add(manifest, arcname=_MANIFEST)
            tar.add(snapshot, arcname=_DB)
            for blob in blobs:
                tar.add(blob, arcname=f"{_ARCHIVE}/{blob.name}")
        os.chmod(partial, 0o600)
        with open(partial, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(partial, target)
    return summary


def restore_home(
    source: Path, sessions_dir: Path, *, progress: Callable[[int, int], None] | None = None
) -> BackupSummary:
    """Restore the backup `source` into `sessions_dir`, which must hold no store yet."""
    if not source.is_file():
        raise BackupError(f"{source}: no such backup file")
    existing = sessions_dir / _DB
    if existing.exists():
        raise BackupError(
            f"{existing} already exists: restore into a new home (--home DIR), "
            "a restore never overwrites a store"
        )
    sessions_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    with tempfile.TemporaryDirectory(prefix=".sg-restore-", dir=sessions_dir) as tmp:
        unpacked = Path(tmp)
        manifest = _unpack(source, unpacked)
        snapshot = unpacked / _DB
        if _sha256(snapshot) != manifest.get("sha256"):
            raise BackupError(f"{source}: state.db does not match its sha256 in the manifest")
        _check_database(source, snapshot, progress)
        blobs = sorted((unpacked / _ARCHIVE).glob("*")) if (unpacked / _ARCHIVE).is_dir() else []
        if blobs:
            archive = sessions_dir / _ARCHIVE
            archive.mkdir(exist_ok=True, mode=0o700)
            for blob in blobs:
                shutil.move(blob, archive / blob.name)
        os.chmod(snapshot, 0o600)
        os.replace(snapshot, existing)
    return BackupSummary(**{**manifest, "path": str(source)})


def _snapshot(source: Path, target: Path, progress: Callable[[int, int], None] | None) -> None:
    def step(status: int, remaining: int, total: int) -> None:
        if progress is not None:
            progress(total - remaining, total)

    try:
        with (
            contextlib.closing(sqlite3.connect(f"file:{source}?mode=ro", uri=True)) as src,
            contextlib.closing(sqlite3.connect(target)) as dst,
        ):
            src.execute("PRAGMA busy_timeout = 30000")
            src.backup(dst, pages=_PAGES_PER_STEP, progress=step)
            # The snapshot is a plain single file: no WAL beside it.
            dst.execute("PRAGMA journal_mode = DELETE")
    except sqlite3.Error as exc:
        raise BackupError(f"cannot read {source}: {exc}") from exc


def _describe(db: Path) -> tuple[int, int, int]:
    with contextlib.closing(sqlite3.connect(db)) as conn:
        version = conn.execute("SELECT coalesce(max(version), 0) FROM schema_migrations")
        sessions = conn.execute("SELECT count(*) FROM sessions")
        entries = conn.execute("SELECT count(*) FROM entries")
        return int(version.fetchone()[0]), int(sessions.fetchone()[0]), int(entries.fetchone()[0])


def _unpack(source: Path, into: Path) -> dict[str, Any]:
    try:
        with tarfile.open(source, "r:gz") as tar:
            names = tar.getnames()
            if _MANIFEST not in names or _DB not in names:
                raise BackupError(f"{source}: not a sessiongate backup (no manifest or state.db)")
            for name in names:
                if name not in (_MANIFEST, _DB) and not name.startswith(f"{_ARCHIVE}/"):
                    raise BackupError(f"{source}: unexpected member {name!r}")
            # The "data" filter refuses links, absolute paths and `..` outside `into`.
            tar.extractall(into, filter="data")
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise BackupError(f"{source}: not a readable backup ({exc})") from exc
    try:
        manifest = json.loads((into / _MANIFEST).read_text())
    except (ValueError, OSError) as exc:
        raise BackupError(f"{source}: the manifest is not valid JSON ({exc})") from exc
    if not isinstance(manifest, dict) or manifest.get("format") != BACKUP_FORMAT:
        raise BackupError(f"{source}: the manifest names another format than {BACKUP_FORMAT}")
    known = set(BackupSummary.__dataclass_fields__)
    if set(manifest) != known:
        raise BackupError(f"{source}: the manifest's fields are not {sorted(known)}")
    return manifest


def _check_database(source: Path, db: Path, progress: Callable[[int, int], None] | None) -> None:
    newest = max(v for v, _, _ in MIGRATIONS)
    try:
        with contextlib.closing(sqlite3.connect(db)) as conn:
            verdict = conn.execute("PRAGMA integrity_check").fetchone()[0]
            if verdict != "ok":
                raise BackupError(f"{source}: state.db fails its integrity check ({verdict})")
            version = conn.execute("SELECT max(version) FROM schema_migrations").fetchone()[0]
    except sqlite3.Error as exc:
        raise BackupError(f"{source}: state.db is not a readable database ({exc})") from exc
    if version is None or int(version) > newest:
        raise BackupError(
            f"{source}: the schema version {version} is newer than this sessiongate's "
            f"({newest}); restore it with the release that wrote it, or a newer one"
        )
    if progress is not None:
        size = db.stat().st_size
        progress(size, size)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()
