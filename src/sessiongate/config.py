"""Loading `GatewayConfig` from a YAML file plus `SESSIONGATE_*` environment overrides.

The file is optional; keys nest either as YAML mappings or as dotted names
(`agent.echo.delay_seconds: 1` is `agent: {echo: {delay_seconds: 1}}`). An environment variable
`SESSIONGATE_<KEY>` overrides one value, `__` separating levels
(`SESSIONGATE_AGENT__GATEWAY_TIMEOUT=60`); its value is read as a YAML scalar, except for text
fields (tokens, ids), which take the raw string so `0123` stays `0123`. Every mistake becomes
one `ConfigError` listing all the bad keys, never a traceback.
"""

from __future__ import annotations

import os
import types
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Union, get_args, get_origin

import platformdirs
import yaml
from pydantic import BaseModel, SecretStr, ValidationError

from sessiongate.core.config import PLATFORM_CONFIGS, GatewayConfig, PlatformConfig
from sessiongate.core.secrets import mask_secrets as mask_in_text, url_passwords
from sessiongate.errors import SessiongateError
from sessiongate.gateway.prompts import SystemPromptError, SystemPrompts

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = [
    "CONFIG_FILE_NAME",
    "ENV_PREFIX",
    "ConfigError",
    "config_as_dict",
    "default_config_path",
    "default_home",
    "load_config",
]

ENV_PREFIX = "SESSIONGATE_"
CONFIG_FILE_NAME = "config.yaml"
# Variables with the prefix that choose where things are rather than what the config says.
_NOT_CONFIG_KEYS = frozenset({"SESSIONGATE_HOME", "SESSIONGATE_CONFIG"})
_MASK = "***"


class ConfigError(SessiongateError, ValueError):
    """The configuration cannot be used; `problems` lists each reason, `path` names the file."""

    code = "invalid_config"
    path: Path | None
    problems: list[str]
    unknown_keys: list[str]

    def __init__(
        self,
        message: str,
        *,
        path: Path | None = None,
        problems: list[str] | None = None,
        unknown_keys: list[str] | None = None,
    ) -> None:
        super().__init__(
            message,
            path=path,
            problems=problems if problems is not None else [message],
            unknown_keys=unknown_keys or [],
        )


def default_home(*, environ: Mapping[str, str] | None = None) -> Path:
    """`$SESSIONGATE_HOME`, else the platform's user data dir for sessiongate."""
    env = os.environ if environ is None else environ
    home = env.get("SESSIONGATE_HOME")
    if home:
        return Path(home).expanduser()
    return Path(platformdirs.user_data_dir("sessiongate"))


def default_config_path(
    *, environ: Mapping[str, str] | None = None, home: Path | None = None
) -> Path:
    """`$SESSIONGATE_CONFIG`, else `config.yaml` in the home directory."""
    env = os.environ if environ is None else environ
    explicit = env.get("SESSIONGATE_CONFIG")
    if explicit:
        return Path(explicit).expanduser()
    return (home if home is not None else default_home(environ=env)) / CONFIG_FILE_NAME


def load_config(
    path: Path | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    home: Path | None = None,
) -> GatewayConfig:
    """Read `path` (YAML) and apply `SESSIONGATE_*` overrides from `environ` (`os.environ`).

    With no `path`, `$SESSIONGATE_CONFIG` is read if set (it must exist), else `config.yaml` in
    `home` (default `default_home()`) if it exists, else only defaults and the environment.
    Raises `ConfigError` naming the file for a missing or malformed file and listing every
    unknown key or invalid value.
    """
    env = os.environ if environ is None else environ
    required = path is not None or bool(env.get("SESSIONGATE_CONFIG"))
    if path is None:
        path = default_config_path(environ=env, home=home)
    from_file = required or path.is_file()
    data = _read_yaml(path) if from_file else {}
    sources: dict[tuple[str, ...], str] = {}
    for name, raw in sorted(env.items()):
        if not name.startswith(ENV_PREFIX) or name in _NOT_CONFIG_KEYS:
            continue
        key = _env_key(name)
        _set_nested(data, key, _env_value(key, raw), origin=name)
        sources[key] = name
    try:
        config = GatewayConfig.model_validate(data)
    except ValidationError as exc:
        problems = _describe(exc, sources)
        unknown = [
            ".".join(map(str, e["loc"])) for e in exc.errors() if e["type"] == "extra_forbidden"
        ]
        where = f" in {path}" if from_file else ""
        raise ConfigError(
            f"invalid configuration{where}:\n" + "\n".join(f"  - {p}" for p in problems),
            path=path,
            problems=problems,
            unknown_keys=unknown,
        ) from None
    _check_prompt_files(config, base=path.parent if from_file else Path.cwd(), path=path)
    return config


def _check_prompt_files(config: GatewayConfig, *, base: Path, path: Path) -> None:
    """Make every `system_prompt_file` absolute (a relative one is read from the config
    file's folder) and read each once, as `run` will: one that cannot be read is a
    `ConfigError` naming the setting and the file."""
    holders: list[Any] = [config.agent, *config.agents.values(), *config.bindings]
    for holder in holders:
        name = holder.system_prompt_file
        if name is not None and not Path(name).expanduser().is_absolute():
            holder.system_prompt_file = str(base / Path(name).expanduser())
    try:
        SystemPrompts.load(config)
    except SystemPromptError as exc:
        raise ConfigError(
            f"invalid configuration in {path}:\n  - {exc.message}",
            path=path,
            problems=[exc.message],
        ) from None


def config_as_dict(config: GatewayConfig, *, mask_secrets: bool = True) -> dict[str, Any]:
    """The configuration as plain data (for `sessiongate config`); secrets shown as `***`."""
    return dict(_plain(config.model_dump(), mask_secrets=mask_secrets))


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {path}", path=path) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read config file {path}: {exc}", path=path) from None
    try:
        loaded = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"malformed YAML in {path}: {_yaml_problem(exc)}", path=path) from None
    if loaded is None:
        return {}
    if not isinstance(loaded, dict):
        raise ConfigError(
            f"config file {path} must hold a mapping of keys, not {type(loaded).__name__}",
            path=path,
        )
    try:
        return _expand_dotted(loaded, ())
    except ConfigError as exc:
        raise ConfigError(f"{exc.message} (in {path})", path=path) from None


def _yaml_problem(exc: yaml.YAMLError) -> str:
    if isinstance(exc, yaml.MarkedYAMLError) and exc.problem_mark is not None:
        mark = exc.problem_mark
        return f"{exc.problem} at line {mark.line + 1}, column {mark.column + 1}"
    return str(exc)


def _expand_dotted(mapping: dict[Any, Any], prefix: tuple[str, ...]) -> dict[str, Any]:
    """Nest `a.b.c: v` as `a: {b: {c: v}}`, recursively, refusing two spellings of one key."""
    out: dict[str, Any] = {}
    for raw_key, value in mapping.items():
        if not isinstance(raw_key, str) or not raw_key:
            where = ".".join(prefix) or "the top level"
            raise ConfigError(f"keys must be non-empty text, got {raw_key!r} under {where}")
        path = tuple(raw_key.split("."))
        if not all(path):
            raise ConfigError(f"malformed dotted key {'.'.join((*prefix, raw_key))!r}")
        if isinstance(value, dict):
            value = _expand_dotted(value, (*prefix, *path))
        _set_nested(out, path, value, origin=".".join((*prefix, raw_key)), merge=True)
    return out


def _set_nested(
    data: dict[str, Any], path: tuple[str, ...], value: Any, *, origin: str, merge: bool = False
) -> None:
    """Put `value` at `path`; mappings merge when `merge`, other clashes are errors."""
    node = data
    for depth, part in enumerate(path[:-1]):
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            taken = ".".join(path[: depth + 1])
            raise ConfigError(f"{origin} sets a key under {taken!r}, which is not a mapping")
        node = child
    last = path[-1]
    if merge and last in node:
        if not (isinstance(node[last], dict) and isinstance(value, dict)):
            raise ConfigError(f"key {'.'.join(path)!r} is given twice ({origin})")
        for sub, sub_value in value.items():
            _set_nested(node[last], (sub,), sub_value, origin=origin, merge=True)
        return
    node[last] = value


def _env_key(name: str) -> tuple[str, ...]:
    parts = tuple(name[len(ENV_PREFIX) :].lower().split("__"))
    if not all(parts):
        raise ConfigError(f"malformed environment variable name {name!r}")
    return parts


def _env_value(key: tuple[str, ...], raw: str) -> Any:
    if _is_text_field(key):
        return raw
    try:
        return yaml.safe_load(raw)
    except yaml.YAMLError:
        # Not YAML (`@x`, an unbalanced quote): the value is the text itself.
        return raw


def _is_text_field(key: tuple[str, ...]) -> bool:
    """Whether the field at `key` holds text, so the raw string is its value."""
    annotation: Any = GatewayConfig
    for part in key:
        annotation = _strip_optional(annotation)
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            field = annotation.model_fields.get(part)
            if field is None:
                return False
            annotation = field.annotation
        elif get_origin(annotation) is dict:
            annotation = _strip_optional(get_args(annotation)[1])
            # `platforms.<name>` sections with keys of their own have a model of their own.
            if annotation is PlatformConfig:
                annotation = PLATFORM_CONFIGS.get(part, PlatformConfig)
        else:
            return False
    return _strip_optional(annotation) in (str, SecretStr)


def _strip_optional(annotation: Any) -> Any:
    if get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    if get_origin(annotation) in (Union, types.UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return annotation


def _describe(exc: ValidationError, sources: Mapping[tuple[str, ...], str]) -> list[str]:
    """One line per bad key; a union's per-branch complaints are folded into its key's line."""
    by_key: dict[tuple[str, ...], list[str]] = {}
    unknown: list[tuple[str, ...]] = []
    for error in exc.errors():
        loc = _field_path(tuple(str(part) for part in error["loc"]))
        if error["type"] == "extra_forbidden":
            unknown.append(loc)
        else:
            # The offending value is not echoed: it may be a secret.
            by_key.setdefault(loc, []).append(error["msg"])
    lines = [
        f"{'.'.join(k)}: {'; or '.join(dict.fromkeys(m))}{_origin(k, sources)}"
        for k, m in by_key.items()
    ]
    lines += [f"unknown key {'.'.join(k)!r}{_origin(k, sources)}" for k in unknown]
    return lines


def _field_path(loc: tuple[str, ...]) -> tuple[str, ...]:
    """`loc` up to the field it names, without pydantic's union-branch suffixes (`.int`)."""
    annotation: Any = GatewayConfig
    for depth, part in enumerate(loc):
        annotation = _strip_optional(annotation)
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            field = annotation.model_fields.get(part)
            annotation = field.annotation if field is not None else None
        elif get_origin(annotation) is dict:
            annotation = get_args(annotation)[1]
        elif get_origin(annotation) in (Union, types.UnionType):
            return loc[:depth]
    return loc


def _origin(key: tuple[str, ...], sources: Mapping[tuple[str, ...], str]) -> str:
    for path, name in sources.items():
        if key[: len(path)] == path:
            return f" (from {name})"
    return ""


def _plain(value: Any, *, mask_secrets: bool) -> Any:
    if isinstance(value, SecretStr):
        return _MASK if mask_secrets else value.get_secret_value()
    if isinstance(value, dict):
        return {k: _plain(v, mask_secrets=mask_secrets) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v, mask_secrets=mask_secrets) for v in value]
    if mask_secrets and isinstance(value, str) and "://" in value:
        # A database password written into store.url is as secret as a token.
        return _mask_url(value)
    return value


def _mask_url(url: str) -> str:
    return mask_in_text(url, frozenset(url_passwords(url)))
