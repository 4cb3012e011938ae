"""Conversions between Python values and column values (defined beside the records they fill)."""

from __future__ import annotations

from sessiongate.store.records import dumps, from_us, iso_from_us, loads, to_us

__all__ = ["dumps", "from_us", "iso_from_us", "loads", "to_us"]
