"""What went wrong with a call to the model server, and whether trying again can help.

One table maps the SDK's exceptions to a `Failure`: a rejected key or an unknown model is the
operator's to fix (`misconfigured`, naming the setting), rate limits, 5xx, timeouts, dropped
connections and broken or empty streams may pass (`transient`, retried with backoff), anything
else the server refused is `rejected`. The SDK is imported lazily, as everywhere in the agent.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

__all__ = [
    "NOTICES",
    "BrokenStreamError",
    "EmptyResponseError",
    "Failure",
    "FailureKind",
    "backoff_delay",
    "classify",
]


class FailureKind(enum.StrEnum):
    MISCONFIGURED = "agent_misconfigured"
    TRANSIENT = "agent_unavailable"
    REJECTED = "agent_failed"
    EMPTY = "agent_empty_response"


# What a person is told for each kind; the details stay in the log (they may hold internals).
NOTICES = {
    FailureKind.MISCONFIGURED: (
        "Sorry, I can't answer: the agent is misconfigured (the gateway log says which "
        "setting). Please tell the operator."
    ),
    FailureKind.TRANSIENT: (
        "Sorry, the model is temporarily unavailable (busy or unreachable). Please try again "
        "in a moment."
    ),
    FailureKind.REJECTED: "Sorry, the model refused this request. Please try again.",
    FailureKind.EMPTY: "Sorry, the model sent no answer. Please try again.",
}


class BrokenStreamError(Exception):
    """The stream ended before the message did (no `finish_reason`, or the body was cut)."""


class EmptyResponseError(Exception):
    """A complete answer with nothing in it: no choices, or no text and no tool calls."""


@dataclass(frozen=True, slots=True)
class Failure:
    kind: FailureKind
    detail: str
    status: int | None = None
    # The configuration key an operator should look at, for `misconfigured`.
    setting: str | None = None
    # Seconds the server asked us to wait (`Retry-After`), if it said.
    retry_after: float | None = None

    @property
    def retryable(self) -> bool:
        return self.kind in (FailureKind.TRANSIENT, FailureKind.EMPTY)


def classify(exc: BaseException, *, openai: Any) -> Failure | None:
    """The failure `exc` stands for, or None when it is not an upstream failure (a bug)."""
    if isinstance(exc, BrokenStreamError):
        return Failure(FailureKind.TRANSIENT, f"broken stream: {exc}")
    if isinstance(exc, EmptyResponseError):
        return Failure(FailureKind.EMPTY, str(exc))
    if isinstance(exc, openai.APITimeoutError):
        return Failure(FailureKind.TRANSIENT, "the server did not answer in time")
    if isinstance(exc, openai.APIConnectionError):
        return Failure(FailureKind.TRANSIENT, f"cannot reach the server: {exc}")
    if isinstance(exc, openai.APIStatusError):
        return _from_status(exc)
    if isinstance(exc, openai.APIError):
        # Raised mid-stream by the SDK when the server sends an `error` event.
        return Failure(FailureKind.TRANSIENT, f"the server reported an error: {exc}")
    return None


def _from_status(exc: Any) -> Failure:
    status = int(exc.status_code)
    detail = f"HTTP {status}: {_message(exc)}"
    if status in (401, 403):
        return Failure(FailureKind.MISCONFIGURED, detail, status, setting="agent.openai.api_key")
    if status == 404:
        # An unknown model and a wrong base URL both answer 404; the message tells which.
        setting = "agent.openai.model" if "model" in detail.lower() else "agent.openai.base_url"
        return Failure(FailureKind.MISCONFIGURED, detail, status, setting=setting)
    if status in (408, 409, 429) or status >= 500:
        return Failure(FailureKind.TRANSIENT, detail, status, retry_after=_retry_after(exc))
    return Failure(FailureKind.REJECTED, detail, status)


def _message(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return str(error["message"])[:300]
    return str(getattr(exc, "message", exc))[:300]


def _retry_after(exc: Any) -> float | None:
    response = getattr(exc, "response", None)
    raw = None if response is None else response.headers.get("retry-after")
    try:
        return max(0.0, float(raw)) if raw is not None else None
    except ValueError:
        return None  # an HTTP date: ignored, the backoff decides


def backoff_delay(
    attempt: int, *, first: float, cap: float, retry_after: float | None = None
) -> float:
    """Seconds to wait before retry number `attempt` (1-based): doubling from `first`, never
    past `cap`; a server's `Retry-After` is honoured up to the cap."""
    delay = float(first * 2 ** (attempt - 1))
    if retry_after is not None:
        delay = max(delay, retry_after)
    return min(delay, cap)
