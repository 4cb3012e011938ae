"""The session source of a request body: the platform is always `api`."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from sessiongate.core.platform import Platform
from sessiongate.core.source import SessionSource

if TYPE_CHECKING:
    from sessiongate.api.schemas import SourceIn

__all__ = ["source_of"]

# Every SessionSource field a client may set: the platform is always `api`, and
# `role_authorized` is granted by adapters, never claimed by a request body.
_SOURCE_FIELDS = tuple(
    f.name
    for f in dataclasses.fields(SessionSource)
    if f.name not in ("platform", "role_authorized")
)


def source_of(body: SourceIn) -> SessionSource:
    """The session source a body describes; `role_authorized` is never taken from a body."""
    given = type(body).model_fields
    fields: dict[str, Any] = {name: getattr(body, name) for name in _SOURCE_FIELDS if name in given}
    return SessionSource(platform=Platform.API, **fields)
