"""Opening the backend a store is configured for; the one place that names them both.

`store.url` chooses: `sqlite:///path` (or nothing: `state.db` in the sessions folder) is the
embedded default, `postgresql://…` the shared database several instances can run on. Drivers
are imported here, lazily, so a store that never opens PostgreSQL never imports psycopg.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sessiongate.errors import StoreUnavailableError

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence

    from sessiongate.core.config import GatewayConfig
    from sessiongate.store.ownership import Ownership
    from sessiongate.store.postgres.database import PostgresDatabase
    from sessiongate.store.postgres.wakeups import Wakeups
    from sessiongate.store.protocol import Backend, EphemeralBackend

__all__ = [
    "POSTGRES_MISSING",
    "check_copy_target",
    "database_origin",
    "describe_database",
    "is_postgres_url",
    "open_backend",
    "open_copy_target",
    "open_memory_backend",
    "open_ownership",
    "open_wakeups",
    "upgrade_database",
]


POSTGRES_MISSING = (
    "store.url names PostgreSQL, which needs psycopg 3 and psycopg_pool: "
    "pip install 'sessiongate[postgres]'"
)


@contextlib.contextmanager
def _postgres_driver() -> Iterator[None]:
    """Around a lazy import of the PostgreSQL backend: a missing driver becomes the one-line
    error naming the extra to install, whatever command asked for it."""
    try:
        yield
    except ImportError as exc:
        if (exc.name or "").split(".")[0] not in {"psycopg", "psycopg_pool"}:
            raise
        raise StoreUnavailableError(POSTGRES_MISSING) from exc


def is_postgres_url(url: str | None) -> bool:
    return url is not None and url.startswith(("postgresql://", "postgres://"))


def open_backend(config: GatewayConfig, default_path: Path) -> Backend:
    """The durable backend of a store whose embedded database would be `default_path`."""
    url = config.store.url
    if is_postgres_url(url):
        assert url is not None
        return _postgres()(
            url,
            prepare_threshold=config.store.prepare_threshold,
            writers=config.store.connections,
        )
    from sessiongate.store.sqlite.database import Database

    return Database(_sqlite_path(config, default_path), synchronous=config.synchronous)


def _sqlite_path(config: GatewayConfig, default_path: Path) -> Path:
    url = config.store.url
    return default_path if url is None else Path(url[len("sqlite://") :])


def describe_database(config: GatewayConfig, default_path: Path) -> dict[str, Any]:
    """Which database the store uses and its migrations (applied or pending); changes nothing."""
    url = config.store.url
    if is_postgres_url(url):
        assert url is not None
        with _postgres_driver():
            from sessiongate.store.postgres.database import describe

        return describe(url)
    from sessiongate.store.sqlite.database import migration_status

    path = _sqlite_path(config, default_path)
    return {"backend": "sqlite", "url": f"sqlite://{path}", "migrations": migration_status(path)}


def upgrade_database(config: GatewayConfig, default_path: Path) -> list[int]:
    """Apply the migrations the database lacks (the store also does at open); returns the
    versions applied now."""
    before = {
        m["version"]
        for m in describe_database(config, default_path)["migrations"]
        if m["applied_at"] is not None
    }
    backend = open_backend(config, default_path)  # opening migrates, under the backend's lock
    backend.close()
    after = describe_database(config, default_path)["migrations"]
    return [
        m["version"] for m in after if m["applied_at"] is not None and m["version"] not in before
    ]


def _postgres() -> type[PostgresDatabase]:
    with _postgres_driver():
        from sessiongate.store.postgres.database import PostgresDatabase
    return PostgresDatabase


def database_origin(config: GatewayConfig, default_path: Path) -> str:
    """Where the store's database is, as a copy's marker names its source (no password)."""
    url = config.store.url
    if is_postgres_url(url):
        assert url is not None
        with _postgres_driver():
            from sessiongate.store.postgres.database import redact_url
        return redact_url(url)
    return f"sqlite://{_sqlite_path(config, default_path).resolve()}"


def check_copy_target(url: str, tables: Sequence[str], *, origin: str, resume: bool) -> None:
    """Refuse (`ConflictError`) a `db copy` target that holds sessiongate data, unless it is
    an unfinished copy of `origin` and `resume` asks to finish it; reads only."""
    with _postgres_driver():
        from sessiongate.store.postgres.copy_guard import check_copy_target as check
    check(url, tables, origin=origin, resume=resume)


def open_copy_target(url: str) -> PostgresDatabase:
    """The PostgreSQL database a `db copy` writes into (migrated on open); only after
    `check_copy_target` let it."""
    return _postgres()(url)


def open_ownership(backend: Backend, config: GatewayConfig) -> Ownership | None:
    """This instance's leases on a database several instances share; None on one that only
    this process uses (SQLite), where the home lock already makes the instance the owner."""
    if not backend.shared:
        return None
    from sessiongate.store.ownership import Ownership

    return Ownership(
        backend,  # type: ignore[arg-type]  # a shared backend's Tx offers the lease statements
        ttl=config.store.lease_ttl_seconds,
        heartbeat=config.store.heartbeat_seconds,
    )


def open_wakeups(config: GatewayConfig, on_key: Callable[[str], None]) -> Wakeups | None:
    """This instance's own connection on a shared database (its liveness lock, and its
    wake-up hints unless `store.poll_only`); None on SQLite."""
    url = config.store.url
    if not is_postgres_url(url):
        return None
    assert url is not None
    with _postgres_driver():
        from sessiongate.store.postgres.wakeups import Wakeups

    return Wakeups(url, on_key, hints=not config.store.poll_only)


def open_memory_backend(*, first_row_id: int = 1) -> EphemeralBackend:
    """A backend that lives only in this process's memory (incognito lanes), its inbox rows
    and turns numbered from `first_row_id`."""
    from sessiongate.store.sqlite.database import Database

    db = Database(None)
    if first_row_id > 1:
        db.number_rows_from(first_row_id)
    return db
