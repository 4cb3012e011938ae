"""What every command shares: the options, finding home and config, opening the store, output.

Exit codes: 0 success; 1 the operation failed or found problems; 2 bad usage or a bad
configuration (click uses 2 for usage errors too). With `--json` an error is JSON as well, the
HTTP API's shape `{"error": {"code", "message"}}` on stderr, with the same exit code (the
option's callback switches `fail` over before the command's body runs; `cli.main` does the
same for click's own usage errors).
"""

from __future__ import annotations

import contextlib
import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.markup import escape

from sessiongate.config import ConfigError, default_home, load_config
from sessiongate.core.secrets import collect_secrets
from sessiongate.errors import InvalidSessionKeyError, SessiongateError
from sessiongate.logs import hidden, hide_secrets
from sessiongate.store.session_store import SessionStore

if TYPE_CHECKING:
    from collections.abc import Iterator

    from sessiongate.agents.base import AgentFactory
    from sessiongate.core.config import GatewayConfig

__all__ = [
    "EXIT_FAILURE",
    "EXIT_USAGE",
    "ConfigOption",
    "HomeOption",
    "JsonOption",
    "Paths",
    "agent_description",
    "agent_factory_for",
    "console",
    "emit_json",
    "err_console",
    "fail",
    "json_errors",
    "load_paths_and_config",
    "open_store",
    "opened_store",
    "plural",
    "print_error",
    "sessions_dir",
    "when",
]

EXIT_FAILURE = 1
EXIT_USAGE = 2

console = Console(highlight=False)
err_console = Console(stderr=True, highlight=False)

HomeOption = Annotated[
    Path | None,
    typer.Option(
        "--home",
        help="State directory. Default: $SESSIONGATE_HOME, else the user data dir.",
        file_okay=False,
        show_default=False,
    ),
]
ConfigOption = Annotated[
    Path | None,
    typer.Option(
        "--config",
        help="YAML config file. Default: $SESSIONGATE_CONFIG, else <home>/config.yaml if present.",
        dir_okay=False,
        show_default=False,
    ),
]
_json_errors = False


def _errors_as_json(value: bool) -> bool:
    global _json_errors
    _json_errors = _json_errors or value
    return value


JsonOption = Annotated[
    bool, typer.Option("--json", help="Print JSON (for scripts).", callback=_errors_as_json)
]


class Paths:
    """Where one invocation keeps its state."""

    __slots__ = ("config_file", "home")

    def __init__(self, home: Path, config_file: Path | None) -> None:
        self.home = home
        self.config_file = config_file


def sessions_dir(home: Path) -> Path:
    return home / "sessions"


def fail(message: str, code: int = EXIT_FAILURE, *, error_code: str | None = None) -> NoReturn:
    """Say what went wrong on stderr (JSON under `--json`) and exit with `code`."""
    print_error(message, error_code or ("invalid_usage" if code == EXIT_USAGE else "failed"))
    raise typer.Exit(code)


def print_error(message: str, error_code: str, *, as_json: bool | None = None) -> None:
    """One error on stderr: JSON under `--json` (or `as_json`), else a line of text; the
    configuration's secrets masked, whatever the error quoted."""
    message = hidden(message)
    if _json_errors if as_json is None else as_json:
        error = {"error": {"code": error_code, "message": message}}
        sys.stderr.write(json.dumps(error, ensure_ascii=False) + "\n")
        sys.stderr.flush()
        return
    # The message may quote user text (keys, labels) holding `[...]`: never read as markup.
    err_console.print(f"[bold red]error:[/] {escape(message)}", markup=True, soft_wrap=True)


def json_errors() -> bool:
    """Whether this invocation asked for `--json`."""
    return _json_errors


def load_paths_and_config(
    home: Path | None, config_file: Path | None
) -> tuple[Paths, GatewayConfig]:
    """Resolve `--home` and `--config`; a bad configuration exits with code 2."""
    resolved = (home or default_home()).expanduser()
    try:
        config = load_config(config_file, home=resolved)
    except ConfigError as exc:
        fail(exc.message, EXIT_USAGE)
    # From here no error or log line of this command shows one of the config's secrets.
    hide_secrets(collect_secrets(config))
    return Paths(resolved, config_file), config


def open_store(paths: Paths, config: GatewayConfig) -> SessionStore:
    """The store under `<home>/sessions`; a store that will not open exits with code 1."""
    try:
        # The home holds transcripts and recovery markers: private, like the store's files.
        paths.home.mkdir(parents=True, exist_ok=True, mode=0o700)
        return SessionStore(sessions_dir(paths.home), config)
    except SessiongateError as exc:
        fail(f"{exc.message} (try `sessiongate doctor --home {paths.home}`)", error_code=exc.code)
    except OSError as exc:
        fail(f"cannot open the store under {paths.home}: {exc}", error_code="store_unavailable")


@contextlib.contextmanager
def opened_store(home: Path | None, config_file: Path | None) -> Iterator[SessionStore]:
    """The store under `<home>/sessions`, closed afterwards; a store error in the body becomes
    a one-line message and a non-zero exit, never a traceback."""
    paths, config = load_paths_and_config(home, config_file)
    store = open_store(paths, config)
    try:
        yield store
    except SessiongateError as exc:
        code = EXIT_USAGE if isinstance(exc, InvalidSessionKeyError) else EXIT_FAILURE
        fail(exc.message, code, error_code=exc.code)
    except OSError as exc:
        # The disk refused a file the store writes beside the database (a delete's archive).
        fail(f"{exc.strerror or exc}: {exc.filename or paths.home}", error_code="store_unavailable")
    finally:
        store.close()


def agent_factory_for(config: GatewayConfig) -> AgentFactory:
    """The configured agent (OpenAI-compatible if configured, else echo); a missing optional
    dependency exits with the install hint instead of a traceback."""
    # Here, not at the top: the agents (and their HTTP clients) are for the commands that chat.
    from sessiongate.agents import build_agent_factory

    try:
        return build_agent_factory(config)
    except ImportError as exc:
        fail(str(exc))


def agent_description(config: GatewayConfig) -> str:
    """Which agent answers, for banners: the one `build_agent_factory` picks."""
    openai = config.agent.openai
    if openai.base_url or openai.api_key is not None:
        return f"openai-compatible, model {openai.model} at {openai.base_url or 'api.openai.com'}"
    delay = config.agent.echo.delay_seconds
    return "echo (repeats each message" + (f" after {delay:g} s)" if delay else ")")


def plural(count: int, one: str, many: str | None = None) -> str:
    """`1 branch`, `2 branches`, `10,000 entries`: a count and its noun, agreeing."""
    noun = one if count == 1 else (many or f"{one}s")
    return f"{count:,} {noun}"


def when(value: datetime | str | None) -> str:
    """A time as every command prints it for a person: UTC to the second,
    `2026-01-31 09:05:07Z`; `--json` keeps the full ISO-8601 value."""
    if value is None or value == "":
        return ""
    moment = value if isinstance(value, datetime) else datetime.fromisoformat(value)
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%SZ")


def emit_json(data: Any) -> None:
    """Plain JSON on stdout (no colour, no wrapping), for scripts."""
    sys.stdout.write(json.dumps(data, indent=2, default=str, ensure_ascii=False) + "\n")
    sys.stdout.flush()
