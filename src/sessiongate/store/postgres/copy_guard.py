"""Whether `db copy` may write into a PostgreSQL database, decided before it writes a byte.

A database that already holds sessiongate rows is refused: another instance may serve it, and
rows copied beside its own leave that instance with sessions whose transcripts are someone
else's. The one exception is a copy of the same source that was cut short, which its own
marker (`copy.ORIGIN_KEY`) proves, and then only when asked for with `--resume`. The check
connects, reads and creates nothing: the target's migrations run only once it passed.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from sessiongate.errors import ConflictError
from sessiongate.store.postgres.copy import inspect_target
from sessiongate.store.postgres.database import _connect, redact_url

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["check_copy_target"]


def check_copy_target(url: str, tables: Sequence[str], *, origin: str, resume: bool) -> None:
    """Raise `ConflictError` unless a copy of `origin` may write into the database at `url`:
    it holds no sessiongate rows, or (with `resume`) only those of an unfinished copy of
    `origin`."""
    with contextlib.closing(_connect(url)) as conn:
        has_rows, marker = inspect_target(conn, tables)
    where = redact_url(url)
    if not has_rows and marker is None:
        return  # empty: a first copy (or a resumed one that had not begun)
    if marker is not None and marker == origin:
        if resume:
            return
        raise ConflictError(
            f"{where} holds an unfinished copy of {origin}: "
            "run the same command with --resume to finish it",
            target=where,
        )
    if resume:
        what = f"a copy of {marker}" if marker is not None else "data of its own"
        raise ConflictError(
            f"cannot resume: {where} holds {what}, not an unfinished copy of {origin}",
            target=where,
        )
    raise ConflictError(
        f"{where} already holds sessiongate data (another instance may be serving it): "
        "copy into an empty database or schema",
        target=where,
    )
