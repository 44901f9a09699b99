"""The guarantee model (the *model* seam): what a scenario's matrix row must show.

Pure logic, as explicit tables: (producer profile, topology, fault schedule) -> the guarantee class
(``CLASS_RULES``, first match wins) and the exact expectations of the row: what the class promises
under any fault (``PROMISES``), what every class promises without a fault (``NO_FAULT_ZERO``), and
the availability and efficacy rules that match the setting (``RULES``). Each expectation names the
Great Expectations suite that checks it (see ``acklab.checker.verdict``); ``docs/guarantees.md`` is
generated from these tables (``acklab model-table``).

Kinds: a violated *evidence* expectation means the load did not happen as planned (messages never
sent, refused by the client, or of unknown outcome), so the scenario is incomplete, never a pass;
a violated *guarantee* expectation fails the scenario; so does a violated *availability*
expectation once the fault took effect; a violated *efficacy* expectation means the fault did not
do what the experiment needs ("fault ineffective"), so the scenario is incomplete, never a pass.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from acklab.cluster.topology import Topology
from acklab.nemesis.faults import FAULTS, NO_FAULT, permanent_error
from acklab.workload import families
from acklab.workload.profiles import ProducerProfile

if TYPE_CHECKING:
    from acklab.nemesis.schedule import FaultStep

RECOVERY_S = 30.0  # after a fault ends: restart, catch up, rejoin the ISR, elect (seconds, generous)
REFUSAL_S = 0.5  # one attempt the leader refuses at once (NOT_ENOUGH_REPLICAS), round trip (generous)

# Faults whose effect on a producer ends when their window ends (`FaultSpec.bounded`), and those that
# swallow or hold requests silently (`FaultSpec.silent`): a request lost in flight, or held by a
# leader cut off from its followers, is retried only after it times out. librdkafka enforces request.timeout.ms on the broker only and times
# requests out after socket.timeout.ms (default 60 s = the default delivery timeout: measured, 10 s
# of request-loss then failed every write in flight, at 60 s); profiles set socket.timeout.ms =
# request_timeout_ms, the client-side timeout of Java's request.timeout.ms.
BOUNDED_FAULTS = frozenset(name for name, spec in FAULTS.items() if spec.bounded and name != NO_FAULT)
SILENT_FAULTS = frozenset(name for name, spec in FAULTS.items() if spec.silent)


class Guarantee(StrEnum):
    """Delivery guarantee classes, weakest first."""

    AT_MOST_ONCE = "at-most-once"
    LEADER_DURABLE = "leader-durable"
    AT_LEAST_ONCE = "at-least-once"
    AT_LEAST_ONCE_ORDERED = "at-least-once-ordered"
    EXACTLY_ONCE = "exactly-once"
    TRANSACTIONAL = "transactional"


class Kind(StrEnum):
    """What a violated expectation means: see the module docstring."""

    EVIDENCE = "evidence"
    GUARANTEE = "guarantee"
    AVAILABILITY = "availability"
    EFFICACY = "efficacy"


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

    @classmethod
    def of(
        cls, profile: ProducerProfile, topology: Topology, schedule: Sequence[FaultStep], client_defaults: Mapping[str, float] | None = None
    ) -> Setting:
        """The setting of a scenario; `client_defaults`: the documented defaults of the client family
        that runs it (`ClientFamily.defaults`; None: the default family's)."""
        defaults = families.default().defaults if client_defaults is None else client_defaults
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
        )

    def has(self, fault: str) -> bool:
        return any(name == fault for name, _ in self.faults)

    def longest(self, fault: str) -> float:
        """The longest step of `fault` in seconds (0 if none)."""
        return max((duration for name, duration in self.faults if name == fault), default=0.0)

    def only(self, faults: frozenset[str]) -> bool:
        """The schedule has faults, all of them in `faults`."""
        return bool(self.faults) and all(name in faults for name, _ in self.faults)


@dataclass(frozen=True)
class Expectation:
    """One bound on one matrix column, with the suite that checks it and why it holds."""

    column: str
    min: float | None
    max: float | None
    kind: Kind
    suite: str
    rule: str
    no_fault_only: bool = False  # applies only to rows whose fault is `none`

    def text(self) -> str:
        """``lost == 0``, ``failed >= 1``, ``x <= 5`` or ``1 <= x <= 5``."""
        low, high = (None if v is None else f"{v:g}" for v in (self.min, self.max))
        if low is not None and low == high:
            return f"{self.column} == {low}"
        if high is None:
            return f"{self.column} >= {low}"
        return f"{self.column} <= {high}" if low is None else f"{low} <= {self.column} <= {high}"

    def holds(self, value: float | None) -> bool:
        """Whether `value` meets the bound (a missing value never does)."""
        if value is None:
            return False
        return (self.min is None or value >= self.min) and (self.max is None or value <= self.max)

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "kind": str(self.kind)}


@dataclass(frozen=True)
class Expected:
    """What the model expects of one scenario: its class and the exact expectations of its row."""

    guarantee: Guarantee
    expectations: tuple[Expectation, ...]
    reason: str = ""  # which class rule matched and the settings that decided it

    @property
    def suites(self) -> tuple[str, ...]:
        """The suites that check this row, class suite first."""
        return tuple(dict.fromkeys([guarantee_suite(self.guarantee), *(e.suite for e in self.expectations)]))


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

# Why a column must be zero, once per column.
ZERO_BECAUSE: Mapping[str, str] = {
    "lost": "An acknowledged record must be readable from the topic.",
    "duplicates": "No record may be written twice.",
    "reordered": "Records of a key must sit in send order within their partition.",
    "offset_mismatch": "An acknowledged record must sit at the offset its acknowledgement named.",
    "misrouted": "A keyed record, retried or not, must land in the partition its key hashes to.",
    "aborted_visible": "A read_committed reader must not see records of aborted transactions.",
    "hanging_partitions": "Every transaction must end: a partition whose last stable offset stays below its high watermark "
    "after the transactions timed out holds a hanging transaction that stalls read_committed readers (KAFKA-14402).",
}


@dataclass(frozen=True)
class Promise:
    summary: str
    zero: tuple[str, ...]  # columns that are zero under any fault


PROMISES: Mapping[Guarantee, Promise] = {
    Guarantee.AT_MOST_ONCE: Promise(
        "acks=0: the producer never hears from the broker, so it never retries: records may be "
        "lost, never duplicated.",
        ("duplicates", "misrouted"),
    ),
    Guarantee.LEADER_DURABLE: Promise(
        "A record is acknowledged once the leader has it (acks=1, or an ISR that may shrink to the "
        "leader, or an out-of-sync replica that may be elected): it may be lost when the leader "
        "fails or is cut off from its followers, and retries may duplicate and reorder.",
        ("misrouted",),
    ),
    Guarantee.AT_LEAST_ONCE: Promise(
        "acks=all with min.insync.replicas >= 2 and clean election: no acknowledged record is "
        "lost (a leader cut off from its followers cannot acknowledge alone); retries may "
        "duplicate, and with more than one request in flight, reorder.",
        ("lost", "offset_mismatch", "misrouted"),
    ),
    Guarantee.AT_LEAST_ONCE_ORDERED: Promise(
        "at-least-once with one request in flight per connection: retries may duplicate, and "
        "librdkafka documents that they may reorder unless enable.idempotence is set (a leader "
        "change opens another connection); that order holds is the belief `in-flight-1-keeps-order`, "
        "checked apart (acklab.model.beliefs), not promised.",
        ("lost", "offset_mismatch", "misrouted"),
    ),
    Guarantee.EXACTLY_ONCE: Promise(
        "Idempotent producer on a replicated topic: the broker drops retried batches by producer "
        "id and sequence, so each record is written once, in send order per partition (within "
        "one producer session).",
        ("lost", "duplicates", "reordered", "offset_mismatch", "misrouted"),
    ),
    Guarantee.TRANSACTIONAL: Promise(
        "Transactional producer: exactly-once, and records of aborted transactions are invisible "
        "to read_committed readers.",
        ("lost", "duplicates", "reordered", "offset_mismatch", "misrouted", "aborted_visible", "hanging_partitions"),
    ),
}
# Without a fault nothing is lost, duplicated or moved, whatever the class.
NO_FAULT_ZERO: tuple[str, ...] = ("lost", "duplicates", "offset_mismatch")


@dataclass(frozen=True)
class Rule:
    """An availability or efficacy rule: when it applies, the bounds it sets, and why."""

    name: str
    kind: Kind
    when: str
    test: Callable[[Setting], bool]
    bounds: tuple[tuple[str, float | None, float | None], ...]
    why: str

    @property
    def suite(self) -> str:
        return f"{self.kind}_{self.name}"

    def expectations(self) -> tuple[Expectation, ...]:
        return tuple(Expectation(c, low, high, self.kind, self.suite, self.why) for c, low, high in self.bounds)


RULES: tuple[Rule, ...] = (
    Rule(
        "load-as-planned",
        Kind.EVIDENCE,
        "always",
        lambda s: True,
        (("unsent", 0, 0), ("refused", 0, 0), ("unknown", 0, 0)),
        "Every planned message was handed to the producer and has a known outcome; messages never sent "
        "(the load stopped early), refused by produce() itself or of unknown outcome leave the experiment "
        "short of its plan. Messages a fatal producer error failed are not a gap: they count in `fatal`.",
    ),
    Rule(
        "healthy-cluster",
        Kind.AVAILABILITY,
        "fault none",
        lambda s: not s.faults,
        (("failed_clean", 0, 0), ("indeterminate", 0, 0), ("fatal", 0, 0)),
        "A healthy cluster acknowledges every write and the producer reports it (records of aborted "
        "transactions are counted apart).",
    ),
    Rule(
        "idempotence-recovers",
        Kind.AVAILABILITY,
        "enable.idempotence, min.insync.replicas >= 2, clean election",
        lambda s: s.idempotent and s.min_insync_replicas >= 2 and not s.unclean_leader_election,
        (("fatal", 0, 0),),
        "librdkafka's idempotent producer recovers from retriable errors, request timeouts and lost "
        "connections by itself; it raises a fatal error only when it can no longer keep its guarantee "
        "(INTRODUCTION.md, 'Idempotent Producer'), e.g. when acknowledged data was lost, which a "
        "replicated topic with clean election does not do. A fatal error here fails every message it "
        "had not delivered.",
    ),
    Rule(
        "outage-outlasted",
        Kind.AVAILABILITY,
        f"faults all in {{{', '.join(sorted(BOUNDED_FAULTS))}}}, none answering a non-retriable error, acks != 0, "
        f"and the producer retries at least the outage + {RECOVERY_S:g} s (min(delivery.timeout.ms, retries x "
        f"retry.backoff.ms)), + request.timeout.ms for {', '.join(sorted(SILENT_FAULTS))} (a lost or held "
        "request is noticed only then)",
        lambda s: s.only(BOUNDED_FAULTS)
        and not s.permanent_error
        and s.acks != "0"
        and s.budget_s >= s.outage_s + s.silent_s + RECOVERY_S,
        (("failed_clean", 0, 0), ("indeterminate", 0, 0)),
        "The producer keeps retrying until the cluster serves again, so no write fails (records of "
        "aborted transactions are counted apart).",
    ),
    Rule(
        "transaction-aborts",
        Kind.EFFICACY,
        "transactional, abort_ratio > 0",
        lambda s: s.aborts,
        (("aborted", 1, None),),
        "Some transactions must abort, or aborted_visible == 0 proves nothing.",
    ),
)
# Then what each fault must do to the guarantees' columns (`FaultSpec.effects`), in catalog order.
RULES += tuple(Rule(e.name, Kind.EFFICACY, e.when, e.test, e.bounds, e.why) for spec in FAULTS.values() for e in spec.effects)


def guarantee_suite(guarantee: Guarantee | str) -> str:
    """The suite of a guarantee class."""
    return f"guarantee_{Guarantee(guarantee)}"


def classify(setting: Setting) -> Guarantee:
    """The class of the first rule of ``CLASS_RULES`` that matches."""
    return CLASS_RULES[_first_match(setting)].guarantee


def _first_match(setting: Setting) -> int:
    return next(number for number, rule in enumerate(CLASS_RULES) if rule.test(setting))


def reason(setting: Setting) -> str:
    """Why `setting` gets its class: the rule that matched, and the settings every rule up to it read
    (the earlier rules did not match on them, this one did)."""
    number = _first_match(setting)
    read = dict.fromkeys(field for rule in CLASS_RULES[: number + 1] for field in rule.reads)
    values = ", ".join(f"{SETTING_NAMES[field]}={_show(getattr(setting, field))}" for field in read)
    return f"rule {number + 1} ({CLASS_RULES[number].when}) matched" + (f"; decided by {values}" if values else "")


def _show(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def class_expectations(guarantee: Guarantee) -> tuple[Expectation, ...]:
    """Everything the class suite checks: its promise, then the no-fault extras."""
    suite, promise = guarantee_suite(guarantee), PROMISES[guarantee]
    extra = [column for column in NO_FAULT_ZERO if column not in promise.zero]
    return tuple(
        Expectation(column, 0, 0, Kind.GUARANTEE, suite, ZERO_BECAUSE[column], no_fault_only=column in extra)
        for column in (*promise.zero, *extra)
    )


def expect_setting(setting: Setting) -> Expected:
    """The class and the exact expectations of a row with this setting."""
    guarantee = classify(setting)
    expectations = [e for e in class_expectations(guarantee) if not e.no_fault_only or not setting.faults]
    for rule in RULES:
        if rule.test(setting):
            expectations += rule.expectations()
    return Expected(guarantee, tuple(expectations), reason(setting))


def expect(
    profile: ProducerProfile, topology: Topology, schedule: Sequence[FaultStep], client_defaults: Mapping[str, float] | None = None
) -> Expected:
    """What a scenario of `profile` on `topology` under `schedule` must show (`Setting.of`)."""
    return expect_setting(Setting.of(profile, topology, schedule, client_defaults))


def suite_expectations() -> dict[str, tuple[Expectation, ...]]:
    """Every suite the model uses, with all its expectations: the class suites, then the rules."""
    suites = {guarantee_suite(g): class_expectations(g) for g in Guarantee}
    suites.update({rule.suite: rule.expectations() for rule in RULES})
    return suites
