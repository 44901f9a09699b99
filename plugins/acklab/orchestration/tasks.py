"""Task bodies of the delivery DAGs: thin wrappers over `acklab.orchestration.pipeline` and
`acklab.orchestration.execution`, taking and returning XCom-able dicts. No Airflow import: everything here runs
without Airflow. The DAG files import this module inside task bodies only."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

from acklab.base.spec import SpecError
from acklab.checker.submit import audit_job
from acklab.checker.verdict import GuaranteeViolation
from acklab.cluster.cluster import Cluster
from acklab.cluster.state import STATE_FILE, keep_alive
from acklab.cluster.topology import topology_names
from acklab.model import beliefs
from acklab.orchestration import execution
from acklab.orchestration.pipeline import provision, run_pipeline, verdict, write_result
from acklab.plan import presets
from acklab.plan.params import RunParams
from acklab.plan.planner import RunPlan, librdkafka_clients, make_plan, version_grid
from acklab.plan.preset_files import resolve_presets_file
from acklab.report.compare import build_comparison
from acklab.report.field_notes import build_field_notes
from acklab.report.html import TimelineDrawing
from acklab.store.runs import RunDir
from acklab.workload.producer import ProgressMeter

log = logging.getLogger(__name__)


def plan_run(params: dict[str, Any], create: bool = True) -> dict[str, Any]:
    """Validate params (fails before any cluster starts) and, if `create`, open a run folder holding
    the plan (`plan.json`), which every later task of the run reads."""
    plan = make_plan(_run_params(params))
    if not create:
        return {"params": plan.params.model_dump(mode="json")}
    run = _new_run(plan)
    log.info(
        "run %s: %d scenario(s) in %d group(s) on %s (Kafka %s)",
        run["run_id"], len(plan.scenarios), len(plan.groups()), plan.topology.name, plan.topology.kafka_version,
    )
    return run


def _new_run(plan: RunPlan, **extra: Any) -> dict[str, Any]:
    """A run folder holding `plan`; what the DAG passes on: its folder and id."""
    run = RunDir.create()
    run.write_plan(plan)
    return {"run_dir": str(run.root), "run_id": run.run_id, **extra}


def stored_plan(run: dict[str, Any]) -> RunPlan:
    """The plan the plan task stored in the run's folder."""
    return RunDir(Path(run["run_dir"])).read_plan(RunPlan)


def scenario_groups(run: dict[str, Any]) -> list[dict[str, Any]]:
    """What the DAG maps over: each group's index, label (its fault, and its client where a fault has a
    group per client) and scenario names."""
    plan = stored_plan(run)
    return [{"index": i, "fault": plan.group_label(group), "scenarios": [s.name for s in group]} for i, group in enumerate(plan.groups())]


def plan_versions(params: dict[str, Any], create: bool = True) -> list[dict[str, Any]]:
    """One run per (Kafka version, client) pair of `params["kafka_versions"]` x the clients
    (`params["clients"]`, FAMILY:VERSION, and the confluent-kafka `params["client_versions"]`; with
    neither, the run's own client: a preset's, else the locked confluent-kafka), each validated before
    anything starts (and given a folder holding its plan if `create`)."""
    clients = [*(params.get("clients") or []), *librdkafka_clients(params.get("client_versions"))]
    base = {**_run_params(params), "clients": []}  # here `clients` is the comparison's axis, not clients side by side
    plans = version_grid(base, params.get("kafka_versions") or [], clients or [None])
    if not create:
        return [{"params": plan.params.model_dump(mode="json")} for plan in plans]
    log.info("%d version pair(s): %d scenario(s) each", len(plans), len(plans[0].scenarios))
    return [_new_run(plan, label=f"{plan.topology.kafka_version} / {plan.client.family} {plan.client.version}") for plan in plans]


def _run_params(params: dict[str, Any]) -> dict[str, Any]:
    """The RunParams of a DAG run's params: the preset's, if one is named; a client (or client_version)
    named in the trigger replaces the DAG's default clients."""
    own = {k: v for k, v in params.items() if k in RunParams.model_fields}
    if own.get("client") is not None or own.get("client_version") is not None:
        own["clients"] = []
    if own.get("presets_file") is not None:  # a trigger is untrusted: a NAME in a presets folder, never a path
        resolve_presets_file(own["presets_file"], paths=False)
    if own.get("topology") is not None and own["topology"] not in topology_names():  # likewise a topology of clusters/
        raise SpecError(f"params.topology: {own['topology']!r} is not a topology of clusters/ (a trigger names one: {', '.join(topology_names())})")
    return presets.with_preset(params["preset"], own, own.get("presets_file")) if params.get("preset") else own


def provision_cluster(run: dict[str, Any], lease_s: float) -> dict[str, Any]:
    """Start the cluster. Bound to this process when ACKLAB_BIND_CLUSTER_TO_PID=1 (`airflow dags test`,
    one process), otherwise to the heartbeat the run's tasks keep (`keep_alive`): once no task of
    the run is alive for `heartbeat_s()`, the next provisioning or `acklab reap` removes it."""
    run_dir = RunDir(Path(run["run_dir"]))
    owner = os.getpid() if os.environ.get("ACKLAB_BIND_CLUSTER_TO_PID") == "1" else None
    with keep_alive(run_dir.cluster):
        cluster = provision(
            run_dir.read_plan(RunPlan), run_dir, bind_to_pid=owner, heartbeat_s=None if owner else heartbeat_s(), lease_s=lease_s
        )
    return {**run, "bootstrap_servers": cluster.bootstrap_servers}


def heartbeat_s() -> float:
    """How long a cluster outlives the last sign of life of its run's tasks (ACKLAB_HEARTBEAT_S, default 60)."""
    return float(os.environ.get("ACKLAB_HEARTBEAT_S", "60"))


def run_group(run: dict[str, Any], group: dict[str, Any]) -> list[str]:
    """Run one scenario group on the run's cluster (the DAG maps this task over the groups)."""
    run_dir = RunDir(Path(run["run_dir"]))
    with keep_alive(run_dir.cluster):
        entries = execution.run_group(Cluster.attach(run_dir.cluster), run_dir.read_plan(RunPlan), group["index"], run_dir, ProgressMeter(log.info))
    return [entry.scenario for entry in entries]


def collect(run: dict[str, Any]) -> dict[str, Any]:
    """Join the groups' evidence into the manifest; return the audit job for SparkSubmitOperator."""
    run_dir = RunDir(Path(run["run_dir"]))
    with keep_alive(run_dir.cluster):
        execution.write_manifest(Cluster.attach(run_dir.cluster), run_dir.read_plan(RunPlan), run_dir)
    return _audit(run, run_dir)


def share_list(run: dict[str, Any], shares: int) -> list[dict[str, Any]]:
    """The run's groups dealt into shares (`acklab.orchestration.shares`); its plan published for them."""
    from acklab.orchestration import shares as sharing

    dealt = sharing.share_list(run, shares)
    log.info("run %s: %d share(s): %s", run["run_id"], len(dealt), "; ".join(share["label"] for share in dealt))
    return dealt


def run_share(run: dict[str, Any], share: dict[str, Any], attempt: int, lease_s: float) -> dict[str, Any]:
    """One share, whole, on a cluster of its own, its evidence published (`acklab.orchestration.shares.run_share`);
    the cluster is bound to this process under ACKLAB_BIND_CLUSTER_TO_PID=1, else to the task's heartbeat."""
    from acklab.orchestration import shares as sharing

    owner = os.getpid() if os.environ.get("ACKLAB_BIND_CLUSTER_TO_PID") == "1" else None
    return sharing.run_share(
        run["run_id"], share, attempt, lease_s=lease_s, heartbeat_s=None if owner else heartbeat_s(), owner_pid=owner,
        progress=ProgressMeter(log.info),
    )


def gather(run: dict[str, Any], shares: list[dict[str, Any]]) -> dict[str, Any]:
    """The shares' evidence into the run folder and its manifest; the audit job (from the records archive)."""
    from acklab.orchestration import shares as sharing

    return sharing.gather(run, shares, heartbeat_s())


def run_whole(run: dict[str, Any], attempt: int, lease_s: float) -> dict[str, Any]:
    """The whole run as one share (a version pair): its plan published, its groups on a cluster of
    its own, its evidence published (`run_share`)."""
    (share,) = share_list(run, 1)
    return run_share(run, share, attempt, lease_s)


def gather_whole(run: dict[str, Any]) -> dict[str, Any]:
    """`gather` of a run made of one share (`run_whole`), whatever that share did; the audit job."""
    from acklab.orchestration import shares as sharing

    folder = RunDir(Path(run["run_dir"]))
    return gather(run, sharing.shares_of(folder.read_plan(RunPlan), 1))


def _audit(run: dict[str, Any], run_dir: RunDir) -> dict[str, Any]:
    """The audit job's arguments, for SparkSubmitOperator (templated or mapped)."""
    job = audit_job(run_dir)
    return {**run, "manifest": str(job.manifest), "audit_out": str(job.out.root), "application_args": job.application_args}


def teardown_cluster(run: dict[str, Any]) -> None:
    """Tear down the run's cluster; nothing to do if it was never provisioned."""
    root = RunDir(Path(run["run_dir"])).cluster
    if (root / STATE_FILE).exists():
        Cluster.attach(root).teardown()


def validate(audit: dict[str, Any], dag_run: tuple[str, str]) -> dict[str, Any]:
    """GX verdict per matrix row, kept in the history under `dag_run` (dag id, run id); the summary's
    `failure` says why the run did not pass ("" if it did: `gate` fails the DAG run on it)."""
    run = RunDir(Path(audit["run_dir"]))
    with TimelineDrawing(run) as drawing:  # the report's timelines are drawn while GX validates
        result = verdict(run)
        for row in run.read_matrix():
            log.info("matrix row: %s", json.dumps(row))
        for line in result.summary_lines():
            log.info("%s", line)
        summary = write_result(run, result, dag_run, drawing)
    for regression in summary["regressions"]:
        log.error("REGRESSION %(scenario)s: %(status)s now, passed in green run %(last_green_run)s", regression)
    for lost in summary["unverified"]:
        log.warning("NO LONGER VERIFIED %(scenario)s: incomplete now, passed in green run %(last_green_run)s", lost)
    for item in summary["beliefs"]:
        log.info("%s", beliefs.describe(item))
    for seen in summary["observations"]:
        log.info("%s", presets.describe(seen))
    log.info("html report: %s", summary["html"])
    log.info("matrix: %s", run.matrix_json)
    log.info("report: %s", result.data_docs_index)
    return {**summary, "failure": result.failure(), "run_dir": str(run.root), "kafka_version": run.read_plan(RunPlan).topology.kafka_version}


def gate(summary: dict[str, Any]) -> None:
    """Fail (the task, so the DAG run) unless the validated run passed; say why."""
    if summary["failure"]:
        raise GuaranteeViolation(summary["failure"])
    log.info("every scenario passed: %s", summary["html"])


def compare_versions(summaries: list[dict[str, Any]]) -> dict[str, Any]:
    """Side-by-side report of the versions' runs; raises unless every version passed."""
    comparison = build_comparison([Path(s["run_dir"]) for s in summaries])
    log.info("version comparison: %s", comparison.html)
    for line in comparison.summary_lines():
        log.info("%s", line)
    if comparison.status != "pass":
        raise RuntimeError(f"version regression run {comparison.status}: {'; '.join(comparison.summary_lines())}")
    return {"status": comparison.status, "html": str(comparison.html)}


def plan_presets(params: dict[str, Any], create: bool = True) -> list[dict[str, Any]]:
    """One run per field-notes preset (on `params`' Kafka version and client, if set), each validated
    before anything starts (and given a folder holding its plan if `create`)."""
    versions = {key: params.get(key) for key in ("kafka_version", "client", "client_version")}
    plans = [make_plan(presets.with_preset(name, versions)) for name in presets.FIELD_NOTES]
    log.info("%d preset(s)", len(plans))
    if not create:
        return [{"params": plan.params.model_dump(mode="json")} for plan in plans]
    return [_new_run(plan, label=plan.params.preset) for plan in plans]


def run_preset(run: dict[str, Any], dag_run: tuple[str, str]) -> dict[str, Any]:
    """One preset's run, whole, from its stored plan: its cluster, load, Spark audit (spark-submit),
    GX verdict (kept in the history under `dag_run`) and teardown."""
    run_dir = RunDir(Path(run["run_dir"]))
    result = run_pipeline(run_dir.read_plan(RunPlan), run_dir, progress=ProgressMeter(log.info))
    summary = write_result(result.run, result.verdict, dag_run, result.drawing)
    for line in result.verdict.summary_lines():
        log.info("%s", line)
    for seen in summary["observations"]:
        log.info("%s", presets.describe(seen))
    return {**summary, "run_dir": str(result.run.root)}


def publish_presets(summaries: list[dict[str, Any]]) -> dict[str, Any]:
    """One page over the presets' runs; raises if a preset's guarantee verdict failed."""
    report = build_field_notes([Path(s["run_dir"]) for s in summaries])
    log.info("field notes: %s", report.html)
    for line in report.lines:
        log.info("%s", line)
    if report.status == "fail":
        raise RuntimeError(f"field notes run failed: {'; '.join(line for line in report.lines if not line.startswith(' '))}")
    return {"status": report.status, "html": str(report.html)}


def explore_space(params: dict[str, Any], default_seed: int) -> tuple[Any, int, float]:
    """The exploration DAG's params as (space, seed, budget seconds), checked before anything runs
    (SpecError in one line). A trigger is untrusted: the topology is a name in clusters/, profiles
    and faults the catalog's. Without a seed, `default_seed` (the DAG gives its logical date's
    YYYYMMDD: each week draws anew, and a week's draws are repeated by its date)."""
    from acklab.orchestration.explore import checked_space
    from acklab.plan.explore import check_budget

    if params.get("topology") not in topology_names():
        raise SpecError(f"topology {params.get('topology')!r}: a name in clusters/ ({', '.join(topology_names())})")
    space = checked_space(
        "params", params["topology"], params.get("clients"), params.get("client_versions"), params.get("kafka_versions"),
        params.get("profiles"), params.get("faults"),
    )
    seed = params.get("seed")
    return space, default_seed if seed is None else int(seed), check_budget(float(params["budget_minutes"]))


def explore_run(params: dict[str, Any], default_seed: int, dag_run: tuple[str, str]) -> dict[str, Any]:
    """A whole exploration in this task (`acklab.orchestration.explore`): every trial and confirming
    run kept in the history under `dag_run`. Raises if a finding was confirmed (a violation found)."""
    from acklab.orchestration.explore import explore
    from acklab.store.runs import ExplorationDir

    space, seed, budget_s = explore_space(params, default_seed)

    def execute(trial: dict[str, Any]) -> tuple[RunDir, Any]:
        result = run_pipeline(trial, progress=ProgressMeter(log.info))
        write_result(result.run, result.verdict, dag_run, result.drawing)
        for line in result.verdict.summary_lines():
            log.info("%s", line)
        return result.run, result.verdict

    folder = ExplorationDir.create(seed)
    log.info("exploring for %.0f s with seed %d: %s", budget_s, seed, folder.root)
    summary = explore(space, seed, budget_s, execute, folder=folder)
    confirmed = [f for f in summary["findings"] if f["confirmed"]]
    log.info("%d trials (%d scenarios) in %.0f s; %d confirmed finding(s)", summary["trials"], summary["scenarios"], summary["elapsed_s"], len(confirmed))
    for finding in summary["findings"]:
        log.info("finding %d: %s; known: %s; report: %s; %s", finding["number"], finding["summary"], finding["known"], finding["report"], finding["why_not"] or "")
    if confirmed:
        raise GuaranteeViolation(f"exploration {folder.root.name}: {len(confirmed)} confirmed finding(s): " + "; ".join(f["report"] for f in confirmed))
    return {"exploration": str(folder.summary), "trials": summary["trials"], "findings": len(summary["findings"])}
