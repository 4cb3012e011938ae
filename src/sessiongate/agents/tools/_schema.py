"""A tool's JSON schema and argument check, both from its function's signature.

Each parameter becomes a field of a pydantic model (its type hint, its default, its line in the
docstring's `Args:` section as the description), so the schema the model is shown and the check
its arguments pass are one definition. A parameter annotated `ToolContext` is the gateway's, not
the model's: it is left out of both and passed in by the caller.
"""

from __future__ import annotations

import inspect
import re
import typing
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["Signature", "describe_validation_error", "read_signature"]

_ARGS_HEADER = re.compile(r"^\s*(Args|Arguments|Parameters)\s*:\s*$")
_ARG_LINE = re.compile(r"^\s*\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")


@dataclass(frozen=True, slots=True)
class Signature:
    """What the schema and the check of one function need."""

    description: str
    arguments: type[BaseModel]
    context_parameter: str | None

    def json_schema(self) -> dict[str, Any]:
        schema = _without_titles(self.arguments.model_json_schema())
        schema.setdefault("properties", {})
        return dict(schema)


def read_signature(function: Callable[..., Any], *, name: str, context_type: type) -> Signature:
    """The schema model of `function`'s parameters; raises `TypeError` for a parameter the
    model could not fill (`*args`, `**kwargs`, positional-only)."""
    hints = typing.get_type_hints(function, include_extras=True)
    summary, arg_docs = _parse_docstring(inspect.getdoc(function) or "")
    fields: dict[str, Any] = {}
    context_parameter = None
    for parameter in inspect.signature(function).parameters.values():
        annotation = hints.get(parameter.name, Any)
        if annotation is context_type:
            context_parameter = parameter.name
            continue
        if parameter.kind in (
            parameter.VAR_POSITIONAL,
            parameter.VAR_KEYWORD,
            parameter.POSITIONAL_ONLY,
        ):
            raise TypeError(f"parameter {parameter.name!r} cannot be filled from JSON arguments")
        default = ... if parameter.default is parameter.empty else parameter.default
        fields[parameter.name] = (
            annotation,
            Field(default, description=arg_docs.get(parameter.name)),
        )
    arguments = create_model(f"{name}_arguments", __config__=ConfigDict(extra="forbid"), **fields)
    return Signature(
        description=summary or name, arguments=arguments, context_parameter=context_parameter
    )


def describe_validation_error(exc: ValidationError) -> str:
    """One line per wrong argument: `count: Input should be a valid integer`."""
    lines = []
    for error in exc.errors():
        where = ".".join(str(part) for part in error["loc"]) or "arguments"
        if error["type"] == "extra_forbidden":
            lines.append(f"{where}: unknown argument")
        else:
            lines.append(f"{where}: {error['msg']}")
    return "; ".join(lines)


def _parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """The text before `Args:`, and each argument's description from that section."""
    summary: list[str] = []
    args: dict[str, str] = {}
    current: str | None = None
    in_args = False
    for line in doc.splitlines():
        if _ARGS_HEADER.match(line):
            in_args = True
            continue
        if not in_args:
            summary.append(line)
            continue
        if not line.strip():
            current = None
            continue
        match = _ARG_LINE.match(line)
        if match:
            current = match.group(1)
            args[current] = match.group(2).strip()
        elif current is not None:
            args[current] = f"{args[current]} {line.strip()}".strip()
        else:
            in_args = False  # another section begins
    return "\n".join(summary).strip(), args


def _without_titles(value: Any) -> Any:
    """pydantic's schema without its generated `title`s (noise for the model)."""
    if isinstance(value, dict):
        return {k: _without_titles(v) for k, v in value.items() if k != "title"}
    if isinstance(value, list):
        return [_without_titles(v) for v in value]
    return value
