"""Task bodies of the delivery DAGs: thin wrappers over `acklab.pipeline` and `acklab.scenario`,
taking and returning XCom-able dicts. No Airflow import: everything here runs without Airflow."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

from acklab.checker.audit import audit_job
from acklab.cluster.state import STATE_FILE
from acklab.pipeline import CLUSTER_DIR, attach, matrix_rows, provision, verdict, write_result
from acklab.report.compare import build_comparison
from acklab import scenario
from acklab.scenario import RunParams, make_plan, new_run_dir, run_scenarios, write_manifest
from acklab.workload.producer import ProgressMeter

log = logging.getLogger(__name__)


def plan_run(params: dict[str, Any]) -> dict[str, Any]:
    """Validate params (fails before any cluster starts), open a run folder, list the scenario groups."""
    plan = make_plan(_run_params(params))
    run_dir = new_run_dir()
    groups = plan.groups()
    log.info(
        "run %s: %d scenario(s) in %d group(s) on %s (Kafka %s)",
        run_dir.name, len(plan.scenarios), len(groups), plan.topology.name, plan.topology.kafka_version,
    )
    return {"run_dir": str(run_dir), "params": plan.params.model_dump()}


def scenario_groups(run: dict[str, Any]) -> list[dict[str, Any]]:
    """What the DAG maps over: each group's index, fault and scenario names."""
    groups = make_plan(run["params"]).groups()
    return [{"index": i, "fault": group[0].fault, "scenarios": [s.name for s in group]} for i, group in enumerate(groups)]


def plan_versions(params: dict[str, Any]) -> list[dict[str, Any]]:
    """One run per Kafka version in `params["kafka_versions"]`, each validated before anything starts."""
    versions = params.get("kafka_versions") or []
    if len(versions) < 2 or len(set(versions)) != len(versions):
        raise ValueError(f"params.kafka_versions: two or more distinct versions, got {versions}")
    runs = []
    for kafka_version in versions:
        plan = make_plan(_run_params({**params, "kafka_version": kafka_version}))
        runs.append({"run_dir": str(new_run_dir()), "params": plan.params.model_dump()})
    log.info("versions %s: %d scenario(s) each", versions, len(plan.scenarios))
    return runs


def _run_params(params: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in params.items() if k in RunParams.model_fields}


def provision_cluster(run: dict[str, Any], lease_s: float) -> dict[str, Any]:
    """Start the cluster. Bound to this process when ACKLAB_BIND_CLUSTER_TO_PID=1 (`airflow dags test`),
    otherwise bounded by the lease; either way an orphan is reaped at the next start."""
    cluster = provision(make_plan(run["params"]), Path(run["run_dir"]), bind_to_pid=_owner(), lease_s=lease_s)
    return {**run, "bootstrap_servers": cluster.bootstrap_servers}


def _owner() -> int | None:
    return os.getpid() if os.environ.get("ACKLAB_BIND_CLUSTER_TO_PID") == "1" else None


def run_group(run: dict[str, Any], group: dict[str, Any]) -> list[str]:
    """Run one scenario group on the run's cluster (the DAG maps this task over the groups)."""
    run_dir = Path(run["run_dir"])
    entries = scenario.run_group(attach(run_dir), make_plan(run["params"]), group["index"], run_dir, ProgressMeter(log.info))
    return [entry["scenario"] for entry in entries]


def collect(run: dict[str, Any]) -> dict[str, Any]:
    """Join the groups' evidence into the manifest; return the audit job for SparkSubmitOperator."""
    run_dir = Path(run["run_dir"])
    return _audit(run, write_manifest(attach(run_dir), make_plan(run["params"]), run_dir))


def run_all_groups(run: dict[str, Any]) -> dict[str, Any]:
    """Every scenario group of the run, one after the other, on its cluster; return the audit job."""
    run_dir = Path(run["run_dir"])
    manifest = run_scenarios(attach(run_dir), make_plan(run["params"]), run_dir, ProgressMeter(log.info))
    return _audit(run, manifest)


def _audit(run: dict[str, Any], manifest: Path) -> dict[str, Any]:
    job = audit_job(manifest)
    return {
        **run, "manifest": str(manifest), "audit_out": str(job.out), "jars": job.jars, "matrix_json": str(job.matrix_json),
        "application_args": ["--manifest", str(manifest), "--out", str(job.out)],
    }


def teardown_cluster(run: dict[str, Any]) -> None:
    """Tear down the run's cluster; nothing to do if it was never provisioned."""
    if (Path(run["run_dir"]) / CLUSTER_DIR / STATE_FILE).exists():
        attach(Path(run["run_dir"])).teardown()


def validate(audit: dict[str, Any], raise_on_failure: bool = True) -> dict[str, Any]:
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
    if raise_on_failure:
        result.raise_for_status()
    return {**summary, "run_dir": str(matrix_json.parent.parent), "kafka_version": audit["params"]["kafka_version"]}


def compare_versions(summaries: list[dict[str, Any]]) -> dict[str, Any]:
    """Side-by-side report of the versions' runs; raises unless every version passed."""
    comparison = build_comparison([Path(s["run_dir"]) for s in summaries])
    log.info("version comparison: %s", comparison.html)
    for line in comparison.summary_lines():
        log.info("%s", line)
    if comparison.status != "pass":
        raise RuntimeError(f"version regression run {comparison.status}: {'; '.join(comparison.summary_lines())}")
    return {"status": comparison.status, "html": str(comparison.html)}
