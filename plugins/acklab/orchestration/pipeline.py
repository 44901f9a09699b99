"""The steps of a run, shared by the DAG tasks and the CLI (which calls `run_pipeline`)."""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass
from typing import Any

from acklab.base.paths import expectations_dir
from acklab.checker.gx_validation import validate_matrix
from acklab.checker.submit import audit_job, submit
from acklab.checker.verdict import Verdict
from acklab.cluster.cluster import Cluster
from acklab.model import beliefs
from acklab.orchestration.execution import run_scenarios
from acklab.plan import presets
from acklab.plan.planner import RunPlan, make_plan
from acklab.report.ci_results import run_results, write_run_results
from acklab.report.html import TimelineDrawing, beliefs_page, build_report, write_beliefs_page
from acklab.report.known_bugs import write_known_bugs
from acklab.store.history import RunRecord, record_run, regressions, unverified
from acklab.store.runs import RunDir
from acklab.workload.producer import Progress


def provision(plan: RunPlan, run: RunDir, *, bind_to_pid: int | None, lease_s: float, heartbeat_s: float | None = None) -> Cluster:
    """Start the run's cluster on the plan's backend (reaping orphans of earlier runs first)."""
    return Cluster.provision(
        plan.topology, run.cluster, plan.params.backend, owner_pid=bind_to_pid, heartbeat_s=heartbeat_s, lease_s=lease_s,
        cut_links=plan.cuts_links,
    )


def verdict(run: RunDir) -> Verdict:
    """Validate every matrix row with Great Expectations; Data Docs are rebuilt."""
    return validate_matrix(run, expectations_dir(), run_name=run.run_id)


def write_result(
    run: RunDir, result: Verdict, dag_run: tuple[str, str] | None = None, drawing: TimelineDrawing | None = None
) -> dict[str, Any]:
    """Keep the run in the history (with the Airflow `(dag_id, run_id)` that made it, if any), call
    out regressions, build the HTML report (its timelines from `drawing` when they are being drawn
    already), and record the status and the paths of matrix, Data Docs and report in the run's result."""
    manifest, rows = run.read_manifest(), run.read_matrix()
    statuses = {s.scenario: s.status for s in result.scenarios}
    dag_id, dag_run_id = dag_run or (None, None)
    record_run(
        RunRecord(
            run.run_id, time.time(), result.status, manifest.topology["name"], manifest.topology["kafka_version"],
            manifest.client_version, dag_id, dag_run_id, str(run.report.index),
        ),
        rows, statuses,
    )
    found, unknown_now = regressions(run.run_id), unverified(run.run_id)
    checked = beliefs.summary(
        beliefs.findings(rows, {e.scenario: e.beliefs for e in manifest.scenarios}, statuses)
    )
    observed = presets.observe(run, manifest, rows, statuses)
    if result.data_docs_index is not None:
        write_beliefs_page(result.data_docs_index.parent / beliefs_page(run.run_id), run.run_id, checked)
    html = build_report(run, statuses, result.status, result.data_docs_index, found, unknown_now, checked, observed, result.control_lines(), drawing,
                        caught=[c.scenario for c in result.controls if c.caught])
    summary = {
        "status": result.status,
        "control": result.control_lines(),
        "scenarios": {s.scenario: s.status for s in result.checked},  # the negative control's outcome is "control"
        "regressions": [asdict(r) for r in found],
        "unverified": [asdict(r) for r in unknown_now],
        "beliefs": checked,
        "observations": observed,
        "matrix": str(run.matrix_json),
        "html": str(html),
        "report": str(result.data_docs_index),
    }
    run.write_result(summary)
    write_run_results(run, run_results(run, result, str(html)))
    if presets.is_catalog_bug(manifest):
        write_known_bugs()
    return summary


@dataclass(frozen=True)
class RunResult:
    run: RunDir
    verdict: Verdict
    drawing: TimelineDrawing | None = None  # the report's timelines, drawn while GX validated (`write_result`)


def run_pipeline(
    plan: RunPlan | dict[str, object], run: RunDir | None = None, progress: Progress | None = None, spark_master: str | None = None
) -> RunResult:
    """Plan (unless given a plan), provision, load under faults, audit with Spark and validate — the
    DAG's path, in one process. The plan is kept in the run folder (`run`, which holds it already,
    or a new one)."""
    if not isinstance(plan, RunPlan):
        plan = make_plan(plan)
    if run is None:
        run = RunDir.create()
        run.write_plan(plan)
    cluster = provision(plan, run, bind_to_pid=os.getpid(), lease_s=6 * 3600)
    try:
        run_scenarios(cluster, plan, run, progress)
        submit(audit_job(run), spark_master)
    finally:
        cluster.teardown()
    drawing = TimelineDrawing(run)
    try:
        return RunResult(run, verdict(run), drawing)
    except BaseException:
        drawing.close()
        raise
