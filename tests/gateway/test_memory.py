from __future__ import annotations

import mmap
import platform
import sys
from typing import TYPE_CHECKING

import pytest

from sessiongate.gateway.memory import AUTO_BUDGET_FRACTION, MemoryProbe, malloc_trim

if TYPE_CHECKING:
    from pathlib import Path

MB = 1024 * 1024
GB = 1024 * MB
# cgroup v1's "no limit" on x86-64.
V1_UNLIMITED = "9223372036854771712"


def write(root: Path, relative: str, text: str) -> None:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A fake machine with 8 GB of RAM and no cgroup limit files."""
    write(tmp_path, "proc/meminfo", f"MemTotal:       {8 * GB // 1024} kB\nMemFree: 1 kB\n")
    return tmp_path


def test_anon_rss_comes_from_rss_anon_in_status(root: Path) -> None:
    write(root, "proc/self/status", "VmRSS:\t  900 kB\nRssAnon:\t  700 kB\nRssFile:\t 200 kB\n")
    write(root, "proc/self/statm", "1000 500 100 1 0 1 0\n")
    assert MemoryProbe(root).anon_rss_bytes() == 700 * 1024


def test_anon_rss_falls_back_to_statm_resident_minus_shared(root: Path) -> None:
    # Old kernels have no RssAnon line.
    write(root, "proc/self/status", "VmRSS:\t  900 kB\n")
    write(root, "proc/self/statm", "1000 500 100 1 0 1 0\n")
    assert MemoryProbe(root).anon_rss_bytes() == 400 * mmap.PAGESIZE


def test_anon_rss_is_none_without_proc(tmp_path: Path) -> None:
    assert MemoryProbe(tmp_path).anon_rss_bytes() is None


@pytest.mark.skipif(sys.platform != "linux", reason="reads the real /proc")
def test_anon_rss_of_this_process_is_positive() -> None:
    rss = MemoryProbe().anon_rss_bytes()
    assert rss is not None
    assert rss > 0


def test_a_number_is_megabytes(root: Path) -> None:
    assert MemoryProbe(root).budget_bytes(512) == 512 * MB


@pytest.mark.parametrize("setting", [0, "off"])
def test_zero_and_off_disable_the_budget(root: Path, setting: int | str) -> None:
    assert MemoryProbe(root).budget_bytes(setting) is None  # type: ignore[arg-type]


def test_auto_without_cgroup_limit_is_65_percent_of_ram(root: Path) -> None:
    assert AUTO_BUDGET_FRACTION == 0.65
    assert MemoryProbe(root).budget_bytes("auto") == int(8 * GB * 0.65)


def test_auto_prefers_cgroup_v2_memory_high(root: Path) -> None:
    write(root, "proc/self/cgroup", "0::/\n")
    write(root, "sys/fs/cgroup/memory.high", f"{2 * GB}\n")
    write(root, "sys/fs/cgroup/memory.max", f"{3 * GB}\n")
    assert MemoryProbe(root).budget_bytes("auto") == int(2 * GB * 0.65)


def test_auto_uses_memory_max_when_high_is_max(root: Path) -> None:
    write(root, "proc/self/cgroup", "0::/\n")
    write(root, "sys/fs/cgroup/memory.high", "max\n")
    write(root, "sys/fs/cgroup/memory.max", f"{3 * GB}\n")
    assert MemoryProbe(root).budget_bytes("auto") == int(3 * GB * 0.65)


def test_auto_finds_a_limit_set_on_an_ancestor_cgroup(root: Path) -> None:
    write(root, "proc/self/cgroup", "0::/system.slice/gateway.service\n")
    write(root, "sys/fs/cgroup/system.slice/gateway.service/memory.high", "max\n")
    write(root, "sys/fs/cgroup/system.slice/gateway.service/memory.max", "max\n")
    write(root, "sys/fs/cgroup/system.slice/memory.max", f"{1 * GB}\n")
    assert MemoryProbe(root).cgroup_limit_bytes() == 1 * GB


def test_auto_reads_cgroup_v1_limit(root: Path) -> None:
    write(root, "proc/self/cgroup", "5:cpu:/\n4:memory:/docker/abc\n0::/\n")
    write(root, "sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes", f"{4 * GB}\n")
    assert MemoryProbe(root).budget_bytes("auto") == int(4 * GB * 0.65)


def test_cgroup_v1_unlimited_value_is_ignored(root: Path) -> None:
    write(root, "proc/self/cgroup", "4:memory:/\n")
    write(root, "sys/fs/cgroup/memory/memory.limit_in_bytes", V1_UNLIMITED + "\n")
    probe = MemoryProbe(root)
    assert probe.cgroup_limit_bytes() is None
    assert probe.budget_bytes("auto") == int(8 * GB * 0.65)


def test_cgroup_limit_above_ram_is_capped_by_ram(root: Path) -> None:
    write(root, "proc/self/cgroup", "0::/\n")
    write(root, "sys/fs/cgroup/memory.max", f"{64 * GB}\n")
    assert MemoryProbe(root).budget_bytes("auto") == int(8 * GB * 0.65)


def test_auto_is_none_when_nothing_is_known(tmp_path: Path) -> None:
    assert MemoryProbe(tmp_path).budget_bytes("auto") is None


def test_malloc_trim_runs_where_glibc_has_it() -> None:
    has_glibc = sys.platform == "linux" and platform.libc_ver()[0] == "glibc"
    assert malloc_trim() is has_glibc
