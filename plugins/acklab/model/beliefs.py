"""Beliefs: the claims of the registry (`acklab.model.claims.BELIEFS`) that users hold about producer
settings and that the client or broker does not document.

A documented claim is what librdkafka and Kafka document; violating it fails the run. A belief is
checked the same way, on the same matrix rows, but only ever *confirmed* or *refuted* per client,
with its evidence: a finding for the report and Data Docs, never a red verdict.

A belief applies to a scenario by its scope (`acklab.model.claims.Scope`), and only under a fault
(undisturbed, every claim here trivially holds). It is judged by one matrix column: zero confirms it,
more refutes it. A scenario whose verdict is incomplete (evidence missing, fault ineffective) tests
nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from acklab.model.claims import BELIEFS
from acklab.model.setting import Setting
from acklab.workload import families


def applying(setting: Setting) -> tuple[str, ...]:
    """The names of the beliefs a scenario with `setting` tests."""
    return tuple(belief.id for belief in BELIEFS if belief.scope.applies(setting))


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
    by_name = {belief.id: belief for belief in BELIEFS}
    found = []
    for row in rows:
        scenario = row["scenario"]
        client = families.row_label(row)
        for name in beliefs.get(scenario, ()):
            belief = by_name[name]
            ((column, _, _),) = belief.bounds
            count, acked = row.get(column), row.get("acked")
            if statuses.get(scenario) == "incomplete" or count is None:
                status: Status = "untested"
                evidence = "the scenario's evidence is incomplete"
            else:
                status = "refuted" if count > 0 else "confirmed"
                evidence = f"{column} = {count:,} of {acked:,} acknowledged under {row.get('fault')}"
            found.append(Finding(name, belief.text, belief.instead, scenario, client, status, evidence))
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
