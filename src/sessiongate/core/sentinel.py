"""`UNSET`: "not given", where `None` is a value (in a PATCH, `label=None` clears the label)."""

from __future__ import annotations

import enum
from typing import Final, Literal

__all__ = ["UNSET", "Unset"]


class Unset(enum.Enum):
    UNSET = "UNSET"

    def __repr__(self) -> str:
        return "UNSET"

    def __bool__(self) -> Literal[False]:
        return False


UNSET: Final = Unset.UNSET
