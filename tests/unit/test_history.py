"""The run history on real SQLite files, migrated by Alembic: regressions, changes, the runs of a DAG
run, the migrated schema against the tables the code queries, and a pre-Alembic history taken over."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

from acklab.store.history import METADATA, VERSION_TABLE, RunRecord, changes, engine, ours, record_run, regressions, runs_of, unverified


def rows(*scenarios: str) -> list[dict]:
    return [{"scenario": s, "profile": s.split("__")[0], "fault": s.split("__")[1], "guarantee": "exactly-once"} for s in scenarios]


def record(db: Path, run_id: str, finished: float, status: str, statuses: dict[str, str], kafka: str = "4.3.1", **more: str) -> None:
    record_run(RunRecord(run_id, finished, status, "three-brokers", kafka, "2.16.1", **more), rows(*statuses), statuses, db)


def test_planted_regression_is_detected(tmp_path: Path) -> None:
    db = tmp_path / "history.sqlite"
    record(db, "r1", 1.0, "pass", {"idempotent__leader-kill": "pass", "at-least-once__ack-loss": "pass"})
    record(db, "r2", 2.0, "fail", {"idempotent__leader-kill": "fail", "at-least-once__ack-loss": "pass"})
    (found,) = regressions("r2", db)
    assert (found.scenario, found.status, found.last_green_run) == ("idempotent__leader-kill", "fail", "r1")


def test_no_regression_without_an_earlier_green_run_or_on_another_version(tmp_path: Path) -> None:
    db, scenario = tmp_path / "history.sqlite", "idempotent__leader-kill"
    record(db, "r1", 1.0, "fail", {scenario: "pass"})
    record(db, "r2", 2.0, "pass", {scenario: "pass"}, kafka="3.9.2")
    record(db, "r3", 3.0, "fail", {scenario: "fail"})
    assert regressions("r3", db) == []  # r1 was not green; r2 is another Kafka version
    record(db, "r4", 4.0, "pass", {scenario: "pass"})
    record(db, "r5", 5.0, "incomplete", {scenario: "incomplete"})
    assert regressions("r5", db) == []  # incomplete is not a regression, it is no evidence
    (lost,) = unverified("r5", db)  # ... but the guarantee is no longer verified
    assert (lost.scenario, lost.status, lost.last_green_run) == ("idempotent__leader-kill", "incomplete", "r4")


def test_changes_are_against_the_last_run_of_the_same_settings_that_ran_the_scenario(tmp_path: Path) -> None:
    db = tmp_path / "history.sqlite"
    record(db, "r1", 1.0, "fail", {"a__x": "fail", "b__x": "pass"})
    record(db, "r2", 2.0, "pass", {"b__x": "pass"})
    record(db, "r3", 3.0, "pass", {"a__x": "pass"}, kafka="3.9.2")  # other settings: not compared
    record(db, "r4", 4.0, "fail", {"a__x": "pass", "b__x": "fail", "c__x": "fail"})  # c never ran before: no change
    assert [(c.scenario, c.before, c.now, c.previous_run) for c in changes("r4", db)] == [("a__x", "fail", "pass", "r1"), ("b__x", "pass", "fail", "r2")]
    assert changes("r1", db) == []


def test_a_recorded_run_is_found_by_its_dag_run_and_replaced_when_recorded_again(tmp_path: Path) -> None:
    db = tmp_path / "history.sqlite"
    record(db, "r1", 1.0, "fail", {"a__x": "fail"}, dag_id="kafka_delivery_matrix", dag_run_id="manual__1", report="/runs/r1/report/index.html")
    record(db, "r1", 2.0, "pass", {"a__x": "pass", "b__x": "pass"}, dag_id="kafka_delivery_matrix", dag_run_id="manual__1")
    record(db, "r2", 3.0, "pass", {"a__x": "pass"}, dag_id="kafka_delivery_matrix", dag_run_id="manual__2")
    (run,) = runs_of("kafka_delivery_matrix", "manual__1", db)
    assert (run.run_id, run.status, run.report) == ("r1", "pass", None)
    with engine(db).connect() as connection:
        assert connection.execute(sa.text("SELECT count(*) FROM acklab_verdicts WHERE run_id = 'r1'")).scalar() == 2


def test_the_migrations_build_the_tables_the_code_queries(tmp_path: Path) -> None:
    with engine(tmp_path / "history.sqlite").connect() as connection:
        assert compare_metadata(MigrationContext.configure(connection, opts={"version_table": VERSION_TABLE, "include_name": ours}), METADATA) == []
        assert connection.execute(sa.text(f"SELECT version_num FROM {VERSION_TABLE}")).scalar() == "0001"


def test_a_history_from_before_alembic_is_taken_over(tmp_path: Path) -> None:
    db = tmp_path / "history.sqlite"
    with sqlite3.connect(db) as old:
        old.executescript(
            "CREATE TABLE runs (run_id TEXT PRIMARY KEY, finished REAL NOT NULL, status TEXT NOT NULL, topology TEXT NOT NULL, kafka_version TEXT NOT NULL);"
            "CREATE TABLE verdicts (run_id TEXT NOT NULL, scenario TEXT NOT NULL, profile TEXT NOT NULL, fault TEXT NOT NULL,"
            " guarantee TEXT NOT NULL, status TEXT NOT NULL, row_json TEXT NOT NULL, PRIMARY KEY (run_id, scenario));"
        )
        old.execute("INSERT INTO runs VALUES ('old', 1.0, 'pass', 'three-brokers', '4.3.1')")
        old.execute("INSERT INTO verdicts VALUES ('old', 'a__x', 'a', 'x', 'exactly-once', 'pass', ?)", (json.dumps({"scenario": "a__x"}),))
    record_run(RunRecord("new", 2.0, "fail", "three-brokers", "4.3.1"), rows("a__x"), {"a__x": "fail"}, db)
    (found,) = regressions("new", db)
    assert (found.scenario, found.last_green_run) == ("a__x", "old")
    assert set(sa.inspect(engine(db)).get_table_names()) == {"acklab_runs", "acklab_verdicts", VERSION_TABLE}


def test_finding_the_history_leaves_a_cli_s_logging_alone(tmp_path: Path) -> None:
    """Importing Airflow to look up the connection must not send the CLI's log lines to stdout (its `--json`)."""
    code = (
        "import logging, sys; logging.basicConfig(level=logging.INFO, stream=sys.stderr)\n"
        "from acklab.store.history import history_url; history_url()\n"
        "logging.getLogger('acklab.cli').info('a log line')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "ACKLAB_RUNS": str(tmp_path)})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout == "" and "a log line" in done.stderr
