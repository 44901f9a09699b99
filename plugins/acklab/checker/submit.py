"""Submitting the Spark audit: the arguments the DAG's SparkSubmitOperator and the CLI's
spark-submit share, and the CLI's spark-submit itself."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path

from acklab.base.paths import cache_dir, spark_job
from acklab.checker.spark_job import APPLICATION, SPARK_CONF
from acklab.store.runs import AuditDir, RunDir

SUBMIT_TIMEOUT_S = 3600.0
DRIVER_OPTIONS = "spark.driver.extraJavaOptions"


class AuditError(RuntimeError):
    """spark-submit failed or timed out; the message quotes its output's end."""


@dataclass(frozen=True)
class AuditJob:
    """What to submit: the job file, its arguments and Spark conf."""

    application: str
    manifest: Path
    out: AuditDir
    conf: dict[str, str] = field(default_factory=lambda: with_class_archive(SPARK_CONF))
    extra_args: tuple[str, ...] = ()

    @property
    def application_args(self) -> list[str]:
        return ["--manifest", str(self.manifest), "--out", str(self.out.root), *self.extra_args]


def class_archive() -> Path:
    """The Spark driver's class-data-sharing archive (AppCDS) for this pyspark, dumped by `make setup`
    (`acklab.tools.spark_classes`): the driver JVM maps the classes it would otherwise load and
    verify from ~250 jars. A JVM that cannot use it (another JDK) warns and starts without it."""
    return cache_dir() / "spark" / version("pyspark") / "driver.jsa"


def with_class_archive(conf: Mapping[str, str]) -> dict[str, str]:
    """`conf` with the driver JVM started from `class_archive()`, when setup dumped one."""
    archive = class_archive()
    return with_driver_options(conf, f"-XX:SharedArchiveFile={archive}") if archive.exists() else dict(conf)


def with_driver_options(conf: Mapping[str, str], *options: str) -> dict[str, str]:
    """`conf` with `options` added to the driver JVM's."""
    return {**conf, DRIVER_OPTIONS: " ".join(filter(None, (conf.get(DRIVER_OPTIONS, ""), *options)))}


def audit_job(run: RunDir, out: AuditDir | None = None, topic_records: Path | None = None) -> AuditJob:
    """The audit of `run` (output in its `audit/` unless `out`; from an archive of topic records
    instead of Kafka if `topic_records`)."""
    return AuditJob(
        application=str(spark_job(APPLICATION)),
        manifest=run.manifest,
        out=out or run.audit,
        extra_args=("--topic-records", str(topic_records)) if topic_records else (),
    )


def submit(job: AuditJob, master: str | None = None, timeout_s: float = SUBMIT_TIMEOUT_S) -> Path:
    """Run `spark-submit` for `job` (the CLI's path; the DAG uses SparkSubmitOperator); return matrix.json."""
    venv_bin = Path(sys.executable).parent
    spark_submit = str(venv_bin / "spark-submit") if (venv_bin / "spark-submit").exists() else shutil.which("spark-submit")
    command = [str(spark_submit), "--master", master or os.environ.get("ACKLAB_SPARK_MASTER", "local[*]")]
    for key, value in job.conf.items():
        command += ["--conf", f"{key}={value}"]
    # spark-submit locates pyspark with the first python3 on PATH: make it this interpreter's.
    env = {**os.environ, "PATH": f"{venv_bin}{os.pathsep}{os.environ.get('PATH', '')}", "PYSPARK_PYTHON": sys.executable}
    try:
        result = subprocess.run(
            [*command, job.application, *job.application_args], capture_output=True, text=True, env=env, timeout=timeout_s
        )
    except subprocess.TimeoutExpired as exc:
        raise AuditError(f"spark-submit timed out after {timeout_s:.0f}s: {str(exc.stderr or '')[-2000:]}") from None
    if result.returncode != 0:
        raise AuditError(f"spark-submit failed ({result.returncode}):\n{result.stderr[-3000:]}")
    return job.out.matrix_json
