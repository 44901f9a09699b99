"""The steps of a run, shared by the DAG tasks and the CLI (which calls `run_pipeline`)."""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from acklab.checker.audit import audit_job, submit
from acklab.checker.verdict import Verdict, validate_matrix
from acklab.cluster.base import Cluster
from acklab.cluster.docker import DockerCluster
from acklab.cluster.local import LocalCluster
from acklab.cluster.state import ClusterState
from acklab.paths import RESULT_FILE, expectations_dir
from acklab.report.history import record_run, regressions
from acklab.report.html import build_report
from acklab.scenario import RunPlan, make_plan, new_run_dir, run_scenarios
from acklab.workload.producer import Progress

CLUSTER_DIR = "cluster"
BACKENDS: dict[str, type[LocalCluster]] = {"local": LocalCluster, "docker": DockerCluster}


def provision(plan: RunPlan, run_dir: Path, *, bind_to_pid: int | None, lease_s: float) -> Cluster:
    """Start the run's cluster in `<run>/cluster` on the plan's backend (reaping orphans of earlier runs first)."""
    backend = BACKENDS[plan.params.backend]
    return backend.provision(plan.topology, run_dir / CLUSTER_DIR, owner_pid=bind_to_pid, lease_s=lease_s)


def attach(run_dir: Path) -> Cluster:
    """The run's cluster, on the backend recorded in its `cluster.json`."""
    root = run_dir / CLUSTER_DIR
    return BACKENDS[ClusterState.load(root).backend].attach(root)


def verdict(matrix_json: Path) -> Verdict:
    """Validate every matrix row with Great Expectations; Data Docs are rebuilt."""
    return validate_matrix(matrix_json, expectations_dir(), run_name=matrix_json.parent.parent.name)


def write_result(matrix_json: Path, result: Verdict) -> dict[str, Any]:
    """Keep the run in the history, call out regressions, build the HTML report, and record the
    status and the paths of matrix, Data Docs and report in `<run>/result.json`."""
    run_dir = matrix_json.parent.parent
    manifest = json.loads((run_dir / "manifest.json").read_text())
    statuses = {s.scenario: s.status for s in result.scenarios}
    record_run(
        run_dir.name, time.time(), result.status, manifest["topology"]["name"], manifest["topology"]["kafka_version"],
        matrix_rows(matrix_json), statuses,
    )
    found = regressions(run_dir.name)
    html = build_report(run_dir, statuses, result.status, result.data_docs_index, found)
    summary = {
        "status": result.status,
        "scenarios": statuses,
        "regressions": [asdict(r) for r in found],
        "matrix": str(matrix_json),
        "html": str(html),
        "report": str(result.data_docs_index),
    }
    (run_dir / RESULT_FILE).write_text(json.dumps(summary, indent=2))
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
