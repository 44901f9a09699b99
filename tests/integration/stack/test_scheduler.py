"""The DAGs under a real scheduler: the Airflow stack (api-server, scheduler, dag-processor;
LocalExecutor) on PostgreSQL, driven only through the REST API, the way a team runs acklab."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

from acklab.services.airflow_stack import StackState
from acklab.store.history import METADATA, VERSION_TABLE, engine, ours, runs_of

from ..airflow_rest import AirflowRest
from ..helpers import assert_nothing_left

pytestmark = [pytest.mark.integration, pytest.mark.scheduler]

SMOKE = "kafka_delivery_smoke"
DAILY = "kafka_delivery_matrix"
# 6 s of load: the leader kill at 1 s takes effect well before the load ends. The daily DAG's params
# hold the standard pipelines: `processing: []` leaves them out.
# The scheduler's and the REST API's part; the negative controls through a DAG are test_dag_e2e's subject.
CONF = {
    "profiles": ["leader-ack", "idempotent"], "faults": ["leader-kill"], "processing": [], "messages": 30000, "rate": 5000, "fault_at_s": 1.0,
    "negative_control": False,
}
RUN_TIMEOUT_S = 600


def _new_run(store: Path, before: set[Path]) -> Path:
    (run,) = [p for p in set(store.iterdir()) - before if p.is_dir() and (p / "manifest.json").exists()]
    return run


def _check_passed(run: Path, clients: tuple[str, ...] = ("",)) -> dict:
    """The run passed its two scenarios for each client tag (`""`: the first client's plain names)."""
    result = json.loads((run / "result.json").read_text())
    assert result["status"] == "pass", result
    assert result["scenarios"] == {f"{p}{tag}__leader-kill": "pass" for p in ("leader-ack", "idempotent") for tag in clients}
    rows = {row["scenario"]: row for row in json.loads(Path(result["matrix"]).read_text()) if not row["control"]}
    assert {row["sent"] for row in rows.values()} == {CONF["messages"]}
    for tag in clients:
        assert (rows[f"idempotent{tag}__leader-kill"]["lost"], rows[f"idempotent{tag}__leader-kill"]["duplicates"]) == (0, 0)
    assert_nothing_left(run / "cluster")
    return result


def test_stack_listens_on_loopback_only(airflow_stack: StackState) -> None:
    sockets = airflow_stack.listening()
    assert {port for _, port in sockets} >= {int(airflow_stack.url.rsplit(":", 1)[1])}
    assert {address for address, _ in sockets} == {"127.0.0.1"}, sockets
    assert airflow_stack.database == "postgresql"


def test_rest_trigger_with_params_runs_the_smoke_dag(
    airflow_stack: StackState, airflow_rest: AirflowRest, isolated_run_store: Path
) -> None:
    airflow_rest.wait_for_dag(SMOKE)
    airflow_rest.set_paused(SMOKE, False)
    bad = airflow_rest.trigger(SMOKE, {**CONF, "faults": ["meteor"]})
    assert bad.status_code == 400 and "meteor" in bad.text, bad.text  # the params' enum, before any run exists
    before = set(isolated_run_store.iterdir())

    response = airflow_rest.trigger(SMOKE, CONF)
    assert response.status_code == 200, response.text
    run_id = response.json()["dag_run_id"]
    run = airflow_rest.wait_for_run(SMOKE, run_id, RUN_TIMEOUT_S)
    assert run["state"] == "success", airflow_rest.failure_report(SMOKE, run_id)
    states = airflow_rest.task_states(SMOKE, run_id)
    assert run["run_type"] == "manual" and run["conf"] == CONF
    assert set(states.values()) == {"success"} and "run_group[0]" in states, states
    assert "PASS idempotent__leader-kill [exactly-once]" in airflow_rest.task_log(SMOKE, run_id, "validate")
    stored = _new_run(isolated_run_store, before)
    _check_passed(stored)
    (event,) = [e for e in airflow_rest.get("/assets/events", name="acklab_delivery_matrix")["asset_events"] if e["source_run_id"] == run_id]
    assert event["extra"]["run_dir"] == str(stored) and event["extra"]["status"] == "pass"  # downstream DAGs can be scheduled on it
    history = sa.make_url(str(airflow_stack.history)).set(drivername="postgresql+psycopg2")  # the connection acklab_history
    (recorded,) = runs_of(SMOKE, run_id, history)  # the history is in the deployment's PostgreSQL
    assert (recorded.run_id, recorded.status, recorded.report) == (stored.name, "pass", str(stored / "report" / "index.html"))
    with engine(history).connect() as connection:
        assert connection.dialect.name == "postgresql"
        assert compare_metadata(MigrationContext.configure(connection, opts={"version_table": VERSION_TABLE, "include_name": ours}), METADATA) == []


# Triggers whose properties would load code, read files or reach other hosts: the form's schema
# refuses each name before a run exists (`acklab.base.property_policy.refused_names_schema`).
REFUSED_AT_THE_API = [
    ({"custom_profiles": {"mine": {"librdkafka": {"plugin.library.path": "/tmp/libevil.so"}}}, "profiles": ["mine"]}, "plugin.library.path"),
    ({"custom_profiles": {"mine": {"librdkafka": {"sasl.kerberos.kinit.cmd": "touch /tmp/owned"}}}, "profiles": ["mine"]}, "sasl.kerberos.kinit.cmd"),
    ({"client": "java", "custom_profiles": {"mine": {"java": {"sasl.jaas.config": "x"}}}, "profiles": ["mine"]}, "sasl.jaas.config"),
    ({"client": "java", "custom_profiles": {"mine": {"java": {"config.providers": "file"}}}, "profiles": ["mine"]}, "config.providers"),
    ({"broker_config": {"authorizer.class.name": "com.example.Evil"}}, "authorizer.class.name"),
    ({"broker_config": {"log.dirs": "/etc"}}, "log.dirs"),
    ({"processing": ["eos"], "processor_config": {"consumer": {"interceptor.classes": "com.example.Evil"}}}, "interceptor.classes"),
    ({"topology": "/etc/passwd"}, "/etc/passwd"),
]


def test_a_trigger_whose_properties_load_code_or_leave_the_sandbox_is_refused(
    airflow_rest: AirflowRest, isolated_run_store: Path
) -> None:
    """Through the REST API: a property the schema names is refused with 400; one only its value
    betrays (a Java class of another vendor) fails the run at `plan` with the policy's line, before
    any run folder or broker exists."""
    airflow_rest.wait_for_dag(SMOKE)
    airflow_rest.set_paused(SMOKE, False)
    before = set(isolated_run_store.iterdir())
    for conf, name in REFUSED_AT_THE_API:
        response = airflow_rest.trigger(SMOKE, {**CONF, **conf})
        assert response.status_code == 400 and name in response.text, (name, response.status_code, response.text[:500])
    conf = {**CONF, "client": "java", "custom_profiles": {"mine": {"java": {"interceptor.classes": "com.example.Evil"}}}, "profiles": ["mine"]}
    response = airflow_rest.trigger(SMOKE, conf)
    assert response.status_code == 200, response.text
    run_id = response.json()["dag_run_id"]
    run = airflow_rest.wait_for_run(SMOKE, run_id, RUN_TIMEOUT_S)
    assert run["state"] == "failed"
    states = airflow_rest.task_states(SMOKE, run_id)
    assert states["plan"] == "failed" and not any(state == "success" for state in states.values()), states
    assert "java property interceptor.classes refused: it would load code into the client" in airflow_rest.task_log(SMOKE, run_id, "plan")
    assert set(isolated_run_store.iterdir()) == before  # no run folder, so no cluster


def test_backfill_runs_the_daily_dag_through_the_scheduler(airflow_rest: AirflowRest, isolated_run_store: Path) -> None:
    """A backfill of the daily DAG's next interval with small params: the scheduler creates and runs
    the run from the DAG's timetable. Backfilling that very interval also keeps unpausing the DAG from
    scheduling it with the default (standard-matrix) params."""
    dag = airflow_rest.wait_for_dag(DAILY)
    assert dag["is_paused"] is True
    logical_date = dag["next_dagrun_logical_date"]
    before = set(isolated_run_store.iterdir())
    backfill = airflow_rest.backfill(DAILY, logical_date, CONF)
    airflow_rest.set_paused(DAILY, False)
    try:
        (run,) = [r for r in airflow_rest.runs(DAILY) if r.get("backfill_id") == backfill["id"] or r["run_type"] == "backfill"]
        finished = airflow_rest.wait_for_run(DAILY, run["dag_run_id"], RUN_TIMEOUT_S)
    finally:
        airflow_rest.set_paused(DAILY, True)
    assert finished["state"] == "success", airflow_rest.failure_report(DAILY, run["dag_run_id"])
    assert finished["run_type"] == "backfill" and finished["logical_date"] == logical_date and finished["conf"] == CONF
    assert [r["run_type"] for r in airflow_rest.runs(DAILY)] == ["backfill"], "the scheduler also ran the default matrix"
    _check_passed(_new_run(isolated_run_store, before), ("", ".java"))  # the daily DAG runs both client families
