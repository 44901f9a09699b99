"""Every producer client family acklab runs, by name (`acklab.workload.client.ClientFamily`)."""

from __future__ import annotations

from collections.abc import Mapping

from acklab.base.spec import SpecError
from acklab.workload.client import Client, ClientFamily
from acklab.workload.java_client import Java
from acklab.workload.librdkafka import Librdkafka

FAMILIES: Mapping[str, ClientFamily] = {family.name: family for family in (Librdkafka(), Java())}
CLIENT_PATTERN = r"^(librdkafka|java)(:[0-9][0-9A-Za-z.+-]*)?$"
"""A client spec: `FAMILY` (its locked version) or `FAMILY:VERSION`."""
DEFAULT = "librdkafka"
"""The family of `client_version` (the confluent-kafka shorthand) and of a run that names none."""


def default() -> ClientFamily:
    return FAMILIES[DEFAULT]


def of(client: Client) -> ClientFamily:
    """The family `client` belongs to."""
    return FAMILIES[client.family]


def parse(spec: str) -> tuple[ClientFamily, str | None]:
    """The family and version of a client spec `FAMILY[:VERSION]`; SpecError naming what is allowed."""
    name, _, version = spec.partition(":")
    if name not in FAMILIES:
        raise SpecError(f"client {spec!r}: expected FAMILY:VERSION with FAMILY one of {', '.join(FAMILIES)} (e.g. java:3.9.1, librdkafka:2.16.1)")
    return FAMILIES[name], version or None


def row_label(row: Mapping[str, object]) -> str:
    """How reports name the client of a matrix row (its client_family, client_version, librdkafka_version)."""
    family = FAMILIES.get(str(row.get("client_family") or DEFAULT), default())
    return family.label(Client(str(row.get("client_version") or "?"), str(row.get("librdkafka_version") or "?"), "", family.name))
