"""Every DAG imports cleanly, has the documented shape, and its defaults form a valid plan."""

from __future__ import annotations

import os

import pytest

from acklab.cluster import links
from acklab.nemesis.faults import FAULT_NAMES, FAULTS, PLANTING
from acklab.plan.params import STANDARD_PIPELINE_FAULTS, STANDARD_PROCESSING
from acklab.plan.planner import make_plan
from acklab.services import airflow_pool
from acklab.workload.profiles import catalog

DAG_IDS = {
    "kafka_delivery_matrix", "kafka_delivery_matrix_shares", "kafka_delivery_smoke", "kafka_explore", "kafka_field_notes", "kafka_version_regression",
}


@pytest.fixture(scope="module")
def dagbag():
    os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
    from airflow.dag_processing.dagbag import DagBag

    from acklab.base.paths import PROJECT_ROOT

    return DagBag(dag_folder=str(PROJECT_ROOT / "dags"))


def test_no_import_errors(dagbag) -> None:
    assert dagbag.import_errors == {}
    assert set(dagbag.dags) >= DAG_IDS


@pytest.mark.parametrize("dag_id", ["kafka_delivery_matrix", "kafka_delivery_smoke"])
def test_matrix_dag_shape(dagbag, dag_id: str) -> None:
    dag = dagbag.dags[dag_id]
    tasks = {t.task_id: t for t in dag.tasks}
    assert tasks["provision_cluster"].is_setup and tasks["teardown_cluster"].is_teardown
    from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

    from acklab.orchestration.dags import AuditOperator

    assert tasks["audit"].task_type == "AuditOperator" and issubclass(AuditOperator, SparkSubmitOperator)
    assert {t.task_id for t in tasks["audit"].downstream_list} == {"teardown_cluster", "validate"}
    assert [a.name for a in tasks["validate"].outlets] == ["acklab_delivery_matrix"]  # every validated matrix, red or green
    assert [t.task_id for t in tasks["validate"].downstream_list] == ["verdict"]
    assert all(type(c).__name__ == "VerdictChangeNotifier" for c in (*tasks["verdict"].on_success_callback, *tasks["verdict"].on_failure_callback))
    assert tasks["verdict"].on_success_callback and tasks["verdict"].on_failure_callback
    group = tasks["run_group"]
    assert group.pool == airflow_pool.NAME and group.is_mapped, "scenario groups: mapped, serialized by the pool"
    assert {t.task_id for t in group.upstream_list} == {"provision_cluster", "scenario_groups"}


def test_shares_dag_shape(dagbag) -> None:
    """plan -> shares -> one mapped share task (a cluster of its own: one per worker slot) -> gather whatever they did
    -> audit from the archive -> validate -> verdict; its defaults the standard matrix in 2 shares."""
    from acklab.plan.params import standard_matrix

    dag = dagbag.dags["kafka_delivery_matrix_shares"]
    tasks = {t.task_id: t for t in dag.tasks}
    assert set(tasks) == {"plan", "shares", "run_share", "gather", "audit", "validate", "verdict"}
    assert tasks["run_share"].is_mapped and tasks["run_share"].pool == airflow_pool.SHARES
    assert tasks["gather"].trigger_rule == "all_done", "gather runs whatever the shares did: a dead share's scenarios become incomplete"
    assert "--topic-records" in tasks["audit"].application_args
    assert {t.task_id for t in tasks["audit"].upstream_list} == {"gather"}
    assert dag.params["shares"] == 2
    assert make_plan({name: dag.params[name] for name in dag.params if name not in ("preset", "shares")}).params == standard_matrix()


def test_daily_dag_runs_the_standard_matrix(dagbag) -> None:
    dag = dagbag.dags["kafka_delivery_matrix"]
    assert dag.timetable.expression == "0 0 * * *"  # @daily
    plan = make_plan({name: dag.params[name] for name in dag.params if name != "preset"})
    assert (plan.topology.brokers, plan.topology.replication_factor, plan.topology.min_insync_replicas) == (3, 3, 2)
    faults = [name for name in FAULT_NAMES if FAULTS[name].standard and (not FAULTS[name].cuts_links or links.unavailable() is None)]
    # both client families, a group per fault and client (fourteen producers in one group overload two
    # cores), the fault's two groups one after the other; librdkafka keeps the plain names
    producers = [s for s in plan.checked if s.pipeline is None]
    assert len(producers) == 2 * len(catalog()) * len(faults) >= 72
    controls, groups = plan.groups()[: len(PLANTING) + 1], plan.groups()[len(PLANTING) + 1:]
    assert [s.name for g in controls for s in g] == [*(f"negative-control__{fault}" for fault in PLANTING), "pipeline-control__processor-kill"]
    alone = [g for g in groups if g[0].pipeline is None]
    assert [(g[0].fault, g[0].client.family) for g in alone] == [(f, c) for f in faults for c in ("librdkafka", "java")]
    assert all(len(g) == len(catalog()) and len({s.client for s in g}) == 1 for g in alone)
    # the pipelines: every documented style x their faults x both clients, in groups of their own, each after its
    # fault's producers (the processor and coordinator faults, which act on pipelines only, last)
    pipelines = [g for g in groups if g[0].pipeline is not None]
    assert [(g[0].fault, g[0].client.family) for g in pipelines] == [(f, c) for f in STANDARD_PIPELINE_FAULTS for c in ("librdkafka", "java")]
    assert all([s.pipeline.style for s in g if s.pipeline] == STANDARD_PROCESSING and len({s.client for s in g}) == 1 for g in pipelines)
    order = [(f, c, False) for f in faults for c in ("librdkafka", "java")]
    order = [step for f, c, _ in order for step in [(f, c, False), *([(f, c, True)] if f in STANDARD_PIPELINE_FAULTS else [])]]
    order += [(f, c, True) for f in STANDARD_PIPELINE_FAULTS if f not in faults for c in ("librdkafka", "java")]
    assert [(g[0].fault, g[0].client.family, g[0].pipeline is not None) for g in groups] == order
    assert [plan.group_label(g) for g in groups[:3]] == ["none (librdkafka)", "none (librdkafka) pipelines", "none (java)"]
    assert {s.name for s in producers if s.client.family == "librdkafka"} == {f"{p}__{f}" for p in catalog() for f in faults}
    assert {s.name for s in producers if s.client.family == "java"} == {f"{p}.java__{f}" for p in catalog() for f in faults}


def test_smoke_dag_is_small(dagbag) -> None:
    dag = dagbag.dags["kafka_delivery_smoke"]
    plan = make_plan({name: dag.params[name] for name in dag.params if name != "preset"})
    assert [s.name for s in plan.scenarios] == [
        *(f"negative-control__{fault}" for fault in PLANTING), "leader-ack__leader-kill", "idempotent__leader-kill",
    ]


def test_version_dag_compares_two_versions(dagbag) -> None:
    dag = dagbag.dags["kafka_version_regression"]
    tasks = {t.task_id: t for t in dag.tasks}
    # each pair whole on any worker, one cluster of its own per worker slot; gathered whatever it did
    assert set(tasks) == {"plan", "run_pair", "gather", "audit", "validate", "compare"}
    assert tasks["run_pair"].is_mapped and tasks["run_pair"].pool == airflow_pool.SHARES
    assert tasks["gather"].is_mapped and tasks["gather"].trigger_rule == "all_done"
    assert {t.task_id for t in tasks["gather"].upstream_list} == {"plan", "run_pair"}
    assert tasks["audit"].task_type == "AuditOperator" and tasks["audit"].is_mapped
    assert {t.task_id for t in tasks["audit"].upstream_list} == {"gather"}
    assert {t.task_id for t in tasks["compare"].upstream_list} == {"validate"}
    assert [a.name for a in tasks["validate"].outlets] == ["acklab_delivery_matrix"]
    assert tasks["compare"].on_success_callback and tasks["compare"].on_failure_callback  # the changed verdicts are mailed
    versions = dag.params["kafka_versions"]
    assert len(versions) >= 2 and len(set(versions)) == len(versions)
    assert (dag.params["clients"], dag.params["client_versions"]) == ([], [])  # each run's own client: a preset's, or the locked one
    # the pipelines are compared across versions as the producers are
    assert (dag.params["processing"], dag.params["processing_faults"]) == (STANDARD_PROCESSING, STANDARD_PIPELINE_FAULTS)


@pytest.mark.parametrize("dag_id", sorted(DAG_IDS))
def test_params_are_typed_and_described(dagbag, dag_id: str) -> None:
    dag = dagbag.dags[dag_id]
    for name in dag.params:
        param = dag.params.get_param(name)
        assert param.schema.get("type") and param.description, name


@pytest.mark.parametrize(
    ("name", "value"),
    [("faults", ["meteor"]), ("profiles", ["idempotent", "idempotent"]), ("messages", 0), ("topology", "nine-brokers"), ("rate", -1)],
)
def test_invalid_param_is_rejected_by_the_trigger_form(dagbag, name: str, value: object) -> None:
    from airflow.sdk.definitions.param import ParamValidationError

    param = dagbag.dags["kafka_delivery_matrix"].params.get_param(name)
    param.resolve(param.value)
    with pytest.raises(ParamValidationError):
        param.resolve(value)


def test_field_notes_dag_runs_every_field_note_preset(dagbag) -> None:
    """plan -> one mapped run per preset (serialized by the pool) -> one page; every preset plannable."""
    from acklab.orchestration import tasks
    from acklab.plan.presets import FIELD_NOTES

    dag = dagbag.dags["kafka_field_notes"]
    assert dag.timetable.expression == "0 0 * * 0"  # @weekly
    by_id = {t.task_id: t for t in dag.tasks}
    assert set(by_id) == {"plan", "run_preset", "publish"}
    assert by_id["run_preset"].is_mapped and by_id["run_preset"].pool == airflow_pool.NAME
    assert {t.task_id for t in by_id["publish"].upstream_list} == {"run_preset"}
    planned = tasks.plan_presets({name: dag.params[name] for name in dag.params}, create=False)
    assert [run["params"]["preset"] for run in planned] == list(FIELD_NOTES) and len(FIELD_NOTES) == 10


def test_explore_dag_runs_one_exploration_in_the_pool_and_checks_its_params(dagbag) -> None:
    """One task holding the pool slot, telling of changed verdicts; its defaults a valid space, a
    seed from the logical date; a trigger's bad values refused by the form or in one line by the task."""
    from airflow.sdk.definitions.param import ParamValidationError

    from acklab.base.spec import SpecError
    from acklab.orchestration import tasks

    dag = dagbag.dags["kafka_explore"]
    assert dag.timetable.expression == "0 0 * * 0"  # @weekly
    (task,) = dag.tasks
    assert task.task_id == "explore" and task.pool == airflow_pool.NAME and task.on_failure_callback
    params = {name: dag.params[name] for name in dag.params}
    space, seed, budget_s = tasks.explore_space(params, 20261206)
    assert (seed, budget_s, space.topology, space.faults, space.profiles) == (20261206, 3600.0, "three-brokers", (), ())
    assert tasks.explore_space({**params, "seed": 7}, 20261206)[1] == 7
    for name, value in (("budget_minutes", 0), ("faults", ["planted-loss"]), ("profiles", ["nope"]), ("topology", "/etc/passwd"), ("seed", "x")):
        param = dag.params.get_param(name)
        with pytest.raises(ParamValidationError):
            param.resolve(value)
    for bad, message in (({"topology": "../x"}, "a name in clusters/"), ({"budget_minutes": -1}, "budget_minutes -1"),
                         ({"clients": ["nope"]}, "client 'nope'")):
        with pytest.raises(SpecError, match=message):
            tasks.explore_space({**params, **bad}, 1)
