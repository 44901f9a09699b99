"""Weekly Airflow DAG: the same delivery matrix on two or more Kafka versions, side by side, with a
comparison report calling out every scenario whose verdict differs between versions."""

from acklab.dag_factory import version_regression_dag
from acklab.maven import DEFAULT_KAFKA_VERSION
from acklab.scenario import standard_matrix

dag = version_regression_dag("kafka_version_regression", "@weekly", standard_matrix(), [DEFAULT_KAFKA_VERSION, "3.9.2"], __doc__)
