"""The run history: every validated run's matrix rows and verdicts, in the SQL database that the
Airflow connection `acklab_history` names (PostgreSQL where users deploy); without that connection, the
SQLite file `history.sqlite` in the runs root. Alembic (`acklab/store/migrations`) creates and upgrades
the same tables on both, under its own version table, so the database may be Airflow's own.

- A *regression*: a scenario failing now that passed in the most recent earlier green run (overall
  status pass) of the same settings (topology, Kafka version, client version).
- A *change*: a scenario whose verdict differs from its verdict in the most recent earlier run of the
  same settings that ran it.
"""

from __future__ import annotations

import fcntl
import json
import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import sqlalchemy as sa
from alembic import command
from alembic.config import Config

from acklab.store.runs import history_db

CONN_ID = "acklab_history"
VERSION_TABLE = "acklab_alembic_version"
MIGRATIONS = Path(__file__).parent / "migrations"
DIALECTS = {"sqlite": "sqlite", "postgres": "postgresql+psycopg2", "postgresql": "postgresql+psycopg2"}
"""Airflow connection types acklab keeps its history in, and their SQLAlchemy drivers."""

METADATA = sa.MetaData()
RUNS = sa.Table(
    "acklab_runs", METADATA,
    sa.Column("run_id", sa.String(200), primary_key=True),
    sa.Column("finished", sa.Float, nullable=False),
    sa.Column("status", sa.String(20), nullable=False),
    sa.Column("topology", sa.String(200), nullable=False),
    sa.Column("kafka_version", sa.String(50), nullable=False),
    sa.Column("client_version", sa.String(100), nullable=False, server_default=""),
    sa.Column("dag_id", sa.String(250)),
    sa.Column("dag_run_id", sa.String(250)),
    sa.Column("report", sa.Text),
)
VERDICTS = sa.Table(
    "acklab_verdicts", METADATA,
    sa.Column("run_id", sa.String(200), sa.ForeignKey("acklab_runs.run_id", ondelete="CASCADE"), primary_key=True),
    sa.Column("scenario", sa.String(250), primary_key=True),
    sa.Column("profile", sa.String(100), nullable=False),
    sa.Column("fault", sa.String(100), nullable=False),
    sa.Column("guarantee", sa.String(100), nullable=False),
    sa.Column("status", sa.String(20), nullable=False),
    sa.Column("row_json", sa.Text, nullable=False),
)


def ours(name: str | None, kind: str, parents: object) -> bool:
    """Alembic's `include_name`: acklab's tables only (the database may be Airflow's, with its own)."""
    return kind != "table" or name in METADATA.tables


@dataclass(frozen=True)
class RunRecord:
    """One run as the history keeps it. `dag_id`/`dag_run_id`: the Airflow run that made it, if any."""

    run_id: str
    finished: float
    status: str
    topology: str
    kafka_version: str
    client_version: str = ""
    dag_id: str | None = None
    dag_run_id: str | None = None
    report: str | None = None


@dataclass(frozen=True)
class Regression:
    scenario: str
    status: str
    last_green_run: str


@dataclass(frozen=True)
class Change:
    """A scenario's verdict `now`, differing from `before`, its verdict in `previous_run`."""

    scenario: str
    before: str
    now: str
    previous_run: str


Database = str | sa.URL | Path | None
"""Where the history is: a SQLAlchemy URL, a SQLite file, or None for `history_url()`."""


def history_url(conn_id: str = CONN_ID) -> sa.URL:
    """The history database: the Airflow connection `conn_id` if defined, else the runs root's SQLite file."""
    with _own_logging():
        from airflow.sdk import BaseHook
        from airflow.sdk.exceptions import AirflowNotFoundException

    try:
        conn = BaseHook.get_connection(conn_id)
    except AirflowNotFoundException:
        return _sqlite(history_db())
    if conn.conn_type not in DIALECTS:
        raise ValueError(f"connection {conn_id}: type {conn.conn_type!r} cannot hold the history; allowed: {', '.join(DIALECTS)}")
    if DIALECTS[conn.conn_type] == "sqlite":
        return _sqlite(Path(conn.host or conn.schema))
    return sa.URL.create(
        DIALECTS[conn.conn_type], username=conn.login, password=conn.password, host=conn.host, port=conn.port, database=conn.schema,
    )


@contextmanager
def _own_logging() -> Iterator[None]:
    """Importing Airflow the first time points the root logger at stdout; a process with its own
    logging (the CLI: its console on stderr, `--json` on stdout) gets its handlers back."""
    root = logging.getLogger()
    handlers, level, first = root.handlers[:], root.level, "airflow.sdk" not in sys.modules
    try:
        yield
    finally:
        if first and handlers:
            root.handlers[:] = handlers
            root.setLevel(level)


def _sqlite(path: Path) -> sa.URL:
    path.parent.mkdir(parents=True, exist_ok=True)
    return sa.URL.create("sqlite", database=str(path))


def engine(db: Database = None) -> sa.Engine:
    """An engine on the history database, its tables migrated to the newest revision."""
    if db is None:
        db = history_url()
    return _migrated(_sqlite(db) if isinstance(db, Path) else sa.make_url(db))


@cache
def _migrated(url: sa.URL) -> sa.Engine:
    logging.getLogger("alembic").setLevel(logging.WARNING)  # its INFO lines say nothing an operator needs
    created = sa.create_engine(url)
    with _migration_lock(created) as connection:
        config = Config()
        config.set_main_option("script_location", str(MIGRATIONS))
        config.attributes["connection"] = connection
        command.upgrade(config, "head")
    return created


@contextmanager
def _migration_lock(created: sa.Engine) -> Iterator[sa.Connection]:
    """A transaction in which one process at a time migrates (concurrent DAG tasks share the database)."""
    if created.dialect.name == "postgresql":
        with created.begin() as connection:
            connection.execute(sa.text("SELECT pg_advisory_xact_lock(hashtext('acklab_history'))"))
            yield connection
        return
    with open(f"{created.url.database}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        with created.begin() as connection:
            yield connection


def record_run(run: RunRecord, rows: list[dict], statuses: dict[str, str], db: Database = None) -> None:
    """Store (or replace) a run's matrix rows and verdicts."""
    with engine(db).begin() as connection:
        connection.execute(VERDICTS.delete().where(VERDICTS.c.run_id == run.run_id))
        connection.execute(RUNS.delete().where(RUNS.c.run_id == run.run_id))
        connection.execute(RUNS.insert().values(**run.__dict__))
        if rows:
            connection.execute(VERDICTS.insert(), [
                {"run_id": run.run_id, "scenario": r["scenario"], "profile": r["profile"], "fault": r["fault"],
                 "guarantee": r["guarantee"], "status": statuses[r["scenario"]], "row_json": json.dumps(r)}
                for r in rows
            ])


def regressions(run_id: str, db: Database = None) -> list[Regression]:
    """Scenarios failing in `run_id` that passed in the last earlier green run of the same settings:
    a guarantee that held no longer does."""
    return _since_green(run_id, "fail", db)


def unverified(run_id: str, db: Database = None) -> list[Regression]:
    """Scenarios incomplete in `run_id` that passed in that green run: no evidence of a violation, so
    no regression, but the guarantee is no longer verified."""
    return _since_green(run_id, "incomplete", db)


def _same_settings(run: sa.Row) -> sa.ColumnElement[bool]:
    return sa.and_(
        RUNS.c.finished < run.finished, RUNS.c.topology == run.topology, RUNS.c.kafka_version == run.kafka_version,
        RUNS.c.client_version == run.client_version,
    )


def _run(connection: sa.Connection, run_id: str) -> sa.Row:
    run = connection.execute(sa.select(RUNS).where(RUNS.c.run_id == run_id)).one_or_none()
    if run is None:
        raise KeyError(f"run {run_id} is not in the history")
    return run


def _since_green(run_id: str, status: str, db: Database) -> list[Regression]:
    with engine(db).connect() as connection:
        run = _run(connection, run_id)
        green = connection.execute(
            sa.select(RUNS.c.run_id).where(_same_settings(run), RUNS.c.status == "pass").order_by(RUNS.c.finished.desc()).limit(1)
        ).scalar()
        if green is None:
            return []
        now, before = VERDICTS.alias("now"), VERDICTS.alias("before")
        found = connection.execute(
            sa.select(now.c.scenario, now.c.status)
            .join(before, sa.and_(before.c.scenario == now.c.scenario, before.c.run_id == green))
            .where(now.c.run_id == run_id, now.c.status == status, before.c.status == "pass")
            .order_by(now.c.scenario)
        ).all()
    return [Regression(scenario, found_status, green) for scenario, found_status in found]


def changes(run_id: str, db: Database = None) -> list[Change]:
    """Every scenario of `run_id` whose verdict differs from the one it had in the most recent earlier
    run of the same settings that ran it (a scenario never run before is no change)."""
    with engine(db).connect() as connection:
        run = _run(connection, run_id)
        earlier = (
            sa.select(VERDICTS.c.scenario, VERDICTS.c.status, VERDICTS.c.run_id, RUNS.c.finished)
            .join(RUNS, RUNS.c.run_id == VERDICTS.c.run_id).where(_same_settings(run))
            .order_by(RUNS.c.finished)
        )
        last = {scenario: (status, previous) for scenario, status, previous, _ in connection.execute(earlier)}
        now = connection.execute(
            sa.select(VERDICTS.c.scenario, VERDICTS.c.status).where(VERDICTS.c.run_id == run_id).order_by(VERDICTS.c.scenario)
        ).all()
    return [Change(scenario, last[scenario][0], status, last[scenario][1]) for scenario, status in now
            if scenario in last and last[scenario][0] != status]


def runs_of(dag_id: str, dag_run_id: str, db: Database = None) -> list[RunRecord]:
    """The runs one Airflow DAG run recorded, oldest first."""
    with engine(db).connect() as connection:
        found = connection.execute(
            sa.select(RUNS).where(RUNS.c.dag_id == dag_id, RUNS.c.dag_run_id == dag_run_id).order_by(RUNS.c.finished)
        ).all()
    return [RunRecord(**row._mapping) for row in found]


def recent_runs(limit: int = 50, db: Database = None) -> list[RunRecord]:
    """The `limit` most recently finished runs, newest first."""
    with engine(db).connect() as connection:
        found = connection.execute(sa.select(RUNS).order_by(RUNS.c.finished.desc()).limit(limit)).all()
    return [RunRecord(**row._mapping) for row in found]


def verdicts(run_ids: list[str], db: Database = None) -> dict[str, dict[str, dict]]:
    """Per run of `run_ids`, per scenario: its matrix row with its verdict under `status`."""
    found: dict[str, dict[str, dict]] = {run_id: {} for run_id in run_ids}
    with engine(db).connect() as connection:
        for run_id, scenario, status, row in connection.execute(
            sa.select(VERDICTS.c.run_id, VERDICTS.c.scenario, VERDICTS.c.status, VERDICTS.c.row_json)
            .where(VERDICTS.c.run_id.in_(run_ids)).order_by(VERDICTS.c.scenario)
        ):
            found[run_id][scenario] = {**json.loads(row), "status": status}
    return found
