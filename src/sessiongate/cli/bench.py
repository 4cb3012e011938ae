"""`sessiongate bench`: runs the benchmark suite of `sessiongate.bench`, imported only here.

Every argument after `bench` other than `--help` is passed through untouched, so the suite
owns its options (`sessiongate bench -- --help` shows them when the suite is installed).
"""

from __future__ import annotations

import importlib
from typing import Any

import typer

from sessiongate.cli._common import EXIT_FAILURE, fail

__all__ = ["bench"]

# Where the suite's entry point may live, in order of preference.
_ENTRY_MODULES = ("sessiongate.bench.cli", "sessiongate.bench")


def _entry_point() -> Any:
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
        fail(
            "the benchmark suite is not available in this installation "
            "(sessiongate.bench has no main()); run it from a source checkout with `make bench`",
            EXIT_FAILURE,
        )
    result = main(list(ctx.args))
    raise typer.Exit(int(result or 0))
