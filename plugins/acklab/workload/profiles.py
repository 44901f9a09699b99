"""Producer profiles: named producer settings that define a delivery guarantee.

A profile is typed fields (the catalog's form, `catalog/profiles.yaml`: one meaning, which each client
family translates), raw librdkafka properties (`{librdkafka: {property: value}}`, read as exactly the
producer those properties configure: librdkafka's defaults for what they leave out), the user's own
Java producer properties (`{java: {property: value}}`, run verbatim on the Java client; their typed
fields are stated when the plan resolves the profile for its client: what the Java client documents
for them at its version, `acklab.workload.java_client`), or both raw forms (`{librdkafka: {...},
java: {...}}`): one experiment's producer written for each client, each family running its own.
Contradictions are rejected here, in one line; the configuration a client makes of a profile, and that
client's own validation of it, are its family's (`acklab.workload.client.ClientFamily`). Nothing here
imports librdkafka."""

from __future__ import annotations

import math
from collections.abc import Mapping
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from acklab.base.property_policy import check_client_properties
from acklab.base.spec import SpecError, first_error, load_yaml, parse_model

CATALOG = "catalog/profiles.yaml"
RAW = "librdkafka"  # a profile spec's key for raw librdkafka properties
JAVA = "java"  # a profile spec's key for the user's own Java producer properties

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
    "socket.timeout.ms": "socket_timeout_ms",
    "delivery.timeout.ms": "delivery_timeout_ms",
    "message.timeout.ms": "delivery_timeout_ms",
    "partitioner": "partitioner",
    "transactional.id": "transaction (the workload sets one id per producer process)",
    "transaction.timeout.ms": "transaction.timeout_ms",
    "bootstrap.servers": "the cluster (set by acklab)",
    "metadata.broker.list": "the cluster (set by acklab)",
}
# librdkafka's defaults of the typed fields (CONFIGURATION.md), for raw profiles that leave them out.
LIBRDKAFKA_DEFAULTS: Mapping[str, Any] = {
    "acks": "all",
    "enable_idempotence": False,
    "retries": 2147483647,
    "max_in_flight": 1000000,
    "linger_ms": 5,
    "request_timeout_ms": 30000,
    "socket_timeout_ms": 60000,
    "delivery_timeout_ms": 300000,
    "partitioner": "consistent_random",
}
IDEMPOTENT_MAX_IN_FLIGHT = 5  # librdkafka caps max.in.flight to this when enable.idempotence is set


class TransactionSpec(BaseModel):
    """Transactions of `records_per_txn` records; a fraction `abort_ratio` of them is aborted.

    Which transactions abort is deterministic and evenly spread: transaction `i` aborts when
    floor((i + 1) * abort_ratio) > floor(i * abort_ratio)."""

    model_config = ConfigDict(extra="forbid", defer_build=True)  # built on first use: DAG files import it when parsed
    records_per_txn: int = Field(1000, ge=1)
    abort_ratio: float = Field(0.0, ge=0, le=1)
    timeout_ms: int = Field(60000, ge=1000, description="transaction.timeout.ms")

    def aborts(self, txn: int) -> bool:
        return math.floor((txn + 1) * self.abort_ratio) > math.floor(txn * self.abort_ratio)


class ProducerProfile(BaseModel):
    """The producer side of a scenario."""

    model_config = ConfigDict(extra="forbid", defer_build=True)
    name: str
    description: str = ""
    acks: Literal["0", "1", "all"]
    enable_idempotence: bool = False
    retries: int = Field(2147483647, ge=0)
    max_in_flight: int = Field(5, ge=1)
    linger_ms: int = Field(5, ge=0)
    request_timeout_ms: int = Field(10000, ge=100)
    socket_timeout_ms: int | None = Field(None, ge=10, description="client-side request timeout; null = request_timeout_ms")
    delivery_timeout_ms: int = Field(60000, ge=1000)
    partitioner: Partitioner = "consistent_random"
    transaction: TransactionSpec | None = None
    overrides: dict[str, str | int | float | bool] = {}
    java: dict[str, str] | None = Field(
        None, description="the user's own Java producer properties, run verbatim on the Java client; once resolved for a client "
        "(`ClientFamily.resolve`), the typed fields are their documented effect"
    )
    java_only: bool = Field(False, description="the profile is Java properties alone (no librdkafka form): it runs on the Java client only")

    @field_validator("overrides")
    @classmethod
    def _not_managed(cls, overrides: dict[str, str | int | float | bool]) -> dict[str, str | int | float | bool]:
        for key in overrides:
            if key in MANAGED_PROPERTIES:
                raise ValueError(f"{key} is set by {MANAGED_PROPERTIES[key]}, not by overrides")
        check_client_properties("librdkafka", overrides)
        return overrides

    @field_validator("java")
    @classmethod
    def _allowed_java(cls, java: dict[str, str] | None) -> dict[str, str] | None:
        if java is not None:
            check_client_properties("java", java)
        return java

    @model_validator(mode="after")
    def _consistent(self) -> ProducerProfile:
        if self.java is not None:
            return self  # the Java client itself judges its properties (`ClientFamily.validate`)
        if self.enable_idempotence:
            if self.acks != "all":
                raise ValueError(f"enable_idempotence requires acks=all, got acks={self.acks}")
            if self.max_in_flight > IDEMPOTENT_MAX_IN_FLIGHT:
                raise ValueError(f"enable_idempotence requires max_in_flight <= {IDEMPOTENT_MAX_IN_FLIGHT}, got {self.max_in_flight}")
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
        return self

    @classmethod
    def from_librdkafka(cls, name: str, properties: Mapping[str, Any], description: str = "") -> ProducerProfile:
        """The profile of the producer `properties` configure (librdkafka names and aliases; its
        defaults for what they leave out). ValueError names a property acklab cannot honour."""
        fields: dict[str, Any] = {}
        overrides: dict[str, Any] = {}
        transactional_id = None
        for key, value in properties.items():
            target = MANAGED_PROPERTIES.get(key)
            if target is None:
                overrides[key] = value
            elif key == "transactional.id":
                transactional_id = value
            elif key == "transaction.timeout.ms":
                fields.setdefault("transaction", {})["timeout_ms"] = int(value)
            elif target.startswith("the cluster"):
                raise ValueError(f"{key} is set by acklab (the cluster under test), not by the profile")
            else:
                fields[target] = _field_value(target, key, value)
        if transactional_id is None:
            fields.pop("transaction", None)
        else:  # a transactional producer is idempotent
            fields.setdefault("transaction", {})
            fields.setdefault("enable_idempotence", True)
        typed = {**LIBRDKAFKA_DEFAULTS, **fields}
        if typed["enable_idempotence"] and "max_in_flight" not in fields:
            typed["max_in_flight"] = IDEMPOTENT_MAX_IN_FLIGHT
        return cls.model_validate({"name": name, "description": description or "raw librdkafka properties", **typed, "overrides": overrides})


def _field_value(field: str, key: str, value: Any) -> Any:
    """A librdkafka property's value as the typed field wants it."""
    text = str(value).strip().lower()
    if field == "acks":
        return {"-1": "all", "all": "all", "0": "0", "1": "1"}.get(text, text)
    if field == "enable_idempotence":
        if text not in ("true", "false"):
            raise ValueError(f"{key}: expected true or false, got {value!r}")
        return text == "true"
    if field == "partitioner":
        return text
    try:
        return int(value)
    except (TypeError, ValueError):
        raise ValueError(f"{key}: expected an integer, got {value!r}") from None


def profile_from_spec(name: str, spec: Mapping[str, Any], source: str) -> ProducerProfile:
    """A profile from its spec: typed fields, or `{librdkafka: {...}, description: ...}`; SpecError in one line."""
    if not isinstance(spec, Mapping):
        raise SpecError(f"{source}: profile {name}: expected a mapping of fields (or librdkafka: {{property: value}}, or java: {{property: value}})")
    if JAVA in spec:
        extra = set(spec) - {JAVA, RAW, "description"}
        properties = spec[JAVA]
        if extra or not isinstance(properties, Mapping) or not all(isinstance(v, str | int | float | bool) for v in properties.values()):
            raise SpecError(
                f"{source}: profile {name}: expected {JAVA}: {{property: value}} and at most {RAW}: {{property: value}} and a description beside it"
            )
        text = {str(k): str(v).lower() if isinstance(v, bool) else str(v) for k, v in properties.items()}
        if RAW in spec:  # the librdkafka form states the typed fields; the Java client states its own (`ClientFamily.resolve`)
            both = profile_from_spec(name, {key: value for key, value in spec.items() if key != JAVA}, source)
            return parse_model(ProducerProfile, {**both.model_dump(), "java": text}, f"{source}: profile {name}")
        # The typed fields are the Java client's to state, at its version (`ClientFamily.resolve`).
        return parse_model(ProducerProfile, {
            "name": name, "description": str(spec.get("description") or "the user's Java producer properties"), "acks": "all", "java": text,
            "java_only": True,
        }, f"{source}: profile {name}")
    if RAW in spec:
        extra = set(spec) - {RAW, "description"}
        if extra or not isinstance(spec[RAW], Mapping):
            raise SpecError(f"{source}: profile {name}: with {RAW} only `description` may be given beside it, got {sorted(extra)}")
        try:
            return ProducerProfile.from_librdkafka(name, spec[RAW], str(spec.get("description", "")))
        except ValidationError as exc:
            where, message = first_error(exc)
            raise SpecError(f"{source}: profile {name}: {where or '(top level)'}: {message}") from None
        except ValueError as exc:
            raise SpecError(f"{source}: profile {name}: {exc}") from None
    return parse_model(ProducerProfile, {"name": name, **spec}, f"{source}: profile {name}")


@cache
def _catalog_specs() -> dict[str, dict[str, object]]:
    return yaml.safe_load(resources.files("acklab").joinpath(CATALOG).read_text())


def profile_names() -> list[str]:
    """The built-in profiles' names."""
    return sorted(_catalog_specs())


@cache
def catalog() -> dict[str, ProducerProfile]:
    """The built-in profiles, by name."""
    return {name: profile_from_spec(name, spec, "catalog") for name, spec in _catalog_specs().items()}


def load_profiles_file(path: Path) -> dict[str, dict[str, Any]]:
    """The profile specs of a user's profiles file (the catalog's schema), checked; SpecError in one line."""
    specs = load_yaml(path, "profiles file")
    if not isinstance(specs, dict) or not specs:
        raise SpecError(f"profiles file {path}: expected a mapping of profile name -> profile")
    for name, spec in specs.items():
        profile_from_spec(str(name), spec, f"profiles file {path}")
    return {str(name): spec for name, spec in specs.items()}


def get_profile(name: str, custom: Mapping[str, Mapping[str, Any]] | None = None) -> ProducerProfile:
    """A user's profile (`custom`: name -> spec) or a catalog one, by name."""
    if custom and name in custom:
        return profile_from_spec(name, custom[name], "params.custom_profiles")
    profiles = catalog()
    if name not in profiles:
        known = sorted({*profiles, *(custom or {})})
        raise SpecError(f"unknown profile {name!r}; valid: {', '.join(known)}")
    return profiles[name]
