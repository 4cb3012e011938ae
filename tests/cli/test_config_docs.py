"""`docs/CONFIG.md` is generated from the settings model and must not go stale."""

from __future__ import annotations

import re
from pathlib import Path

from sessiongate.cli._config_docs import REGENERATE, config_keys, render_config_markdown
from sessiongate.config import load_config

DOCS = Path(__file__).resolve().parents[2] / "docs" / "CONFIG.md"


def test_config_md_is_what_the_settings_model_generates():
    assert DOCS.read_text(encoding="utf-8") == render_config_markdown(), (
        f"docs/CONFIG.md is stale: run `{REGENERATE}` and commit the result"
    )


def test_every_key_says_what_it_means():
    missing = [key.path for key in config_keys() if not key.meaning]
    assert not missing, (
        f"keys without a meaning: {missing}; give the field a description "
        "(Field(..., description=...)) or a line in sessiongate/cli/_config_docs.py MEANINGS, "
        f"then run `{REGENERATE}`"
    )


def _other_value(key, default):
    """An environment value for `key` that differs from its default and is valid."""
    if key.path == "reset_policy.timezone":
        return "Europe/Berlin"
    if key.path == "api.allowed_hosts":
        return "[gateway.example.com]"
    if key.path == "store.url":
        return "postgresql://sessiongate@127.0.0.1/sessiongate"
    if key.path.endswith(("approvals.approvers", "takeover.operators")):  # `<platform>:<id>`
        return "[telegram:1]"
    if key.path.endswith("system_prompt_file"):  # it must exist: any readable text file
        return __file__
    if isinstance(default, bool):
        return str(not default).lower()
    if default is None and key.type.startswith("bool"):  # unset: decided elsewhere
        return "false"
    if default is None and key.type.startswith(("int", "number")):  # unset: no limit
        return "7"
    if isinstance(default, (int, float)):
        return str(default + 1)
    choices = re.findall(r'`"([^"]*)"`', key.type)
    if choices:  # a choice of literals: another one
        return next(c for c in choices if c != default)
    if key.type.startswith("list"):
        return "[/x]"
    if key.type.startswith("mapping"):
        return "{x: 1}"
    return "other"


def _value_at(config, path):
    value = config
    for part in path.split("."):
        value = getattr(value, part)
    return value.get_secret_value() if hasattr(value, "get_secret_value") else value


def test_every_documented_variable_sets_its_key():
    # The documented names are the ones the loader reads: each, set, changes its key.
    defaults = load_config(environ={"SESSIONGATE_HOME": "/nonexistent"})
    checked = 0
    for key in config_keys():
        # A named platform section exists only once configured (tests/adapters/telegram
        # checks its variables).
        if "<name>" in key.path or "[]" in key.path or key.path.startswith("platforms."):
            continue
        default = _value_at(defaults, key.path)
        raw = _other_value(key, default)
        config = load_config(environ={key.env: raw, "SESSIONGATE_HOME": "/nonexistent"})
        assert _value_at(config, key.path) != default, key.env
        checked += 1
    assert checked > 30


def test_the_documented_bindings_variable_sets_the_list_as_json():
    documented = re.search(r"`(SESSIONGATE_BINDINGS)='([^']*)'`", DOCS.read_text("utf-8"))
    assert documented is not None
    name, raw = documented.groups()
    config = load_config(
        environ={
            name: raw,
            "SESSIONGATE_AGENTS__SUPPORT__KIND": "echo",
            "SESSIONGATE_HOME": "/nonexistent",
        }
    )
    ((binding,),) = [config.bindings]
    assert (binding.platform, binding.chat_id, binding.agent) == ("telegram", "42", "support")
    rows = [line for line in DOCS.read_text("utf-8").splitlines() if "`bindings[]." in line]
    assert rows
    assert all("`SESSIONGATE_BINDINGS` (the list, as JSON)" in row for row in rows)
