"""docs/CLI.md is generated from --help and must match what the real command prints."""

from __future__ import annotations

from pathlib import Path

import pytest

from sessiongate.cli._docs import command_paths, help_text, render_cli_markdown

DOCS = Path(__file__).resolve().parents[2] / "docs" / "CLI.md"
REGENERATE = "run `.venv/bin/python -m sessiongate.cli._docs > docs/CLI.md`"
COMMANDS = [" ".join(p) for p in command_paths()]


def test_cli_md_is_in_sync_with_the_help_text():
    assert DOCS.read_text(encoding="utf-8") == render_cli_markdown(), REGENERATE


def test_every_documented_command_is_a_design_command():
    assert set(COMMANDS) >= {
        "",
        "run",
        "chat",
        "sessions",
        "sessions list",
        "sessions show",
        "sessions search",
        "sessions export",
        "sessions import",
        "sessions prune",
        "doctor",
        "config",
        "bench",
    }


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help_text_and_a_docs_section(command):
    text = help_text(command.split())
    usage, _, rest = text.partition("\n\n")
    assert usage.startswith(f"Usage: {' '.join(['sessiongate', *command.split()])}")
    description = rest.split("\n\n")[0].strip()
    assert description, "no help text"
    assert not description.startswith("Options:"), "no help text"
    assert f"## `{' '.join(['sessiongate', *command.split()])}`" in DOCS.read_text(encoding="utf-8")


@pytest.mark.parametrize("command", ["", "sessions", "sessions list", "doctor", "run"])
def test_the_installed_command_prints_what_the_docs_show(sg, command):
    result = sg(*command.split(), "--help")
    assert result.returncode == 0, result.stderr
    assert result.stdout.rstrip() in DOCS.read_text(encoding="utf-8")
