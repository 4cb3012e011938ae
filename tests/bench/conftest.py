"""What the benchmark's tests share: a deadline of their own for runs that rightly take long.

The suite dumps every thread's stack after `faulthandler_timeout` (120 s) of one test, to show
where a hung test hangs. The benchmark's end-to-end runs (every store and section, at tiny or
quick sizes, in child processes) take minutes on a loaded two-core machine without hanging, and
their dump in the middle of a passing run read as a crash. `long_run` gives such a run its own
deadline, as long as the bench's own child timeouts (a real hang still fails the test, and its
dump is shown with the failure), then puts the suite's back for the rest of the test.

The suite itself, `sessiongate_bench`, lives in the repository's `benchmarks/` folder, outside
the wheel: it is put on the import path here, and on `PYTHONPATH` for the children it starts,
as `sessiongate bench` does from a checkout.
"""

from __future__ import annotations

import contextlib
import faulthandler
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

BENCHMARKS = str(Path(__file__).resolve().parents[2] / "benchmarks")
if BENCHMARKS not in sys.path:
    sys.path.insert(0, BENCHMARKS)
os.environ["PYTHONPATH"] = os.pathsep.join(
    [BENCHMARKS, *(p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p)]
)

# The bench's own timeout for a quick run's child process (`harness.run_bench`).
LONG_RUN_SECONDS = 900.0


@pytest.fixture(scope="session")
def long_run(pytestconfig: pytest.Config) -> Callable[[], contextlib.AbstractContextManager[None]]:
    suite = float(pytestconfig.getini("faulthandler_timeout") or 0)

    @contextlib.contextmanager
    def deadline() -> Iterator[None]:
        faulthandler.cancel_dump_traceback_later()
        faulthandler.dump_traceback_later(LONG_RUN_SECONDS, file=sys.stderr)
        try:
            yield
        finally:
            faulthandler.cancel_dump_traceback_later()
            if suite > 0:
                faulthandler.dump_traceback_later(suite, file=sys.stderr)

    return deadline
