"""The Spark audit's fixed submission: its entry point under spark/ and its Spark conf, shared by
the DAGs' SparkSubmitOperator (read at parse time: this module imports nothing) and the CLI."""

from __future__ import annotations

APPLICATION = "delivery_matrix.py"  # the spark-submit entry under spark/
SPARK_CONF = {
    "spark.ui.enabled": "false",
    # Spark's INFO lines would each be parsed again by the Airflow task log.
    "spark.log.level": "WARN",
}
