"""Every run's matrix and verdicts, kept in a SQLite file in the run store; regression detection.

A regression is a scenario (same profile, fault, topology and Kafka version) that passed in the
most recent earlier *green* run (overall status pass) and fails now.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from acklab.store.runs import history_db

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY, finished REAL NOT NULL, status TEXT NOT NULL,
    topology TEXT NOT NULL, kafka_version TEXT NOT NULL, client_version TEXT NOT NULL DEFAULT ''
);
CREATE TABLE IF NOT EXISTS verdicts (
    run_id TEXT NOT NULL REFERENCES runs(run_id), scenario TEXT NOT NULL, profile TEXT NOT NULL,
    fault TEXT NOT NULL, guarantee TEXT NOT NULL, status TEXT NOT NULL, row_json TEXT NOT NULL,
    PRIMARY KEY (run_id, scenario)
);
"""


@dataclass(frozen=True)
class Regression:
    scenario: str
    status: str
    last_green_run: str


@contextmanager
def _db(path: Path | None = None) -> Iterator[sqlite3.Connection]:
    connection = sqlite3.connect(path or history_db())
    try:
        connection.executescript(SCHEMA)
        columns = {row[1] for row in connection.execute("PRAGMA table_info(runs)")}
        if "client_version" not in columns:  # a history written before client versions were recorded
            connection.execute("ALTER TABLE runs ADD COLUMN client_version TEXT NOT NULL DEFAULT ''")
        with connection:
            yield connection
    finally:
        connection.close()


def record_run(
    run_id: str, finished: float, status: str, topology: str, kafka_version: str,
    rows: list[dict], statuses: dict[str, str], db: Path | None = None, client_version: str = "",
) -> None:
    """Store (or replace) a run's matrix rows and verdicts."""
    with _db(db) as db:
        db.execute("DELETE FROM verdicts WHERE run_id = ?", (run_id,))
        db.execute(
            "INSERT OR REPLACE INTO runs (run_id, finished, status, topology, kafka_version, client_version) VALUES (?, ?, ?, ?, ?, ?)",
            (run_id, finished, status, topology, kafka_version, client_version),
        )
        db.executemany(
            "INSERT INTO verdicts VALUES (?, ?, ?, ?, ?, ?, ?)",
            [
                (run_id, r["scenario"], r["profile"], r["fault"], r["guarantee"], statuses[r["scenario"]], json.dumps(r))
                for r in rows
            ],
        )


def regressions(run_id: str, db: Path | None = None) -> list[Regression]:
    """Scenarios failing in `run_id` that passed in the last earlier green run of the same topology,
    Kafka version and client version: a guarantee that held no longer does."""
    return _since_green(run_id, "fail", db)


def unverified(run_id: str, db: Path | None = None) -> list[Regression]:
    """Scenarios incomplete in `run_id` that passed in that green run: no evidence of a violation, so
    no regression, but the guarantee is no longer verified."""
    return _since_green(run_id, "incomplete", db)


def _since_green(run_id: str, status: str, db: Path | None) -> list[Regression]:
    with _db(db) as connection:
        run = connection.execute(
            "SELECT finished, topology, kafka_version, client_version FROM runs WHERE run_id = ?", (run_id,)
        ).fetchone()
        if run is None:
            raise KeyError(f"run {run_id} is not in the history")
        green = connection.execute(
            "SELECT run_id FROM runs WHERE status = 'pass' AND finished < ? AND topology = ? AND kafka_version = ? "
            "AND client_version = ? ORDER BY finished DESC LIMIT 1",
            run,
        ).fetchone()
        if green is None:
            return []
        rows = connection.execute(
            "SELECT now.scenario, now.status FROM verdicts AS now JOIN verdicts AS before "
            "ON before.scenario = now.scenario AND before.run_id = ? "
            "WHERE now.run_id = ? AND now.status = ? AND before.status = 'pass' ORDER BY now.scenario",
            (green[0], run_id, status),
        ).fetchall()
    return [Regression(scenario, found, green[0]) for scenario, found in rows]
