"""Run planning: what a user chooses (`RunParams`), the standard matrix, and the validated plan
(topology, load, scenarios with the model's expectations). Cheap to import (no librdkafka, numpy
or pyarrow): DAG files build their params from it. Running a plan is `acklab.orchestration.execution`'s."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from acklab.base.maven import KAFKA_VERSION_PATTERN, SetupError, kafka_libs
from acklab.base.spec import SpecError, parse_model
from acklab.cluster.links import unavailable as links_unavailable
from acklab.cluster.topology import Topology, load_topology
from acklab.model.beliefs import applying
from acklab.model.guarantees import Expected, Setting, expect
from acklab.nemesis.faults import FAULT_NAMES, FAULTS
from acklab.nemesis.schedule import FaultStep, check_schedule, schedule_for
from acklab.plan.presets import preset
from acklab.workload import families
from acklab.workload.client import Client
from acklab.workload.profiles import Partitioner, ProducerProfile, get_profile, profile_from_spec, profile_names
from acklab.workload.spec import MAX_MESSAGES, MAX_PRODUCERS, LoadSpec


class RunParams(BaseModel):
    """What a user chooses for a run (DAG params, CLI options); validated before anything starts.
    The DAG trigger form is generated from this model's JSON schema.

    The fault lasts 10 s by default: when the killed leader is also the active KRaft controller,
    a new controller must be elected and then fence the broker (session timeout) before
    leadership moves, which takes 5-7 s here."""

    model_config = ConfigDict(extra="forbid")
    preset: str | None = Field(None, description="The named preset these params come from (acklab presets), if any")
    topology: str = Field("three-brokers", description="Cluster topology: a name in clusters/ (or a YAML path)")
    kafka_version: str | None = Field(
        None, pattern=KAFKA_VERSION_PATTERN, description="Apache Kafka version (fetched by `acklab setup`); null = the topology's"
    )
    backend: Literal["local", "docker"] = Field("local", description="Local JVMs or Docker containers")
    client_version: str | None = Field(
        None, pattern=families.default().version_pattern,
        description=f"confluent-kafka version of the producers (2.0.2 or later, set up by `acklab setup --client-version`); null = the locked {families.default().locked}",
    )
    profiles: list[str] = Field(
        default_factory=lambda: ["leader-ack", "idempotent"], min_length=1, description="Producer profiles, one scenario per fault"
    )
    custom_profiles: dict[str, dict[str, Any]] | None = Field(
        None,
        description="Your own producer profiles: name -> profile (the catalog's fields, or {librdkafka: {property: value}}); "
        "`profiles` may name them",
    )
    faults: list[str] = Field(default_factory=lambda: ["leader-kill"], min_length=1, description="Faults, one scenario per profile")
    schedule: list[FaultStep] | None = Field(
        None, description="Explicit fault schedule [{at_s, fault, target, duration_s, options, before_load}]; replaces faults"
    )
    messages: int = Field(30000, ge=1, le=MAX_MESSAGES, description="Messages per scenario (a cap with duration_s)")
    duration_s: float | None = Field(None, gt=0, description="Stop each load after this many seconds (messages is then a cap)")
    rate: float | None = Field(5000.0, gt=0, description="Messages per second per scenario (null = as fast as possible)")
    message_bytes: int = Field(100, ge=16, le=1_000_000, description="Bytes per message value")
    keys: int = Field(16, ge=1, le=100_000, description="Keys per producer")
    producers: int = Field(1, ge=1, le=MAX_PRODUCERS, description="Producer processes per scenario")
    partitioner: Partitioner | None = Field(None, description="Key partitioner (null = the profile's)")
    fault_at_s: float = Field(2.0, ge=0, description="Seconds into the load when the fault starts")
    fault_duration_s: float = Field(10.0, gt=0, description="Seconds the fault lasts")
    side_by_side: bool = Field(
        True, description="Run the profiles of one fault together on the cluster (false: one scenario at a time)"
    )

    @model_validator(mode="after")
    def _distinct(self) -> RunParams:
        for name, values in (("profiles", self.profiles), ("faults", self.faults)):
            if len(set(values)) != len(values):
                raise ValueError(f"{name} must be distinct: {values}")
        return self


def standard_matrix() -> RunParams:
    """The daily matrix: the 3-broker RF=3 min.insync=2 topology x every profile x every fault,
    20 s of load at 2,000 msg/s per scenario (the fault at 2 s for 10 s). The faults that cut links
    between nodes are in it where this host can cut them (`acklab.cluster.links.unavailable`:
    root, iptables, cgroup2), and left out elsewhere."""
    faults = [name for name in FAULT_NAMES if not FAULTS[name].cuts_links or links_unavailable() is None]
    return RunParams(profiles=profile_names(), faults=faults, messages=40_000, rate=2000.0)


class ScenarioPlan(BaseModel):
    name: str
    profile: ProducerProfile
    fault: str
    schedule: list[FaultStep]
    expected: Expected
    beliefs: tuple[str, ...] = ()  # the beliefs it tests (acklab.model.beliefs)


class RunPlan(BaseModel):
    """A validated run: topology, producer client, load and scenarios (profile x fault schedule)."""

    params: RunParams
    topology: Topology
    client: Client
    load: LoadSpec
    scenarios: list[ScenarioPlan]

    @property
    def cuts_links(self) -> bool:
        """Some fault of the plan cuts links between nodes: the cluster needs link control."""
        return any(FAULTS[step.fault].cuts_links for scenario in self.scenarios for step in scenario.schedule)

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
    if params.preset is not None:
        preset(params.preset)  # SpecError naming the presets
    topology = load_topology(params.topology)
    if params.kafka_version:
        topology = parse_model(Topology, {**topology.model_dump(), "kafka_version": params.kafka_version}, "params.kafka_version")
    if params.backend == "local":
        try:
            kafka_libs(topology.kafka_version)
        except SetupError as exc:
            raise SpecError(f"kafka_version {topology.kafka_version}: {exc}") from None
    schedules = _fault_schedules(params, topology)
    cutting = sorted({step.fault for steps in schedules.values() for step in steps if FAULTS[step.fault].cuts_links})
    if cutting and (problem := links_unavailable()):
        raise SpecError(f"params.faults: {', '.join(cutting)} cut links between nodes, unavailable on this host: {problem}")
    load = parse_model(LoadSpec, params.model_dump(include=set(LoadSpec.model_fields)), "params")
    if params.rate is None and params.duration_s is None and any(schedules.values()):
        raise SpecError(
            f"params.rate: at full speed {params.messages} messages may all be sent before a fault starts "
            f"({params.fault_at_s:g} s in); set rate or duration_s so that the load outlasts the fault window"
        )
    if params.rate is not None or params.duration_s is not None:
        load_s = min(params.messages / params.rate if params.rate else float("inf"), params.duration_s or float("inf"))
        for fault, steps in schedules.items():
            late = [step for step in steps if step.at_s >= load_s]
            if late:
                raise SpecError(
                    f"params.fault_at_s: {fault} at {late[0].at_s}s would start after the load ends "
                    f"(after {load_s:.1f}s: {params.messages} messages at {params.rate or 'max'}/s, duration_s={params.duration_s})"
                )
    for name, spec in (params.custom_profiles or {}).items():
        profile_from_spec(name, spec, "params.custom_profiles")
    profiles = []
    for name in params.profiles:
        profile = get_profile(name, params.custom_profiles)
        if params.partitioner is not None:
            profile = parse_model(ProducerProfile, {**profile.model_dump(), "partitioner": params.partitioner}, "params.partitioner")
        profiles.append(profile)
    before_load = sorted({step.fault for steps in schedules.values() for step in steps if step.before_load})
    if before_load and (transactional := [p.name for p in profiles if p.transaction is not None]):
        raise SpecError(
            f"params.profiles: {transactional[0]} is transactional and its producers initialise transactions before the "
            f"load, which {before_load[0]} in effect before the load may prevent; give it faults that start during the load"
        )
    client = _client(params)
    families.of(client).validate(client, profiles, load)
    defaults = families.of(client).defaults
    scenarios = []
    for profile in profiles:
        name = profile.name
        for fault, steps in schedules.items():
            scenarios.append(
                ScenarioPlan(
                    name=f"{name}__{fault}",
                    profile=profile,
                    fault=fault,
                    schedule=steps,
                    expected=expect(profile, topology, steps, defaults),
                    beliefs=applying(Setting.of(profile, topology, steps, defaults)),
                )
            )
    return RunPlan(params=params, topology=topology, client=client, load=load, scenarios=scenarios)


def version_grid(
    params: dict[str, Any], kafka_versions: list[str | None], client_versions: list[str | None], minimum: int = 2
) -> list[RunPlan]:
    """One plan per (Kafka version, client version) pair of the same params (None: the default), all
    validated before anything starts; at least `minimum` pairs (a comparison needs two)."""
    for name, versions in (("kafka_versions", kafka_versions), ("client_versions", client_versions)):
        if not versions or len(set(versions)) != len(versions):
            raise SpecError(f"params.{name}: one or more distinct versions, got {versions}")
    if len(kafka_versions) * len(client_versions) < minimum:
        raise SpecError(f"params: a version comparison needs {minimum} or more (kafka_versions x client_versions) pairs")
    base = {k: v for k, v in params.items() if k in RunParams.model_fields}
    return [
        make_plan({**base, "kafka_version": kafka, "client_version": client}) for kafka in kafka_versions for client in client_versions
    ]


def _client(params: RunParams) -> Client:
    try:
        return families.default().client(params.client_version)
    except SetupError as exc:
        raise SpecError(f"params.client_version: {exc}") from None


def _fault_schedules(params: RunParams, topology: Topology) -> dict[str, list[FaultStep]]:
    """Fault label -> schedule: one per catalog name in `faults`, or the explicit `schedule`."""
    if params.schedule is not None:
        check_schedule(params.schedule, topology, "params.schedule")
        return {"+".join(step.label for step in params.schedule) or "none": params.schedule}
    schedules = {fault: schedule_for(fault, params.fault_at_s, params.fault_duration_s) for fault in params.faults}
    for fault, steps in schedules.items():
        check_schedule(steps, topology, f"params.faults ({fault})")
    return schedules
