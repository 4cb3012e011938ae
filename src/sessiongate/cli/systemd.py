"""Telling systemd how the service is doing (`Type=notify`), with no dependency.

Under a unit with `Type=notify`, systemd passes the path of a datagram socket in
`$NOTIFY_SOCKET`; a service writes `READY=1` there once it serves, and `STOPPING=1` when it
begins to stop (see sd_notify(3)). Without the variable (not under systemd) every call is a
no-op, and a socket that cannot be written only costs a debug line: readiness reporting never
stops the gateway.
"""

from __future__ import annotations

import logging
import os
import socket

__all__ = ["notify"]

log = logging.getLogger(__name__)


def notify(*fields: str) -> bool:
    """Send `fields` (`"READY=1"`, `"STATUS=…"`) as one notification; whether it was sent."""
    address = os.environ.get("NOTIFY_SOCKET")
    if not address:
        return False
    # An abstract socket is named with a leading "@", which stands for a NUL byte.
    target = "\0" + address[1:] if address.startswith("@") else address
    message = "\n".join(fields).encode("utf-8", "replace")
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
            sock.connect(target)
            sock.sendall(message)
    except OSError as exc:
        log.debug("cannot notify systemd", extra={"reason": str(exc)})
        return False
    return True
