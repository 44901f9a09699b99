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

from pydantic import BaseModel, ConfigDict, Field, model_validator

from acklab.cluster.base import Cluster
from acklab.model import Guarantee, expected_guarantee
from acklab.nemesis.faults import FaultStep, Nemesis, schedule_for
from acklab.paths import runs_dir
from acklab.profiles import ProducerProfile, get_profile
from acklab.topology import SpecError, Topology, load_topology, parse_model
from acklab.workload.producer import LoadSpec, Progress, run_load

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
    profiles: list[str] = Field(default_factory=lambda: ["leader-ack", "idempotent"], min_length=1)
    fault: str = "leader-kill"
    messages: int = Field(30000, ge=1)
    rate: float | None = Field(5000.0, gt=0)
    message_bytes: int = Field(100, ge=16)
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
    guarantee: Guarantee


class RunPlan(BaseModel):
    """A validated run: topology, scenarios, fault schedule and load."""

    params: RunParams
    topology: Topology
    schedule: list[FaultStep]
    load: LoadSpec
    scenarios: list[ScenarioPlan]


def make_plan(params: RunParams | dict[str, object]) -> RunPlan:
    """Resolve names and check every constraint; raise SpecError naming the bad field."""
    if not isinstance(params, RunParams):
        params = parse_model(RunParams, params, "params")
    topology = load_topology(params.topology)
    if params.kafka_version:
        topology = parse_model(Topology, {**topology.model_dump(), "kafka_version": params.kafka_version}, "params.kafka_version")
    schedule = schedule_for(params.fault, params.fault_at_s, params.fault_duration_s)
    load = parse_model(LoadSpec, {"messages": params.messages, "rate": params.rate, "message_bytes": params.message_bytes}, "params")
    if schedule and params.rate is not None and params.fault_at_s >= params.messages / params.rate:
        raise SpecError(
            f"params.fault_at_s: the fault at {params.fault_at_s}s would start after the load ends "
            f"({params.messages} messages at {params.rate:.0f}/s take {params.messages / params.rate:.1f}s)"
        )
    scenarios = []
    for name in params.profiles:
        profile = get_profile(name)
        scenarios.append(
            ScenarioPlan(
                name=f"{name}__{params.fault}",
                profile=profile,
                fault=params.fault,
                guarantee=expected_guarantee(profile, topology, params.fault),
            )
        )
    return RunPlan(params=params, topology=topology, schedule=schedule, load=load, scenarios=scenarios)


def new_run_dir() -> Path:
    """A fresh run folder in the run store: `runs/<UTC time>-<random>`."""
    run_id = time.strftime("%Y%m%dT%H%M%S", time.gmtime()) + "-" + secrets.token_hex(3)
    path = runs_dir() / run_id
    path.mkdir(parents=True)
    return path


def run_scenarios(cluster: Cluster, plan: RunPlan, run_dir: Path, progress: Progress | None = None) -> Path:
    """Run every scenario of `plan` on `cluster`; return the manifest (written after each scenario)."""
    manifest: dict[str, object] = {
        "run_id": run_dir.name,
        "bootstrap_servers": cluster.bootstrap_servers,
        "topology": plan.topology.model_dump(),
        "params": plan.params.model_dump(),
        "scenarios": [],
    }
    for index, scenario in enumerate(plan.scenarios):
        entry = run_scenario(cluster, plan, scenario, f"acklab-{run_dir.name}-{index}", run_dir, progress)
        manifest["scenarios"].append(entry)  # type: ignore[union-attr]
        _write_json(run_dir / MANIFEST, manifest)
    return run_dir / MANIFEST


def run_scenario(
    cluster: Cluster, plan: RunPlan, scenario: ScenarioPlan, topic: str, run_dir: Path, progress: Progress | None
) -> dict[str, object]:
    """Fresh topic, load under the fault schedule, recovery; return the scenario's manifest entry."""
    topology = plan.topology
    admin = cluster.admin()
    admin.create_topic(topic, topology.partitions, topology.replication_factor)
    admin.wait_in_sync(topic, 60)
    send_log = Path("scenarios") / scenario.name / "send_log.parquet"
    nemesis = Nemesis(cluster, topic, plan.schedule)
    log.info("scenario %s: %d messages to %s", scenario.name, plan.load.messages, topic)
    nemesis.start()
    try:
        result = run_load(cluster.bootstrap_servers, topic, scenario.profile, plan.load, run_dir / send_log, progress)
    except BaseException:
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
        "guarantee": str(scenario.guarantee),
        "topic": topic,
        "partitions": topology.partitions,
        "send_log": str(send_log),
        "load_started": result.started,
        "load_ended": result.ended,
        "delivery_errors": result.errors,
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
