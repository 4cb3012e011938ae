"""`sessiongate bench`: runs the benchmark suite, `sessiongate_bench`, imported only here.

The suite is not part of the wheel: it lives in the source repository's `benchmarks/`
folder, with the contenders' environment it measures against. From a checkout (an editable
install, or a run from the repository's root) that folder is put on the import path of this
process and of the suite's children; installed from a wheel, the command says how to get it.

Every argument after `bench` other than `--help` is passed through untouched, so the suite
owns its options (`sessiongate bench -- --help` shows them when the suite is there).
"""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path
from typing import Any

import typer

import sessiongate
from sessiongate.cli._common import EXIT_FAILURE, fail

__all__ = ["bench"]

# Where the suite's entry point may live, in order of preference.
_ENTRY_MODULES = ("sessiongate_bench.cli", "sessiongate_bench")
_PACKAGE = "sessiongate_bench"

_NOT_AVAILABLE = (
    "the benchmark suite is not available in this installation: it is not part of the "
    "package, it lives in the source repository's benchmarks/ folder. Clone the repository "
    "and run `make bench` there (or `sessiongate bench` from the checkout's root)"
)


def _checkout_benchmarks() -> Path | None:
    """`benchmarks/` of the checkout this package runs from, else of the working directory."""
    source_root = Path(sessiongate.__file__).resolve().parents[2]
    for candidate in (source_root / "benchmarks", Path.cwd() / "benchmarks"):
        if (candidate / _PACKAGE / "__init__.py").is_file():
            return candidate
    return None


def _put_on_path(folder: Path) -> None:
    """Make the suite importable here and in the children it starts (`python -m ...`)."""
    entry = str(folder)
    if entry not in sys.path:
        sys.path.insert(0, entry)
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if entry not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([entry, *paths])


def _entry_point() -> Any:
    folder = _checkout_benchmarks()
    if folder is not None:
        _put_on_path(folder)
    for name in _ENTRY_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            # Only a missing suite module is "not installed"; a broken import is a bug to show.
            if exc.name is not None and (name.startswith(exc.name) or exc.name.startswith(name)):
                continue
            raise
        main = getattr(module, "main", None)
        if callable(main):
            return main
    return None


def bench(ctx: typer.Context) -> None:
    """Run the benchmarks; other arguments go to the benchmark suite.

    `sessiongate bench -- --help` shows the suite's own options.
    """
    main = _entry_point()
    if main is None:
        fail(_NOT_AVAILABLE, EXIT_FAILURE)
    result = main(list(ctx.args))
    raise typer.Exit(int(result or 0))
