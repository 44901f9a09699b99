"""The claims registry (the *model* seam): every claim acklab checks, each stated once.

A claim says what a matrix row must show for the settings it applies to (`Scope`: the model's
`Setting`, and the client families and versions it is documented for), as bounds over matrix columns
(`Expectation`). A *documented* claim is what the client or broker documents: the guarantee each
class promises (``PROMISES``), the evidence, availability and efficacy rules (``RULES``), and what
each fault must do (`acklab.nemesis.faults.FaultSpec.effects`); a row that violates one is judged by
its kind. A *belief* (kind ``belief``) is what users assume and nobody documents: it is only ever
confirmed or refuted, a finding, never a red row (``BELIEFS``). ``CLAIMS`` holds them all; the
verdict's expectations and the GX suites (`acklab.model.guarantees`, `acklab.checker.gx_suites`), the
beliefs page (`acklab.model.beliefs`), the preset observations that restate a claim
(`acklab.plan.presets`) and docs/guarantees.md are generated from it.

Kinds: a violated *evidence* expectation means the load did not happen as planned (messages never
sent, refused by the client, or of unknown outcome), so the scenario is incomplete, never a pass;
a violated *guarantee* expectation fails the scenario; so does a violated *availability*
expectation once the fault took effect; a violated *efficacy* expectation means the fault did not
do what the experiment needs ("fault ineffective"), so the scenario is incomplete, never a pass.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

from acklab.model.classes import Guarantee, classify
from acklab.model.setting import SILENT_FAULTS, Setting
from acklab.nemesis.faults import FAULTS, NO_FAULT, PLANTING

RECOVERY_S = 30.0  # after a fault ends: restart, catch up, rejoin the ISR, elect (seconds, generous)
# Faults whose effect on a producer ends when their window ends (`FaultSpec.bounded`).
BOUNDED_FAULTS = frozenset(name for name, spec in FAULTS.items() if spec.bounded and name != NO_FAULT)


class Kind(StrEnum):
    """What a violated expectation means (see the module docstring); `belief`: only a finding."""

    EVIDENCE = "evidence"
    GUARANTEE = "guarantee"
    AVAILABILITY = "availability"
    EFFICACY = "efficacy"
    BELIEF = "belief"


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
class Scope:
    """The settings a claim applies to: `test` over the model's `Setting` (`when`, in words), for
    the client `families` it is documented for (None: every family) and their versions matching
    `versions` (a PEP 440 specifier, e.g. ``<2.3.0``; "": every version)."""

    when: str
    test: Callable[[Setting], bool]
    families: frozenset[str] | None = None
    versions: str = ""

    def applies(self, setting: Setting) -> bool:
        if self.families is not None and setting.family not in self.families:
            return False
        if self.versions and setting.client_version:
            from packaging.specifiers import SpecifierSet  # only at plan time

            if setting.client_version not in SpecifierSet(self.versions):
                return False
        return self.test(setting)


Bound = tuple[str, float | None, float | None]
"""(matrix column, min, max); None: unbounded."""


@dataclass(frozen=True)
class Claim:
    """One claim: `id` (the GX suite of a documented claim, the name of a belief), what it says
    (`text`), its `kind`, where it applies (`scope`), and its check over matrix columns: `bounds`
    under any fault and `no_fault_bounds` only without a fault, each with why it holds (`reasons`,
    per column, else `why`). A belief also names its `source` and what is documented `instead`."""

    id: str
    kind: Kind
    text: str
    scope: Scope
    bounds: tuple[Bound, ...]
    why: str = ""
    reasons: Mapping[str, str] = field(default_factory=dict)
    no_fault_bounds: tuple[Bound, ...] = ()
    source: str = ""
    instead: str = ""

    @property
    def documented(self) -> bool:
        return self.kind is not Kind.BELIEF

    def expectations(self) -> tuple[Expectation, ...]:
        """Every bound as an expectation of the claim's suite (the no-fault ones marked)."""
        return tuple(
            Expectation(column, low, high, self.kind, self.id, self.reasons.get(column, self.why), no_fault_only=no_fault)
            for bounds, no_fault in ((self.bounds, False), (self.no_fault_bounds, True))
            for column, low, high in bounds
        )


def guarantee_suite(guarantee: Guarantee | str) -> str:
    """The suite (and claim id) of a guarantee class."""
    return f"guarantee_{Guarantee(guarantee)}"


def suite_class(suite: str) -> Guarantee | None:
    """The guarantee class whose promise `suite` checks; None for a rule's suite (a guarantee rule
    such as `guarantee_in-flight-1-keeps-order` applies within classes)."""
    return next((g for g in Guarantee if guarantee_suite(g) == suite), None)


# Why a column must be zero, once per column.
ZERO_BECAUSE: Mapping[str, str] = {
    "lost": "An acknowledged record must be readable from the topic.",
    "duplicates": "No record may be written twice.",
    "reordered": "Records of a key must sit in send order within their partition.",
    "offset_mismatch": "An acknowledged record must sit at the offset its acknowledgement named.",
    "misrouted": "A keyed record, retried or not, must land in the partition its key hashes to.",
    "misdirected": "A record must land in the topic it was sent to (KAFKA-19012: a reused buffer sent records to another topic).",
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
        ("duplicates", "misrouted", "misdirected"),
    ),
    Guarantee.LEADER_DURABLE: Promise(
        "A record is acknowledged once the leader has it (acks=1, or an ISR that may shrink to the "
        "leader, or an out-of-sync replica that may be elected): it may be lost when the leader "
        "fails or is cut off from its followers, and retries may duplicate and reorder.",
        ("misrouted", "misdirected"),
    ),
    Guarantee.AT_LEAST_ONCE: Promise(
        "acks=all with min.insync.replicas >= 2 and clean election: no acknowledged record is "
        "lost (a leader cut off from its followers cannot acknowledge alone); retries may "
        "duplicate, and with more than one request in flight, reorder.",
        ("lost", "offset_mismatch", "misrouted", "misdirected"),
    ),
    Guarantee.AT_LEAST_ONCE_ORDERED: Promise(
        "at-least-once with one request in flight per connection: retries may duplicate; order is "
        "the client's: the Java client documents that it holds (`guarantee_in-flight-1-keeps-order`), "
        "librdkafka documents that retries may reorder unless enable.idempotence is set (a leader "
        "change opens another connection), so there that order holds is the belief "
        "`in-flight-1-keeps-order`, checked apart (acklab.model.beliefs), not promised.",
        ("lost", "offset_mismatch", "misrouted", "misdirected"),
    ),
    Guarantee.EXACTLY_ONCE: Promise(
        "Idempotent producer on a replicated topic: the broker drops retried batches by producer "
        "id and sequence, so each record is written once, in send order per partition (within "
        "one producer session).",
        ("lost", "duplicates", "reordered", "offset_mismatch", "misrouted", "misdirected"),
    ),
    Guarantee.TRANSACTIONAL: Promise(
        "Transactional producer: exactly-once, and records of aborted transactions are invisible "
        "to read_committed readers.",
        ("lost", "duplicates", "reordered", "offset_mismatch", "misrouted", "misdirected", "aborted_visible", "hanging_partitions"),
    ),
}
# Without a fault nothing is lost, duplicated or moved, whatever the class.
NO_FAULT_ZERO: tuple[str, ...] = ("lost", "duplicates", "offset_mismatch")


def _class_claim(guarantee: Guarantee) -> Claim:
    """What a class promises: its zero columns under any fault, then the no-fault extras."""
    promise = PROMISES[guarantee]
    extra = [column for column in NO_FAULT_ZERO if column not in promise.zero]
    return Claim(
        guarantee_suite(guarantee), Kind.GUARANTEE, promise.summary,
        Scope(f"class {guarantee}", lambda s: classify(s) is guarantee),
        tuple((column, 0, 0) for column in promise.zero), reasons=ZERO_BECAUSE,
        no_fault_bounds=tuple((column, 0, 0) for column in extra),
    )


def _rule(name: str, kind: Kind, when: str, test: Callable[[Setting], bool], bounds: tuple[Bound, ...], why: str, **scope: Any) -> Claim:
    """An evidence, availability or efficacy rule: its suite is `<kind>_<name>`."""
    return Claim(f"{kind}_{name}", kind, why, Scope(when, test, **scope), bounds, why)


RULES: tuple[Claim, ...] = (
    _rule(
        "load-as-planned",
        Kind.EVIDENCE,
        "always",
        lambda s: True,
        (("unsent", 0, 0), ("refused", 0, 0), ("unknown", 0, 0)),
        "Every planned message was handed to the producer and has a known outcome; messages never sent "
        "(the load stopped early), refused by produce() itself or of unknown outcome leave the experiment "
        "short of its plan. Messages a fatal producer error failed are not a gap: they count in `fatal`.",
    ),
    _rule(
        "healthy-cluster",
        Kind.AVAILABILITY,
        "fault none",
        lambda s: not s.faults,
        (("failed_clean", 0, 0), ("indeterminate", 0, 0), ("fatal", 0, 0)),
        "A healthy cluster acknowledges every write and the producer reports it (records of aborted "
        "transactions are counted apart).",
    ),
    _rule(
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
        families=frozenset({"librdkafka"}),
    ),
    _rule(
        "in-flight-1-keeps-order",
        Kind.GUARANTEE,
        "acks != 0, max.in.flight.requests.per.connection=1",
        lambda s: s.acks != "0" and s.max_in_flight == 1,
        (("reordered", 0, 0),),
        "The Java client documents that retries reorder records only with more than one request in flight "
        "without idempotence (ProducerConfig, `max.in.flight.requests.per.connection`: with 1, ordering is "
        "preserved): it sends one batch of a partition at a time, also across a leader change.",
        families=frozenset({"java"}),
    ),
    _rule(
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
    *(
        _rule(plants.claim[0], Kind.GUARANTEE, f"fault {fault}", lambda s, fault=fault: s.has(fault), ((plants.counted, 0, 0),), plants.claim[1])
        for fault, plants in PLANTING.items()
    ),
    _rule(
        "processing-exactly-once",
        Kind.GUARANTEE,
        "processing eos (and eos-naive, the planted bug that claims it)",
        lambda s: s.processing in ("eos", "eos-naive"),
        (("processed_lost", 0, 0), ("processed_duplicated", 0, 0), ("output_aborted_visible", 0, 0), ("zombie_writes", 0, 0)),
        "A processor that produces its output and sends its consumer offsets in one transaction (KIP-447: "
        "sendOffsetsToTransaction with the consumer's group metadata; send_offsets_to_transaction in librdkafka) commits "
        "each input's effect once: every input whose offset the group committed has exactly one committed output, "
        "output of aborted transactions is invisible to read_committed readers, and a member the group moved past "
        "(a zombie) can neither write nor commit offsets (Kafka's KIP-447; both clients' transactional producer docs).",
    ),
    _rule(
        "processing-at-least-once",
        Kind.GUARANTEE,
        "processing at-least-once",
        lambda s: s.processing == "at-least-once",
        (("processed_lost", 0, 0),),
        "A processor that flushes its output before it commits the offsets never loses an input whose offset was "
        "committed; an input processed again after a crash or a rebalance is duplicated, which is allowed.",
    ),
    _rule(
        "processing-at-most-once",
        Kind.GUARANTEE,
        "processing at-most-once",
        lambda s: s.processing == "at-most-once",
        (("processed_duplicated", 0, 0),),
        "A processor that commits the offsets before it produces never processes an input twice (its producer is "
        "idempotent); an input whose offset was committed and whose output was not produced is lost, which is allowed.",
    ),
    _rule(
        "pipeline-drained",
        Kind.EVIDENCE,
        "a pipeline (processing set)",
        lambda s: s.processing is not None,
        (("unprocessed", 0, 0),),
        "Every acknowledged input was consumed and its offset committed by the end of the drain; an input never "
        "consumed says nothing about the processing guarantee, so the scenario is incomplete.",
    ),
    _rule(
        "transaction-aborts",
        Kind.EFFICACY,
        "transactional, abort_ratio > 0",
        lambda s: s.aborts,
        (("aborted", 1, None),),
        "Some transactions must abort, or aborted_visible == 0 proves nothing.",
    ),
)
# Then what each fault must do to the guarantees' columns (`FaultSpec.effects`), in catalog order.
RULES += tuple(_rule(e.name, Kind.EFFICACY, e.when, e.test, e.bounds, e.why) for spec in FAULTS.values() for e in spec.effects)


def _belief(name: str, claim: str, source: str, documented: str, when: str, test: Callable[[Setting], bool], column: str, **scope: Any) -> Claim:
    """A belief judged by one column: zero confirms it, more refutes it."""
    return Claim(name, Kind.BELIEF, claim, Scope(when, test, **scope), ((column, 0, 0),), source=source, instead=documented)


# Claims users hold that the client or broker does not document. Each applies only under a fault
# (undisturbed, every one trivially holds).
BELIEFS: tuple[Claim, ...] = (
    _belief(
        "in-flight-1-keeps-order",
        "max.in.flight.requests.per.connection=1 keeps each key's records in order, without idempotence",
        "field notes, producer settings (Java client semantics)",
        "librdkafka CONFIGURATION.md, `retries`: retrying may cause reordering unless enable.idempotence "
        "is set; a leader change opens another connection, each with its own request in flight",
        "acks != 0, enable.idempotence=false, max.in.flight=1, under a fault",
        lambda s: s.acks != "0" and not s.idempotent and s.max_in_flight == 1 and bool(s.faults),
        "reordered",
        families=frozenset({"librdkafka"}),  # the Java client documents it
    ),
    _belief(
        "acks-all-no-loss",
        "acks=all means no acknowledged record is lost",
        "field notes (folklore)",
        "acks=all waits for the current ISR only: with min.insync.replicas=1 or unclean leader election "
        "an acknowledged record may sit on one broker and be lost with it",
        "acks=all, under a fault",
        lambda s: s.acks == "all" and bool(s.faults),
        "lost",
    ),
    _belief(
        "retries-keep-partition",
        "a keyed record that is retried lands in the partition its key maps to",
        "field notes #6",
        "the partitioner maps a key to the same partition on every attempt while the partition count "
        "is unchanged (librdkafka's default consistent_random hashes with CRC32, Java's with murmur2)",
        "any profile, under a fault",
        lambda s: bool(s.faults),
        "misrouted",
    ),
)

CLAIMS: tuple[Claim, ...] = (*(_class_claim(g) for g in Guarantee), *RULES, *BELIEFS)
_BY_ID = {claim.id: claim for claim in CLAIMS}


def claim(claim_id: str) -> Claim:
    """The registry's claim `claim_id` (KeyError naming it otherwise)."""
    return _BY_ID[claim_id]
