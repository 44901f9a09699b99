"""Fault schedule spec: `{at_s, fault, target, duration_s, options, before_load}` steps, validated up front
(against the fault catalog here, against the topology by `check_schedule` at plan time)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from acklab.base.spec import SpecError, parse_model
from acklab.cluster.topology import Topology
from acklab.nemesis.faults import COORDINATORS, FAULT_NAMES, FAULTS, NO_FAULT, TargetKind

TARGET = re.compile(
    r"^(?:(?P<role>leader|follower):(?:(?P<topic>[^/\s]+)/)?(?P<partition>\d+)|controller|broker:(?P<broker>\d+)|random-broker|every-broker|group-coordinator|txn-coordinator)$"
)
NODE_OPTIONS = ("peers", "side")  # options of link faults that name node ids
TARGET_FORMS = (
    "leader:[<topic>/]<partition>, follower:[<topic>/]<partition>, controller, broker:<id>, random-broker, every-broker (proxy "
    "faults), group-coordinator or txn-coordinator (a pipeline's)"
)


class Target(BaseModel):
    """A parsed target: a partition's leader/follower, the active controller, a broker id, a random
    broker, or every broker (proxy faults)."""

    kind: TargetKind
    topic: str | None = None
    partition: int = 0
    broker: int | None = None

    @classmethod
    def parse(cls, text: str) -> Target:
        match = TARGET.match(text)
        if match is None:
            raise ValueError(f"target {text!r}: expected {TARGET_FORMS}")
        if match["role"]:
            return cls(kind=match["role"], topic=match["topic"], partition=int(match["partition"]))
        if match["broker"]:
            return cls(kind="broker", broker=int(match["broker"]))
        return cls(kind=text)  # type: ignore[arg-type]

    def problem(self, topology: Topology) -> str | None:
        """Why this target cannot exist on `topology`, or None."""
        if self.kind in ("leader", "follower") and self.topic is None and self.partition >= topology.partitions:
            return f"partition {self.partition} does not exist: topics have {topology.partitions} (0..{topology.partitions - 1})"
        if self.kind == "follower" and topology.replication_factor < 2:
            return f"a partition has no follower with replication_factor {topology.replication_factor}"
        if self.kind == "broker" and self.broker not in topology.broker_ids:
            return f"broker {self.broker} does not exist: brokers are {', '.join(map(str, topology.broker_ids))}"
        return None


class FaultStep(BaseModel):
    """One fault `at_s` seconds into the load, lasting `duration_s`; target and options default per fault.
    A `before_load` step (at_s 0) is in effect before the producers start: they start against it."""

    model_config = ConfigDict(extra="forbid")
    fault: str
    at_s: float = Field(2.0, ge=0)
    duration_s: float = Field(10.0, gt=0)
    target: str | None = None
    options: dict[str, Any] = {}
    before_load: bool = Field(
        False, description="apply it before the producers start (at_s 0; they then start without the topic's metadata)"
    )

    @model_validator(mode="after")
    def _resolve(self) -> FaultStep:
        spec = FAULTS.get(self.fault)
        if spec is None or self.fault == NO_FAULT:
            raise ValueError(f"unknown fault {self.fault!r}; valid: {', '.join(FAULT_NAMES[1:])}")
        if self.target is not None and not spec.targets:
            raise ValueError(f"{self.fault} takes no target, got {self.target!r}")
        self.target = self.target or spec.default_target
        if self.target is not None:
            kind = Target.parse(self.target).kind
            if kind not in spec.targets:
                raise ValueError(f"{self.fault} cannot target {self.target!r}; it targets {', '.join(sorted(spec.targets))}")
        self.options = spec.options.model_validate(self.options).model_dump()
        if self.before_load and not spec.precedes_load:
            raise ValueError(f"{self.fault} cannot run before the load; these can: {', '.join(n for n, s in FAULTS.items() if s.precedes_load)}")
        if self.before_load and "at_s" not in self.model_fields_set:
            self.at_s = 0.0
        if self.before_load and self.at_s != 0:
            raise ValueError(f"a step before the load starts at at_s 0, not {self.at_s:g}")
        return self

    @property
    def needs_pipeline(self) -> bool:
        """It acts on a pipeline's processors or a coordinator of one: it runs with pipelines only."""
        return FAULTS[self.fault].needs_pipeline or (self.target is not None and Target.parse(self.target).kind in COORDINATORS)

    @property
    def label(self) -> str:
        """Its name in a schedule's label: the fault, `-before-load` for a step before the load."""
        return f"{self.fault}-before-load" if self.before_load else self.fault

    @property
    def parsed_target(self) -> Target:
        assert self.target is not None
        return Target.parse(self.target)

    @property
    def end_s(self) -> float:
        return self.at_s + self.duration_s


def schedule_for(fault: str, at_s: float = 2.0, duration_s: float = 10.0) -> list[FaultStep]:
    """The one-step schedule of a catalog fault name (`none` = empty schedule)."""
    if fault not in FAULTS:
        raise SpecError(f"unknown fault {fault!r}; valid: {', '.join(FAULT_NAMES)}")
    if fault == NO_FAULT:
        return []
    return [parse_model(FaultStep, {"fault": fault, "at_s": at_s, "duration_s": duration_s}, f"fault {fault}")]


def check_schedule(steps: Sequence[FaultStep], topology: Topology, source: str) -> None:
    """SpecError (one line) for a target or an option's node that cannot exist on `topology`, a link
    cut on a single node, a fault that needs followers without any, or two faults on broker processes (or on pipeline processors) whose
    windows overlap (they could stop the same broker, or processor, twice)."""
    for number, step in enumerate(steps):
        if FAULTS[step.fault].cuts_links and len(topology.node_ids) < 2:
            raise SpecError(f"{source}.{number}.fault: {step.fault} cuts links between nodes; topology {topology.name} has one node")
        if FAULTS[step.fault].needs_followers and topology.replication_factor < 2:
            raise SpecError(
                f"{source}.{number}.fault: {step.fault} stops followers; topology {topology.name} has replication_factor "
                f"{topology.replication_factor} (no follower)"
            )
        if step.target is not None and (problem := step.parsed_target.problem(topology)):
            raise SpecError(f"{source}.{number}.target: {step.target!r}: {problem}")
        for option in NODE_OPTIONS:
            if unknown := sorted(set(step.options.get(option) or ()) - set(topology.node_ids)):
                raise SpecError(
                    f"{source}.{number}.options.{option}: no node {', '.join(map(str, unknown))}; nodes are {', '.join(map(str, topology.node_ids))}"
                )
    for what, exclusive, why in (
        ("broker processes", lambda spec: spec.stops_nodes, "one could stop a broker the other holds"),
        ("pipeline processors", lambda spec: spec.signals_processors, "one could stop a processor the other holds"),
    ):
        chosen = sorted((step for step in steps if exclusive(FAULTS[step.fault])), key=lambda step: step.at_s)
        for first, second in zip(chosen, chosen[1:], strict=False):
            if second.at_s < first.end_s:
                raise SpecError(
                    f"{source}: {first.fault} ({first.at_s:g}-{first.end_s:g} s) and {second.fault} ({second.at_s:g}-{second.end_s:g} s) "
                    f"overlap; faults on {what} must not overlap ({why})"
                )
