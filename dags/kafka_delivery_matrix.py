"""Daily Airflow DAG: the standard delivery matrix — 3 brokers, RF=3, min.insync.replicas=2, every
producer profile x every fault (the baseline included), audited by Spark, validated by Great Expectations."""

from acklab.dag_factory import delivery_matrix_dag
from acklab.scenario import standard_matrix

dag = delivery_matrix_dag("kafka_delivery_matrix", "@daily", standard_matrix(), __doc__, ["matrix"])
