"""`sessiongate bench`: issue 5's benchmark of the store against the libraries people use.

harness.run_bench     every store, one after another, then report, JSON and chart
├── contenders        the stores measured; the contenders' separate virtual environment
├── runner            one store: the workload child, then two concurrent writer children
│   └── workload      the workload itself (standard library only: it also runs in the
│                     contenders' environment), with baseline.py and sessiongate_store.py
├── gateway           the hook for the end-to-end gateway section
└── report, machine   goals, ratios and docs/PERFORMANCE.md; the machine described
cli.bench_command     the typer command over run_bench
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sessiongate_bench.harness import run_bench
    from sessiongate_bench.workload import Sizes

__all__ = ["Sizes", "run_bench"]


def __getattr__(name: str) -> Any:
    # Imported on first use, not with the package: the sections run their children as
    # `python -m sessiongate_bench.<section>`, and a package that imported that very module
    # first makes runpy warn (RuntimeWarning: found in sys.modules) and run it twice over.
    if name == "run_bench":
        from sessiongate_bench.harness import run_bench

        return run_bench
    if name == "Sizes":
        from sessiongate_bench.workload import Sizes

        return Sizes
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
