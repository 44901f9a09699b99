"""The facts the guarantee model reads of a scenario (`Setting`): the producer profile's typed
settings, the topology, the fault schedule, and the client that runs it (its family, version and
documented defaults)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from acklab.cluster.topology import Topology
from acklab.nemesis.faults import FAULTS, answers_writes, permanent_error
from acklab.workload import families
from acklab.workload.client import Client
from acklab.workload.processing import TRANSACTIONAL_STYLES
from acklab.workload.profiles import ProducerProfile

if TYPE_CHECKING:
    from acklab.nemesis.schedule import FaultStep

REFUSAL_S = 0.5  # one attempt the leader refuses at once (NOT_ENOUGH_REPLICAS), round trip (generous)
# Faults that swallow or hold requests silently (`FaultSpec.silent`): a request lost in flight, or held
# by a leader cut off from its followers, is retried only after it times out. librdkafka enforces
# request.timeout.ms on the broker only and times requests out after socket.timeout.ms (default 60 s =
# the default delivery timeout: 10 s of request-loss then fails every write in flight, at
# 60 s); profiles set socket.timeout.ms = request_timeout_ms, the client-side timeout of Java's
# request.timeout.ms.
SILENT_FAULTS = frozenset(name for name, spec in FAULTS.items() if spec.silent)


@dataclass(frozen=True)
class Setting:
    """The facts the model reads, from the profile's typed settings and the topology."""

    acks: str  # "0", "1" or "all"
    idempotent: bool
    transactional: bool
    aborts: bool  # the profile aborts some of its transactions
    max_in_flight: int
    retries: int
    min_insync_replicas: int
    unclean_leader_election: bool
    faults: tuple[tuple[str, float], ...]  # (name, duration_s) of each schedule step; () = no fault
    outage_s: float  # from the first fault's start to the last fault's end
    budget_s: float  # a message is retried at least this long before it fails
    silent_s: float  # how long a request lost in flight goes unnoticed (silent faults only, else 0)
    refused_s: float  # a write the leader refuses at once fails within this time
    permanent_error: bool  # a fault answers writes with an error clients do not retry
    errors_writes: bool  # a fault answers produce requests with an error
    family: str = families.DEFAULT  # the client family that runs the scenario
    client_version: str = ""  # its version ("": unknown)
    processing: str | None = None  # a pipeline scenario's processing style (`acklab.workload.processing`); None: a producer scenario
    transaction_version: int = 0  # the transaction protocol its transactions run (`ClientFamily.transaction_version`); 0: none, or unknown (no client)

    @classmethod
    def of(
        cls, profile: ProducerProfile, topology: Topology, schedule: Sequence[FaultStep], client: Client | None = None, processing: str | None = None
    ) -> Setting:
        """The setting of a scenario run by `client` (None: the default family, version unknown),
        with its family's documented defaults (`ClientFamily.defaults`); `processing`: a pipeline's
        style (`profile` then writes its input)."""
        family = families.default() if client is None else families.of(client)
        defaults = family.defaults
        backoff_ms, backoff_max_ms = (
            float(profile.overrides.get(name, defaults[name])) for name in ("retry.backoff.ms", "retry.backoff.max.ms")
        )
        delivery_ms, retries = profile.delivery_timeout_ms, profile.retries
        broker = topology.broker_overrides
        start = min((step.at_s for step in schedule), default=0.0)
        end = max((step.at_s + step.duration_s for step in schedule), default=0.0)
        return cls(
            acks=profile.acks,
            idempotent=profile.enable_idempotence,
            transactional=profile.transaction is not None,
            aborts=profile.transaction is not None and profile.transaction.abort_ratio > 0,
            max_in_flight=profile.max_in_flight,
            retries=retries,
            min_insync_replicas=int(broker.get("min.insync.replicas", topology.min_insync_replicas)),
            unclean_leader_election=str(
                broker.get("unclean.leader.election.enable", topology.unclean_leader_election)
            ).lower()
            == "true",
            faults=tuple((step.fault, step.duration_s) for step in schedule),
            outage_s=end - start,
            budget_s=min(delivery_ms, retries * backoff_ms) / 1000,
            silent_s=profile.request_timeout_ms / 1000 if any(step.fault in SILENT_FAULTS for step in schedule) else 0.0,
            refused_s=min(delivery_ms / 1000, retries * backoff_max_ms / 1000 + (retries + 1) * REFUSAL_S),
            permanent_error=any(permanent_error(step.fault, step.options) for step in schedule),
            errors_writes=any(answers_writes(step.fault, step.options) for step in schedule),
            family=family.name,
            client_version=client.version if client is not None else "",
            processing=processing,
            transaction_version=(
                family.transaction_version(client, topology.kafka_version)
                if client is not None and (profile.transaction is not None or processing in TRANSACTIONAL_STYLES)
                else 0
            ),
        )

    def has(self, fault: str) -> bool:
        return any(name == fault for name, _ in self.faults)

    def longest(self, fault: str) -> float:
        """The longest step of `fault` in seconds (0 if none)."""
        return max((duration for name, duration in self.faults if name == fault), default=0.0)

    def only(self, faults: frozenset[str]) -> bool:
        """The schedule has faults, all of them in `faults`."""
        return bool(self.faults) and all(name in faults for name, _ in self.faults)
