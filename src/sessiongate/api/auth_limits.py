"""How many wrong credentials one client address may try: a brake on guessing the token.

Each wrong bearer token and each wrong sign-in password is a failure of the address it came
from. After `FAILURES_PER_WINDOW` failures within `WINDOW_SECONDS`, every further attempt from
that address that carries a credential (a bearer token, a sign-in form) is a 429
`too_many_requests` with `Retry-After`, the right token included (otherwise the answer itself
would tell a guesser when it was right), until the oldest failure leaves the window. A request
carrying no credential is not an attempt and is not counted, and a signed-in dashboard goes on
working. Behind a reverse proxy every client shares the proxy's address, so a guesser there
slows everyone's sign-in down, never anyone's signed-in work.

Time comes from the store's `Clock`, so tests move it with `FakeClock.advance`. At most
`MAX_CLIENTS` addresses are remembered (the stalest forgotten first), so a flood of addresses
cannot grow memory without bound.
"""

from __future__ import annotations

import math
from collections import OrderedDict, deque
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from starlette.types import Scope

    from sessiongate.core.clock import Clock

__all__ = [
    "FAILURES_PER_WINDOW",
    "MAX_CLIENTS",
    "WINDOW_SECONDS",
    "FailureLimiter",
    "client_address",
]

# Ten honest typos a minute is generous; a guesser gets 14,400 tries a day, against a token of
# at least 16 characters beyond loopback (api/bind.py, `check_bind_address`).
FAILURES_PER_WINDOW = 10
WINDOW_SECONDS = 60.0
MAX_CLIENTS = 10_000


def client_address(scope: Scope) -> str:
    """The peer's address as the server saw it (`unknown` when the server does not say)."""
    client = scope.get("client")
    return str(client[0]) if client else "unknown"


class FailureLimiter:
    """Failed credentials per client address within a sliding window (module docstring)."""

    def __init__(
        self,
        clock: Clock,
        *,
        limit: int = FAILURES_PER_WINDOW,
        window_seconds: float = WINDOW_SECONDS,
        max_clients: int = MAX_CLIENTS,
    ) -> None:
        self._clock = clock
        self._limit = limit
        self._window = window_seconds
        self._max_clients = max_clients
        self._failures: OrderedDict[str, deque[float]] = OrderedDict()

    def retry_after(self, client: str) -> int | None:
        """Whole seconds until `client` may try again, or None when it may try now."""
        failures = self._recent(client)
        if failures is None or len(failures) < self._limit:
            return None
        wait = failures[0] + self._window - self._now()
        return max(1, math.ceil(wait))

    def record_failure(self, client: str) -> None:
        failures = self._recent(client)
        if failures is None:
            while len(self._failures) >= self._max_clients:
                self._failures.popitem(last=False)
            failures = self._failures[client] = deque(maxlen=self._limit)
        failures.append(self._now())
        self._failures.move_to_end(client)

    def __len__(self) -> int:
        return len(self._failures)

    def _recent(self, client: str) -> deque[float] | None:
        failures = self._failures.get(client)
        if failures is None:
            return None
        horizon = self._now() - self._window
        while failures and failures[0] <= horizon:
            failures.popleft()
        if not failures:
            del self._failures[client]
            return None
        return failures

    def _now(self) -> float:
        return self._clock.now().timestamp()
