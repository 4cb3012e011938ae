"""How much anonymous memory the process holds, what it may hold, and giving freed memory back.

The agent cache's pressure valve (spec §11) compares the process's anonymous RSS — the heap
where cached transcripts live, not mapped files or shared pages — against a budget:

- a number is megabytes; `0` or `"off"` disables the valve (`budget_bytes` answers `None`);
- `"auto"` derives a limit from the cgroup the gateway runs under — cgroup v2 `memory.high`
  (unless `max`), then `memory.max`, then cgroup v1 `memory.limit_in_bytes` (its huge
  "unlimited" value ignored) — else total RAM (`/proc/meminfo` `MemTotal`), and takes
  `AUTO_BUDGET_FRACTION` (65%) of it. A cgroup limit above total RAM is no real limit, so the
  smaller of the two is used.

Every file is read below `root` (default `/`), so tests build fake `/proc` and cgroup trees under
a temporary folder. Where none of the files exist (macOS, Windows) the probe answers `None` and
the valve stays shut.
"""

from __future__ import annotations

import ctypes
import functools
import mmap
from pathlib import Path
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["AUTO_BUDGET_FRACTION", "MemoryProbe", "MemorySetting", "malloc_trim"]

MemorySetting = int | Literal["auto", "off"]

# Share of the derived limit the cache may fill before it sheds agents. The rest is headroom for
# the turn in flight, the store's page cache and the allocator's own slack, so the kernel never
# throttles (memory.high) or kills (memory.max) the gateway before the valve acts (#80764).
AUTO_BUDGET_FRACTION = 0.65

# cgroup v1 reports "no limit" as PAGE_COUNTER_MAX rounded to pages (9223372036854771712 on
# x86-64); anything this large is unlimited, whatever the page size.
_V1_UNLIMITED_THRESHOLD = 1 << 60

_MB = 1024 * 1024


class MemoryProbe:
    """Reads memory facts of this process from `/proc` and `/sys/fs/cgroup` below `root`."""

    def __init__(self, root: Path | str = "/") -> None:
        self.root = Path(root)

    # ------------------------------------------------------------------ usage

    def anon_rss_bytes(self) -> int | None:
        """Resident anonymous memory: `RssAnon` of `/proc/self/status`, else resident minus
        shared pages of `/proc/self/statm`; `None` where neither exists."""
        status = self._read("proc/self/status")
        if status is not None:
            for line in status.splitlines():
                if line.startswith("RssAnon:"):
                    return _kib_field(line)
        statm = self._read("proc/self/statm")
        if statm is not None:
            fields = statm.split()
            if len(fields) >= 3 and fields[1].isdigit() and fields[2].isdigit():
                return max(0, int(fields[1]) - int(fields[2])) * mmap.PAGESIZE
        return None

    # ------------------------------------------------------------------ budget

    def budget_bytes(self, setting: MemorySetting) -> int | None:
        """The anonymous-RSS budget for `setting`, or `None` when the valve is off."""
        if setting == "off":
            return None
        if setting == "auto":
            limit = self.limit_bytes()
            return None if limit is None else int(limit * AUTO_BUDGET_FRACTION)
        if setting <= 0:
            return None
        return setting * _MB

    def limit_bytes(self) -> int | None:
        """The memory this process may use: the cgroup limit, capped by total RAM."""
        total = self.total_ram_bytes()
        cgroup = self.cgroup_limit_bytes()
        if cgroup is None:
            return total
        return cgroup if total is None else min(cgroup, total)

    def total_ram_bytes(self) -> int | None:
        meminfo = self._read("proc/meminfo")
        if meminfo is None:
            return None
        for line in meminfo.splitlines():
            if line.startswith("MemTotal:"):
                return _kib_field(line)
        return None

    def cgroup_limit_bytes(self) -> int | None:
        """cgroup v2 `memory.high`, then `memory.max`, then cgroup v1; `None` if uncapped."""
        v2_dirs, v1_dirs = self._cgroup_dirs()
        for name in ("memory.high", "memory.max"):
            limit = _smallest(v2_dirs, name, self._read_v2_limit)
            if limit is not None:
                return limit
        return _smallest(v1_dirs, "memory.limit_in_bytes", self._read_v1_limit)

    def malloc_trim(self) -> bool:
        """Give freed heap pages back to the OS (see `malloc_trim`)."""
        return malloc_trim()

    # ------------------------------------------------------------------ internals

    def _cgroup_dirs(self) -> tuple[list[Path], list[Path]]:
        """Folders whose limits bind this process: its own cgroup and every ancestor, for v2
        (the unified hierarchy) and for the v1 memory controller.

        A limit anywhere up the tree binds, so the smallest one found wins. In a container with
        a cgroup namespace the own path is `/` and only the mount root is looked at.
        """
        v2_base = self.root / "sys/fs/cgroup"
        v1_base = v2_base / "memory"
        v2_path = v1_path = "/"
        text = self._read("proc/self/cgroup") or ""
        for line in text.splitlines():
            hierarchy, _, rest = line.partition(":")
            controllers, _, path = rest.partition(":")
            if hierarchy == "0" and controllers == "":
                v2_path = path or "/"
            elif "memory" in controllers.split(","):
                v1_path = path or "/"
        return _with_ancestors(v2_base, v2_path), _with_ancestors(v1_base, v1_path)

    def _read(self, relative: str) -> str | None:
        return _read_text(self.root / relative)

    def _read_v2_limit(self, path: Path) -> int | None:
        text = _read_text(path)
        if text is None:
            return None
        value = text.strip()
        # "max" means no limit at this level.
        return int(value) if value.isdigit() and int(value) > 0 else None

    def _read_v1_limit(self, path: Path) -> int | None:
        text = _read_text(path)
        if text is None:
            return None
        value = text.strip()
        if not value.isdigit():
            return None
        limit = int(value)
        return limit if 0 < limit < _V1_UNLIMITED_THRESHOLD else None


def malloc_trim() -> bool:
    """Call glibc's `malloc_trim(0)` so freed arenas return to the OS; `False` (and nothing
    done) where the C library has no such function (musl, macOS, Windows)."""
    trim = _malloc_trim_function()
    if trim is None:
        return False
    trim(0)
    return True


@functools.cache
def _malloc_trim_function() -> Callable[[int], int] | None:
    try:
        # The process's own symbol table includes the C library it was linked against; this
        # avoids ctypes.util.find_library, which may spawn ldconfig.
        libc = ctypes.CDLL(None)
    except (OSError, TypeError):  # TypeError: Windows refuses a None name
        return None
    trim = getattr(libc, "malloc_trim", None)
    if trim is None:
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    function: Callable[[int], int] = trim
    return function


def _with_ancestors(base: Path, cgroup_path: str) -> list[Path]:
    parts = [part for part in cgroup_path.split("/") if part and part != ".."]
    return [base.joinpath(*parts[:depth]) for depth in range(len(parts), -1, -1)]


def _smallest(folders: list[Path], name: str, read: Callable[[Path], int | None]) -> int | None:
    limits = [limit for folder in folders if (limit := read(folder / name)) is not None]
    return min(limits) if limits else None


def _kib_field(line: str) -> int | None:
    # "RssAnon:     1234 kB"
    fields = line.split()
    if len(fields) >= 2 and fields[1].isdigit():
        return int(fields[1]) * 1024
    return None


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
