"""System prompts: each agent's instructions (and a binding's override), read once at start.

`agents.<id>.system_prompt` (text) or `system_prompt_file` gives an agent its instructions or
persona; `bindings[].system_prompt` (or `_file`) replaces them for the chats that binding
matches, so one gateway can run a support bot and a personal assistant. The instructions go
before the session context block (`compose_system_prompt`). Files are read here once, when the
runner is built, so a turn never touches the disk for them and a missing file stops the start
with a line naming the setting and the path.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from sessiongate.core.bindings import DEFAULT_AGENT, agent_of_key, binding_for
from sessiongate.errors import SessiongateError

if TYPE_CHECKING:
    from sessiongate.core.config import GatewayConfig
    from sessiongate.core.source import SessionSource

__all__ = ["SystemPromptError", "SystemPrompts", "compose_system_prompt", "read_prompt_file"]

# A prompt file larger than this is a mistake (a binary, a log), not instructions.
MAX_PROMPT_FILE_BYTES = 256 * 1024


class SystemPromptError(SessiongateError, ValueError):
    """A configured `system_prompt_file` cannot be read; the message names the setting."""

    code = "invalid_config"


def read_prompt_file(setting: str, name: str) -> str:
    """The text of prompt file `name` for `setting`, or `SystemPromptError` saying why not."""
    path = Path(name).expanduser()
    try:
        if path.stat().st_size > MAX_PROMPT_FILE_BYTES:
            raise SystemPromptError(
                f"{setting}: {path} is larger than {MAX_PROMPT_FILE_BYTES // 1024} KiB"
            )
        return path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        raise SystemPromptError(f"{setting}: no such file: {path}") from None
    except IsADirectoryError:
        raise SystemPromptError(f"{setting}: {path} is a folder, not a file") from None
    except UnicodeDecodeError:
        raise SystemPromptError(f"{setting}: {path} is not UTF-8 text") from None
    except OSError as exc:
        raise SystemPromptError(f"{setting}: cannot read {path}: {exc.strerror}") from None


def compose_system_prompt(instructions: str | None, context_block: str) -> str:
    """The system prompt of a turn: the instructions first, then the session context block."""
    if not instructions:
        return context_block
    if not context_block:
        return instructions
    return f"{instructions}\n\n{context_block}"


@dataclass(frozen=True, slots=True)
class SystemPrompts:
    """The resolved instructions: by agent id, and by binding (its index in `bindings`)."""

    config: GatewayConfig
    by_agent: dict[str, str] = field(default_factory=dict)
    by_binding: dict[int, str] = field(default_factory=dict)

    @classmethod
    def load(cls, config: GatewayConfig) -> SystemPrompts:
        """Every configured prompt, files read now; `SystemPromptError` for one that cannot be."""
        by_agent: dict[str, str] = {}
        for agent_id in config.agent_ids():
            spec = config.agent_spec(agent_id)
            where = "agent" if agent_id not in config.agents else f"agents.{agent_id}"
            text = _text_of(where, spec.system_prompt, spec.system_prompt_file)
            if text:
                by_agent[agent_id] = text
        by_binding: dict[int, str] = {}
        for index, binding in enumerate(config.bindings):
            text = _text_of(f"bindings[{index}]", binding.system_prompt, binding.system_prompt_file)
            if text:
                by_binding[index] = text
        return cls(config, by_agent, by_binding)

    def instructions_for(self, session_key: str, source: SessionSource | None) -> str | None:
        """The instructions of the turn `source` starts on `session_key`: the matching
        binding's override when it binds the key's own agent, else that agent's."""
        agent_id = agent_of_key(session_key) or DEFAULT_AGENT
        if source is not None and self.by_binding:
            found = binding_for(source, self.config.bindings)
            if found is not None:
                index, binding = found
                if binding.agent == agent_id and index in self.by_binding:
                    return self.by_binding[index]
        return self.by_agent.get(agent_id)


def _text_of(where: str, text: str | None, file: str | None) -> str | None:
    if file is not None:
        return read_prompt_file(f"{where}.system_prompt_file", file) or None
    return text.strip() or None if text is not None else None
