"""The `erasure` family: what erasure and retention read and remove (`store/erasure.py` and
`store/retention.py` state the rules). SQLite: `sqlite/erasure.py`; PostgreSQL:
`postgres/erasure.py`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["ErasureTx"]


class ErasureTx(Protocol):
    """What erasure and retention read and remove (`store/erasure.py` and `store/retention.py`
    state the rules). Times are integer microseconds; JSON crosses as text."""

    def aliases_of(self, platform: str, canonical: str) -> list[str]:
        """The aliases that point at `canonical`."""
        ...

    def sessions_forked_from(self, session_ids: Sequence[str]) -> list[tuple[int, str, str | None]]:
        """(sid, session id, key) of the sessions whose parent is one of `session_ids`."""
        ...

    def all_session_ids(self) -> list[tuple[int, str, str | None]]:
        """(sid, session id, key) of every session."""
        ...

    def redact_entry(
        self, entry_id: int, *, role: str | None, content: str | None, payload: str | None
    ) -> None:
        """Overwrite one entry's role, text and payload in place (its place in the tree
        stays); the search index is the caller's to rebuild."""
        ...

    def erase_person_records(
        self, platform: str, ids: Sequence[str], keys: Sequence[str]
    ) -> dict[str, int]:
        """Delete what the gateway keeps of a person outside transcripts: inbox and dedup
        rows and journal turns of `keys` or sent by `ids`, restart counters and tombstones of
        `keys`, identity aliases naming `ids`, pairing rows of `ids`; counts by kind."""
        ...

    def insert_erasure(self, *, at: int, subject_hash: str, counts: str) -> int:
        """Record an erasure (the subject's hash, never its ids; counts as JSON); its id."""
        ...

    def list_erasures(self, limit: int) -> list[tuple[int, int, str, str]]:
        """(id, at, subject hash, counts JSON), newest first."""
        ...

    def lane_sizes(self) -> dict[str, int]:
        """Bytes of transcript text and payload per session key (an estimate of its share)."""
        ...

    def busy_lanes(self) -> set[str]:
        """Keys with a turn accepted or running, or inbound rows waiting."""
        ...
