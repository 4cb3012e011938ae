from __future__ import annotations

import pytest
import typer

from sessiongate.cli import bench


def test_bench_help_is_ours(sg):
    result = sg("bench", "--help")
    assert result.returncode == 0
    assert "benchmark suite" in result.stdout


def test_without_a_suite_bench_exits_1_with_a_clear_message(monkeypatch, capsys):
    monkeypatch.setattr(bench, "_ENTRY_MODULES", ("sessiongate.no_such_bench_module",))

    class Ctx:
        args = ()

    with pytest.raises(typer.Exit) as exc:
        bench.bench(Ctx())  # type: ignore[arg-type]
    assert exc.value.exit_code == 1
    assert "benchmark suite is not available" in capsys.readouterr().err


def test_bench_passes_its_arguments_to_the_suite(monkeypatch):
    seen: list[list[str]] = []

    def main(argv: list[str]) -> int:
        seen.append(argv)
        return 3

    monkeypatch.setattr(bench, "_entry_point", lambda: main)

    class Ctx:
        args = ("--quick", "x")

    with pytest.raises(typer.Exit) as exc:
        bench.bench(Ctx())  # type: ignore[arg-type]
    assert exc.value.exit_code == 3
    assert seen == [["--quick", "x"]]


def test_bench_reaches_the_real_suite_and_rejects_an_unknown_store(sg):
    result = sg("bench", "--only", "no-such-store")
    assert result.returncode == 2
    assert "unknown store no-such-store" in result.stderr + result.stdout
