"""The Spark audit's fixed submission: its entry point under spark/ and its Spark conf, shared by
the DAGs' SparkSubmitOperator (read at parse time: this module imports nothing) and the CLI."""

from __future__ import annotations

APPLICATION = "delivery_matrix.py"  # the spark-submit entry under spark/
SPARK_CONF = {
    # Measured on the 295-scenario standard matrix's archive (11.8M messages, 2 cores): 184 s with
    # 8 shuffle partitions and 2g (the heap at 95 %), 148 s with 4g, 131 s with 4g and 4 partitions.
    "spark.sql.shuffle.partitions": "4",
    "spark.ui.enabled": "false",
    "spark.driver.memory": "4g",
    # The throughput collector: re-audits of that archive took 82.9-87.5 s (5 runs) with it, 87.2-95.5 s
    # (4 runs) with G1, Java's default, whose barriers and concurrent work cost more than its short pauses.
    "spark.driver.extraJavaOptions": "-XX:+UseParallelGC",
    "spark.executor.extraJavaOptions": "-XX:+UseParallelGC",
    # The send logs (one file per scenario) are listed by the driver, not by a Spark job of a task
    # per file once there are more than 32 (295 tasks, 2.3 s for the standard matrix).
    "spark.sql.sources.parallelPartitionDiscovery.threshold": "4096",
    # INFO logs ~100 lines per Kafka consumer (one per topic partition): 79k lines for the standard
    # matrix, each one parsed again by the Airflow task log.
    "spark.log.level": "WARN",
}
