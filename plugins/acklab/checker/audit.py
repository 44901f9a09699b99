"""The Spark audit job: one spark-submit for all scenarios of a run.

`audit_job` gives the arguments that both the DAG's SparkSubmitOperator and the CLI use.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path

from acklab.maven import spark_kafka_jars
from acklab.paths import spark_job

AUDIT_DIR = "audit"
SPARK_CONF = {
    "spark.sql.shuffle.partitions": "8",
    "spark.ui.enabled": "false",
    "spark.driver.memory": "2g",
    # INFO logs ~100 lines per Kafka consumer (one per topic partition): 79k lines for the standard
    # matrix, each one parsed again by the Airflow task log.
    "spark.log.level": "WARN",
}


@dataclass(frozen=True)
class AuditJob:
    """What to submit: the job file, its arguments, the Kafka connector jars and Spark conf."""

    application: str
    application_args: list[str]
    jars: str
    conf: dict[str, str] = field(default_factory=lambda: dict(SPARK_CONF))

    @property
    def out(self) -> Path:
        return Path(self.application_args[self.application_args.index("--out") + 1])

    @property
    def matrix_json(self) -> Path:
        return self.out / "matrix.json"


def audit_job(manifest: Path) -> AuditJob:
    """The audit of the run whose manifest is `manifest` (output in `<run>/audit/`)."""
    jars = spark_kafka_jars(version("pyspark"))
    out = manifest.parent / AUDIT_DIR
    return AuditJob(
        application=str(spark_job("delivery_matrix.py")),
        application_args=["--manifest", str(manifest), "--out", str(out)],
        jars=",".join(str(j) for j in jars),
    )


def submit(job: AuditJob, master: str | None = None) -> Path:
    """Run `spark-submit` for `job` (CLI path; the DAG uses SparkSubmitOperator) and return matrix.json."""
    venv_bin = Path(sys.executable).parent
    spark_submit = str(venv_bin / "spark-submit") if (venv_bin / "spark-submit").exists() else shutil.which("spark-submit")
    command = [str(spark_submit), "--master", master or os.environ.get("ACKLAB_SPARK_MASTER", "local[*]"), "--jars", job.jars]
    for key, value in job.conf.items():
        command += ["--conf", f"{key}={value}"]
    # spark-submit locates pyspark with the first python3 on PATH: make it this interpreter's.
    env = {**os.environ, "PATH": f"{venv_bin}{os.pathsep}{os.environ.get('PATH', '')}", "PYSPARK_PYTHON": sys.executable}
    result = subprocess.run([*command, job.application, *job.application_args], capture_output=True, text=True, env=env)
    if result.returncode != 0:
        raise RuntimeError(f"spark-submit failed ({result.returncode}):\n{result.stderr[-3000:]}")
    return job.matrix_json
