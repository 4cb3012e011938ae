"""No two modules of the package import each other, however indirectly.

Every import counts: module level, function-local, and those under `if TYPE_CHECKING:` (a
circle that exists only for the type checker is still a circle in the design). A package's
`__init__` is a module like any other; importing `a.b.c` is an edge to `a.b.c` only, not to
the packages above it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import sessiongate

ROOT = Path(sessiongate.__file__).parent


def modules(root: Path) -> dict[str, tuple[Path, bool]]:
    found: dict[str, tuple[Path, bool]] = {}
    for path in root.rglob("*.py"):
        parts = [root.name, *path.relative_to(root).with_suffix("").parts]
        package = parts[-1] == "__init__"
        if package:
            parts = parts[:-1]
        found[".".join(parts)] = (path, package)
    return found


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    known = modules(root)

    def owner(name: str) -> str | None:
        while name and name not in known:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {name: set() for name in known}
    for name, (path, package) in known.items():
        here = name if package else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text())):
            targets: list[str | None] = []
            if isinstance(node, ast.Import):
                targets = [owner(alias.name) for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = here.split(".")[: len(here.split(".")) - (node.level - 1)]
                    source = ".".join(base + ([node.module] if node.module else []))
                else:
                    source = node.module or ""
                for alias in node.names:
                    child = f"{source}.{alias.name}"
                    targets.append(child if child in known else owner(source))
            graph[name].update(t for t in targets if t and t != name)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            for target in edges:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph[target]))))
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return sorted(found)


def test_the_graph_sees_a_circle_when_there_is_one():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_the_graph_counts_function_local_and_type_checking_imports(tmp_path):
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("from .c import C\n")
    (package / "a.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.b import B\n"
    )
    (package / "b.py").write_text("def f():\n    from . import a\n    from .sub import c\n")
    (package / "sub" / "c.py").write_text("from ..b import f\nclass C: ...\n")
    graph = import_graph(package)
    assert graph["pkg.a"] == {"pkg.b"}
    assert graph["pkg.b"] == {"pkg.a", "pkg.sub.c"}
    assert graph["pkg.sub"] == {"pkg.sub.c"}
    assert graph["pkg.sub.c"] == {"pkg.b"}
    assert circles(graph) == [["pkg.a", "pkg.b", "pkg.sub.c"]]


def test_no_import_circles():
    assert circles(import_graph()) == []


def test_no_import_circles_in_the_benchmark_suite():
    # `benchmarks/sessiongate_bench`, outside the package (it is not in the wheel).
    suite = ROOT.parents[1] / "benchmarks" / "sessiongate_bench"
    graph = import_graph(suite)
    assert "sessiongate_bench.harness" in graph
    assert circles(graph) == []
