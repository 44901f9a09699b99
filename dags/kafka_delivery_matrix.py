"""Daily Airflow DAG: the standard delivery matrix — 3 brokers, RF=3, min.insync.replicas=2, every
producer profile x every fault (the baseline included; the node-to-node link cuts where the host can
cut links: root, iptables, cgroup2), audited by Spark, validated by Great Expectations."""

from acklab.orchestration.dags import delivery_matrix_dag
from acklab.plan.params import standard_matrix

dag = delivery_matrix_dag("kafka_delivery_matrix", "@daily", standard_matrix(), __doc__, ["matrix"])

if __name__ == "__main__":
    dag.test()
