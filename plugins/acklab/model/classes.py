"""Delivery guarantee classes and how a setting gets its class: ``CLASS_RULES``, first match wins."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum

from acklab.model.setting import Setting


class Guarantee(StrEnum):
    """Delivery guarantee classes, weakest first."""

    AT_MOST_ONCE = "at-most-once"
    LEADER_DURABLE = "leader-durable"
    AT_LEAST_ONCE = "at-least-once"
    AT_LEAST_ONCE_ORDERED = "at-least-once-ordered"
    EXACTLY_ONCE = "exactly-once"
    TRANSACTIONAL = "transactional"


@dataclass(frozen=True)
class ClassRule:
    when: str
    test: Callable[[Setting], bool]
    guarantee: Guarantee
    reads: tuple[str, ...] = ()  # the Setting fields `test` looks at


# How the settings a class rule reads are named in a reason.
SETTING_NAMES: Mapping[str, str] = {
    "acks": "acks",
    "min_insync_replicas": "min.insync.replicas",
    "unclean_leader_election": "unclean.leader.election.enable",
    "transactional": "transactional",
    "idempotent": "enable.idempotence",
    "max_in_flight": "max.in.flight",
}

# First match wins. acks=all waits for the current ISR only, so it is as weak as acks=1 when the
# ISR may shrink to the leader alone (min.insync.replicas=1) or an out-of-sync replica may lead.
CLASS_RULES: tuple[ClassRule, ...] = (
    ClassRule("acks=0", lambda s: s.acks == "0", Guarantee.AT_MOST_ONCE, ("acks",)),
    ClassRule("acks=1", lambda s: s.acks == "1", Guarantee.LEADER_DURABLE, ("acks",)),
    ClassRule("min.insync.replicas < 2", lambda s: s.min_insync_replicas < 2, Guarantee.LEADER_DURABLE, ("min_insync_replicas",)),
    ClassRule("unclean.leader.election.enable=true", lambda s: s.unclean_leader_election, Guarantee.LEADER_DURABLE, ("unclean_leader_election",)),
    ClassRule("transactional (transactional.id)", lambda s: s.transactional, Guarantee.TRANSACTIONAL, ("transactional",)),
    ClassRule("enable.idempotence=true", lambda s: s.idempotent, Guarantee.EXACTLY_ONCE, ("idempotent",)),
    ClassRule("max.in.flight.requests.per.connection=1", lambda s: s.max_in_flight == 1, Guarantee.AT_LEAST_ONCE_ORDERED, ("max_in_flight",)),
    ClassRule("otherwise (acks=all, min.insync >= 2, clean election)", lambda s: True, Guarantee.AT_LEAST_ONCE),
)

def classify(setting: Setting) -> Guarantee:
    """The class of the first rule of ``CLASS_RULES`` that matches."""
    return CLASS_RULES[_first_match(setting)].guarantee


def _first_match(setting: Setting) -> int:
    return next(number for number, rule in enumerate(CLASS_RULES) if rule.test(setting))


TRANSACTION_VERSIONS: Mapping[int, str] = {
    1: "transaction version 1: a transaction's producer epoch is the producer's, so a late EndTxn of an earlier "
    "transaction is taken as the end of the open one (KAFKA-17754; fenced only by version 2)",
    2: "transaction version 2 (KIP-890 part 2): every transaction bumps the producer epoch, so a late EndTxn or "
    "write of an earlier transaction is fenced",
}
"""The transaction protocols (`Setting.transaction_version`): the guarantee is the same on both
(exactly-once, documented), so a row of either that loses or duplicates is red; version 1 leaves a
late EndTxn unfenced, a bug of its protocol that only version 2 closes."""


def reason(setting: Setting) -> str:
    """Why `setting` gets its class: the rule that matched, and the settings every rule up to it read
    (the earlier rules did not match on them, this one did); for a setting with transactions, the
    protocol they run (`TRANSACTION_VERSIONS`)."""
    number = _first_match(setting)
    read = dict.fromkeys(field for rule in CLASS_RULES[: number + 1] for field in rule.reads)
    values = ", ".join(f"{SETTING_NAMES[field]}={_show(getattr(setting, field))}" for field in read)
    protocol = f"; {TRANSACTION_VERSIONS[setting.transaction_version]}" if setting.transaction_version else ""
    return f"rule {number + 1} ({CLASS_RULES[number].when}) matched" + (f"; decided by {values}" if values else "") + protocol


def _show(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)
