"""Airflow DAG for many workers: the standard delivery matrix dealt into shares, each run whole on
whichever worker takes it (its own cluster, its groups, its topics read back into the records
archive, teardown, evidence published to the evidence store), then audited by Spark from the archive
and validated by Great Expectations. Manual: trigger it with `shares` and any params."""

from acklab.orchestration.dags import delivery_matrix_shares_dag
from acklab.plan.params import standard_matrix

dag = delivery_matrix_shares_dag("kafka_delivery_matrix_shares", None, standard_matrix(), __doc__, ["matrix", "shares"])

if __name__ == "__main__":
    dag.test()
