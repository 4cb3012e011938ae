"""What the store's connections check of their network link themselves.

A partition that drops packets ends no connection by itself: a store call waiting for the
server's answer waits until the link heals, with the thread that made it inside it (the event
loop's, for a turn's statements), and the server's own keepalives end only the server's side.
So every connection of the store asks libpq for TCP keepalives and a bound on unacknowledged
data, unless its URL sets those parameters itself. Unix sockets ignore them.
"""

from __future__ import annotations

from psycopg.conninfo import conninfo_to_dict, make_conninfo

__all__ = ["LINK_CHECKS", "with_link_checks"]

# A silent link is found within about 11 s of waiting (5 s idle, then 3 probes 2 s apart: the
# server settings docs/SCALING.md recommends), and sent data may go unacknowledged for 10 s:
# about one lease TTL, by when the instance's lanes have moved on anyway.
LINK_CHECKS = {
    "keepalives": "1",
    "keepalives_idle": "5",
    "keepalives_interval": "2",
    "keepalives_count": "3",
    "tcp_user_timeout": "10000",
}


def with_link_checks(url: str) -> str:
    """The connection string of `url` with each of `LINK_CHECKS` it does not set."""
    given = conninfo_to_dict(url)
    return make_conninfo(url, **{k: v for k, v in LINK_CHECKS.items() if k not in given})
