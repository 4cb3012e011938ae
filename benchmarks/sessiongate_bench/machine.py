"""A description of the machine a benchmark ran on, for the report's header."""

from __future__ import annotations

import os
import platform
import sqlite3
import sys
from pathlib import Path
from typing import Any

__all__ = ["describe_machine"]


def describe_machine() -> dict[str, Any]:
    """CPU model, logical cores, RAM, OS, Python and SQLite versions."""
    return {
        "cpu": _cpu_model(),
        "cores": os.cpu_count() or 0,
        "ram_gb": round(_ram_bytes() / 2**30, 1),
        "os": platform.platform(),
        "python": platform.python_version(),
        "implementation": sys.implementation.name,
        "sqlite": sqlite3.sqlite_version,
    }


def _cpu_model() -> str:
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text(errors="replace").splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine() or "unknown"


def _ram_bytes() -> int:
    meminfo = Path("/proc/meminfo")
    if meminfo.exists():
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 0
