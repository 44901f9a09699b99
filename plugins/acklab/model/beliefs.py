"""Beliefs: claims users hold about producer settings that the client or broker does not document.

A guarantee (``acklab.model.guarantees``) is what librdkafka and Kafka document; violating it fails the run. A
belief is checked the same way, on the same matrix rows, but only ever *confirmed* or *refuted* per
client version, with its evidence: a finding for the report and Data Docs, never a red verdict.

A belief applies to a scenario by its settings (``acklab.model.guarantees.Setting``), and only under a fault
(undisturbed, every claim here trivially holds). It is judged by one matrix column: zero confirms it,
more refutes it. A scenario whose verdict is incomplete (evidence missing, fault ineffective) tests
nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from acklab.model.guarantees import Setting


@dataclass(frozen=True)
class Belief:
    name: str
    claim: str  # what users believe
    source: str  # where the belief comes from
    documented: str  # what the client or broker documents instead
    when: str  # the settings it applies to, in words
    applies: Callable[[Setting], bool]
    column: str  # the matrix column whose zero confirms the claim


BELIEFS: tuple[Belief, ...] = (
    Belief(
        "in-flight-1-keeps-order",
        "max.in.flight.requests.per.connection=1 keeps each key's records in order, without idempotence",
        "field notes, producer settings (Java client semantics)",
        "librdkafka CONFIGURATION.md, `retries`: retrying may cause reordering unless enable.idempotence "
        "is set; a leader change opens another connection, each with its own request in flight",
        "acks != 0, enable.idempotence=false, max.in.flight=1, under a fault",
        lambda s: s.acks != "0" and not s.idempotent and s.max_in_flight == 1 and bool(s.faults),
        "reordered",
    ),
    Belief(
        "acks-all-no-loss",
        "acks=all means no acknowledged record is lost",
        "field notes (folklore)",
        "acks=all waits for the current ISR only: with min.insync.replicas=1 or unclean leader election "
        "an acknowledged record may sit on one broker and be lost with it",
        "acks=all, under a fault",
        lambda s: s.acks == "all" and bool(s.faults),
        "lost",
    ),
    Belief(
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

BELIEF_NAMES = tuple(belief.name for belief in BELIEFS)


def applying(setting: Setting) -> tuple[str, ...]:
    """The names of the beliefs a scenario with `setting` tests."""
    return tuple(belief.name for belief in BELIEFS if belief.applies(setting))


Status = Literal["confirmed", "refuted", "untested"]


@dataclass(frozen=True)
class Finding:
    belief: str
    claim: str
    documented: str
    scenario: str
    client: str  # `confluent-kafka X (librdkafka Y)`
    status: Status
    evidence: str


def findings(rows: Iterable[Mapping[str, Any]], beliefs: Mapping[str, Iterable[str]], statuses: Mapping[str, str]) -> list[Finding]:
    """One finding per (matrix row, belief its scenario tests); `beliefs`: scenario -> names (the
    manifest's), `statuses`: scenario -> verdict (an incomplete one tests nothing)."""
    by_name = {belief.name: belief for belief in BELIEFS}
    found = []
    for row in rows:
        scenario = row["scenario"]
        client = f"confluent-kafka {row.get('client_version') or '?'} (librdkafka {row.get('librdkafka_version') or '?'})"
        for name in beliefs.get(scenario, ()):
            belief = by_name[name]
            count, acked = row.get(belief.column), row.get("acked")
            if statuses.get(scenario) == "incomplete" or count is None:
                status: Status = "untested"
                evidence = "the scenario's evidence is incomplete"
            else:
                status = "refuted" if count > 0 else "confirmed"
                evidence = f"{belief.column} = {count:,} of {acked:,} acknowledged under {row.get('fault')}"
            found.append(Finding(name, belief.claim, belief.documented, scenario, client, status, evidence))
    return found


def summary(found: Iterable[Finding]) -> list[dict[str, Any]]:
    """Per (belief, client): the status (refuted if any scenario refutes it, confirmed if some
    confirm it, else untested) and the scenarios behind it."""
    groups: dict[tuple[str, str], list[Finding]] = {}
    for finding in found:
        groups.setdefault((finding.belief, finding.client), []).append(finding)
    out = []
    for (name, client), group in groups.items():
        statuses = {f.status for f in group}
        status = "refuted" if "refuted" in statuses else "confirmed" if "confirmed" in statuses else "untested"
        out.append({
            "belief": name,
            "claim": group[0].claim,
            "documented": group[0].documented,
            "client": client,
            "status": status,
            "evidence": [f"{f.scenario}: {f.evidence}" for f in group if f.status == status],
        })
    return out


def describe(item: Mapping[str, Any]) -> str:
    """One line for a `summary` item: `BELIEF REFUTED name (client): first evidence`."""
    evidence = item["evidence"][0] if item["evidence"] else "no scenario tested it"
    return f"BELIEF {item['status'].upper()} {item['belief']} ({item['client']}): {evidence}"
