"""Cluster topology specs (`clusters/*.yaml`), validated before anything starts."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from acklab.base.maven import DEFAULT_KAFKA_VERSION, KAFKA_VERSION_PATTERN
from acklab.base.paths import clusters_dir
from acklab.base.property_policy import check_broker_properties
from acklab.base.spec import SpecError, load_yaml, parse_model


class Controllers(BaseModel):
    """KRaft quorum: `combined` runs the controller inside the first `count` brokers,
    `dedicated` runs `count` controller-only nodes."""

    model_config = ConfigDict(extra="forbid", defer_build=True)  # built on first use: DAG files import it when parsed
    mode: Literal["combined", "dedicated"] = "combined"
    count: int = Field(1, ge=1, le=7)


class Topology(BaseModel):
    """A Kafka cluster and the defaults of the topics acklab creates on it."""

    model_config = ConfigDict(extra="forbid", defer_build=True)
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$")
    kafka_version: str = Field(DEFAULT_KAFKA_VERSION, pattern=KAFKA_VERSION_PATTERN, description="Apache Kafka version (jars fetched by `acklab setup`)")
    brokers: int = Field(ge=1, le=9)
    controllers: Controllers = Controllers()
    partitions: int = Field(3, ge=1, le=1000)
    replication_factor: int = Field(ge=1)
    min_insync_replicas: int = Field(1, ge=1)
    unclean_leader_election: bool = False
    heap_mb: int = Field(512, ge=128, le=8192)
    broker_overrides: dict[str, str | int | float | bool] = {}

    @field_validator("broker_overrides")
    @classmethod
    def _allowed_overrides(cls, overrides: dict[str, str | int | float | bool]) -> dict[str, str | int | float | bool]:
        check_broker_properties(overrides)
        return overrides

    @model_validator(mode="after")
    def _consistent(self) -> Topology:
        if self.replication_factor > self.brokers:
            raise ValueError(f"replication_factor ({self.replication_factor}) > brokers ({self.brokers})")
        if self.min_insync_replicas > self.replication_factor:
            raise ValueError(
                f"min_insync_replicas ({self.min_insync_replicas}) > replication_factor ({self.replication_factor})"
            )
        if self.controllers.count % 2 == 0:
            raise ValueError(f"controllers.count ({self.controllers.count}) must be odd for a KRaft majority")
        if self.controllers.mode == "combined" and self.controllers.count > self.brokers:
            raise ValueError(f"controllers.count ({self.controllers.count}) > brokers ({self.brokers}) in combined mode")
        return self

    @property
    def broker_ids(self) -> list[int]:
        return list(range(1, self.brokers + 1))

    @property
    def controller_ids(self) -> list[int]:
        if self.controllers.mode == "combined":
            return self.broker_ids[: self.controllers.count]
        return list(range(101, 101 + self.controllers.count))

    @property
    def node_ids(self) -> list[int]:
        """Every KRaft node: brokers and controllers (a combined node once)."""
        return sorted(set(self.broker_ids) | set(self.controller_ids))


def load_topology(name_or_path: str) -> Topology:
    """Load a topology by name (`clusters/<name>.yaml`) or by path."""
    path = Path(name_or_path)
    if not path.suffix:
        path = clusters_dir() / f"{name_or_path}.yaml"
    if not path.exists():
        raise SpecError(f"topology {name_or_path!r} not found (known: {', '.join(topology_names())})")
    data = load_yaml(path, "topology")
    if not isinstance(data, dict):
        raise SpecError(f"{path}: expected a mapping at the top level")
    return parse_model(Topology, data, str(path))


def topology_names() -> list[str]:
    """The shipped topologies (`clusters/*.yaml`)."""
    return sorted(p.stem for p in clusters_dir().glob("*.yaml"))
