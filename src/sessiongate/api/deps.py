"""What route handlers take from the app: the store, the runner, how to call the store (decision
15: `CallsDep`), the config, a checked key."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated
from urllib.parse import unquote

from fastapi import Depends, Path, Request

from sessiongate.api.metrics import ApiMetrics
from sessiongate.core.config import GatewayConfig
from sessiongate.core.keys import check_key_text, parse_session_key
from sessiongate.errors import InvalidSessionKeyError, SessionBusyError, SessionNotFoundError
from sessiongate.gateway.runner import GatewayRunner
from sessiongate.gateway.store_calls import StoreCalls
from sessiongate.store.session_store import SessionStore

if TYPE_CHECKING:
    from sessiongate.core.entry import SessionEntry

__all__ = [
    "CallsDep",
    "ConfigDep",
    "KeyDep",
    "MetricsDep",
    "RunnerDep",
    "StoreDep",
    "decode_session_key",
    "ensure_idle",
    "require_entry",
]

# The dependencies below are `async def` although they never await: FastAPI runs a plain `def`
# dependency on its thread pool, and a dozen thread hops per request cost more than the request.


async def get_store(request: Request) -> SessionStore:
    store: SessionStore = request.app.state.store
    return store


async def get_runner(request: Request) -> GatewayRunner:
    runner: GatewayRunner = request.app.state.runner
    return runner


async def get_calls(request: Request) -> StoreCalls:
    """How a handler calls the store: `await calls.run(fn, ...)` runs it inline on SQLite and
    on the store's threads on PostgreSQL, so no request makes the loop wait on the network."""
    runner: GatewayRunner = request.app.state.runner
    return runner.calls


async def get_config(request: Request) -> GatewayConfig:
    config: GatewayConfig = request.app.state.config
    return config


async def get_metrics(request: Request) -> ApiMetrics:
    metrics: ApiMetrics = request.app.state.metrics
    return metrics


def decode_session_key(raw: str) -> str:
    """The key from its path segment (percent-decoded once); `InvalidSessionKeyError` if it
    cannot be a key at all."""
    try:
        key = unquote(raw, errors="strict")
    except UnicodeDecodeError:
        # Almost always a key sent as it is, whose own `%` (an incognito key's `:%f…`) was
        # decoded as an escape: say how to send it.
        raise InvalidSessionKeyError(
            "the session key in the path does not percent-decode to text: percent-encode the "
            "key (`%` is `%25`, `:` is `%3A`)",
            session_key=raw,
        ) from None
    return check_key_text(key)


async def _key_param(
    key: Annotated[
        str,
        Path(
            description="the session key, percent-encoded (`:` as `%3A`, `%` as `%25`, "
            "`/` as `%2F`)",
            examples=["agent%3Amain%3Aapi%3Adm%3Aalice"],
        ),
    ],
) -> str:
    return decode_session_key(key)


def require_entry(store: SessionStore, key: str) -> SessionEntry:
    """The entry for `key`: 404 when the key is well formed but unknown, 400 when it is not a
    key (keys imported from a legacy store need not parse, so the lookup comes first)."""
    entry = store.get_session(key)
    if entry is None:
        parse_session_key(key)
        raise SessionNotFoundError(store.missing_message(key), session_key=key)
    return entry


def ensure_idle(runner: GatewayRunner, key: str, action: str) -> None:
    """Refuse an operation that moves the transcript while a turn runs on the lane."""
    if runner.is_busy(key):
        raise SessionBusyError(
            f"cannot {action} while a turn is running on {key!r}; retry when it has finished",
            session_key=key,
        )


StoreDep = Annotated[SessionStore, Depends(get_store)]
RunnerDep = Annotated[GatewayRunner, Depends(get_runner)]
CallsDep = Annotated[StoreCalls, Depends(get_calls)]
ConfigDep = Annotated[GatewayConfig, Depends(get_config)]
MetricsDep = Annotated[ApiMetrics, Depends(get_metrics)]
KeyDep = Annotated[str, Depends(_key_param)]
