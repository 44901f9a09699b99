"""Every DAG imports cleanly and its defaults form a valid plan."""

from __future__ import annotations

import os

import pytest

from acklab.paths import PROJECT_ROOT
from acklab.scenario import make_plan


@pytest.fixture(scope="module")
def dagbag():
    os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
    from airflow.dag_processing.dagbag import DagBag

    return DagBag(dag_folder=str(PROJECT_ROOT / "dags"))


def test_no_import_errors(dagbag) -> None:
    assert dagbag.import_errors == {}
    assert "kafka_delivery_matrix" in dagbag.dags


def test_delivery_dag_shape_and_defaults(dagbag) -> None:
    dag = dagbag.dags["kafka_delivery_matrix"]
    assert dag.timetable.expression == "0 0 * * *"  # @daily
    tasks = {t.task_id: t for t in dag.tasks}
    assert tasks["provision_cluster"].is_setup and tasks["teardown_cluster"].is_teardown
    assert tasks["audit"].task_type == "SparkSubmitOperator"
    assert {t.task_id for t in tasks["audit"].downstream_list} == {"teardown_cluster", "validate"}
    defaults = {name: dag.params[name] for name in dag.params}
    plan = make_plan(defaults)
    assert [s.name for s in plan.scenarios] == ["leader-ack__leader-kill", "idempotent__leader-kill"]
