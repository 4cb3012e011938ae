"""Imports only go down the layers of DESIGN.md (type-checking imports included)."""

from __future__ import annotations

import ast
from pathlib import Path

import sessiongate

ROOT = Path(sessiongate.__file__).parent
# Order of DESIGN.md: each layer may import the ones before it, never one after it.
LAYERS = ["errors", "core", "store", "gateway", "agents", "adapters", "testing", "ui", "api", "top"]
# The test kit (platform stubs, `sessiongate try`'s targets) is for tests: in the product only
# the `try` command uses it (and the benchmark, `benchmarks/sessiongate_bench`, outside it).
TESTING_USERS = ("sessiongate.cli.try_cmd", "sessiongate.cli._trial")
TOP_LEVEL = {"cli", "config", "logs", "__main__", "__init__"}
# The benchmark suite, outside the package (not in the wheel).
BENCH = ROOT.parents[1] / "benchmarks" / "sessiongate_bench"


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


def every_import(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif (  # `importlib.import_module("name")`
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            found.add(node.args[0].value)
    return found


def imported_modules(path: Path) -> set[str]:
    return {m for m in every_import(path) if m == "sessiongate" or m.startswith("sessiongate.")}


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


def test_nothing_in_the_product_imports_the_test_kit_but_try():
    wrong = []
    for path in ROOT.rglob("*.py"):
        module = "sessiongate." + ".".join(path.relative_to(ROOT).with_suffix("").parts)
        if module.startswith(("sessiongate.testing", *TESTING_USERS)):
            continue
        wrong += [
            f"{module} imports {target}"
            for target in imported_modules(path)
            if target.startswith("sessiongate.testing")
        ]
    assert wrong == []


def test_the_benchmark_lives_outside_the_package_and_nothing_in_it_imports_it():
    assert not (ROOT / "bench").exists()
    assert (BENCH / "__init__.py").is_file()
    wrong = [
        f"{path} imports {target}"
        for path in ROOT.rglob("*.py")
        for target in every_import(path)
        if target.split(".")[0] == "sessiongate_bench"
    ]
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


def test_no_driver_or_sql_above_the_storage_backends():
    """The storage seam: only `store/sqlite/` and `store/postgres/` import a database driver
    or hold SQL; `backends.py` opens them, lazily."""
    drivers = {"sqlite3", "psycopg", "psycopg_pool"}
    sql = ("SELECT ", "INSERT INTO", "UPDATE ", "DELETE FROM", "PRAGMA ")
    wrong = []
    for path in (ROOT / "store").glob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                wrong += [f"{path.name} imports {a.name}" for a in node.names if a.name in drivers]
            elif isinstance(node, ast.ImportFrom) and node.module:
                if node.module.split(".")[0] in drivers:
                    wrong.append(f"{path.name} imports {node.module}")
                if path.name != "backends.py" and node.module.startswith(
                    ("sessiongate.store.sqlite", "sessiongate.store.postgres")
                ):
                    wrong.append(f"{path.name} imports {node.module}")
            elif (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and any(word in node.value for word in sql)
            ):
                wrong.append(f"{path.name} holds SQL: {node.value[:40]!r}")
    assert wrong == []


def test_every_test_file_has_a_name_of_its_own():
    # The suite has no packages: pytest imports each test file by its base name, so two files
    # of one name would stop collection.
    from collections import Counter
    from pathlib import Path

    names = Counter(path.name for path in Path(__file__).parent.rglob("test_*.py"))
    assert [name for name, count in names.items() if count > 1] == []
