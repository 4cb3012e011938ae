"""`sessiongate backup FILE` and `sessiongate restore FILE`: a home's store, copied and put back.

On SQLite the backup is online and consistent (SQLite's backup API, while the gateway serves);
a restore goes into a home without a store, never over one, and not while a gateway holds it.
On PostgreSQL the database server's own tools do this better, and `backup` says how.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn

import sessiongate
from sessiongate.cli._common import (
    EXIT_USAGE,
    ConfigOption,
    HomeOption,
    JsonOption,
    emit_json,
    err_console,
    fail,
    load_paths_and_config,
    sessions_dir,
)
from sessiongate.errors import SessiongateError
from sessiongate.gateway.recovery import HomeLock
from sessiongate.store.backends import is_postgres_url
from sessiongate.store.sqlite.backup import backup_home, restore_home

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from sessiongate.store.sqlite.backup import BackupSummary

__all__ = ["backup", "restore"]

FileArgument = Annotated[Path, typer.Argument(help="The backup file (a .tar.gz).")]

POSTGRES_HOWTO = """\
store.url names a PostgreSQL database: back it up with PostgreSQL's own tools, which copy it
consistently while gateways serve it:

    pg_dump --format=custom --file sessiongate.dump "$URL"      # URL: your store.url
    pg_restore --no-owner --dbname "$NEW_DATABASE_URL" sessiongate.dump

(or continuous archiving with point-in-time recovery; see the PostgreSQL manual's
"Backup and Restore"). Then point store.url at the restored database."""


def backup(
    file: FileArgument,
    home: HomeOption = None,
    config_file: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Write an online, consistent backup of the home's SQLite store to FILE.

    Safe while the gateway runs. The file holds the database, the archive blobs of deleted
    sessions and a manifest (sizes, sha256, counts); restore it with `sessiongate restore`.
    """
    paths, config = load_paths_and_config(home, config_file)
    if is_postgres_url(config.store.url):
        fail(POSTGRES_HOWTO, EXIT_USAGE, error_code="unsupported_backend")
    with _progress("backing up", quiet=as_json) as step:
        try:
            summary = backup_home(
                sessions_dir(paths.home), file, version=sessiongate.__version__, progress=step
            )
        except SessiongateError as exc:
            fail(exc.message, error_code=exc.code)
    _report("backed up", summary, as_json)


def restore(
    file: FileArgument,
    home: HomeOption = None,
    config_file: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Restore a backup made by `sessiongate backup` into a home that has no store yet.

    The file is checked (manifest, sha256, integrity, schema version) before anything is
    written; a home with a store, or one a gateway holds, is refused.
    """
    paths, config = load_paths_and_config(home, config_file)
    if is_postgres_url(config.store.url):
        fail(POSTGRES_HOWTO, EXIT_USAGE, error_code="unsupported_backend")
    lock = HomeLock(paths.home)
    try:
        lock.acquire()
    except SessiongateError as exc:
        fail(exc.message, error_code=exc.code)
    try:
        with _progress("checking", quiet=as_json) as step:
            summary = restore_home(file, sessions_dir(paths.home), progress=step)
    except SessiongateError as exc:
        fail(exc.message, error_code=exc.code)
    finally:
        lock.release()
    _report(f"restored into {paths.home}", summary, as_json)


class _progress:
    """A rich progress bar on stderr (none under --json); the block gets its update function."""

    def __init__(self, label: str, *, quiet: bool) -> None:
        self._bar = Progress(
            TextColumn(label),
            BarColumn(),
            TaskProgressColumn(),
            console=err_console,
            transient=True,
            disable=quiet,
        )

    def __enter__(self) -> Callable[[int, int], None]:
        self._bar.start()
        task = self._bar.add_task("", total=None)

        def step(done: int, total: int) -> None:
            self._bar.update(task, completed=done, total=total)

        return step

    def __exit__(self, *exc: object) -> None:
        self._bar.stop()


def _report(verb: str, summary: BackupSummary, as_json: bool) -> None:
    if as_json:
        emit_json(summary.as_dict())
        return
    for line in _lines(verb, summary):
        print(line)


def _lines(verb: str, summary: BackupSummary) -> Iterator[str]:
    yield f"{verb}: {summary.path}"
    yield (
        f"  {summary.sessions} sessions, {summary.entries} transcript entries, "
        f"{summary.archive_blobs} archive blobs"
    )
    yield (
        f"  database {summary.database_bytes} bytes, schema {summary.schema_version}, "
        f"sha256 {summary.sha256[:16]}…, written by sessiongate {summary.sessiongate_version}"
    )
