"""docs/QUICKSTART.md: linked first from the README, and what it says to paste works."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from sessiongate.cli._common import agent_description
from sessiongate.cli._docs import command_paths
from sessiongate.config import load_config
from sessiongate.core.config import TelegramConfig

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = (ROOT / "docs" / "QUICKSTART.md").read_text(encoding="utf-8")


def _sh_blocks() -> list[str]:
    return re.findall(r"```sh\n(.*?)```", QUICKSTART, flags=re.DOTALL)


def test_the_readme_links_the_quickstart_before_any_other_page():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    links = re.findall(r"\]\((docs/[^)#]+)", readme)
    assert links[0] == "docs/QUICKSTART.md"


def test_the_config_it_writes_gives_a_telegram_bot_on_the_openai_agent(tmp_path):
    [config_text] = re.findall(r"<<'EOF'\n(.*?)EOF\n", QUICKSTART, flags=re.DOTALL)
    path = tmp_path / "config.yaml"
    path.write_text(config_text, encoding="utf-8")
    env = {
        "SESSIONGATE_PLATFORMS__TELEGRAM__TOKEN": "123456:ABC-your-token",
        "OPENAI_API_KEY": "sk-your-key",
    }
    # Every variable the config relies on is exported in a block above it.
    exported = " ".join(_sh_blocks())
    assert all(f"export {name}=" in exported for name in env)
    config = load_config(path, environ=env)
    telegram = config.platforms["telegram"]
    assert isinstance(telegram, TelegramConfig)
    assert telegram.enabled
    assert telegram.token is not None
    assert telegram.dm_policy == "pairing"
    assert agent_description(config).startswith("openai-compatible, model gpt-4o-mini")


def test_its_install_line_names_extras_that_exist():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"][
        "optional-dependencies"
    ]
    installs = re.findall(r"pip install '\.\[([a-z,]+)\]'", QUICKSTART)
    assert "telegram,openai" in installs
    for named in installs:
        assert set(named.split(",")) <= set(extras), named


def test_every_sessiongate_command_it_runs_exists():
    known = {" ".join(p) for p in command_paths()}
    seen = set()
    for block in _sh_blocks():
        for line in block.splitlines():
            if line.startswith("sessiongate "):
                words = line.split("|")[0].split()[1:]
                name = " ".join(words[:2]) if words[0] in ("pairing", "sessions") else words[0]
                assert name in known, line
                seen.add(name)
    assert {"try", "run", "config", "pairing approve", "pairing list"} <= seen
