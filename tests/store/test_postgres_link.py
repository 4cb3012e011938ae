"""Every connection the PostgreSQL backend opens checks its own link (`_link.py`): TCP
keepalives and a bound on unacknowledged data, unless the URL sets its own.

This machine cannot drop packets on loopback (no root tool for it), so what is checked is the
socket the kernel was given: the options that make a silent link fail a waiting call."""

from __future__ import annotations

import os
import socket

import pytest

from postgres_support import wait_for
from sessiongate.store.postgres.database import PostgresDatabase
from sessiongate.store.postgres.wakeups import Wakeups

DEFAULTS = {"keepalive": 1, "idle": 5, "interval": 2, "count": 3, "user_timeout": 10_000}


def _options(sock: socket.socket) -> dict[str, int]:
    return {
        "keepalive": sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE),
        "idle": sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE),
        "interval": sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL),
        "count": sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT),
        "user_timeout": sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT),
    }


def _server_sockets() -> dict[tuple[str, int], dict[str, int]]:
    """This process's TCP sockets, by local address, with their options."""
    found = {}
    for name in os.listdir("/proc/self/fd"):
        try:
            sock = socket.socket(fileno=os.dup(int(name)))
        except OSError:
            continue
        with sock:
            if sock.family not in (socket.AF_INET, socket.AF_INET6):
                continue
            if sock.type != socket.SOCK_STREAM:
                continue
            try:
                sock.getpeername()
            except OSError:
                continue  # a listening socket
            found[sock.getsockname()[:2]] = _options(sock)
    return found


@pytest.fixture
def tcp_url(pg_schema):
    from psycopg.conninfo import conninfo_to_dict

    host = conninfo_to_dict(pg_schema.url).get("host") or ""
    if not host or host.startswith("/"):
        pytest.skip("the test server is reached over a Unix socket: no TCP options to check")
    return pg_schema.url


def test_the_writer_the_readers_and_the_wakeups_check_their_link(tcp_url):
    before = _server_sockets()
    database = PostgresDatabase(tcp_url)
    link = Wakeups(tcp_url, lambda _key: None, hints=False)
    try:
        with database.snapshot():
            pass
        link.listen("instance-a")
        assert wait_for(lambda: len(_server_sockets().keys() - before.keys()) >= 3)
        opened = {k: v for k, v in _server_sockets().items() if k not in before}
        assert len(opened) >= 3  # the writer, a reader, the wakeups' connection
        assert all(options == DEFAULTS for options in opened.values()), opened
    finally:
        link.close()
        database.close()


def test_what_the_url_sets_is_kept(tcp_url):
    joiner = "&" if "?" in tcp_url else "?"
    url = f"{tcp_url}{joiner}keepalives_idle=30&tcp_user_timeout=0"
    before = _server_sockets()
    database = PostgresDatabase(url)
    try:
        opened = [v for k, v in _server_sockets().items() if k not in before]
        assert opened == [{**DEFAULTS, "idle": 30, "user_timeout": 0}]
    finally:
        database.close()
