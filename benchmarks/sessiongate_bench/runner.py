"""Runs one store: the workload in a child process, then two concurrent writer processes.

Every store gets fresh processes (so peak RSS is its own) and a fresh directory, one store
after another. Children report progress as JSON lines on stdout and their result in a file;
a child that fails or hangs marks its store failed, and the run goes on with the next one.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
from collections import Counter
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sessiongate_bench.contenders import StoreSpec
    from sessiongate_bench.workload import Sizes

__all__ = ["WORKLOAD_FILE", "Progress", "run_store", "run_writers"]

WORKLOAD_FILE = Path(__file__).resolve().parent / "workload.py"

# (store id, phase, done, total)
Progress = Callable[[str, str, int, int], None]


class ChildError(RuntimeError):
    """A child process failed; the message carries its traceback or stderr tail."""


def run_store(
    spec: StoreSpec,
    *,
    python: Path,
    adapter: str,
    sizes: Sizes,
    work: Path,
    progress: Progress,
    timeout_s: float,
    keep_files: bool = False,
) -> dict[str, Any]:
    """The workload, then the writers in both modes; `status` is ok or error."""
    result: dict[str, Any] = {
        "id": spec.id,
        "family": spec.family,
        "label": spec.label,
        "durability": spec.durability,
    }
    work.mkdir(parents=True, exist_ok=True)
    try:
        workload = _child(
            python,
            "run",
            adapter,
            spec.options,
            work / "workload",
            sizes,
            on_event=lambda ev: _relay(progress, spec.id, ev),
            timeout_s=timeout_s,
        )
        result["workload"] = workload
        result["writers"] = {}
        for mode in ("distinct", "shared"):
            progress(spec.id, f"two writers, {mode} sessions", 0, 1)
            result["writers"][mode] = run_writers(
                python, adapter, spec.options, work / mode, sizes, mode, timeout_s=timeout_s
            )
            progress(spec.id, f"two writers, {mode} sessions", 1, 1)
    except (ChildError, OSError, subprocess.SubprocessError) as exc:
        result["status"] = "error"
        result["error"] = str(exc)
    else:
        result["status"] = "ok"
    finally:
        if not keep_files:
            shutil.rmtree(work, ignore_errors=True)
    return result


def _relay(progress: Progress, store: str, event: Mapping[str, Any]) -> None:
    if event.get("event") == "progress":
        progress(store, str(event["phase"]), int(event["done"]), int(event["total"]))


def run_writers(
    python: Path,
    adapter: str,
    options: Mapping[str, Any],
    work: Path,
    sizes: Sizes,
    mode: str,
    *,
    timeout_s: float,
) -> dict[str, Any]:
    """Two processes append to one database at once; then count what is stored, and how often.

    In `shared` mode writer 0 creates the session before writer 1 opens it; both start on the
    same signal. `lost` are messages whose call returned but that are not stored, `duplicated`
    the extra copies, `phantom` those stored although their call raised (a torn turn).
    """
    work.mkdir(parents=True, exist_ok=True)
    writers: list[subprocess.Popen[str]] = []
    outs = [work / f"writer{w}.json" for w in (0, 1)]
    logs = [work / f"writer{w}.log" for w in (0, 1)]
    handles: list[IO[str]] = []
    try:
        for w in (0, 1):
            log: IO[str] = logs[w].open("w")
            handles.append(log)
            command = _command(python, "write", adapter, options, work, sizes, outs[w])
            proc = subprocess.Popen(
                [*command, "--writer", str(w), "--mode", mode],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
            )
            writers.append(proc)
            _wait_ready(proc, outs[w], logs[w], timeout_s)
        for proc in writers:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        reports = []
        for w, proc in enumerate(writers):
            _finish(proc, timeout_s)
            reports.append(_read_result(outs[w], logs[w], proc.returncode))
    finally:
        for proc in writers:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            for pipe in (proc.stdin, proc.stdout):
                if pipe is not None:
                    pipe.close()
        for log in handles:
            log.close()
    names = sorted({n for report in reports for n in report["names"]})
    verify_out = work / "verify.json"
    found = _child(
        python,
        "verify",
        adapter,
        options,
        work,
        sizes,
        extra=["--names", json.dumps(names)],
        out=verify_out,
        timeout_s=timeout_s,
    )["found"]
    return summarize_writers(reports, Counter(found), mode=mode)


def summarize_writers(
    reports: list[dict[str, Any]], found: Counter[str], *, mode: str
) -> dict[str, Any]:
    """Errors, lost, duplicated and phantom messages from the writers' reports and a re-read."""
    acked = {uid for report in reports for uid in report["acked"]}
    stored = set(found)
    attempted = sum(int(r["attempted"]) for r in reports)
    seconds = max(float(r["seconds"]) for r in reports)
    errors = sum(int(r["errors"]) for r in reports)
    lost = len(acked - stored)
    duplicated = sum(n - 1 for n in found.values() if n > 1)
    kinds: Counter[str] = Counter()
    for report in reports:
        kinds.update(report["error_kinds"])
    return {
        "mode": mode,
        "turns": sum(int(r["turns"]) for r in reports),
        "attempted": attempted,
        "acked": len(acked),
        "stored": sum(found.values()),
        "errors": errors,
        "error_kinds": dict(kinds),
        "error_samples": list(dict.fromkeys(s for r in reports for s in r["error_samples"]))[:4],
        "lost": lost,
        "duplicated": duplicated,
        "phantom": len(stored - acked),
        "msg_per_s": len(acked) / seconds if seconds > 0 else 0.0,
        "turn_p99_ms": max(float(r["turn_latency"]["p99_ms"]) for r in reports),
        "clean": errors == 0 and lost == 0 and duplicated == 0,
    }


def _command(
    python: Path,
    command: str,
    adapter: str,
    options: Mapping[str, Any],
    work: Path,
    sizes: Sizes,
    out: Path,
) -> list[str]:
    return [
        str(python),
        str(WORKLOAD_FILE),
        command,
        "--adapter",
        adapter,
        "--options",
        json.dumps(dict(options)),
        "--work",
        str(work),
        "--sizes",
        json.dumps(sizes.to_dict()),
        "--out",
        str(out),
    ]


def _child(
    python: Path,
    command: str,
    adapter: str,
    options: Mapping[str, Any],
    work: Path,
    sizes: Sizes,
    *,
    timeout_s: float,
    on_event: Callable[[dict[str, Any]], None] | None = None,
    extra: list[str] | None = None,
    out: Path | None = None,
) -> dict[str, Any]:
    work.mkdir(parents=True, exist_ok=True)
    out = out or work / f"{command}.json"
    log_path = work / f"{command}.log"
    argv = _command(python, command, adapter, options, work, sizes, out) + (extra or [])
    with (
        log_path.open("w") as log,
        subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=log, text=True) as proc,
    ):
        watchdog = threading.Timer(timeout_s, proc.kill)
        watchdog.start()
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                if on_event is not None and line.startswith("{"):
                    on_event(json.loads(line))
            proc.wait()
        finally:
            watchdog.cancel()
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return _read_result(out, log_path, proc.returncode)


def _wait_ready(proc: subprocess.Popen[str], out: Path, log: Path, timeout_s: float) -> None:
    assert proc.stdout is not None
    watchdog = threading.Timer(timeout_s, proc.kill)
    watchdog.start()
    try:
        line = proc.stdout.readline()
    finally:
        watchdog.cancel()
    if '"ready"' not in line:
        proc.wait()
        _read_result(out, log, proc.returncode)  # raises with the child's traceback
        raise ChildError(f"writer did not get ready: {line.strip()!r}")


def _finish(proc: subprocess.Popen[str], timeout_s: float) -> None:
    try:
        proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()


def _read_result(out: Path, log: Path, returncode: int | None) -> dict[str, Any]:
    try:
        data: dict[str, Any] = json.loads(out.read_text())
    except (OSError, ValueError):
        tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
        raise ChildError(f"child exited with {returncode} and no result; stderr: {tail}") from None
    if data.get("status") == "error":
        raise ChildError(str(data.get("error", "unknown error")))
    return data
