"""Producer profiles: named, validated librdkafka settings that define a delivery guarantee.

librdkafka (confluent_kafka) is imported only when a profile is validated, never at import."""

from __future__ import annotations

import math
from functools import cache
from importlib import resources
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from acklab.spec import SpecError, parse_model

CATALOG = "catalog/profiles.yaml"

Partitioner = Literal["consistent_random", "murmur2_random"]
"""librdkafka partitioners for keyed messages: CRC32 of the key, or Java-compatible murmur2."""

# librdkafka properties (and their aliases) that a profile sets through a typed field, or that
# the workload manages; `overrides` may set any other property.
MANAGED_PROPERTIES = {
    "acks": "acks",
    "request.required.acks": "acks",
    "enable.idempotence": "enable_idempotence",
    "retries": "retries",
    "message.send.max.retries": "retries",
    "max.in.flight.requests.per.connection": "max_in_flight",
    "max.in.flight": "max_in_flight",
    "linger.ms": "linger_ms",
    "queue.buffering.max.ms": "linger_ms",
    "request.timeout.ms": "request_timeout_ms",
    "socket.timeout.ms": "request_timeout_ms",
    "delivery.timeout.ms": "delivery_timeout_ms",
    "message.timeout.ms": "delivery_timeout_ms",
    "partitioner": "partitioner",
    "transactional.id": "transaction (the workload sets one id per producer process)",
    "transaction.timeout.ms": "transaction.timeout_ms",
    "bootstrap.servers": "the cluster (set by acklab)",
    "metadata.broker.list": "the cluster (set by acklab)",
}


class TransactionSpec(BaseModel):
    """Transactions of `records_per_txn` records; a fraction `abort_ratio` of them is aborted.

    Which transactions abort is deterministic and evenly spread: transaction `i` aborts when
    floor((i + 1) * abort_ratio) > floor(i * abort_ratio)."""

    model_config = ConfigDict(extra="forbid")
    records_per_txn: int = Field(1000, ge=1)
    abort_ratio: float = Field(0.0, ge=0, le=1)
    timeout_ms: int = Field(60000, ge=1000, description="transaction.timeout.ms")

    def aborts(self, txn: int) -> bool:
        return math.floor((txn + 1) * self.abort_ratio) > math.floor(txn * self.abort_ratio)


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
    partitioner: Partitioner = "consistent_random"
    transaction: TransactionSpec | None = None
    overrides: dict[str, str | int | float | bool] = {}

    @field_validator("overrides")
    @classmethod
    def _not_managed(cls, overrides: dict[str, str | int | float | bool]) -> dict[str, str | int | float | bool]:
        for key in overrides:
            if key in MANAGED_PROPERTIES or key.endswith("_cb") or key in ("on_delivery", "logger"):
                raise ValueError(f"{key} is set by {MANAGED_PROPERTIES.get(key, 'acklab')}, not by overrides")
        return overrides

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
        if self.transaction is not None:
            if not self.enable_idempotence:
                raise ValueError("transaction requires enable_idempotence: true (transactional producers are idempotent)")
            if self.transaction.timeout_ms < self.delivery_timeout_ms:
                raise ValueError(
                    f"transaction.timeout_ms ({self.transaction.timeout_ms}) must be >= delivery_timeout_ms "
                    f"({self.delivery_timeout_ms})"
                )
        _check_with_librdkafka(self.producer_config())
        return self

    def producer_config(self) -> dict[str, str | int | float | bool]:
        """The librdkafka configuration of this profile (without bootstrap.servers and transactional.id)."""
        config: dict[str, str | int | float | bool] = {
            "acks": self.acks,
            "enable.idempotence": self.enable_idempotence,
            "retries": self.retries,
            "max.in.flight.requests.per.connection": self.max_in_flight,
            "linger.ms": self.linger_ms,
            "request.timeout.ms": self.request_timeout_ms,
            # librdkafka enforces request.timeout.ms on the broker only; the client times a request
            # out after socket.timeout.ms. Both, as Java's client-side request.timeout.ms.
            "socket.timeout.ms": self.request_timeout_ms,
            "delivery.timeout.ms": self.delivery_timeout_ms,
            "partitioner": self.partitioner,
        }
        if self.transaction is not None:
            config["transaction.timeout.ms"] = self.transaction.timeout_ms
        return {**config, **self.overrides}


def _check_with_librdkafka(config: dict[str, str | int | float | bool]) -> None:
    """librdkafka itself rejects unknown properties, bad values and contradictions it knows of."""
    from confluent_kafka import KafkaException, Producer

    try:
        Producer({**config, "log_level": 0})
    except KafkaException as exc:
        raise ValueError(f"librdkafka rejects the configuration: {exc.args[0].str()}") from None


def largest_accepted_value(config: dict[str, str | int | float | bool], key: bytes, value_bytes: int) -> int | None:
    """None if librdkafka, configured with `config`, accepts a `value_bytes` value under `key`;
    otherwise the largest value size it accepts (it refuses larger ones at `produce()`, e.g.
    MSG_SIZE_TOO_LARGE above message.max.bytes). Nothing is sent: no broker is configured."""
    from confluent_kafka import KafkaException, Producer

    producer = Producer({**config, "log_level": 0})

    def accepted(size: int) -> bool:
        try:
            producer.produce("acklab-size-probe", b"x" * size, key)
            return True
        except KafkaException:
            return False

    try:
        if accepted(value_bytes):
            return None
        low, high = 0, value_bytes  # accepted(low), not accepted(high)
        while high - low > 1:
            middle = (low + high) // 2
            low, high = (middle, high) if accepted(middle) else (low, middle)
        return low
    finally:
        producer.purge()
        producer.flush(0)


@cache
def _catalog_specs() -> dict[str, dict[str, object]]:
    return yaml.safe_load(resources.files("acklab").joinpath(CATALOG).read_text())


def profile_names() -> list[str]:
    """The built-in profiles' names, without validating them (cheap: no librdkafka)."""
    return sorted(_catalog_specs())


@cache
def catalog() -> dict[str, ProducerProfile]:
    """The built-in profiles, by name, validated (librdkafka checks each configuration)."""
    return {name: parse_model(ProducerProfile, {"name": name, **spec}, f"profile {name}") for name, spec in _catalog_specs().items()}


def get_profile(name: str) -> ProducerProfile:
    profiles = catalog()
    if name not in profiles:
        raise SpecError(f"unknown profile {name!r}; valid: {', '.join(profiles)}")
    return profiles[name]
