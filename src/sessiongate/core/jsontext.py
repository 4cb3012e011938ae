"""JSON text of small values, fast: one C encoder built once and reused.

`json.JSONEncoder(...).encode` builds a new C encoder on every call (through `iterencode`),
which is about a third of encoding a small dict; a feed event or a streamed delta is encoded
thousands of times a second. Without the C accelerator this falls back to the same encoder
`json` would use. Circular references are not checked: only plain data of our own making is
encoded here.
"""

from __future__ import annotations

import json
from json import encoder as _encoder
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["json_encoder"]


def _refuse(value: object) -> Any:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def json_encoder(
    *,
    separators: tuple[str, str] = (", ", ": "),
    default: Callable[[Any], Any] | None = None,
) -> Callable[[Any], str]:
    """`json.dumps(value, ensure_ascii=False, separators=separators, default=default)` as a
    function that reuses one encoder."""
    item_separator, key_separator = separators
    # The C accelerator is not in the type stubs: it is an implementation detail of `json`.
    make = getattr(_encoder, "c_make_encoder", None)
    if make is None:  # pragma: no cover - CPython always has the accelerator
        return json.JSONEncoder(ensure_ascii=False, separators=separators, default=default).encode
    encode = make(
        None,  # no circular-reference markers
        default or _refuse,
        _encoder.encode_basestring,
        None,  # no indent
        key_separator,
        item_separator,
        False,  # sort_keys
        False,  # skipkeys
        True,  # allow_nan
    )

    def to_json(value: Any) -> str:
        return "".join(encode(value, 0))

    return to_json
