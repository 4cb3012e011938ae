"""Reading platform JSON by its documented shape: one error, naming the field, for any other.

A platform's payload is loose input at the edge (STYLE.md section 3): each `payloads.py` reads
it through these accessors, so a field of the wrong type (a `chat` that is a string, an entity
that is a number, an offset of `Infinity`) is a `PayloadError` that says which field, never an
`AttributeError` or `OverflowError` that surfaces as a 500. `loads_json` is the one way a
webhook body becomes JSON: nesting deeper than `MAX_JSON_DEPTH` (no platform nests a tenth as
deep) and the non-standard constants `NaN` and `Infinity` are refused before anything walks
the value, so nothing downstream can hit a `RecursionError`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

__all__ = [
    "MAX_JSON_DEPTH",
    "PayloadError",
    "child",
    "ident",
    "integer",
    "items",
    "loads_json",
    "maybe_child",
    "maybe_ident",
    "maybe_text",
]

# Telegram's deepest path (update.message.reply_to_message.entities[0].user) is 6 levels;
# Slack's block kit nests about a dozen. Anything deeper is not a platform's event.
MAX_JSON_DEPTH = 64
# Ids and counts are well inside 64 bits; anything larger is no platform's number.
_INTEGER_LIMIT = 2**63
# A JSON string (escapes included) or one bracket: the brackets outside strings give the depth.
_TOKEN = re.compile(rb'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.DOTALL)
_OPENERS = frozenset(b"[{")
_QUOTE = ord('"')


class PayloadError(ValueError):
    """A payload that is not the platform's documented shape; `field` says where."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.problem = problem

    def __repr__(self) -> str:
        return f"PayloadError({self.field!r}, {self.problem!r})"


def loads_json(body: bytes | str, *, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """`body` as JSON, refusing nesting deeper than `max_depth`, `NaN` and `Infinity`."""
    raw = body.encode("utf-8", "surrogatepass") if isinstance(body, str) else body
    if raw.count(b"[") + raw.count(b"{") > max_depth:
        _check_depth(raw, max_depth)
    try:
        return json.loads(raw, parse_constant=_refuse_constant)
    except (ValueError, RecursionError) as exc:
        if isinstance(exc, PayloadError):
            raise
        raise PayloadError("body", "not JSON text") from exc


def _check_depth(raw: bytes, max_depth: int) -> None:
    depth = 0
    for match in _TOKEN.finditer(raw):
        first = match.group()[0]
        if first == _QUOTE:
            continue
        if first in _OPENERS:
            depth += 1
            if depth > max_depth:
                raise PayloadError("body", f"JSON nested deeper than {max_depth} levels")
        else:
            depth -= 1


def _refuse_constant(name: str) -> Any:
    raise PayloadError("body", f"{name} is not a JSON number")


def child(parent: Mapping[str, Any], key: str, where: str) -> Mapping[str, Any]:
    """The object at `parent[key]`; it must be there."""
    value = parent.get(key)
    if not isinstance(value, Mapping):
        raise PayloadError(f"{where}.{key}", _not("an object", value))
    return value


def maybe_child(parent: Mapping[str, Any], key: str, where: str) -> Mapping[str, Any]:
    """The object at `parent[key]`, or an empty one when it is absent or null."""
    value = parent.get(key)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise PayloadError(f"{where}.{key}", _not("an object", value))
    return value


def items(parent: Mapping[str, Any], key: str, where: str) -> list[Any]:
    """The list at `parent[key]`, or an empty one when it is absent or null."""
    value = parent.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise PayloadError(f"{where}.{key}", _not("a list", value))
    return value


def ident(parent: Mapping[str, Any], key: str, where: str) -> str:
    """An id (a string or an integer) at `parent[key]`, as text; it must be there."""
    value = maybe_ident(parent, key, where)
    if value is None:
        raise PayloadError(f"{where}.{key}", "missing")
    return value


def maybe_ident(parent: Mapping[str, Any], key: str, where: str) -> str | None:
    """An id at `parent[key]` as text, or None when it is absent or null."""
    value = parent.get(key)
    if value is None:
        return None
    if isinstance(value, str):
        return value
    return str(integer(value, f"{where}.{key}"))


def maybe_text(parent: Mapping[str, Any], key: str, where: str) -> str | None:
    """The string at `parent[key]`, or None when it is absent or null."""
    value = parent.get(key)
    if value is None or isinstance(value, str):
        return value
    raise PayloadError(f"{where}.{key}", _not("a string", value))


def integer(value: Any, where: str) -> int:
    """`value` as an integer: a JSON integer (not a boolean, not a float) of at most 64 bits."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise PayloadError(where, _not("an integer", value))
    if not -_INTEGER_LIMIT <= value < _INTEGER_LIMIT:
        raise PayloadError(where, "out of range")
    return value


def _not(expected: str, value: Any) -> str:
    return f"expected {expected}, got {_kind(value)}"


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, Mapping):
        return "an object"
    return type(value).__name__
