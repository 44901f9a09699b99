"""The guarantee model (the *model* seam): which delivery guarantee a scenario must show.

Pure logic: (producer profile, topology, fault) -> guarantee class. The Great Expectations
suite of each class encodes what the class promises (see `acklab.checker.verdict`).
"""

from __future__ import annotations

from enum import StrEnum

from acklab.profiles import ProducerProfile
from acklab.topology import Topology


class Guarantee(StrEnum):
    """Delivery guarantee classes, weakest first."""

    AT_MOST_ONCE = "at-most-once"  # loss allowed, the client is never told
    LEADER_DURABLE = "leader-durable"  # acked writes survive unless the leader fails
    AT_LEAST_ONCE = "at-least-once"  # no acked write is lost; duplicates allowed
    EXACTLY_ONCE = "exactly-once"  # per partition: no loss, no duplicates, no reordering


def expected_guarantee(profile: ProducerProfile, topology: Topology, fault: str) -> Guarantee:
    """The guarantee Kafka documents for this producer on this topology, under `fault`."""
    del fault  # no fault of the current catalog weakens or strengthens a class
    if profile.acks == "0":
        return Guarantee.AT_MOST_ONCE
    replicated = profile.acks == "all" and topology.min_insync_replicas >= 2 and not topology.unclean_leader_election
    if not replicated:
        return Guarantee.LEADER_DURABLE
    if profile.enable_idempotence:
        return Guarantee.EXACTLY_ONCE
    return Guarantee.AT_LEAST_ONCE
