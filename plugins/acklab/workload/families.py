"""Every producer client family acklab runs, by name: one object per family (`acklab.workload.client.Family`).

Each object is the family's implementation (`ClientFamily`: versions, configuration, launching)
with the facts on which the families differ (`FamilyFacts`: its configuration file, its setup
option, whether it splits a refused batch, the error names it records). Code outside
`acklab.workload` asks these objects and never compares a family's name."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path

from acklab.base.spec import SpecError
from acklab.workload import java_client, java_errors
from acklab.workload.client import Client, Family
from acklab.workload.java_client import Java
from acklab.workload.librdkafka import Librdkafka

LIBRDKAFKA_BATCH_BYTES = 1_000_000  # librdkafka's default batch.size and message.max.bytes (CONFIGURATION.md)


class LibrdkafkaFamily(Librdkafka):
    """librdkafka through confluent-kafka: JSON configuration; a refused batch is not split."""

    config_file = "librdkafka.json"
    version_option = "client_version"

    def write_config(self, path: Path, config: Mapping[str, object]) -> None:
        from acklab.store.runs import write_json

        write_json(path, dict(config))

    def read_config(self, client: Client, path: Path) -> dict[str, str]:
        if not path.is_file():
            raise SpecError(f"producer config {path}: no such file")
        try:
            properties = json.loads(path.read_text())
        except ValueError as exc:
            raise SpecError(f"producer config {path}: cannot read it: {exc}") from None
        if not isinstance(properties, dict) or not properties:
            raise SpecError(f"producer config {path}: no properties in it (a JSON object of librdkafka properties)")
        return {str(key): str(value) for key, value in properties.items() if key != "bootstrap.servers"}

    def unsplit_batch_bytes(self, config: Mapping[str, object]) -> int | None:
        """librdkafka does not split a batch the broker answered MESSAGE_TOO_LARGE: its batches
        reach the smaller of batch.size and message.max.bytes."""
        return min(int(str(config.get(key, LIBRDKAFKA_BATCH_BYTES))) for key in ("batch.size", "message.max.bytes"))

    def error_names(self, librdkafka_names: Iterable[str]) -> set[str]:
        return set(librdkafka_names)


class JavaFamily(Java):
    """kafka-clients through acklab's Java driver: producer.properties; a refused batch is split."""

    config_file = "producer.properties"
    version_option = "java_client_version"

    def write_config(self, path: Path, config: Mapping[str, object]) -> None:
        java_client.write_properties(path, dict(sorted(config.items())))

    def read_config(self, client: Client, path: Path) -> dict[str, str]:
        return java_client.read_properties(client, path)

    def unsplit_batch_bytes(self, config: Mapping[str, object]) -> int | None:
        return None

    def error_names(self, librdkafka_names: Iterable[str]) -> set[str]:
        return java_errors.java_names(librdkafka_names)


FAMILIES: Mapping[str, Family] = {family.name: family for family in (LibrdkafkaFamily(), JavaFamily())}
CLIENT_PATTERN = rf"^({'|'.join(FAMILIES)})(:[0-9][0-9A-Za-z.+-]*)?$"
"""A client spec: `FAMILY` (its locked version) or `FAMILY:VERSION`."""
DEFAULT = "librdkafka"
"""The family of `client_version` (the confluent-kafka shorthand) and of a run that names none."""


def default() -> Family:
    return FAMILIES[DEFAULT]


def named(name: str | None) -> Family:
    """The family called `name` (a manifest's or a row's `client_family`; None or "": the default);
    SpecError naming the families otherwise."""
    if not name:
        return default()
    if name not in FAMILIES:
        raise SpecError(f"client family {name!r}: expected one of {', '.join(FAMILIES)}")
    return FAMILIES[name]


def of(client: Client) -> Family:
    """The family `client` belongs to."""
    return FAMILIES[client.family]


def with_config_file(file_name: str) -> Family:
    """The family whose producer configuration file is `file_name` (e.g. ``producer.properties``)."""
    found = next((family for family in FAMILIES.values() if family.config_file == file_name), None)
    if found is None:
        raise SpecError(f"no client family reads {file_name} (they read: {', '.join(f.config_file for f in FAMILIES.values())})")
    return found


def parse(spec: str) -> tuple[Family, str | None]:
    """The family and version of a client spec `FAMILY[:VERSION]`; SpecError naming what is allowed."""
    name, _, version = spec.partition(":")
    if name not in FAMILIES:
        raise SpecError(f"client {spec!r}: expected FAMILY:VERSION with FAMILY one of {', '.join(FAMILIES)} (e.g. java:3.9.1, librdkafka:2.16.1)")
    return FAMILIES[name], version or None


def row_label(row: Mapping[str, object]) -> str:
    """How reports name the client of a matrix row (its client_family, client_version, librdkafka_version)."""
    family = FAMILIES.get(str(row.get("client_family") or DEFAULT), default())
    return family.label(Client(str(row.get("client_version") or "?"), str(row.get("librdkafka_version") or "?"), "", family.name))
