"""Scenario planning and execution: one fresh topic per scenario, load under a fault, evidence out.

The same functions back the CLI and the DAG tasks, so both run a scenario the same way.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import threading
import time
from concurrent.futures import ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from acklab.cluster.base import Cluster
from acklab.model import Expected, expect
from acklab.nemesis.catalog import FAULT_NAMES, FAULTS, FaultContext
from acklab.nemesis.events import FaultOutcome
from acklab.nemesis.runner import Nemesis
from acklab.nemesis.schedule import FaultStep, schedule_for
from acklab.nemesis.watch import LeaderWatch
from acklab.paths import runs_dir
from acklab.profiles import Partitioner, ProducerProfile, catalog, get_profile, largest_accepted_value
from acklab.topology import SpecError, Topology, load_topology, parse_model
from acklab.workload.producer import START_TIMEOUT_S, STATS_FILE, LoadResult, LoadSpec, Progress, run_load
from acklab.workload.records import key

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
    side_by_side: bool = Field(
        True, description="run the profiles of one fault together on one cluster (false: one scenario at a time)"
    )

    @model_validator(mode="after")
    def _unique_profiles(self) -> RunParams:
        if len(set(self.profiles)) != len(self.profiles):
            raise ValueError(f"profiles must be distinct: {self.profiles}")
        return self


def standard_matrix() -> RunParams:
    """The daily matrix: the 3-broker RF=3 min.insync=2 topology x every profile x every fault,
    20 s of load at 2,000 msg/s per scenario (the fault at 2 s for 10 s)."""
    return RunParams(profiles=sorted(catalog()), faults=list(FAULT_NAMES), messages=40_000, rate=2000.0)


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

    def groups(self) -> list[list[ScenarioPlan]]:
        """Scenarios run together: all profiles of a fault (side_by_side), else one each."""
        if not self.params.side_by_side:
            return [[scenario] for scenario in self.scenarios]
        by_fault: dict[str, list[ScenarioPlan]] = {}
        for scenario in self.scenarios:
            by_fault.setdefault(scenario.fault, []).append(scenario)
        return list(by_fault.values())


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
    longest_key = key(params.producers - 1, params.keys - 1).encode()
    for name in params.profiles:
        profile = get_profile(name)
        if params.partitioner is not None:
            profile = parse_model(ProducerProfile, {**profile.model_dump(), "partitioner": params.partitioner}, "params.partitioner")
        if (largest := largest_accepted_value(profile.producer_config(), longest_key, params.message_bytes)) is not None:
            raise SpecError(
                f"params.message_bytes: {params.message_bytes}-byte messages are refused by the producer of profile "
                f"{name} (librdkafka: MSG_SIZE_TOO_LARGE, above its message.max.bytes); at most {largest} bytes fit"
            )
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
    """Run every scenario group of `plan` on `cluster`; return the manifest.

    Scenarios of later plans on the same cluster and run folder are appended to the manifest, so one
    audit covers them all."""
    _check_unique(plan, run_dir)
    for index in range(len(plan.groups())):
        run_group(cluster, plan, index, run_dir, progress)
    return write_manifest(cluster, plan, run_dir)


def write_manifest(cluster: Cluster, plan: RunPlan, run_dir: Path) -> Path:
    """Append the plan's scenario entries (each group wrote `scenarios/<name>/entry.json`) to the
    run's manifest; a missing entry is an error, never a silently smaller matrix."""
    path = run_dir / MANIFEST
    _check_unique(plan, run_dir)
    manifest: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {
        "run_id": run_dir.name,
        "bootstrap_servers": cluster.direct_bootstrap_servers,
        "topology": plan.topology.model_dump(),
        "params": [],
        "scenarios": [],
    }
    missing = [s.name for s in plan.scenarios if not _entry_path(run_dir, s.name).exists()]
    if missing:
        raise RuntimeError(f"scenarios without evidence (their group did not finish): {missing}")
    manifest["params"].append(plan.params.model_dump())
    manifest["scenarios"] += [json.loads(_entry_path(run_dir, s.name).read_text()) for s in plan.scenarios]
    _write_json(path, manifest)
    return path


def _check_unique(plan: RunPlan, run_dir: Path) -> None:
    path = run_dir / MANIFEST
    taken = {entry["scenario"] for entry in json.loads(path.read_text())["scenarios"]} if path.exists() else set()
    if clash := taken & {scenario.name for scenario in plan.scenarios}:
        raise SpecError(f"scenarios already in this run: {sorted(clash)}")


def _entry_path(run_dir: Path, scenario: str) -> Path:
    return run_dir / "scenarios" / scenario / "entry.json"


def run_group(cluster: Cluster, plan: RunPlan, index: int, run_dir: Path, progress: Progress | None = None) -> list[dict[str, Any]]:
    """Run scenario group `index`: the profiles of one fault side by side on fresh topics with the same
    replica assignment (so the fault's target, partition 0 of the first topic, has the same leader
    and followers in every topic), one fault schedule for all, then the health gate.

    Writes and returns each scenario's manifest entry."""
    group = plan.groups()[index]
    group_started = time.time()
    topology = plan.topology
    topics = [f"acklab-{run_dir.name}-{scenario.name}" for scenario in group]
    brokers = sorted(topology.broker_ids)
    assignment = [
        [brokers[(p + index + r) % len(brokers)] for r in range(topology.replication_factor)]
        for p in range(topology.partitions)
    ]
    nemesis = Nemesis(FaultContext(cluster, topics[0], topology.min_insync_replicas), group[0].schedule)
    moves_leaders = any(FAULTS[step.fault].moves_leaders for step in group[0].schedule)
    watch = None if moves_leaders else LeaderWatch(cluster, topics)
    log.info("group %d (%s): %d scenario(s), %d messages each", index, group[0].fault, len(group), plan.load.messages)
    topics_ready = threading.Event()

    def start_faults() -> None:  # once every producer is connected and every topic fully in sync
        if not topics_ready.wait(START_TIMEOUT_S):
            raise TimeoutError("topics of the group not ready")
        if watch is not None:
            watch.start()
        nemesis.start()

    ready = threading.Barrier(len(group), action=start_faults, timeout=START_TIMEOUT_S + 30)
    totals = _GroupProgress(len(group), progress)

    def load(n: int) -> LoadResult:
        scenario = group[n]
        send_log = run_dir / "scenarios" / scenario.name / "send_log.parquet"
        try:
            return run_load(cluster.bootstrap_servers, topics[n], scenario.profile, plan.load, send_log, totals.of(n), ready.wait)
        except BaseException:
            ready.abort()  # the other loads stop waiting for this one
            raise

    with ThreadPoolExecutor(len(group), thread_name_prefix="load") as pool:
        futures = [pool.submit(load, n) for n in range(len(group))]  # producers start while topics are created
        try:
            admin = cluster.admin()
            admin.create_topics(topics, assignment)
            for topic in topics:
                admin.wait_in_sync(topic, 60)
            topics_ready.set()
        except BaseException:
            ready.abort()
            raise
        finally:
            wait(futures)
            unplanned = watch.stop() if watch is not None else None
    failed = [f.exception() for f in futures if f.exception() is not None]
    if failed:
        if nemesis.started:
            nemesis.abort()
        raise failed[0]  # type: ignore[misc]
    outcome = nemesis.join()
    cluster.wait_healthy(120)
    timing = {"index": index, "started": group_started, "ended": time.time(), "scenarios": len(group)}
    entries = [
        {**_entry(plan, scenario, topic, future.result(), outcome, unplanned), "group": timing}
        for scenario, topic, future in zip(group, topics, futures, strict=True)
    ]
    for scenario, entry in zip(group, entries, strict=True):
        _write_json(_entry_path(run_dir, scenario.name), entry)
    return entries


class _GroupProgress:
    """Sums the progress of a group's loads and reports it about once a second."""

    def __init__(self, loads: int, sink: Progress | None) -> None:
        self._totals = [(0, 0, 0)] * loads
        self._sink = sink
        self._lock = threading.Lock()
        self._next = 0.0

    def of(self, n: int) -> Progress | None:
        if self._sink is None:
            return None

        def report(sent: int, acked: int, failed: int) -> None:
            with self._lock:
                self._totals[n] = (sent, acked, failed)
                now = time.monotonic()
                if now >= self._next:
                    self._next = now + 0.9
                    self._sink(*(sum(column) for column in zip(*self._totals, strict=True)))  # type: ignore[misc]

        return report


def _entry(
    plan: RunPlan, scenario: ScenarioPlan, topic: str, result: LoadResult, outcome: FaultOutcome, unplanned: str | None
) -> dict[str, Any]:
    """The scenario's manifest entry: what was planned, what the load saw, what the fault did.

    Evidence is incomplete when the load did not send what it planned (`load_shortfall`), when a
    fault started, or first showed its effect, after the load ended, or when a leader changed during
    a load whose schedule moves no leader (`unplanned`)."""
    late = [e for e in outcome.timeline if max(e.started, e.effective_at or 0.0) > result.ended]
    incomplete_reason = load_shortfall(result)
    if late:
        incomplete_reason = f"fault {late[0].fault} started or took effect after the load ended"
    if unplanned is not None:
        incomplete_reason = f"unplanned leader change during the load ({unplanned}); no fault of the schedule moves leaders"
    log.info(
        "scenario %s: sent=%d acked=%d failed=%d unknown=%d errors=%s; fault: %s",
        scenario.name, result.sent, result.acked, result.failed, result.unknown, result.errors, outcome.effect,
    )
    send_log = Path("scenarios") / scenario.name / "send_log.parquet"
    return {
        "scenario": scenario.name,
        "profile": scenario.profile.name,
        "producer_config": scenario.profile.producer_config(),
        "fault": scenario.fault,
        "guarantee": str(scenario.expected.guarantee),
        "expectations": [e.as_dict() for e in scenario.expected.expectations],
        "topic": topic,
        "partitions": plan.topology.partitions,
        "send_log": str(send_log),
        "load_started": result.started,
        "load_ended": result.ended,
        "planned": result.planned,
        "delivery_errors": result.errors,
        "partitioner": scenario.profile.partitioner,
        "producers": plan.load.producers,
        "transactional": scenario.profile.transaction is not None,
        "aborted": result.aborted,
        "stop_reasons": result.stop_reasons,
        "fatal_error": "; ".join(f"{p}: {e}" for p, e in sorted(result.fatal_errors.items())) or None,
        "producer_stats": {"path": str(send_log.parent / STATS_FILE), **result.stats},
        "fault_timeline": outcome.timeline_dicts(),
        "fault_effective": outcome.effective and not late,
        "fault_effect": outcome.effect,
        "evidence_complete": incomplete_reason is None,
        "incomplete_reason": incomplete_reason,
    }


def load_shortfall(result: LoadResult) -> str | None:
    """Why a load's evidence falls short of its plan, or None: messages never sent (other than
    those a fatal error failed, which are a verdict, not a gap), refused by `produce()`, or
    without a delivery report."""
    gaps = []
    if result.unsent:
        why = "; ".join(f"{p}: {r}" for p, r in sorted(result.stop_reasons.items())) or "no reason recorded"
        gaps.append(f"sent {result.sent} of {result.planned} planned messages ({why})")
    if result.refused:
        errors = ", ".join(f"{name} x{count}" for name, count in sorted(result.errors.items()))
        gaps.append(f"produce() refused {result.refused} messages ({errors})")
    if result.unknown:
        gaps.append(f"{result.unknown} messages of unknown outcome (no delivery report, or a transaction whose outcome was never learned)")
    return "; ".join(gaps) or None


def _write_json(path: Path, data: object) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2, default=str))
    os.replace(tmp, path)
