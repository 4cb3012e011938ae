"""The workload's plan, the two-writer accounting, store selection and the contenders' venv."""

from __future__ import annotations

import random
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from sessiongate_bench import workload
from sessiongate_bench.contenders import ensure_contenders_venv, select_stores
from sessiongate_bench.runner import run_writers, summarize_writers
from sessiongate_bench.workload import Sizes, percentiles, turn_plan


def test_turn_plan_adds_up_to_exactly_the_messages_asked_for() -> None:
    plan = turn_plan(random.Random(1), sessions=7, messages=1_001)
    assert sum(k for _, k in plan) == 1_001
    assert all(2 <= k <= 4 for _, k in plan[:-1])
    assert 1 <= plan[-1][1] <= 4
    assert {index for index, _ in plan} <= set(range(7))


class _Counting:
    """A store without `append_new`: the phase must create each conversation itself."""

    def __init__(self) -> None:
        self.created: list[str] = []
        self.appended: Counter[str] = Counter()

    def create_session(self, name: str) -> str:
        self.created.append(name)
        return name

    def append(self, handle: str, messages: list[dict[str, str]]) -> None:
        assert handle in self.created
        self.appended[handle] += len(messages)


def test_appends_with_creation_create_each_conversation_once_on_its_first_turn() -> None:
    store = _Counting()
    sizes = Sizes(new_sessions=9, new_messages=200)
    rng = random.Random(2)
    result = workload._append_to_new_conversations(
        store,  # type: ignore[arg-type]  # duck-typed: only what the phase calls
        workload.filler_pool(rng, 8),
        rng,
        sizes,
        lambda _event: None,
    )
    assert len(store.created) == len(set(store.created)) == result["conversations"]
    assert sum(store.appended.values()) == result["messages"] == 200
    assert result["first_turn_latency"]["n"] == result["conversations"]


def _probe(messages: int, size: int, *, folded: bool = True) -> dict[str, Any]:
    return {"messages": messages, "bytes": size, "checkpointed": folded}


def test_disk_growth_leaves_out_a_probe_that_counted_the_wal() -> None:
    linear = [_probe(0, 0), _probe(100, 1_000), _probe(200, 2_000), _probe(300, 3_000)]
    assert workload._growth(linear) == 1.0
    # The measured case: a WAL the store's checkpointer held at the start and at the third
    # quarter read as 3.3 for storage that grows linearly.
    busy = [_probe(0, 3_600, folded=False), _probe(100, 1_000), _probe(200, 2_000)]
    assert workload._growth([*busy, _probe(300, 13_000, folded=False), _probe(400, 4_000)]) == 1.0
    assert workload._growth(busy) is None  # too few folded probes to say


def test_a_probe_folds_the_wal_into_the_database(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "state.db"
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("CREATE TABLE t (x TEXT)")
    conn.executemany("INSERT INTO t VALUES (?)", [("x" * 1000,)] * 500)
    conn.commit()
    assert (tmp_path / "state.db-wal").stat().st_size > 0
    probe = workload.disk_bytes(tmp_path, [path])
    assert probe["checkpointed"] is True
    assert (tmp_path / "state.db-wal").stat().st_size == 0
    conn.close()


def test_turn_plan_is_the_same_for_every_store() -> None:
    assert turn_plan(random.Random(5), 50, 300) == turn_plan(random.Random(5), 50, 300)


def test_percentiles_are_reported_in_milliseconds() -> None:
    p = percentiles([i / 1000 for i in range(1, 101)])  # 1..100 ms
    assert p == {"n": 100, "p50_ms": pytest.approx(50.5), "p99_ms": 99.0, "max_ms": 100.0}


def _report(writer: int, acked: list[str], *, errors: int = 0) -> dict[str, Any]:
    return {
        "writer": writer,
        "names": ["shared"],
        "turns": 3,
        "attempted": len(acked) + 2 * errors,
        "acked": acked,
        "errors": errors,
        "error_kinds": {"OperationalError": errors} if errors else {},
        "error_samples": ["OperationalError: database is locked"] if errors else [],
        "seconds": 0.5,
        "turn_latency": {"n": 3, "p50_ms": 1.0, "p99_ms": 2.0, "max_ms": 2.0},
    }


def test_writer_summary_counts_lost_duplicated_and_phantom_messages() -> None:
    reports = [_report(0, ["w0-1", "w0-2", "w0-3"]), _report(1, ["w1-1", "w1-2"], errors=1)]
    # w0-2 lost; w1-1 stored twice; w1-9 stored although its call raised.
    found = Counter({"w0-1": 1, "w0-3": 1, "w1-1": 2, "w1-2": 1, "w1-9": 1})
    summary = summarize_writers(reports, found, mode="shared")
    assert summary["lost"] == 1
    assert summary["duplicated"] == 1
    assert summary["phantom"] == 1
    assert summary["errors"] == 1
    assert summary["error_kinds"] == {"OperationalError": 1}
    assert summary["stored"] == 6
    assert summary["clean"] is False
    assert summary["msg_per_s"] == pytest.approx(5 / 0.5)


def test_writer_summary_is_clean_when_everything_is_stored_once() -> None:
    reports = [_report(0, ["w0-1"]), _report(1, ["w1-1"])]
    summary = summarize_writers(reports, Counter({"w0-1": 1, "w1-1": 1}), mode="distinct")
    assert (summary["lost"], summary["duplicated"], summary["phantom"]) == (0, 0, 0)
    assert summary["clean"] is True


LOSSY_ADAPTER = '''
import sqlite3
from pathlib import Path
from typing import Any


class Lossy:
    """Acknowledges every 5th turn without storing it and stores every 7th twice."""

    def __init__(self, work_dir, options):
        Path(work_dir).mkdir(parents=True, exist_ok=True)
        self.conn = sqlite3.connect(str(Path(work_dir) / "lossy.db"), isolation_level=None,
                                    timeout=30)
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("CREATE TABLE IF NOT EXISTS m (s TEXT, content TEXT)")
        self.calls = 0

    def create_session(self, name):
        return name

    open_session = create_session

    def append(self, handle, messages):
        self.calls += 1
        if self.calls % 5 == 0:
            return
        rows = [(handle, m["content"]) for m in messages]
        if self.calls % 7 == 0:
            rows.append(rows[0])
        self.conn.execute("BEGIN IMMEDIATE")
        self.conn.executemany("INSERT INTO m VALUES (?, ?)", rows)
        self.conn.execute("COMMIT")

    def load_all(self, handle):
        return self.conn.execute("SELECT content FROM m WHERE s = ?", (handle,)).fetchall()

    def text(self, item):
        return item[0]

    def close(self):
        self.conn.close()
'''


@pytest.mark.parametrize("mode", ["distinct", "shared"])
def test_two_real_writers_expose_a_store_that_loses_and_duplicates(
    tmp_path: Path, mode: str
) -> None:
    adapter = tmp_path / "lossy.py"
    adapter.write_text(LOSSY_ADAPTER)
    sizes = Sizes(writer_turns=20, writer_sessions=2)
    result = run_writers(
        Path(sys.executable),
        f"{adapter}:Lossy",
        {},
        tmp_path / "work",
        sizes,
        mode,
        timeout_s=120,
    )
    assert result["errors"] == 0
    assert result["lost"] > 0
    assert result["duplicated"] > 0
    assert result["clean"] is False


def test_stores_are_selected_by_id_or_family() -> None:
    assert [s.id for s in select_stores(["sessiongate"])] == [
        "sessiongate-normal",
        "sessiongate-full",
    ]
    assert [s.id for s in select_stores(["sqlite-full", "langgraph"])] == [
        "sqlite-full",
        "langgraph",
    ]
    assert len(select_stores(None)) == 7
    with pytest.raises(ValueError, match="unknown store"):
        select_stores(["sqlite3"])


def test_contenders_venv_is_skipped_with_a_reason_when_it_cannot_exist(tmp_path: Path) -> None:
    assert ensure_contenders_venv(None).reason
    assert "requirements.txt" in str(ensure_contenders_venv(tmp_path).reason)
    (tmp_path / "requirements.txt").write_text("matplotlib\n")
    status = ensure_contenders_venv(tmp_path, create=False)
    assert status.python is None
    assert "not set up" in str(status.reason)
    assert not (tmp_path / ".contenders").exists()
