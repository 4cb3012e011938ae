"""The bench package imports none of its sections with itself: each runs its children as
`python -m sessiongate.bench.<section>`, which warned (RuntimeWarning, found in sys.modules)
when the package had imported that module already."""

from __future__ import annotations

import subprocess
import sys


def test_importing_the_package_imports_no_section():
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, sessiongate.bench as b; "
            "print(sorted(m for m in sys.modules if m.startswith('sessiongate.bench.'))); "
            "print(b.run_bench.__module__, b.Sizes.__module__)",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert done.stdout.splitlines() == [
        "[]",
        "sessiongate.bench.harness sessiongate.bench.workload",
    ]
