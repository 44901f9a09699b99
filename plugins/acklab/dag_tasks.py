"""Task bodies of the delivery DAGs: thin wrappers over `acklab.pipeline`, returning XCom-able dicts."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

from acklab.checker.audit import audit_job
from acklab.pipeline import attach, matrix_rows, provision, verdict, write_result
from acklab.scenario import RunParams, make_plan, new_run_dir, run_scenarios
from acklab.workload.producer import ProgressMeter

log = logging.getLogger(__name__)


def plan_run(params: dict[str, Any]) -> dict[str, Any]:
    """Validate params (fails before any cluster starts) and open a run folder."""
    fields = {k: v for k, v in params.items() if k in RunParams.model_fields}
    plan = make_plan(fields)
    run_dir = new_run_dir()
    log.info("run %s: %d scenario(s) on %s (Kafka %s)", run_dir.name, len(plan.scenarios), plan.topology.name, plan.topology.kafka_version)
    return {"run_dir": str(run_dir), "params": plan.params.model_dump()}


def provision_cluster(run: dict[str, Any], lease_s: float) -> dict[str, Any]:
    """Start the cluster. Bound to this process when ACKLAB_BIND_CLUSTER_TO_PID=1 (`airflow dags test`),
    otherwise bounded by the lease; either way an orphan is reaped at the next start."""
    bind = os.getpid() if os.environ.get("ACKLAB_BIND_CLUSTER_TO_PID") == "1" else None
    cluster = provision(make_plan(run["params"]), Path(run["run_dir"]), bind_to_pid=bind, lease_s=lease_s)
    return {**run, "bootstrap_servers": cluster.bootstrap_servers}


def load_under_faults(run: dict[str, Any]) -> dict[str, Any]:
    """Run every scenario; return the audit job for SparkSubmitOperator."""
    run_dir = Path(run["run_dir"])
    manifest = run_scenarios(attach(run_dir), make_plan(run["params"]), run_dir, ProgressMeter(log.info))
    job = audit_job(manifest)
    return {**run, "manifest": str(manifest), "audit_out": str(job.out), "jars": job.jars, "matrix_json": str(job.matrix_json)}


def teardown_cluster(run: dict[str, Any]) -> None:
    attach(Path(run["run_dir"])).teardown()


def validate(audit: dict[str, Any]) -> dict[str, Any]:
    """GX verdict per matrix row; raises (failing the run) unless every scenario passes."""
    matrix_json = Path(audit["matrix_json"])
    result = verdict(matrix_json)
    for row in matrix_rows(matrix_json):
        log.info("matrix row: %s", json.dumps(row))
    for line in result.summary_lines():
        log.info("%s", line)
    summary = write_result(matrix_json, result)
    for regression in summary["regressions"]:
        log.error("REGRESSION %(scenario)s: %(status)s now, passed in green run %(last_green_run)s", regression)
    log.info("html report: %s", summary["html"])
    log.info("matrix: %s", matrix_json)
    log.info("report: %s", result.data_docs_index)
    result.raise_for_status()
    return summary

