"""The delivery DAGs' shapes, shared by the files in dags/ (which only pick defaults and a schedule).

Matrix DAG: plan -> provision (setup) -> one mapped task per scenario group, serialized by the
one-slot pool `acklab.services.airflow_pool` (they share the cluster) -> collect -> Spark audit ->
validate (an event of the asset MATRIX, red or green), teardown; then verdict, which fails the run
unless every scenario passed. Each DAG's last task mails the verdicts that changed (`acklab.orchestration.notify`).
Shares DAG: the matrix DAG's run dealt into shares, each on a cluster of its own on any worker
(`acklab.orchestration.shares`), gathered, audited from the records archive, validated.
Version DAG: per (Kafka version, client version) pair (mapped), the pair's run whole as one share on
any worker (the pool `airflow_pool.SHARES`: one such cluster per worker), gathered, audited from its
archive and validated (whatever the pair did), then the side-by-side comparison.
Field-notes DAG: per preset (mapped, one pool slot), its whole run in one task; then one page.

Parsing imports only this module, `acklab.orchestration.params` and what it needs (pydantic
models, the catalogs' names); task bodies import their dependencies when they run."""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import DAG, Asset, TriggerRule, dag, get_current_context, setup, task, teardown

from acklab.base.paths import spark_job
from acklab.checker.spark_job import APPLICATION, SPARK_CONF
from acklab.orchestration.notify import VerdictChangeNotifier
from acklab.orchestration.params import (
    client_versions_param,
    clients_param,
    dag_params,
    explore_params,
    kafka_versions_param,
    preset_param,
    shares_param,
    version_params,
)
from acklab.plan.explore import MAX_BUDGET_MINUTES
from acklab.plan.params import RunParams
from acklab.services import airflow_pool

T = TypeVar("T")
LEASE = timedelta(hours=3)

class AuditOperator(SparkSubmitOperator):
    """The Spark audit: spark-submit as SparkSubmitOperator does, its driver started from the class
    archive setup dumped, keeping the run's cluster (which the job reads) alive while it runs."""

    def execute(self, context: Any) -> None:
        from acklab.checker.submit import with_class_archive
        from acklab.cluster.state import keep_alive
        from acklab.store.runs import RunDir

        self.conf = with_class_archive(self.conf or {})
        args = list(self.application_args or [])
        run = RunDir.of_manifest(Path(args[args.index("--manifest") + 1]))
        with keep_alive(run.cluster):
            super().execute(context)


AUDIT = {
    "task_id": "audit",
    "conn_id": "spark_default",
    "application": str(spark_job(APPLICATION)),
    "conf": SPARK_CONF,
    "name": "acklab-delivery-matrix",
}
"""The Spark audit's fixed arguments; the run's come from the collect (or gather) task."""


def _collected(key: str, task_id: str = "collect") -> str:
    """A template for one field of what the collect (or gather) task returned."""
    return "{{ ti.xcom_pull(task_ids='" + task_id + "')['" + key + "'] }}"


def _user_errors(plan: Callable[[], T]) -> T:
    """Bad params fail the run at once, with their one-line message (no retries)."""
    from airflow.sdk.exceptions import AirflowFailException

    from acklab.base.spec import SpecError

    try:
        return plan()
    except SpecError as exc:
        raise AirflowFailException(str(exc)) from None


def _dag_run(context: Any) -> tuple[str, str]:
    """The (dag id, run id) the history keeps a run under."""
    return context["dag_run"].dag_id, context["dag_run"].run_id


def _tell() -> dict[str, VerdictChangeNotifier]:
    """The callbacks of each DAG's last task: mail the DAG run's changed verdicts (`acklab.orchestration.notify`)."""
    return {"on_success_callback": VerdictChangeNotifier(), "on_failure_callback": VerdictChangeNotifier()}


MATRIX = Asset(name="acklab_delivery_matrix", uri="acklab://delivery-matrix")
"""Every validated delivery matrix, green or red (the matrix and version DAGs' `validate` tasks): an
event's extra holds the run id, status, versions and the paths of matrix, result and report."""


def _publish(context: Any, summary: dict[str, Any]) -> None:
    """Attach the validated run to the task's MATRIX event."""
    keys = ("run_dir", "status", "kafka_version", "matrix", "html")
    context["outlet_events"][MATRIX].extra = {key: summary[key] for key in keys}


def _label(**values: Any) -> None:
    """Name the mapped task instance (map_index_template) after its group or version."""
    get_current_context().update(values)  # type: ignore[arg-type]


def _validate_and_gate(audited: Any, audit: AuditOperator) -> None:
    """A matrix DAG's last steps, in the DAG being defined: `validate` (GX, an event of MATRIX) on
    what `audited` returned, once `audit` ran; then `verdict`, which fails the run unless it passed."""

    @task(outlets=[MATRIX])
    def validate(audit: dict[str, Any], **context: Any) -> dict[str, Any]:
        from acklab.orchestration import tasks

        summary = tasks.validate(audit, _dag_run(context))
        _publish(context, summary)
        return summary

    @task(**_tell())
    def verdict(summary: dict[str, Any]) -> None:
        from acklab.orchestration import tasks

        tasks.gate(summary)

    validated = validate(audited)
    audit >> validated
    verdict(validated)


def delivery_matrix_dag(dag_id: str, schedule: str | None, defaults: RunParams, doc: str, tags: list[str]) -> DAG:
    @dag(
        dag_id=dag_id, schedule=schedule, start_date=datetime(2026, 1, 1), catchup=False, max_active_runs=1,
        dagrun_timeout=LEASE, tags=["acklab", "kafka", *tags], doc_md=doc, params=dag_params(defaults, extra={"preset": preset_param()}),
    )
    def matrix() -> None:
        @task
        def plan(**context: Any) -> dict[str, Any]:
            from acklab.orchestration import tasks

            return _user_errors(lambda: tasks.plan_run(dict(context["params"])))

        @task
        def scenario_groups(run: dict[str, Any]) -> list[dict[str, Any]]:
            from acklab.orchestration import tasks

            return tasks.scenario_groups(run)

        @setup
        def provision_cluster(run: dict[str, Any]) -> dict[str, Any]:
            from acklab.orchestration import tasks

            return tasks.provision_cluster(run, LEASE.total_seconds())

        @task(pool=airflow_pool.NAME, map_index_template="{{ fault }}")
        def run_group(run: dict[str, Any], group: dict[str, Any]) -> list[str]:
            from acklab.orchestration import tasks

            _label(fault=group["fault"])
            return tasks.run_group(run, group)

        @task
        def collect(run: dict[str, Any]) -> dict[str, Any]:
            from acklab.orchestration import tasks

            return tasks.collect(run)

        @teardown
        def teardown_cluster(run: dict[str, Any]) -> None:
            from acklab.orchestration import tasks

            tasks.teardown_cluster(run)

        planned = plan()
        cluster = provision_cluster(planned)
        groups = run_group.partial(run=cluster).expand(group=scenario_groups(planned))
        collected = collect(cluster)
        audit = AuditOperator(
            **AUDIT,
            application_args=["--manifest", _collected("manifest"), "--out", _collected("audit_out")],
        )
        groups >> collected >> audit
        audit >> teardown_cluster(cluster)
        _validate_and_gate(collected, audit)

    return matrix()


def share_retries() -> int:
    """Retries of a share task (ACKLAB_SHARE_RETRIES, default 0, read when the DAG is parsed): a retry
    is a new attempt on a new cluster, its evidence apart from the killed one's."""
    return int(os.environ.get("ACKLAB_SHARE_RETRIES", "0"))


def delivery_matrix_shares_dag(dag_id: str, schedule: str | None, defaults: RunParams, doc: str, tags: list[str]) -> DAG:
    """The matrix DAG's run as shares that can run on any worker (`acklab.orchestration.shares`):
    plan -> shares (the groups dealt, the plan published to the evidence store) -> one mapped task
    per share (its own cluster, groups, records archive, teardown, evidence published) -> gather
    (whatever the shares did) -> Spark audit from the archive -> validate -> verdict."""

    @dag(
        dag_id=dag_id, schedule=schedule, start_date=datetime(2026, 1, 1), catchup=False, max_active_runs=1,
        dagrun_timeout=LEASE, tags=["acklab", "kafka", *tags], doc_md=doc,
        params=dag_params(defaults, extra={"preset": preset_param(), "shares": shares_param()}),
    )
    def matrix_shares() -> None:
        @task
        def plan(**context: Any) -> dict[str, Any]:
            from acklab.orchestration import tasks

            return _user_errors(lambda: tasks.plan_run(dict(context["params"])))

        @task
        def shares(run: dict[str, Any], **context: Any) -> list[dict[str, Any]]:
            from acklab.orchestration import tasks

            return tasks.share_list(run, int(context["params"]["shares"]))

        @task(pool=airflow_pool.SHARES, map_index_template="{{ label }}", retries=share_retries(), execution_timeout=LEASE)
        def run_share(run: dict[str, Any], share: dict[str, Any], **context: Any) -> dict[str, Any]:
            from acklab.orchestration import tasks

            _label(label=share["label"])
            return tasks.run_share(run, share, int(context["ti"].try_number), LEASE.total_seconds())

        @task(trigger_rule=TriggerRule.ALL_DONE)
        def gather(run: dict[str, Any], dealt: list[dict[str, Any]]) -> dict[str, Any]:
            from acklab.orchestration import tasks

            return tasks.gather(run, list(dealt))

        planned = plan()
        dealt = shares(planned)
        ran = run_share.partial(run=planned).expand(share=dealt)
        gathered = gather(planned, dealt)
        ran >> gathered
        audit = AuditOperator(
            **AUDIT,
            application_args=[
                "--manifest", _collected("manifest", "gather"), "--out", _collected("audit_out", "gather"),
                "--topic-records", _collected("topic_records", "gather"),
            ],
        )
        gathered >> audit
        _validate_and_gate(gathered, audit)

    return matrix_shares()


def version_regression_dag(
    dag_id: str, schedule: str | None, defaults: RunParams, kafka_versions: list[str], client_versions: list[str], doc: str
) -> DAG:
    params = dag_params(
        defaults, drop=["kafka_version", "client", "client_version"],
        extra={
            "kafka_versions": kafka_versions_param(kafka_versions), "clients": clients_param([]),
            "client_versions": client_versions_param(client_versions),
            "preset": preset_param(),
        },
    )
    return _pairs_dag(dag_id, schedule, params, doc, ["versions"], plan="plan_versions", finish="compare_versions")


def field_notes_dag(dag_id: str, schedule: str | None, doc: str) -> DAG:
    """Every preset, one after the other (one pool slot: one cluster alive at a time), each run whole
    in its task (provision, load, spark-submit audit, GX verdict, teardown); then one page."""

    @dag(
        dag_id=dag_id, schedule=schedule, start_date=datetime(2026, 1, 1), catchup=False, max_active_runs=1,
        dagrun_timeout=LEASE * 2, tags=["acklab", "kafka", "field-notes"], doc_md=doc, params=version_params(),
    )
    def notes() -> None:
        @task
        def plan(**context: Any) -> list[dict[str, Any]]:
            from acklab.orchestration import tasks

            return _user_errors(lambda: tasks.plan_presets(dict(context["params"])))

        @task(pool=airflow_pool.NAME, map_index_template="{{ label }}")
        def run_preset(run: dict[str, Any], **context: Any) -> dict[str, Any]:
            from acklab.orchestration import tasks

            _label(label=run["label"])
            return tasks.run_preset(run, _dag_run(context))

        @task(**_tell())
        def publish(summaries: list[dict[str, Any]]) -> dict[str, Any]:
            from acklab.orchestration import tasks

            return tasks.publish_presets(list(summaries))

        publish(run_preset.expand(run=plan()))

    return notes()


def explore_dag(dag_id: str, schedule: str | None, budget_minutes: float, doc: str) -> DAG:
    """One exploration (`acklab.orchestration.explore`), whole in one task holding the pool slot (its
    trials' clusters are alive one at a time); the task fails when a finding is confirmed."""

    @dag(
        dag_id=dag_id, schedule=schedule, start_date=datetime(2026, 1, 1), catchup=False, max_active_runs=1,
        dagrun_timeout=timedelta(minutes=MAX_BUDGET_MINUTES) + LEASE, tags=["acklab", "kafka", "explore"], doc_md=doc,
        params=explore_params(budget_minutes),
    )
    def exploration() -> None:
        @task(pool=airflow_pool.NAME, execution_timeout=timedelta(minutes=MAX_BUDGET_MINUTES) + LEASE, **_tell())
        def explore(**context: Any) -> dict[str, Any]:
            from acklab.orchestration import tasks

            params = dict(context["params"])
            seed = int(context["logical_date"].strftime("%Y%m%d"))
            return _user_errors(lambda: tasks.explore_run(params, seed, _dag_run(context)))

        explore()

    return exploration()


def _pairs_dag(dag_id: str, schedule: str | None, params: dict[str, Any], doc: str, tags: list[str], *, plan: str, finish: str) -> DAG:
    """Several runs, each a movable unit (`acklab.orchestration.shares`, one share per run): `tasks.<plan>(params)`
    lists the runs; each runs whole on any worker (its own cluster, its records archive, its evidence
    published to the store; the SHARES pool: one such cluster per worker), then is gathered whatever
    it did, audited from its archive and validated; `tasks.<finish>(summaries)` reports on them all."""

    @dag(
        dag_id=dag_id, schedule=schedule, start_date=datetime(2026, 1, 1), catchup=False, max_active_runs=1,
        dagrun_timeout=LEASE * 2, tags=["acklab", "kafka", *tags], doc_md=doc, params=params,
    )
    def pairs_dag() -> None:
        @task(task_id="plan")
        def plan_runs(**context: Any) -> list[dict[str, Any]]:
            from acklab.orchestration import tasks

            return _user_errors(lambda: getattr(tasks, plan)(dict(context["params"])))

        @task(pool=airflow_pool.SHARES, map_index_template="{{ label }}", retries=share_retries(), execution_timeout=LEASE)
        def run_pair(run: dict[str, Any], **context: Any) -> dict[str, Any]:
            from acklab.orchestration import tasks

            _label(label=run["label"])
            return tasks.run_whole(run, int(context["ti"].try_number), LEASE.total_seconds())

        @task(trigger_rule=TriggerRule.ALL_DONE, map_index_template="{{ label }}")
        def gather(run: dict[str, Any]) -> dict[str, Any]:
            from acklab.orchestration import tasks

            _label(label=run["label"])
            return tasks.gather_whole(run)

        @task(map_index_template="{{ label }}", outlets=[MATRIX])
        def validate(audit: dict[str, Any], **context: Any) -> dict[str, Any]:
            from acklab.orchestration import tasks

            _label(label=audit["label"])
            summary = tasks.validate(audit, _dag_run(context))
            _publish(context, summary)
            return summary

        @task(task_id=finish.split("_")[0], **_tell())
        def report(summaries: list[dict[str, Any]]) -> dict[str, Any]:
            from acklab.orchestration import tasks

            return getattr(tasks, finish)(list(summaries))

        planned = plan_runs()
        ran = run_pair.expand(run=planned)
        gathered = gather.expand(run=planned)
        ran >> gathered
        audit = AuditOperator.partial(**AUDIT).expand_kwargs(gathered.map(lambda r: {"application_args": r["application_args"]}))
        validated = validate.expand(audit=gathered)
        audit >> validated
        report(validated)

    return pairs_dag()
