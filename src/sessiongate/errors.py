"""The exceptions sessiongate raises.

SessiongateError
├── InvalidSessionKeyError      a key that is not a session key
├── InvalidSessionIdError       an id that is malformed or tries to escape a folder
├── SessionNotFoundError        no such session key or session id
├── SessionArchivedError        the session is archived and refuses new work
├── SessionBusyError            a turn is running and the operation must wait
├── StaleWriteError             an expected value (session id, marker) no longer holds
├── EntryNotFoundError          no such transcript entry
├── InvalidEntryError           a transcript entry or message that cannot be stored
├── QueueFullError              the lane's overflow queue is at its cap
├── ConflictError               a unique value (label, key) is taken
│   └── MessageIdConflictError  a message id reused for a different message in one lane
├── ForkTooLargeError           a fork over the child model's context window
├── UnauthorizedError           a sender or caller without permission
├── StoreCorruptError           canonical data on disk is damaged; the store will not open
└── StoreUnavailableError       the disk refused a write (full, read-only); nothing was changed
    └── HomeInUseError          another gateway or chat runner holds the home's lock
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "ConflictError",
    "EntryNotFoundError",
    "ForkTooLargeError",
    "HomeInUseError",
    "InvalidEntryError",
    "InvalidSessionIdError",
    "InvalidSessionKeyError",
    "MessageIdConflictError",
    "QueueFullError",
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


class ForkTooLargeError(SessiongateError):
    code = "fork_too_large"


class UnauthorizedError(SessiongateError):
    code = "unauthorized"


class StoreCorruptError(SessiongateError):
    code = "store_corrupt"


class StoreUnavailableError(SessiongateError):
    code = "store_unavailable"


class HomeInUseError(StoreUnavailableError):
    """A runner is already live on this home (`<home>/gateway.lock` is held): a second one
    would take the live runner's turns for crashed ones and run them again."""

    code = "home_in_use"
