"""The bench package imports none of its sections with itself: each runs its children as
`python -m sessiongate_bench.<section>`, which warned (RuntimeWarning, found in sys.modules)
when the package had imported that module already."""

from __future__ import annotations

import subprocess
import sys


def test_importing_the_package_imports_no_section():
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, sessiongate_bench as b; "
            "print(sorted(m for m in sys.modules if m.startswith('sessiongate_bench.'))); "
            "print(b.run_bench.__module__, b.Sizes.__module__)",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert done.stdout.splitlines() == [
        "[]",
        "sessiongate_bench.harness sessiongate_bench.workload",
    ]


def test_no_bench_module_shadows_the_standard_library():
    # `workload.py` runs as a script from its own folder in the contenders' interpreter: a
    # module there named like a standard one (`signal.py`) would be imported in its place.
    import sys
    from pathlib import Path

    import sessiongate_bench

    folder = Path(sessiongate_bench.__file__).parent
    names = {path.stem for path in folder.glob("*.py")}
    assert not names & sys.stdlib_module_names
