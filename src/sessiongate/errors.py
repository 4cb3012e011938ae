"""The exceptions sessiongate raises.

SessiongateError
├── InvalidSessionKeyError      a key that is not a session key
├── InvalidSessionIdError       an id that is malformed or tries to escape a folder
├── SessionNotFoundError        no such session key or session id
├── SessionArchivedError        the session is archived and refuses new work
├── SessionBusyError            a turn is running and the operation must wait
├── StaleWriteError             an expected value (session id, marker) no longer holds
│   └── LeaseLostError          this instance no longer owns the lane (or role) at its epoch
├── EntryNotFoundError          no such transcript entry
├── InvalidEntryError           a transcript entry or message that cannot be stored
├── QueueFullError              the lane's overflow queue is at its cap
├── ConflictError               a unique value (label, key) is taken
│   ├── MessageIdConflictError  a message id reused for a different message in one lane
│   └── JobExistsError          a scheduled job's id (or a run's instant) is taken
├── JobNotFoundError            no scheduled job has this id
├── NotTakenOverError           an operator's reply to a lane the agent is answering
├── ForkTooLargeError           a fork over the child model's context window
├── UnauthorizedError           a sender or caller without permission
├── AgentTurnError              an agent turn ended without a reply (`code` says why)
├── StoreCorruptError           canonical data on disk is damaged; the store will not open
├── StoreUnavailableError       the disk refused a write (full, read-only); nothing was changed
│   └── HomeInUseError          another gateway or chat runner holds the home's lock
└── ForeignStoreError           an import source that is corrupt or not what it claims to be
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "AgentTurnError",
    "ApprovalDecidedError",
    "ApprovalNotFoundError",
    "ConflictError",
    "EntryNotFoundError",
    "ForeignStoreError",
    "ForkTooLargeError",
    "HomeInUseError",
    "InvalidEntryError",
    "InvalidSessionIdError",
    "InvalidSessionKeyError",
    "JobExistsError",
    "JobNotFoundError",
    "LeaseLostError",
    "MessageIdConflictError",
    "NotAnApproverError",
    "NotTakenOverError",
    "QueueFullError",
    "RouteChangedError",
    "SessionArchivedError",
    "SessionBusyError",
    "SessionNotFoundError",
    "SessiongateError",
    "StaleWriteError",
    "StoreCorruptError",
    "StoreUnavailableError",
    "UnauthorizedError",
]


class SessiongateError(Exception):
    """Base class; `code` is the stable machine-readable name used on the wire."""

    code = "error"

    def __init__(self, message: str, **data: Any) -> None:
        super().__init__(message)
        self.message = message
        self.data = data
        for name, value in data.items():
            setattr(self, name, value)

    def __repr__(self) -> str:
        extra = "".join(f", {k}={v!r}" for k, v in self.data.items())
        return f"{type(self).__name__}({self.message!r}{extra})"


class InvalidSessionKeyError(SessiongateError, ValueError):
    code = "invalid_session_key"


class InvalidSessionIdError(SessiongateError, ValueError):
    code = "invalid_session_id"


class SessionNotFoundError(SessiongateError, LookupError):
    code = "session_not_found"


class SessionArchivedError(SessiongateError):
    code = "session_archived"


class SessionBusyError(SessiongateError):
    code = "session_busy"


class StaleWriteError(SessiongateError):
    code = "stale_write"


class LeaseLostError(StaleWriteError):
    """Fencing (DESIGN decision 12): the write was refused, and nothing of it committed,
    because another instance took the lease over (a higher epoch) or it expired."""

    code = "lease_lost"


class RouteChangedError(StaleWriteError):
    """A transaction written over a route as its caller last saw it (`Tx.expect_route`)
    found it changed, and nothing of it committed: run it again without the hint."""

    code = "route_changed"


class EntryNotFoundError(SessiongateError, LookupError):
    code = "entry_not_found"


class InvalidEntryError(SessiongateError, ValueError):
    code = "invalid_entry"


class QueueFullError(SessiongateError):
    code = "queue_full"


class ConflictError(SessiongateError):
    code = "conflict"


class MessageIdConflictError(ConflictError):
    """The sender already used this message id in this lane for a different message.

    Raised before anything is written. It names only the id: nothing of the stored message
    (its text, reply, session or turn) is disclosed, since the caller is not known to be the
    one who sent it."""

    code = "message_id_conflict"


class JobExistsError(ConflictError):
    """A scheduled job with this id exists already (or a run-now at an instant taken)."""

    code = "job_exists"


class JobNotFoundError(SessiongateError, LookupError):
    """No scheduled job has this id."""

    code = "job_not_found"


class NotTakenOverError(SessiongateError):
    """An operator's reply to a lane that is not taken over: the agent answers it, so the
    reply would talk over the agent (take the lane over first)."""

    code = "not_taken_over"


class ForkTooLargeError(SessiongateError):
    code = "fork_too_large"


class UnauthorizedError(SessiongateError):
    code = "unauthorized"


class ApprovalNotFoundError(SessiongateError, LookupError):
    code = "approval_not_found"


class ApprovalDecidedError(ConflictError):
    """The approval is no longer pending (decided, expired, cancelled), or the call it is
    for is not the one the decision was shown."""

    code = "approval_decided"


class NotAnApproverError(UnauthorizedError):
    code = "not_an_approver"


class AgentTurnError(SessiongateError):
    """An agent turn that ended without a reply, and what the person is told.

    `code` is the agent's reason (`agent_misconfigured`, `agent_unavailable`,
    `tool_loop_limit`, ...), `message` the detail for the log, `notice` the text for the user
    and `messages` what the turn completed before it ended (tool calls and results).
    """

    code = "agent_failed"
    notice: str
    messages: list[dict[str, Any]]

    def __init__(
        self,
        message: str,
        *,
        code: str = "agent_failed",
        notice: str = "Sorry, something went wrong while answering. Please try again.",
        messages: list[dict[str, Any]] | None = None,
    ) -> None:
        super().__init__(message, code=code, notice=notice, messages=messages or [])


class StoreCorruptError(SessiongateError):
    code = "store_corrupt"


class StoreUnavailableError(SessiongateError):
    code = "store_unavailable"


class HomeInUseError(StoreUnavailableError):
    """A runner is already live on this home (`<home>/gateway.lock` is held): a second one
    would take the live runner's turns for crashed ones and run them again."""

    code = "home_in_use"


class ForeignStoreError(SessiongateError, ValueError):
    """An import source (another system's home) that is corrupt or foreign; the message names
    the file and the problem, and nothing was imported from it."""

    code = "foreign_store"
