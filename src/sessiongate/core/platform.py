"""Platforms: the built-in set plus plugin platforms registered at run time.

`Platform` is an open set (plugins add to it), so it is a `str` subclass with a registry
instead of an `Enum`; a value compares and serialises as its plain name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

__all__ = ["Platform", "PlatformInfo", "platform_info", "register_platform"]


@dataclass(frozen=True, slots=True)
class PlatformInfo:
    name: str
    # False where the platform needs raw ids in the prompt (Discord mentions) or where a plugin
    # has not declared that hashing ids is safe for it.
    pii_safe: bool
    builtin: bool


_REGISTRY: dict[str, PlatformInfo] = {}


class Platform(str):
    """A registered platform name. `Platform("nope")` raises `ValueError`."""

    __slots__ = ()

    TELEGRAM: ClassVar[Platform]
    DISCORD: ClassVar[Platform]
    SLACK: ClassVar[Platform]
    SIGNAL: ClassVar[Platform]
    WHATSAPP: ClassVar[Platform]
    MATRIX: ClassVar[Platform]
    MATTERMOST: ClassVar[Platform]
    EMAIL: ClassVar[Platform]
    SMS: ClassVar[Platform]
    WEBHOOK: ClassVar[Platform]
    HOMEASSISTANT: ClassVar[Platform]
    LOCAL: ClassVar[Platform]
    API: ClassVar[Platform]

    def __new__(cls, value: object) -> Platform:
        if isinstance(value, Platform):
            return value
        name = str(value).strip().lower() if isinstance(value, str) else ""
        if name not in _REGISTRY:
            raise ValueError(f"unknown platform: {value!r}")
        return super().__new__(cls, name)

    @property
    def value(self) -> str:
        return str.__str__(self)

    def __repr__(self) -> str:
        return f"Platform({str.__str__(self)!r})"


def register_platform(name: str, *, pii_safe: bool = False) -> Platform:
    """Register a plugin platform; registering a built-in name again is an error."""
    key = name.strip().lower()
    if not key.isidentifier():
        raise ValueError(f"platform names are identifiers, got {name!r}")
    existing = _REGISTRY.get(key)
    if existing is not None and existing.builtin:
        raise ValueError(f"{key!r} is a built-in platform")
    _REGISTRY[key] = PlatformInfo(key, pii_safe=pii_safe, builtin=False)
    return Platform(key)


def platform_info(platform: Platform | str) -> PlatformInfo:
    return _REGISTRY[Platform(platform).value]


for _name, _safe in [
    ("telegram", True),
    ("discord", False),
    ("slack", True),
    ("signal", True),
    ("whatsapp", True),
    ("matrix", True),
    ("mattermost", True),
    ("email", True),
    ("sms", True),
    ("webhook", True),
    ("homeassistant", True),
    ("local", True),
    ("api", True),
]:
    _REGISTRY[_name] = PlatformInfo(_name, pii_safe=_safe, builtin=True)
    setattr(Platform, _name.upper(), Platform(_name))
