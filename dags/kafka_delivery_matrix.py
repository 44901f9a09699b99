"""Provision a Kafka cluster, load it under a fault, audit with Spark, validate with Great Expectations."""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import Param, dag, setup, task, teardown

from acklab import dag_tasks
from acklab.checker.audit import SPARK_CONF
from acklab.maven import DEFAULT_KAFKA_VERSION
from acklab.nemesis.catalog import FAULT_NAMES
from acklab.paths import clusters_dir, spark_job
from acklab.profiles import catalog
from acklab.scenario import RunParams

DEFAULTS = RunParams()
LEASE = timedelta(hours=2)
LOADED = "ti.xcom_pull(task_ids='load_under_faults')"


@dag(
    dag_id="kafka_delivery_matrix",
    schedule="@daily",
    start_date=datetime(2026, 1, 1),
    catchup=False,
    max_active_runs=1,
    dagrun_timeout=LEASE,
    tags=["acklab", "kafka"],
    doc_md=__doc__,
    params={
        "topology": Param(DEFAULTS.topology, type="string", enum=sorted(p.stem for p in clusters_dir().glob("*.yaml")),
                          description="Cluster topology (clusters/<name>.yaml)"),
        "kafka_version": Param(None, type=["null", "string"], pattern=r"^(3\.9|4\.\d+)\.\d+$",
                               description=f"Apache Kafka version (3.9.x or 4.x, fetched by `acklab setup`); "
                               f"null = the topology's (default {DEFAULT_KAFKA_VERSION})"),
        "profiles": Param(DEFAULTS.profiles, type="array", minItems=1, uniqueItems=True,
                          items={"type": "string", "enum": sorted(catalog())}, description="Producer profiles, one scenario each"),
        "faults": Param(DEFAULTS.faults, type="array", minItems=1, uniqueItems=True,
                        items={"type": "string", "enum": list(FAULT_NAMES)}, description="Faults, one scenario per profile and fault"),
        "schedule": Param(None, type=["null", "array"], items={"type": "object", "required": ["fault"]},
                          description="Explicit fault schedule [{at_s, fault, target, duration_s, options}]; replaces faults"),
        "messages": Param(DEFAULTS.messages, type="integer", minimum=1, description="Messages per scenario"),
        "rate": Param(DEFAULTS.rate, type=["number", "null"], exclusiveMinimum=0, description="Messages per second (null = max)"),
        "duration_s": Param(DEFAULTS.duration_s, type=["number", "null"], exclusiveMinimum=0,
                            description="Stop each load after this many seconds (messages is then a cap)"),
        "message_bytes": Param(DEFAULTS.message_bytes, type="integer", minimum=16, description="Bytes per message value"),
        "keys": Param(DEFAULTS.keys, type="integer", minimum=1, description="Keys per producer"),
        "producers": Param(DEFAULTS.producers, type="integer", minimum=1, maximum=64, description="Producer processes per scenario"),
        "partitioner": Param(DEFAULTS.partitioner, type=["null", "string"], enum=[None, "consistent_random", "murmur2_random"],
                             description="Key partitioner (null = the profile's)"),
        "fault_at_s": Param(DEFAULTS.fault_at_s, type="number", minimum=0, description="Seconds into the load when the fault starts"),
        "fault_duration_s": Param(DEFAULTS.fault_duration_s, type="number", exclusiveMinimum=0, description="Seconds the fault lasts"),
    },
)
def kafka_delivery_matrix() -> None:
    @task
    def plan(**context) -> dict:
        return dag_tasks.plan_run(dict(context["params"]))

    @setup
    def provision_cluster(run: dict) -> dict:
        return dag_tasks.provision_cluster(run, LEASE.total_seconds())

    @task
    def load_under_faults(run: dict) -> dict:
        return dag_tasks.load_under_faults(run)

    @teardown
    def teardown_cluster(run: dict) -> None:
        dag_tasks.teardown_cluster(run)

    @task
    def validate(audit: dict) -> dict:
        return dag_tasks.validate(audit)

    cluster = provision_cluster(plan())
    loaded = load_under_faults(cluster)
    audit = SparkSubmitOperator(
        task_id="audit",
        conn_id="spark_default",
        application=str(spark_job("delivery_matrix.py")),
        application_args=[
            "--manifest", "{{ %s['manifest'] }}" % LOADED,
            "--out", "{{ %s['audit_out'] }}" % LOADED,
        ],
        jars="{{ %s['jars'] }}" % LOADED,
        conf=SPARK_CONF,
        name="acklab-delivery-matrix",
    )
    loaded >> audit >> teardown_cluster(cluster)
    audit >> validate(loaded)


kafka_delivery_matrix()
