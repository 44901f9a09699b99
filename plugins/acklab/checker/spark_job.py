"""The Spark audit's fixed submission: its entry point under spark/ and its Spark conf, shared by
the DAGs' SparkSubmitOperator (read at parse time: this module imports nothing) and the CLI."""

from __future__ import annotations

APPLICATION = "delivery_matrix.py"  # the spark-submit entry under spark/
SPARK_CONF = {
    "spark.sql.shuffle.partitions": "8",
    "spark.ui.enabled": "false",
    "spark.driver.memory": "2g",
    # INFO logs ~100 lines per Kafka consumer (one per topic partition): 79k lines for the standard
    # matrix, each one parsed again by the Airflow task log.
    "spark.log.level": "WARN",
}
