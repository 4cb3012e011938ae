"""The README's configuration example loads, and its commands exist."""

from __future__ import annotations

import re
from pathlib import Path

from sessiongate.cli._docs import command_paths
from sessiongate.config import load_config

README = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")


def _blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", README, flags=re.DOTALL)


def test_readme_starts_with_make_run_and_make_test():
    first = _blocks("sh")[0].splitlines()
    assert first[0].startswith("make run")
    assert first[1].startswith("make test")


def test_the_yaml_example_is_a_valid_configuration(tmp_path):
    example, agents = _blocks("yaml")
    path = tmp_path / "config.yaml"
    path.write_text(example, encoding="utf-8")
    config = load_config(path, environ={})
    assert config.agent.echo.delay_seconds == 2
    assert config.api.token is not None
    path.write_text(agents, encoding="utf-8")
    several = load_config(path, environ={})
    assert several.agent_ids() == ["main", "support"]
    assert several.bindings[0].agent == "support"
    assert "gpt-4o-mini" in several.pricing


def test_every_sessiongate_command_in_the_readme_exists():
    known = {" ".join(p) for p in command_paths()}
    for block in _blocks("sh"):
        for line in block.splitlines():
            if not line.startswith("sessiongate "):
                continue
            words = line.split("#")[0].split()[1:]
            name = words[0]
            if name == "sessions":
                for sub in words[1].split("|"):
                    assert f"sessions {sub}" in known, line
            else:
                assert name in known, line


DOCS_DIR = Path(__file__).resolve().parents[2] / "docs"
SRC = Path(__file__).resolve().parents[2] / "src" / "sessiongate"


def test_the_library_example_runs_and_finds_what_it_searches_for(tmp_path, monkeypatch, capsys):
    [example] = _blocks("python")
    monkeypatch.chdir(tmp_path)
    exec(compile(example, "README.md", "exec"), {})
    printed = capsys.readouterr().out
    assert "hello" in printed  # the search hit's snippet
    assert printed.strip() != "[]"


def test_the_introduction_claims_no_platform_adapter_that_does_not_ship():
    intro = README.split("\n## ", 1)[0]
    for platform in ("telegram", "discord", "slack", "whatsapp", "signal", "matrix"):
        if (SRC / "adapters" / platform).is_dir():
            continue
        for line in intro.splitlines():
            if platform in line.lower():
                assert "Platform adapters" in line or line.startswith("  "), line


def test_the_docs_link_what_they_name_and_never_cite_tracker_issues():
    for name in ("ARCHITECTURE.md", "CONFIG.md", "API.md", "CLI.md"):
        assert f"(docs/{name})" in README, name
    for path in [*DOCS_DIR.glob("*.md"), DOCS_DIR.parent / "README.md"]:
        text = path.read_text(encoding="utf-8")
        assert not re.search(r"\bissues? #?\d+", text, flags=re.IGNORECASE), path.name
        assert "design notes" not in text, path.name


def test_the_readme_says_busy_follow_ups_merge_and_how_to_queue_them():
    where = README.index("busy_input_mode:")
    nearby = " ".join(README[where : where + 1200].split())
    assert "merged into one next turn" in nearby
    assert "`/queue <text>`" in nearby
