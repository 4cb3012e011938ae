"""The stores measured, and the separate virtual environment the third-party ones run in.

The contenders (OpenAI Agents SDK, Google ADK, LangGraph) and matplotlib install into
`benchmarks/.contenders/venv`, created on first use with `python -m venv` and pip from
`benchmarks/requirements.txt` and reused while that file is unchanged, so sessiongate's own
install stays small. Without it (no network, no `benchmarks/` folder) the run still measures
sessiongate and the baseline and says which contenders were skipped and why.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

__all__ = [
    "STORES",
    "StoreSpec",
    "VenvStatus",
    "ensure_contenders_venv",
    "find_benchmarks_dir",
    "select_stores",
]

_BENCH_DIR = Path(__file__).resolve().parent
BASELINE_FILE = _BENCH_DIR / "baseline.py"
# Loaded by path, not as `sessiongate_bench.…`: the child then imports the store and nothing of
# the harness (rich, typer), so its peak RSS is the store's.
SESSIONGATE_FILE = _BENCH_DIR / "sessiongate_store.py"


@dataclass(frozen=True, slots=True)
class StoreSpec:
    """One store in one configuration, run in its own processes."""

    id: str
    family: str
    label: str
    # `package.module:Class` (imported by the project's interpreter) or `file.py:Class`;
    # a relative file is looked up in the `benchmarks/` folder.
    adapter: str
    durability: str
    # Runs under the contenders' virtual environment instead of the project's interpreter.
    contender: bool = False
    options: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))

    def adapter_spec(self, benchmarks_dir: Path | None) -> str:
        target, _, name = self.adapter.rpartition(":")
        if target.endswith(".py") and not Path(target).is_absolute():
            base = benchmarks_dir if benchmarks_dir is not None else Path.cwd() / "benchmarks"
            return f"{base / target}:{name}"
        return self.adapter


def _opts(**values: Any) -> Mapping[str, Any]:
    return MappingProxyType(values)


STORES: tuple[StoreSpec, ...] = (
    StoreSpec(
        "sessiongate-normal",
        "sessiongate",
        "sessiongate (NORMAL, default)",
        f"{SESSIONGATE_FILE}:SessiongateAdapter",
        "NORMAL",
        options=_opts(synchronous="NORMAL"),
    ),
    StoreSpec(
        "sessiongate-full",
        "sessiongate",
        "sessiongate (FULL)",
        f"{SESSIONGATE_FILE}:SessiongateAdapter",
        "FULL",
        options=_opts(synchronous="FULL"),
    ),
    StoreSpec(
        "sqlite-normal",
        "sqlite",
        "sqlite3 baseline (NORMAL)",
        f"{BASELINE_FILE}:SqliteBaseline",
        "NORMAL",
        options=_opts(synchronous="NORMAL"),
    ),
    StoreSpec(
        "sqlite-full",
        "sqlite",
        "sqlite3 baseline (FULL)",
        f"{BASELINE_FILE}:SqliteBaseline",
        "FULL",
        options=_opts(synchronous="FULL"),
    ),
    StoreSpec(
        "openai-agents",
        "openai-agents",
        "OpenAI Agents SQLiteSession",
        "openai_agents_store.py:OpenAIAgentsSession",
        "FULL",
        contender=True,
    ),
    StoreSpec(
        "google-adk",
        "google-adk",
        "Google ADK SqliteSessionService",
        "google_adk_store.py:GoogleAdkSessions",
        "FULL",
        contender=True,
    ),
    StoreSpec(
        "langgraph",
        "langgraph",
        "LangGraph SqliteSaver",
        "langgraph_store.py:LangGraphSaver",
        "FULL",
        contender=True,
    ),
)


def select_stores(names: Sequence[str] | None) -> list[StoreSpec]:
    """All stores, or those whose id or family is named; an unknown name is an error."""
    if not names:
        return list(STORES)
    known = {s.id for s in STORES} | {s.family for s in STORES}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(
            f"unknown store {', '.join(unknown)}; choose from {', '.join(sorted(known))}"
        )
    wanted = set(names)
    return [s for s in STORES if s.id in wanted or s.family in wanted]


def find_benchmarks_dir() -> Path | None:
    """`benchmarks/` of the source checkout this package runs from, else of the cwd."""
    for candidate in (_BENCH_DIR.parent, Path.cwd() / "benchmarks"):
        if (candidate / "requirements.txt").is_file():
            return candidate
    return None


@dataclass(frozen=True, slots=True)
class VenvStatus:
    """The contenders' interpreter, or why there is none."""

    python: Path | None
    reason: str | None = None
    created: bool = False


_STAMP = ".sessiongate-bench-requirements"


def ensure_contenders_venv(
    benchmarks_dir: Path | None, *, create: bool = True, timeout_s: float = 1200
) -> VenvStatus:
    """Create or reuse `benchmarks/.contenders/venv`; never raises for a missing network."""
    if benchmarks_dir is None:
        return VenvStatus(None, "no benchmarks/ folder (run from a source checkout)")
    requirements = benchmarks_dir / "requirements.txt"
    if not requirements.is_file():
        return VenvStatus(None, f"no {requirements}")
    venv = benchmarks_dir / ".contenders" / "venv"
    python = venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    digest = hashlib.sha256(requirements.read_bytes()).hexdigest()
    stamp = venv / _STAMP
    if python.exists() and stamp.exists() and stamp.read_text().strip() == digest:
        return VenvStatus(python)
    if not create:
        return VenvStatus(None, f"{venv} is not set up")
    try:
        if not python.exists():
            _run([sys.executable, "-m", "venv", str(venv)], timeout_s=300)
        _run(
            [
                *(str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"),
                *("--timeout", "30", "--retries", "2", "-r", str(requirements)),
            ],
            timeout_s=timeout_s,
        )
    except (OSError, subprocess.SubprocessError, RuntimeError) as exc:
        return VenvStatus(None, f"could not set up {venv}: {exc}")
    stamp.write_text(digest + "\n")
    return VenvStatus(python, created=True)


def _run(command: list[str], *, timeout_s: float) -> None:
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, check=False)
    if done.returncode != 0:
        # pip's "Location ... is ignored" noise about local indexes hides the real error.
        lines = [ln for ln in done.stderr.splitlines() if "is ignored" not in ln]
        raise RuntimeError(f"`{' '.join(command[:4])} ...` failed: {' | '.join(lines[-4:])}")
