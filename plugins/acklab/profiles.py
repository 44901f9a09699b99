"""Producer profiles: named, validated librdkafka settings that define a delivery guarantee."""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator

from acklab.topology import SpecError, parse_model


class ProducerProfile(BaseModel):
    """The producer side of a scenario."""

    model_config = ConfigDict(extra="forbid")
    name: str
    description: str = ""
    acks: Literal["0", "1", "all"]
    enable_idempotence: bool = False
    retries: int = Field(2147483647, ge=0)
    max_in_flight: int = Field(5, ge=1)
    linger_ms: int = Field(5, ge=0)
    request_timeout_ms: int = Field(10000, ge=100)
    delivery_timeout_ms: int = Field(60000, ge=1000)
    overrides: dict[str, str | int | float | bool] = {}

    @model_validator(mode="after")
    def _consistent(self) -> ProducerProfile:
        if self.enable_idempotence:
            if self.acks != "all":
                raise ValueError(f"enable_idempotence requires acks=all, got acks={self.acks}")
            if self.max_in_flight > 5:
                raise ValueError(f"enable_idempotence requires max_in_flight <= 5, got {self.max_in_flight}")
            if self.retries == 0:
                raise ValueError("enable_idempotence requires retries > 0")
        if self.delivery_timeout_ms < self.request_timeout_ms + self.linger_ms:
            raise ValueError("delivery_timeout_ms must be >= request_timeout_ms + linger_ms")
        return self

    def producer_config(self) -> dict[str, str | int | float | bool]:
        """The librdkafka configuration of this profile (without bootstrap.servers)."""
        return {
            "acks": self.acks,
            "enable.idempotence": self.enable_idempotence,
            "retries": self.retries,
            "max.in.flight.requests.per.connection": self.max_in_flight,
            "linger.ms": self.linger_ms,
            "request.timeout.ms": self.request_timeout_ms,
            "delivery.timeout.ms": self.delivery_timeout_ms,
            **self.overrides,
        }


@cache
def catalog() -> dict[str, ProducerProfile]:
    """The built-in profiles, by name."""
    raw = yaml.safe_load(resources.files("acklab").joinpath("catalog/profiles.yaml").read_text())
    return {name: parse_model(ProducerProfile, {"name": name, **spec}, f"profile {name}") for name, spec in raw.items()}


def get_profile(name: str) -> ProducerProfile:
    profiles = catalog()
    if name not in profiles:
        raise SpecError(f"unknown profile {name!r}; valid: {', '.join(profiles)}")
    return profiles[name]
