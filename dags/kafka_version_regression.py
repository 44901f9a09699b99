"""Weekly Airflow DAG: the same delivery matrix on every (Kafka version, producer client version)
pair, side by side, with a comparison report calling out every scenario whose verdict differs."""

from acklab.base.maven import DEFAULT_KAFKA_VERSION
from acklab.orchestration.dags import version_regression_dag
from acklab.plan.params import standard_matrix

dag = version_regression_dag("kafka_version_regression", "@weekly", standard_matrix(), [DEFAULT_KAFKA_VERSION, "3.9.2"], [], __doc__)

if __name__ == "__main__":
    dag.test()
