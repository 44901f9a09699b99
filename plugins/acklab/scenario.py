"""Scenario planning and execution: one fresh topic per scenario, load under a fault, evidence out.

The same functions back the CLI and the DAG tasks, so both run a scenario the same way.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import time
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from acklab.cluster.base import Cluster
from acklab.model import Expected, expect
from acklab.nemesis.catalog import FaultContext
from acklab.nemesis.runner import Nemesis
from acklab.nemesis.schedule import FaultStep, schedule_for
from acklab.paths import runs_dir
from acklab.profiles import Partitioner, ProducerProfile, get_profile
from acklab.topology import SpecError, Topology, load_topology, parse_model
from acklab.workload.producer import STATS_FILE, LoadSpec, Progress, run_load

log = logging.getLogger(__name__)
MANIFEST = "manifest.json"


class RunParams(BaseModel):
    """What a user chooses for a run (DAG params, CLI options); validated before anything starts.

    The fault lasts 10 s by default: when the killed leader is also the active KRaft controller,
    a new controller must be elected and then fence the broker (session timeout) before
    leadership moves, which takes 5-7 s here."""

    model_config = ConfigDict(extra="forbid")
    topology: str = "three-brokers"
    kafka_version: str | None = None
    backend: Literal["local", "docker"] = Field("local", description="local JVMs or Docker containers")
    profiles: list[str] = Field(default_factory=lambda: ["leader-ack", "idempotent"], min_length=1)
    faults: list[str] = Field(default_factory=lambda: ["leader-kill"], min_length=1)
    schedule: list[FaultStep] | None = Field(None, description="explicit fault schedule; replaces `faults`")
    messages: int = Field(30000, ge=1)
    duration_s: float | None = Field(None, gt=0, description="stop each load after this long (messages is then a cap)")
    rate: float | None = Field(5000.0, gt=0)
    message_bytes: int = Field(100, ge=16)
    keys: int = Field(16, ge=1, description="keys per producer")
    producers: int = Field(1, ge=1, description="producer processes per scenario")
    partitioner: Partitioner | None = Field(None, description="overrides the profiles' partitioner")
    fault_at_s: float = Field(2.0, ge=0)
    fault_duration_s: float = Field(10.0, gt=0)

    @model_validator(mode="after")
    def _unique_profiles(self) -> RunParams:
        if len(set(self.profiles)) != len(self.profiles):
            raise ValueError(f"profiles must be distinct: {self.profiles}")
        return self


class ScenarioPlan(BaseModel):
    name: str
    profile: ProducerProfile
    fault: str
    schedule: list[FaultStep]
    expected: Expected


class RunPlan(BaseModel):
    """A validated run: topology, load and scenarios (profile x fault schedule)."""

    params: RunParams
    topology: Topology
    load: LoadSpec
    scenarios: list[ScenarioPlan]


def make_plan(params: RunParams | dict[str, object]) -> RunPlan:
    """Resolve names and check every constraint; raise SpecError naming the bad field."""
    if not isinstance(params, RunParams):
        params = parse_model(RunParams, params, "params")
    topology = load_topology(params.topology)
    if params.kafka_version:
        topology = parse_model(Topology, {**topology.model_dump(), "kafka_version": params.kafka_version}, "params.kafka_version")
    schedules = _fault_schedules(params)
    load = parse_model(LoadSpec, params.model_dump(include=set(LoadSpec.model_fields)), "params")
    if params.rate is not None or params.duration_s is not None:
        load_s = min(params.messages / params.rate if params.rate else float("inf"), params.duration_s or float("inf"))
        for fault, steps in schedules.items():
            late = [step for step in steps if step.at_s >= load_s]
            if late:
                raise SpecError(
                    f"params.fault_at_s: {fault} at {late[0].at_s}s would start after the load ends "
                    f"(after {load_s:.1f}s: {params.messages} messages at {params.rate or 'max'}/s, duration_s={params.duration_s})"
                )
    scenarios = []
    for name in params.profiles:
        profile = get_profile(name)
        if params.partitioner is not None:
            profile = parse_model(ProducerProfile, {**profile.model_dump(), "partitioner": params.partitioner}, "params.partitioner")
        for fault, steps in schedules.items():
            scenarios.append(
                ScenarioPlan(
                    name=f"{name}__{fault}",
                    profile=profile,
                    fault=fault,
                    schedule=steps,
                    expected=expect(profile, topology, steps),
                )
            )
    return RunPlan(params=params, topology=topology, load=load, scenarios=scenarios)


def _fault_schedules(params: RunParams) -> dict[str, list[FaultStep]]:
    """Fault label -> schedule: one per catalog name in `faults`, or the explicit `schedule`."""
    if params.schedule is not None:
        return {"+".join(step.fault for step in params.schedule) or "none": params.schedule}
    if len(set(params.faults)) != len(params.faults):
        raise SpecError(f"params.faults: must be distinct: {params.faults}")
    return {fault: schedule_for(fault, params.fault_at_s, params.fault_duration_s) for fault in params.faults}


def new_run_dir() -> Path:
    """A fresh run folder in the run store: `runs/<UTC time>-<random>`."""
    run_id = time.strftime("%Y%m%dT%H%M%S", time.gmtime()) + "-" + secrets.token_hex(3)
    path = runs_dir() / run_id
    path.mkdir(parents=True)
    return path


def run_scenarios(cluster: Cluster, plan: RunPlan, run_dir: Path, progress: Progress | None = None) -> Path:
    """Run every scenario of `plan` on `cluster`; return the manifest (written after each scenario).

    Scenarios of later plans on the same cluster and run folder are appended to the manifest, so one
    audit covers them all."""
    path = run_dir / MANIFEST
    manifest: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {
        "run_id": run_dir.name,
        "bootstrap_servers": cluster.direct_bootstrap_servers,
        "topology": plan.topology.model_dump(),
        "params": [],
        "scenarios": [],
    }
    manifest["params"].append(plan.params.model_dump())
    taken = {entry["scenario"] for entry in manifest["scenarios"]}
    if clash := taken & {scenario.name for scenario in plan.scenarios}:
        raise SpecError(f"scenarios already in this run: {sorted(clash)}")
    for scenario in plan.scenarios:
        topic = f"acklab-{run_dir.name}-{len(manifest['scenarios'])}"
        manifest["scenarios"].append(run_scenario(cluster, plan, scenario, topic, run_dir, progress))
        _write_json(path, manifest)
    return path


def run_scenario(
    cluster: Cluster, plan: RunPlan, scenario: ScenarioPlan, topic: str, run_dir: Path, progress: Progress | None
) -> dict[str, object]:
    """Fresh topic, load under the fault schedule, recovery; return the scenario's manifest entry."""
    topology = plan.topology
    admin = cluster.admin()
    admin.create_topic(topic, topology.partitions, topology.replication_factor)
    admin.wait_in_sync(topic, 60)
    send_log = Path("scenarios") / scenario.name / "send_log.parquet"
    nemesis = Nemesis(FaultContext(cluster, topic, topology.min_insync_replicas), scenario.schedule)
    log.info("scenario %s: %d messages to %s", scenario.name, plan.load.messages, topic)
    started = False

    def start_faults() -> None:  # with the load, once every producer is connected
        nonlocal started
        nemesis.start()
        started = True

    try:
        result = run_load(
            cluster.bootstrap_servers, topic, scenario.profile, plan.load, run_dir / send_log, progress, start_faults
        )
    except BaseException:
        if started:
            nemesis.abort()
        raise
    outcome = nemesis.join()
    cluster.wait_healthy(120)
    late = [e for e in outcome.timeline if e.started > result.ended]
    incomplete_reason = f"fault started after the load ended ({late[0].fault})" if late else None
    log.info(
        "scenario %s: sent=%d acked=%d failed=%d unknown=%d errors=%s; fault: %s",
        scenario.name, result.sent, result.acked, result.failed, result.unknown, result.errors, outcome.effect,
    )
    return {
        "scenario": scenario.name,
        "profile": scenario.profile.name,
        "producer_config": scenario.profile.producer_config(),
        "fault": scenario.fault,
        "guarantee": str(scenario.expected.guarantee),
        "expectations": [e.as_dict() for e in scenario.expected.expectations],
        "topic": topic,
        "partitions": topology.partitions,
        "send_log": str(send_log),
        "load_started": result.started,
        "load_ended": result.ended,
        "delivery_errors": result.errors,
        "partitioner": scenario.profile.partitioner,
        "producers": plan.load.producers,
        "transactional": scenario.profile.transaction is not None,
        "aborted": result.aborted,
        "producer_errors": result.producer_errors,
        "producer_stats": {"path": str(send_log.parent / STATS_FILE), **result.stats},
        "fault_timeline": outcome.timeline_dicts(),
        "fault_effective": outcome.effective and not late,
        "fault_effect": outcome.effect,
        "evidence_complete": incomplete_reason is None,
        "incomplete_reason": incomplete_reason,
    }


def _write_json(path: Path, data: object) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2, default=str))
    os.replace(tmp, path)
