"""Fault schedule spec: `{at_s, fault, target, duration_s, options}` steps, validated up front."""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from acklab.topology import SpecError

TARGET = re.compile(
    r"^(?:(?P<role>leader|follower):(?:(?P<topic>[^/\s]+)/)?(?P<partition>\d+)|controller|broker:(?P<broker>\d+)|random-broker)$"
)


class Target(BaseModel):
    """A parsed target: a partition's leader/follower, the active controller, a broker id, or a random broker."""

    kind: str
    topic: str | None = None
    partition: int = 0
    broker: int | None = None

    @classmethod
    def parse(cls, text: str) -> Target:
        match = TARGET.match(text)
        if match is None:
            raise ValueError(
                f"target {text!r}: expected leader:[<topic>/]<partition>, follower:[<topic>/]<partition>, "
                "controller, broker:<id> or random-broker"
            )
        if match["role"]:
            return cls(kind=match["role"], topic=match["topic"], partition=int(match["partition"]))
        if match["broker"]:
            return cls(kind="broker", broker=int(match["broker"]))
        return cls(kind=text)


class FaultStep(BaseModel):
    """One fault `at_s` seconds into the load, lasting `duration_s`; target and options default per fault."""

    model_config = ConfigDict(extra="forbid")
    fault: str
    at_s: float = Field(2.0, ge=0)
    duration_s: float = Field(10.0, gt=0)
    target: str | None = None
    options: dict[str, Any] = {}

    @model_validator(mode="after")
    def _resolve(self) -> FaultStep:
        from acklab.nemesis.catalog import FAULTS, FAULT_NAMES

        fault = FAULTS.get(self.fault)
        if fault is None:
            raise ValueError(f"unknown fault {self.fault!r}; valid: {', '.join(FAULT_NAMES)}")
        self.target = self.target or fault.default_target
        if self.target is not None:
            Target.parse(self.target)
        self.options = fault.options_model.model_validate(self.options).model_dump()
        return self

    @property
    def parsed_target(self) -> Target:
        assert self.target is not None
        return Target.parse(self.target)


def schedule_for(fault: str, at_s: float = 2.0, duration_s: float = 10.0) -> list[FaultStep]:
    """The one-step schedule of a catalog fault name (`none` = empty schedule)."""
    from acklab.nemesis.catalog import FAULT_NAMES
    from acklab.topology import parse_model

    if fault not in FAULT_NAMES:
        raise SpecError(f"unknown fault {fault!r}; valid: {', '.join(FAULT_NAMES)}")
    if fault == "none":
        return []
    return [parse_model(FaultStep, {"fault": fault, "at_s": at_s, "duration_s": duration_s}, f"fault {fault}")]
