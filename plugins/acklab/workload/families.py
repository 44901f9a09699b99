"""Every producer client family acklab runs, by name (`acklab.workload.client.ClientFamily`)."""

from __future__ import annotations

from collections.abc import Mapping

from acklab.workload.client import Client, ClientFamily
from acklab.workload.librdkafka import Librdkafka

FAMILIES: Mapping[str, ClientFamily] = {family.name: family for family in (Librdkafka(),)}
DEFAULT = "librdkafka"
"""The family of `client_version` (the confluent-kafka shorthand) and of a run that names none."""


def default() -> ClientFamily:
    return FAMILIES[DEFAULT]


def of(client: Client) -> ClientFamily:
    """The family `client` belongs to."""
    return FAMILIES[client.family]
