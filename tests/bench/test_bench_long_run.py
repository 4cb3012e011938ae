"""`long_run` (conftest.py): a benchmark run longer than the suite's faulthandler timeout
prints no stack dump when it passes; the suite's own deadline is back after it."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

INNER = """
import time

def test_long_but_fine(long_run):
    with long_run():
        time.sleep(2.5)  # longer than the suite's 1-second deadline below, and no hang

def test_the_suite_deadline_is_back_afterwards(long_run):
    with long_run():
        pass
    time.sleep(2.5)
"""


def test_a_long_run_prints_no_dump_and_the_suite_deadline_returns(tmp_path: Path) -> None:
    shutil.copy(Path(__file__).with_name("conftest.py"), tmp_path / "conftest.py")
    (tmp_path / "test_inner.py").write_text(INNER)
    (tmp_path / "pytest.ini").write_text("[pytest]\nfaulthandler_timeout = 1\n")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-s", "-q", str(tmp_path)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    # One dump only: the second test's, which ran outside `long_run` past the deadline.
    assert output.count("Timeout (0:00:01)!") == 1, output
    assert "in test_the_suite_deadline_is_back_afterwards" in output
    assert "in test_long_but_fine" not in output
