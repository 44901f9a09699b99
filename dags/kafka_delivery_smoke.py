"""Airflow DAG for CI and quick checks (minutes): acks=1 and idempotent producers under a leader kill,
audited by Spark, validated by Great Expectations. Trigger it with params to run any small matrix."""

from acklab.orchestration.dags import delivery_matrix_dag
from acklab.plan.params import RunParams

dag = delivery_matrix_dag("kafka_delivery_smoke", None, RunParams(messages=60_000), __doc__, ["smoke"])

if __name__ == "__main__":
    dag.test()
