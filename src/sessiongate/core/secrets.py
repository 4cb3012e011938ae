"""The configuration's secrets, and text with them masked.

A secret is every `SecretStr` of the configuration (tokens, signing secrets, API keys) and
every password written into a URL (`postgresql://user:password@host/db`, a `?password=`
parameter, a proxy's `http://user:password@host`). Errors from SDKs and drivers quote what
they were given (python-telegram-bot's "The token `…` was rejected"), so masking what reaches
a log line or the terminal is the one place that cannot forget one; `logs.py` and the CLI's
error output apply it.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from pydantic import BaseModel, SecretStr

__all__ = ["MASK", "collect_secrets", "mask_secrets", "url_passwords"]

MASK = "***"

# Shorter values are not masked: a secret of one or two characters would blank out every
# occurrence of that text in a line, and no platform issues credentials that short.
MIN_SECRET_LENGTH = 3

_PASSWORD_PARAMS = frozenset({"password", "pass", "passwd", "sslpassword"})


def collect_secrets(config: BaseModel) -> frozenset[str]:
    """Every secret value held anywhere in `config` (nested models, lists and dicts)."""
    found: set[str] = set()
    _walk(config, found)
    return frozenset(s for s in found if len(s) >= MIN_SECRET_LENGTH)


def _walk(value: Any, found: set[str]) -> None:
    if isinstance(value, SecretStr):
        found.add(value.get_secret_value())
    elif isinstance(value, BaseModel):
        for name in type(value).model_fields:
            _walk(getattr(value, name), found)
    elif isinstance(value, dict):
        for item in value.values():
            _walk(item, found)
    elif isinstance(value, list | tuple | set | frozenset):
        for item in value:
            _walk(item, found)
    elif isinstance(value, str) and "://" in value:
        found.update(url_passwords(value))


def url_passwords(url: str) -> set[str]:
    """The passwords written into `url` (its userinfo, a `password=` parameter)."""
    found: set[str] = set()
    authority = url.split("://", 1)[1].split("/", 1)[0]
    if "@" in authority:
        userinfo = authority.rsplit("@", 1)[0]
        if ":" in userinfo:
            password = userinfo.split(":", 1)[1]
            found.update({password, unquote(password)})
    try:
        query = urlsplit(url).query
    except ValueError:  # an unclosed `[`: the userinfo above was still read by hand
        query = url.split("?", 1)[1] if "?" in url else ""
    for name, value in parse_qsl(query):
        if name.lower() in _PASSWORD_PARAMS and value:
            found.add(value)
    return found


def mask_secrets(text: str, secrets: frozenset[str]) -> str:
    """`text` with each secret (as written, and as JSON escapes it) replaced by `***`."""
    if not secrets:
        return text
    for secret in sorted(secrets, key=len, reverse=True):
        if secret in text:
            text = text.replace(secret, MASK)
        escaped = json.dumps(secret, ensure_ascii=False)[1:-1]
        if escaped != secret and escaped in text:
            text = text.replace(escaped, MASK)
    return text
