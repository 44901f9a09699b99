"""The steps of a run, shared by the DAG tasks and the CLI (which calls `run_pipeline`)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from acklab.checker.audit import audit_job, submit
from acklab.checker.verdict import Verdict, validate_matrix
from acklab.cluster.local import LocalCluster
from acklab.paths import RESULT_FILE, expectations_dir
from acklab.scenario import RunPlan, make_plan, new_run_dir, run_scenarios
from acklab.workload.producer import Progress

CLUSTER_DIR = "cluster"


def provision(plan: RunPlan, run_dir: Path, *, bind_to_pid: int | None, lease_s: float) -> LocalCluster:
    """Start the run's cluster in `<run>/cluster` (reaping orphans of earlier runs first)."""
    return LocalCluster.provision(plan.topology, run_dir / CLUSTER_DIR, owner_pid=bind_to_pid, lease_s=lease_s)


def attach(run_dir: Path) -> LocalCluster:
    return LocalCluster.attach(run_dir / CLUSTER_DIR)


def verdict(matrix_json: Path) -> Verdict:
    """Validate every matrix row with Great Expectations; Data Docs are rebuilt."""
    return validate_matrix(matrix_json, expectations_dir(), run_name=matrix_json.parent.parent.name)


def write_result(matrix_json: Path, result: Verdict) -> dict[str, object]:
    """Record the run's status and the paths of its matrix and report in `<run>/result.json`."""
    summary = {
        "status": result.status,
        "scenarios": {s.scenario: s.status for s in result.scenarios},
        "matrix": str(matrix_json),
        "report": str(result.data_docs_index),
    }
    (matrix_json.parent.parent / RESULT_FILE).write_text(json.dumps(summary, indent=2))
    return summary


def matrix_rows(matrix_json: Path) -> list[dict[str, object]]:
    return json.loads(matrix_json.read_text())


@dataclass(frozen=True)
class RunResult:
    run_dir: Path
    matrix_json: Path
    verdict: Verdict


def run_pipeline(params: dict[str, object], progress: Progress | None = None, spark_master: str | None = None) -> RunResult:
    """Plan, provision, load under faults, audit with Spark and validate — the DAG's path, in one process."""
    plan = make_plan(params)
    run_dir = new_run_dir()
    cluster = provision(plan, run_dir, bind_to_pid=os.getpid(), lease_s=6 * 3600)
    try:
        manifest = run_scenarios(cluster, plan, run_dir, progress)
        matrix_json = submit(audit_job(manifest), spark_master)
    finally:
        cluster.teardown()
    return RunResult(run_dir, matrix_json, verdict(matrix_json))
