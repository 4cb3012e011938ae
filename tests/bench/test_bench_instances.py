"""Instances on one PostgreSQL database in the benchmark: skipped with a reason without a
server; with one, 1, 2 and 3 real `sessiongate run` processes on one schema and one SQLite
instance each complete every turn. No speed is asserted."""

from __future__ import annotations

from sessiongate_bench.instances import InstanceSizes, instances_lines, run_instances_section
from sessiongate_bench.postgres import ENV_URL


def test_without_a_url_the_section_is_skipped_and_the_report_says_why():
    section = run_instances_section(None, quick=True)
    assert section["status"] == "skipped"
    assert ENV_URL in section["reason"]
    lines = instances_lines(section)
    assert f"Not measured: {section['reason']}." in lines


def test_a_server_that_does_not_answer_is_a_skip_not_a_failure():
    section = run_instances_section("postgresql://nobody:secret@127.0.0.1:1/none", quick=True)
    assert section["status"] == "skipped"
    assert "no PostgreSQL server answers" in section["reason"]
    assert "secret" not in section["reason"]


def test_every_configuration_completes_all_its_turns_on_a_real_server(pg_schema, long_run):
    from postgres_support import SERVER_URL

    sizes = InstanceSizes.quick()
    with long_run():
        section = run_instances_section(SERVER_URL, quick=True)
    assert section["status"] == "ok", section.get("reason")
    assert section["sqlite"]["instances"] == 1
    assert section["sqlite"]["completed"] == sizes.turns
    assert [p["instances"] for p in section["postgres"]] == [1, 2, 3]
    for part in section["postgres"]:
        assert part["completed"] == part["turns"] == sizes.turns
        assert part["ratio_to_sqlite"] > 0
    lines = "\n".join(instances_lines(section))
    assert "PostgreSQL, 3 instances:" in lines
    assert "x SQLite's single instance" in lines
