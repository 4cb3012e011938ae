"""`python -m sessiongate_bench [--quick] ...`, the same command as `sessiongate bench`."""

from __future__ import annotations

import typer

from sessiongate_bench.cli import bench_command

if __name__ == "__main__":
    typer.run(bench_command)
