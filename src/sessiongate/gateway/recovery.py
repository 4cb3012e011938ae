"""Restart recovery (spec §7 with the turn journal of DESIGN decision 4).

Recovery reads the journal as a crash left it, so it must be the only runner on its home: a
second one would take the live runner's running turns for crashed ones and run them again.
`HomeLock` (an advisory `flock` on `<home>/gateway.lock`) is held from the start of the runner
to the end of its stop; the kernel drops it when the process dies, so a crash leaves no stale
lock behind.

At start, before any inbound message is looked at:

1. `.clean_shutdown` (file in the home, and its record in the database) is consumed.
2. `restart_counts.json` fills in the counters of keys the database has no record of (a home
   whose file predates the database); the database is the truth for every other key, so a
   counter reset by `/new` is not brought back by a stale file. The file is rewritten from the
   database once started, and again at the stop.
3. Every turn the journal still calls `running` was cut off by a crash: it goes back to
   `accepted` (keeping its inbox row) and its session is marked `resume_pending`
   (`restart_interrupted`). Without the marker, `suspend_recently_active()` runs as the spec says.
4. Each `accepted` turn (crash, or drain timeout at the last stop) is classified:
   - older than `agent.gateway_auto_continue_freshness` (from its acceptance): *stale*; it
     becomes `interrupted`, its user text stays in the transcript, the user is told;
   - this start is the `stuck_loop_threshold`-th in a row to find the lane's turn cut off
     (its counter of dispatched resumes + 1, so 3 with the default: the original crash and
     two resumes that died too): *stuck*; the session is suspended and the turn `failed`;
   - otherwise it is *resumed*: dispatched through the same lane claim as live messages, the
     counter raised in the claiming transaction (so a SIGKILLed resume still counts), with a
     resume note for the agent.
   A turn with a pending tool approval (`approvals.py`) is always resumed: it was waiting
   for a person, not looping, and the approval keeps it waiting.
5. `replied` turns (committed, not delivered) are delivered; lanes with pending rows get workers.
6. Live messages are accepted meanwhile but dispatched only when the startup gate opens, after
   the resumed turns have finished.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sessiongate.core.entry import ResumeReason
from sessiongate.errors import HomeInUseError, StoreUnavailableError
from sessiongate.store.approvals import PENDING, ApprovalBook
from sessiongate.store.lanes import TurnState

if TYPE_CHECKING:
    from datetime import datetime
    from pathlib import Path

    from sessiongate.core.config import GatewayConfig
    from sessiongate.store.lanes import Claim, LaneStore, Turn
    from sessiongate.store.session_store import SessionStore

__all__ = [
    "CLEAN_SHUTDOWN_FILE",
    "LOCK_FILE",
    "RESTART_COUNTS_FILE",
    "HomeLock",
    "RecoveryPlan",
    "classify",
    "consume_clean_shutdown",
    "plan_recovery",
    "read_restart_counts",
    "write_clean_shutdown",
    "write_restart_counts",
]

log = logging.getLogger(__name__)

CLEAN_SHUTDOWN_FILE = ".clean_shutdown"
RESTART_COUNTS_FILE = "restart_counts.json"
LOCK_FILE = "gateway.lock"


class HomeLock:
    """The exclusive advisory lock of one home; `acquire` raises `HomeInUseError` at once
    (never waits) when another runner holds it. `release` is idempotent."""

    def __init__(self, home: Path) -> None:
        self.path = home / LOCK_FILE
        self._fd: int | None = None

    @property
    def is_held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> None:
        if self._fd is not None:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            # Not inherited by child processes (Python's default), so an agent's subprocess
            # cannot keep the home locked after the gateway has gone.
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            raise StoreUnavailableError(
                f"cannot open the lock file {self.path}: {exc}", path=str(self.path)
            ) from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 32).decode("ascii", "replace").strip() or "unknown"
            os.close(fd)
            home = self.path.parent
            raise HomeInUseError(
                f"home {home} is in use by another sessiongate gateway or chat (pid {holder}); "
                "stop it first, or use another --home",
                home=str(home),
                pid=holder,
            ) from None
        except BaseException:
            os.close(fd)
            raise
        # The holder's pid, for the message a refused runner prints; the lock is the flock.
        os.fchmod(fd, 0o600)
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode("ascii"))
        self._fd = fd

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)  # closing the descriptor drops the flock


@dataclass(slots=True)
class RecoveryPlan:
    clean: bool
    # No session yet and no marker: a new home, whose first start is not a recovery.
    first_start: bool = False
    requeued: int = 0  # running turns found after a crash
    marked_recent: int = 0  # sessions marked by suspend_recently_active
    resume: list[Turn] = field(default_factory=list)
    stale: list[Claim] = field(default_factory=list)
    stuck: list[Claim] = field(default_factory=list)
    deliver: list[Turn] = field(default_factory=list)
    pending_lanes: list[str] = field(default_factory=list)


def consume_clean_shutdown(home: Path, lane_store: LaneStore) -> bool:
    """Whether the last stop was graceful; the marker (file and record) is gone afterwards,
    so a crash from here on is seen as unclean at the next start."""
    recorded = lane_store.consume_clean_shutdown()
    path = home / CLEAN_SHUTDOWN_FILE
    present = path.exists()
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    return recorded is not None or present


def write_clean_shutdown(home: Path, lane_store: LaneStore, at: datetime) -> None:
    """The database record first (the truth), then the file the spec describes."""
    lane_store.mark_clean_shutdown(at)
    _write_atomic(home / CLEAN_SHUTDOWN_FILE, at.isoformat() + "\n")


def read_restart_counts(path: Path) -> dict[str, int]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        log.warning(
            "unreadable restart counts file ignored", extra={"path": str(path), "error": str(exc)}
        )
        return {}
    if not isinstance(data, dict):
        return {}
    return {
        str(k): int(v) for k, v in data.items() if isinstance(v, int) and not isinstance(v, bool)
    }


def write_restart_counts(path: Path, counts: dict[str, int]) -> None:
    _write_atomic(path, json.dumps(counts, indent=2, sort_keys=True) + "\n")


def plan_recovery(
    *,
    home: Path,
    store: SessionStore,
    lane_store: LaneStore,
    config: GatewayConfig,
    now: datetime,
) -> RecoveryPlan:
    """Steps 1-5 of the module docstring, as far as they are synchronous journal decisions."""
    clean = consume_clean_shutdown(home, lane_store)
    plan = RecoveryPlan(clean=clean, first_start=not clean and not store.has_any_sessions())
    known = lane_store.restart_counts()
    from_file = read_restart_counts(home / RESTART_COUNTS_FILE)
    lane_store.merge_restart_counts({k: v for k, v in from_file.items() if k not in known})
    for turn in lane_store.turns_in_state(TurnState.RUNNING):
        lane_store.requeue(turn.id, resume_reason=str(ResumeReason.RESTART_INTERRUPTED))
        plan.requeued += 1
    if not plan.clean:
        plan.marked_recent = store.suspend_recently_active()
    counts = lane_store.restart_counts()
    waiting = {row.turn_id for row in ApprovalBook(store).listed(status=PENDING, limit=100_000)}
    for turn in lane_store.turns_in_state(TurnState.ACCEPTED):
        claim = lane_store.get_claim(turn.id)
        if claim is None:
            log.error(
                "accepted turn without its inbox row",
                extra={"turn_id": turn.id, "session_key": turn.session_key},
            )
            continue
        verdict = classify(
            turn,
            counts.get(turn.session_key, 0),
            config,
            now,
            awaiting_approval=turn.id in waiting,
        )
        if verdict == "stale":
            plan.stale.append(claim)
        elif verdict == "stuck":
            plan.stuck.append(claim)
        else:
            plan.resume.append(turn)
    plan.deliver = lane_store.turns_in_state(TurnState.REPLIED)
    plan.pending_lanes = lane_store.lanes_with_pending()
    if plan.first_start:
        log.info("first start of this home: nothing to recover")
        return plan
    log.info(
        "recovery planned",
        extra={
            "clean": plan.clean,
            "requeued": plan.requeued,
            "marked_recent": plan.marked_recent,
            "resume": len(plan.resume),
            "stale": len(plan.stale),
            "stuck": len(plan.stuck),
            "deliver": len(plan.deliver),
            "pending_lanes": len(plan.pending_lanes),
        },
    )
    return plan


def classify(
    turn: Turn,
    restart_count: int,
    config: GatewayConfig,
    now: datetime,
    *,
    awaiting_approval: bool = False,
) -> str:
    """Step 4 for one `accepted` turn: "stale", "stuck" or "resume". The same rule decides a
    lane taken over from a dead instance on a shared database (`LaneWorker.recover`). A
    turn waiting for an approval is resumed: its wait is neither staleness nor a crash loop."""
    if awaiting_approval:
        return "resume"
    age = (now - turn.accepted_at).total_seconds()
    if age > config.agent.gateway_auto_continue_freshness:
        return "stale"
    if restart_count + 1 >= config.stuck_loop_threshold:
        return "stuck"
    return "resume"


def _write_atomic(path: Path, text: str) -> None:
    """Temp file, fsync, rename, 0600: a reader sees the old or the new file, never half."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, text.encode("utf-8"))
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
