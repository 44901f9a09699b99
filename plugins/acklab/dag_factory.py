"""The delivery DAGs' shapes, shared by the files in dags/ (which only pick defaults and a schedule).

Matrix DAG: plan -> provision (setup) -> one mapped task per scenario group, serialized by the
`acklab_cluster` pool (they share the cluster) -> collect -> Spark audit -> validate, teardown.
Version DAG: per Kafka version (mapped): provision, every group (pool), Spark audit, validation and
teardown (after the audit, whatever happened), then the side-by-side comparison."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import DAG, Param, TriggerRule, dag, get_current_context, setup, task, teardown

from acklab import dag_tasks
from acklab.checker.audit import SPARK_CONF
from acklab.maven import DEFAULT_KAFKA_VERSION
from acklab.nemesis.catalog import FAULT_NAMES
from acklab.paths import clusters_dir, spark_job
from acklab.profiles import catalog
from acklab.scenario import RunParams

POOL = "acklab_cluster"
"""One slot: scenario groups share a cluster, so they run one at a time (`make setup` creates it)."""
LEASE = timedelta(hours=3)
VERSION_PATTERN = r"^(3\.9|4\.\d+)\.\d+$"


def run_params(defaults: RunParams) -> dict[str, Param]:
    """Trigger-form params: JSON-schema types, enums and descriptions; checked before any task runs."""
    return {
        "topology": Param(defaults.topology, type="string", enum=sorted(p.stem for p in clusters_dir().glob("*.yaml")),
                          description="Cluster topology (clusters/<name>.yaml)"),
        "kafka_version": Param(defaults.kafka_version, type=["null", "string"], pattern=VERSION_PATTERN,
                               description=f"Apache Kafka version (3.9.x or 4.x, fetched by `acklab setup`); "
                               f"null = the topology's (default {DEFAULT_KAFKA_VERSION})"),
        "backend": Param(defaults.backend, type="string", enum=["local", "docker"], description="Local JVMs or Docker containers"),
        "profiles": Param(defaults.profiles, type="array", minItems=1, uniqueItems=True,
                          items={"type": "string", "enum": sorted(catalog())}, description="Producer profiles, one scenario per fault"),
        "faults": Param(defaults.faults, type="array", minItems=1, uniqueItems=True,
                        items={"type": "string", "enum": list(FAULT_NAMES)}, description="Faults, one scenario per profile"),
        "schedule": Param(None, type=["null", "array"], items={"type": "object", "required": ["fault"]},
                          description="Explicit fault schedule [{at_s, fault, target, duration_s, options}]; replaces faults"),
        "messages": Param(defaults.messages, type="integer", minimum=1, description="Messages per scenario (a cap with duration_s)"),
        "rate": Param(defaults.rate, type=["number", "null"], exclusiveMinimum=0, description="Messages per second per scenario (null = max)"),
        "duration_s": Param(defaults.duration_s, type=["number", "null"], exclusiveMinimum=0,
                            description="Stop each load after this many seconds (messages is then a cap)"),
        "message_bytes": Param(defaults.message_bytes, type="integer", minimum=16, description="Bytes per message value"),
        "keys": Param(defaults.keys, type="integer", minimum=1, description="Keys per producer"),
        "producers": Param(defaults.producers, type="integer", minimum=1, maximum=64, description="Producer processes per scenario"),
        "partitioner": Param(defaults.partitioner, type=["null", "string"], enum=[None, "consistent_random", "murmur2_random"],
                             description="Key partitioner (null = the profile's)"),
        "fault_at_s": Param(defaults.fault_at_s, type="number", minimum=0, description="Seconds into the load when the fault starts"),
        "fault_duration_s": Param(defaults.fault_duration_s, type="number", exclusiveMinimum=0, description="Seconds the fault lasts"),
        "side_by_side": Param(defaults.side_by_side, type="boolean",
                              description="Run the profiles of one fault together on the cluster (false: one scenario at a time)"),
    }


AUDIT = {
    "task_id": "audit",
    "conn_id": "spark_default",
    "application": str(spark_job("delivery_matrix.py")),
    "conf": SPARK_CONF,
    "name": "acklab-delivery-matrix",
}
"""The Spark audit's fixed arguments; the run's come from the collect (or run_groups) task."""
COLLECTED = "ti.xcom_pull(task_ids='collect')"


def _label(**values: Any) -> None:
    """Name the mapped task instance (map_index_template) after its group or version."""
    get_current_context().update(values)  # type: ignore[arg-type]


def delivery_matrix_dag(dag_id: str, schedule: str | None, defaults: RunParams, doc: str, tags: list[str]) -> DAG:
    @dag(
        dag_id=dag_id, schedule=schedule, start_date=datetime(2026, 1, 1), catchup=False, max_active_runs=1,
        dagrun_timeout=LEASE, tags=["acklab", "kafka", *tags], doc_md=doc, params=run_params(defaults),
    )
    def matrix() -> None:
        @task
        def plan(**context: Any) -> dict[str, Any]:
            return dag_tasks.plan_run(dict(context["params"]))

        @task
        def scenario_groups(run: dict[str, Any]) -> list[dict[str, Any]]:
            return dag_tasks.scenario_groups(run)

        @setup
        def provision_cluster(run: dict[str, Any]) -> dict[str, Any]:
            return dag_tasks.provision_cluster(run, LEASE.total_seconds())

        @task(pool=POOL, map_index_template="{{ fault }}")
        def run_group(run: dict[str, Any], group: dict[str, Any]) -> list[str]:
            _label(fault=group["fault"])
            return dag_tasks.run_group(run, group)

        @task
        def collect(run: dict[str, Any]) -> dict[str, Any]:
            return dag_tasks.collect(run)

        @teardown
        def teardown_cluster(run: dict[str, Any]) -> None:
            dag_tasks.teardown_cluster(run)

        @task
        def validate(audit: dict[str, Any]) -> dict[str, Any]:
            return dag_tasks.validate(audit)

        planned = plan()
        cluster = provision_cluster(planned)
        groups = run_group.partial(run=cluster).expand(group=scenario_groups(planned))
        collected = collect(cluster)
        audit = SparkSubmitOperator(
            **AUDIT,
            application_args=["--manifest", "{{ %s['manifest'] }}" % COLLECTED, "--out", "{{ %s['audit_out'] }}" % COLLECTED],
            jars="{{ %s['jars'] }}" % COLLECTED,
        )
        groups >> collected >> audit
        audit >> teardown_cluster(cluster)
        audit >> validate(collected)

    return matrix()


def version_regression_dag(dag_id: str, schedule: str | None, defaults: RunParams, versions: list[str], doc: str) -> DAG:
    params = run_params(defaults)
    del params["kafka_version"]
    params["kafka_versions"] = Param(
        versions, type="array", minItems=2, uniqueItems=True, items={"type": "string", "pattern": VERSION_PATTERN},
        description="Kafka versions to run the same matrix on, side by side (each fetched by `acklab setup`)",
    )

    @dag(
        dag_id=dag_id, schedule=schedule, start_date=datetime(2026, 1, 1), catchup=False, max_active_runs=1,
        dagrun_timeout=LEASE * 2, tags=["acklab", "kafka", "versions"], doc_md=doc, params=params,
    )
    def versions_dag() -> None:
        @task
        def plan(**context: Any) -> list[dict[str, Any]]:
            return dag_tasks.plan_versions(dict(context["params"]))

        @task(map_index_template="{{ kafka_version }}")
        def provision_cluster(run: dict[str, Any]) -> dict[str, Any]:
            _label(kafka_version=run["params"]["kafka_version"])
            return dag_tasks.provision_cluster(run, LEASE.total_seconds())

        @task(pool=POOL, map_index_template="{{ kafka_version }}")
        def run_groups(run: dict[str, Any]) -> dict[str, Any]:
            _label(kafka_version=run["params"]["kafka_version"])
            return dag_tasks.run_all_groups(run)

        @task(trigger_rule=TriggerRule.ALL_DONE, map_index_template="{{ kafka_version }}")
        def teardown_cluster(run: dict[str, Any]) -> None:
            _label(kafka_version=run["params"]["kafka_version"])
            dag_tasks.teardown_cluster(run)

        @task(map_index_template="{{ kafka_version }}")
        def validate(audit: dict[str, Any]) -> dict[str, Any]:
            _label(kafka_version=audit["params"]["kafka_version"])
            return dag_tasks.validate(audit, raise_on_failure=False)

        @task
        def compare(summaries: list[dict[str, Any]]) -> dict[str, Any]:
            return dag_tasks.compare_versions(list(summaries))

        clusters = provision_cluster.expand(run=plan())
        ran = run_groups.expand(run=clusters)
        audit = SparkSubmitOperator.partial(**AUDIT).expand_kwargs(ran.map(lambda r: {"application_args": r["application_args"], "jars": r["jars"]}))
        validated = validate.expand(audit=ran)
        audit >> validated
        audit >> teardown_cluster.expand(run=clusters)
        compare(validated)

    return versions_dag()
