"""Imports only go down the layers of DESIGN.md (type-checking imports included)."""

from __future__ import annotations

import ast
from pathlib import Path

import sessiongate

ROOT = Path(sessiongate.__file__).parent
# Order of DESIGN.md: each layer may import the ones before it, never one after it.
LAYERS = ["errors", "core", "store", "gateway", "agents", "adapters", "ui", "api", "top"]
TOP_LEVEL = {"cli", "bench", "config", "logs", "__main__", "__init__"}


def layer_of(module: str) -> str:
    parts = module.split(".")
    if len(parts) < 2:
        return "top"
    name = parts[1]
    if name in LAYERS:
        return name
    if name in TOP_LEVEL:
        return "top"
    raise AssertionError(f"module {module} is in no layer")


def imported_modules(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {m for m in found if m == "sessiongate" or m.startswith("sessiongate.")}


def test_imports_only_go_down_the_layers():
    wrong = []
    for path in ROOT.rglob("*.py"):
        module = "sessiongate." + ".".join(path.relative_to(ROOT).with_suffix("").parts)
        mine = LAYERS.index(layer_of(module))
        for target in imported_modules(path):
            if target == "sessiongate" and module.startswith("sessiongate.core"):
                wrong.append(f"{module} imports the package root")
                continue
            if target != "sessiongate" and LAYERS.index(layer_of(target)) > mine:
                wrong.append(f"{module} imports {target}")
    assert wrong == []


def test_core_does_no_io():
    banned = {"sqlite3", "asyncio", "httpx", "socket", "subprocess", "uvicorn", "fastapi"}
    for path in (ROOT / "core").glob("*.py"):
        tree = ast.parse(path.read_text())
        names = {
            alias.name.split(".")[0]
            for node in ast.walk(tree)
            if isinstance(node, ast.Import)
            for alias in node.names
        } | {
            node.module.split(".")[0]
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.module
        }
        assert not names & banned, path.name
