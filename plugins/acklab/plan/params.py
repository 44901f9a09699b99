"""What a user chooses for a run (`RunParams`) and the standard matrix: the DAGs' params and trigger
form come from here, so it stays cheap to import (no guarantee model, presets or librdkafka).
Planning a run from them is `acklab.plan.planner`'s."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from acklab.base.maven import KAFKA_VERSION_PATTERN
from acklab.base.property_policy import check_broker_properties
from acklab.nemesis.faults import FAULT_NAMES, FAULTS
from acklab.nemesis.schedule import FaultStep
from acklab.workload import families
from acklab.workload.processing import GroupProtocol, ProcessorConfig, Style
from acklab.workload.profiles import Partitioner, profile_names
from acklab.workload.spec import MAX_MESSAGES, MAX_PRODUCERS, MAX_TOPICS

MAX_PROCESSORS = 8  # processor instances per pipeline scenario (each a process)


class RunParams(BaseModel):
    """What a user chooses for a run (DAG params, CLI options); validated before anything starts.
    The DAG trigger form is generated from this model's JSON schema.

    The fault lasts 10 s by default: when the killed broker is also the active KRaft controller
    (controller-kill), a new controller must be elected and then fence the broker (session timeout)
    before leadership moves, which takes 5-7 s here, more when the election splits its votes; a leader
    fault's partition is never led by the active controller (`acklab.orchestration.execution.replica_assignment`)."""

    model_config = ConfigDict(extra="forbid")
    preset: str | None = Field(None, description="The named preset these params come from (acklab presets), if any")
    presets_file: str | None = Field(
        None, description="The presets file naming `preset`: NAME (NAME.yaml in the catalog's presets folder or ACKLAB_PRESETS_DIR; "
        "the CLI also takes a path); null = the catalog's presets",
    )
    topology: str = Field("three-brokers", description="Cluster topology: a name in clusters/ (or a YAML path)")
    kafka_version: str | None = Field(
        None, pattern=KAFKA_VERSION_PATTERN, description="Apache Kafka version (fetched by `acklab setup`); null = the topology's"
    )
    backend: Literal["local", "docker"] = Field("local", description="Local JVMs or Docker containers")
    broker_config: dict[str, str | int | float | bool] = Field(
        default_factory=dict, description="Broker settings of this run (server.properties), over the topology's broker_overrides"
    )
    client: str | None = Field(
        None, pattern=families.CLIENT_PATTERN,
        description="The producer client, FAMILY:VERSION (java:3.9.1, librdkafka:2.16.1) or FAMILY for its default version; "
        "null = confluent-kafka of client_version",
    )
    clients: list[str] = Field(
        default_factory=list,
        description="Producer clients side by side (FAMILY:VERSION each): every profile x fault once per client, in the same "
        "fault groups; the first keeps the plain scenario names, the others are <profile>.<family>__<fault>. A DAG trigger that "
        "names client or client_version runs that one client instead",
    )
    client_version: str | None = Field(
        None, pattern=families.default().version_pattern,
        description=f"confluent-kafka version of the producers (2.0.2 or later, set up by `acklab setup --client-version`); null = the locked {families.default().locked}",
    )
    profiles: list[str] = Field(
        default_factory=lambda: ["leader-ack", "idempotent"], description="Producer profiles, one scenario per fault (may be empty with processing)"
    )
    custom_profiles: dict[str, dict[str, Any]] | None = Field(
        None,
        description="Your own producer profiles: name -> profile (the catalog's fields, {librdkafka: {property: value}}, "
        "{java: {property: value}}, or both raw forms, one per client family); `profiles` may name them",
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
    topics: int = Field(
        1, ge=1, le=MAX_TOPICS,
        description="Topics each scenario's load spreads over (key k of each producer to topic k mod topics; at most keys): a record "
        "read from another topic than the one it was sent to is counted misdirected",
    )
    partitioner: Partitioner | None = Field(None, description="Key partitioner (null = the profile's)")
    fault_at_s: float = Field(2.0, ge=0, description="Seconds into the load when the fault starts")
    fault_duration_s: float = Field(10.0, gt=0, description="Seconds the fault lasts")
    side_by_side: bool = Field(
        True, description="Run the profiles of one fault together on the cluster (false: one scenario at a time)"
    )
    clients_together: bool = Field(
        True, description="With several clients side by side: one group per fault holds every client's scenarios (false: one "
        "group per fault and client, each client's producers alone on the cluster)",
    )
    processing: list[Style] = Field(
        default_factory=list,
        description="Pipeline scenarios beside the profiles' ones: per processing style (eos, at-least-once, at-most-once, "
        "eos-naive: a planted bug) and fault, the load writes an input topic with input_profile and `processors` processor "
        "instances of the run's client consume, transform and produce it to an output topic (acklab.workload.processing); "
        "processor faults (processor-kill, zombie) run with these only",
    )
    processing_faults: list[str] | None = Field(
        None, description="The faults pipeline scenarios run under (null = faults); processor faults run with pipelines only"
    )
    pipelines_together: bool = Field(
        True, description="Pipeline scenarios share their fault's group with the producer profiles' scenarios (false: a group "
        "of their own per fault and client, right after the profiles' one, so processors do not compete with those producers)",
    )
    processor_config: ProcessorConfig = Field(
        default_factory=ProcessorConfig, description="The processors' own consumer and producer properties, in their client's names, "
        "over the processors' defaults ({consumer: {...}, producer: {...}}; timings, sizes, counts, retries, acks, compression only)",
    )
    processors: int = Field(2, ge=1, le=MAX_PROCESSORS, description="Processor instances per pipeline scenario (separate processes, one group)")
    input_profile: str = Field("idempotent", description="The producer profile that writes a pipeline's input topic (not transactional)")
    group_protocol: GroupProtocol = Field(
        "classic", description="The processors' consumer group protocol: classic (generations) or consumer (KIP-848, member epochs)"
    )
    negative_control: bool = Field(
        True, description="Run the planted anomalies first (negative-control__planted-loss, __planted-duplicate, __planted-offset, __planted-misroute, __planted-reorder): unless the checker counts each exactly, the "
        "run is invalid. false: the run has no proof that it could go red, and its report says so",
    )

    @field_validator("broker_config")
    @classmethod
    def _allowed_broker_config(cls, config: dict[str, str | int | float | bool]) -> dict[str, str | int | float | bool]:
        check_broker_properties(config)
        return config

    @model_validator(mode="after")
    def _distinct(self) -> RunParams:
        if self.client is not None and self.client_version is not None:
            raise ValueError(f"client ({self.client}) and client_version ({self.client_version}) both name the client: give one")
        if self.clients and (self.client is not None or self.client_version is not None):
            raise ValueError("clients names every client of the run: give it without client or client_version")
        if any(not re.match(families.CLIENT_PATTERN, spec) for spec in self.clients):
            raise ValueError(f"clients: each FAMILY:VERSION (java:3.9.1, librdkafka:2.16.1), got {self.clients}")
        if not self.profiles and not self.processing:
            raise ValueError("profiles or processing: name at least one producer profile or processing style")
        for name, values in (("profiles", self.profiles), ("faults", self.faults), ("processing", self.processing)):
            if len(set(values)) != len(values):
                raise ValueError(f"{name} must be distinct: {values}")
        return self


STANDARD_CLIENTS = [families.DEFAULT, "java"]
"""The standard matrix's clients: librdkafka (keeping the plain scenario names) and the Java client. Each
fault runs one group per client (`clients_together` false): fourteen producers at 2,000 msg/s in one
group overload two cores (brokers fenced on missed heartbeats, unplanned leader changes in the
no-fault group, leader-pause and leader-isolate without effect within their window: docs/benchmarks.md)."""


STANDARD_PROCESSING: list[Style] = ["eos", "at-least-once", "at-most-once"]
"""The standard matrix's processing styles: each documented one (the planted `eos-naive` runs as the
pipelines' negative control)."""

STANDARD_PIPELINE_FAULTS = ["none", "leader-kill", "processor-kill", "zombie", "txn-coordinator-kill", "group-coordinator-kill"]
"""The faults the standard matrix's pipelines run under: the baseline, a partition leader's loss, the
processor faults and both coordinators' loss."""


def standard_matrix() -> RunParams:
    """The daily matrix: the 3-broker RF=3 min.insync=2 topology x every profile x every standard fault (`FaultSpec.standard`)
    x both client families (`STANDARD_CLIENTS`, their locked versions; a group per fault and client), 20 s of
    load at 2,000 msg/s per scenario (the fault at 2 s for 10 s); and the pipelines: every documented
    processing style (`STANDARD_PROCESSING`) x `STANDARD_PIPELINE_FAULTS` x both clients, in groups of
    their own. The faults that cut links between nodes are in it where this host can cut them
    (`acklab.cluster.links.unavailable`: root, iptables, cgroup2), and left out elsewhere."""
    from acklab.cluster import links  # asks iptables: only when the standard matrix is made

    faults = [name for name in FAULT_NAMES if FAULTS[name].standard and (not FAULTS[name].cuts_links or links.unavailable() is None)]
    return RunParams(
        profiles=profile_names(), faults=faults, messages=40_000, rate=2000.0, clients=STANDARD_CLIENTS, clients_together=False,
        processing=STANDARD_PROCESSING, processing_faults=STANDARD_PIPELINE_FAULTS, pipelines_together=False,
    )
