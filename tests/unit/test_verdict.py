"""The verdict rules alone (`acklab.checker.verdict`): a row's status from its counters, its manifest
entry and the expectations it failed, without Great Expectations (`test_gx_verdict` runs them
through real suites)."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from acklab.checker import verdict as verdict_module
from acklab.checker.verdict import (
    INTEGRITY,
    FailedExpectation,
    Row,
    ScenarioVerdict,
    Verdict,
    judge,
    overall,
    pair_rows,
)
from acklab.model.claims import Kind
from acklab.store.runs import Manifest


def row(**record: Any) -> Row:
    """A row of guarantee at-least-once whose fault took effect and whose evidence is complete."""
    fields = {"scenario": "s", "guarantee": "at-least-once", "fault": "leader-kill", "evidence_complete": True, "fault_effective": True}
    control = record.pop("control", False)
    return Row({**fields, **record}, (), ("guarantee_at-least-once",), "leader moved", None, control)


def failure(kind: str, column: str = "lost", suite: str = "guarantee_at-least-once") -> FailedExpectation:
    return FailedExpectation(suite, kind, f"{column} == 0", column, 3)


@pytest.mark.parametrize(
    ("record", "failed", "status", "reason"),
    [
        ({}, [], "pass", None),
        ({}, [failure(Kind.GUARANTEE)], "fail", None),
        ({}, [failure(INTEGRITY, "sent")], "fail", None),
        ({}, [failure(Kind.AVAILABILITY, "acked")], "fail", None),
        ({"evidence_complete": False}, [failure(Kind.GUARANTEE)], "incomplete", "evidence incomplete"),
        ({"evidence_complete": False, "incomplete_reason": "no topic dump"}, [], "incomplete", "no topic dump"),
        ({"fault_effective": False}, [], "incomplete", "fault ineffective (leader moved)"),
        ({"fault_effective": False}, [failure(Kind.GUARANTEE)], "fail", None),
        ({"fault_effective": False}, [failure(Kind.AVAILABILITY, "acked")], "incomplete", "fault ineffective (leader moved)"),
        ({}, [failure(Kind.EFFICACY, "failed")], "incomplete", "fault ineffective: the anomaly it must cause did not show"),
        ({}, [failure(Kind.GUARANTEE, "fatal")], "fail", None),
        ({"evidence_complete": False}, [failure(Kind.GUARANTEE, "fatal")], "fail", None),
    ],
    ids=[
        "nothing-failed", "guarantee", "integrity", "availability", "evidence-incomplete-outranks-guarantee",
        "incomplete-reason-named", "fault-ineffective", "broken-promise-whatever-the-fault", "availability-needs-an-effective-fault",
        "efficacy", "fatal", "fatal-outranks-incomplete-evidence",
    ],
)
def test_status_rules(record: dict[str, Any], failed: list[FailedExpectation], status: str, reason: str | None) -> None:
    verdict = judge(row(**record), failed)
    assert (verdict.status, verdict.reason) == (status, reason)


def test_a_load_short_of_its_plan_is_incomplete_and_says_why() -> None:
    short = failure(Kind.EVIDENCE, "sent", "evidence_load")
    verdict = judge(row(), [short, failure(Kind.GUARANTEE)])
    assert verdict.status == "incomplete"  # a load that did not happen judges nothing
    assert [f.kind for f in verdict.failed] == [Kind.GUARANTEE]  # the other failures are still listed
    alone = judge(row(), [short])
    assert (alone.status, alone.reason) == ("incomplete", "the load did not happen as planned (evidence_load: sent == 0, observed 3)")


def test_the_verdict_carries_the_counts_and_names_a_fatal_error() -> None:
    verdict = judge(row(lost=2, planned=10, fatal_error="_FATAL", planted_lost=None), [failure(Kind.GUARANTEE)])
    assert verdict.counts["lost"] == 2
    assert verdict.summary_line().startswith("FAIL s [at-least-once] guarantee_at-least-once: lost == 0, observed 3; fatal producer error (_FATAL)")
    assert verdict.summary_line().endswith("(planned=10, sent=null, acked=null, failed=null, lost=2, duplicates=null, reordered=null)")


def test_a_caught_control_does_not_count_and_an_uncaught_one_invalidates() -> None:
    caught = judge(row(scenario="control", control=True, lost=50, planted_lost=50), [failure(Kind.GUARANTEE)])
    missed = judge(row(scenario="control", control=True, lost=49, planted_lost=50), [failure(Kind.GUARANTEE)])
    fine = judge(row(scenario="fine"), [])
    assert Verdict("r", (caught, fine), None).status == "pass"
    assert Verdict("r", (missed, fine), None).status == "invalid"
    assert [s.scenario for s in Verdict("r", (caught, fine), None).checked] == ["fine"]


def test_a_run_without_a_negative_control_says_so() -> None:
    verdict = Verdict("r", (ScenarioVerdict("a", "at-least-once", "pass", (), {}),), None)
    assert (verdict.status, verdict.summary_lines()[0]) == ("pass", verdict_module.NO_CONTROL)


def test_fail_outranks_incomplete() -> None:
    def scenario(name: str, status: Any) -> ScenarioVerdict:
        return ScenarioVerdict(name, "at-least-once", status, (), {})

    assert Verdict("r", (scenario("a", "incomplete"), scenario("b", "fail")), None).status == "fail"
    assert Verdict("r", (scenario("a", "pass"),), None).status == "pass"
    assert overall({"pass", "incomplete", "invalid"}) == "invalid"
    assert overall(set()) == "pass"


def manifest(*entries: dict[str, Any]) -> Manifest:
    return Manifest.model_validate({"run_id": "r", "scenarios": list(entries)})


ENTRY = {"scenario": "s", "guarantee": "at-least-once", "guarantee_reason": "acks=all", "expectations": [], "fault_effect": "moved"}
RECORD = {"scenario": "s", "guarantee": "at-least-once", "fault": "leader-kill", "evidence_complete": True, "fault_effective": True}


def test_rows_pair_with_their_manifest_entries() -> None:
    (paired,) = pair_rows([RECORD], manifest(ENTRY), "matrix.json")
    assert (paired.suites, paired.reason, paired.fault_effect, paired.control) == (("guarantee_at-least-once",), "acks=all", "moved", False)


@pytest.mark.parametrize(
    ("records", "entry", "message"),
    [
        ([], ENTRY, "no matrix row for scenario"),
        ([{k: v for k, v in RECORD.items() if k != "fault"}], ENTRY, "row 0 lacks fault"),
        ([RECORD], {**ENTRY, "expectations": None}, "no recorded expectations"),
        ([RECORD], {**ENTRY, "guarantee": "at-most-once"}, "its manifest entry 'at-most-once'"),
        ([{**RECORD, "guarantee": "sometimes"}], {**ENTRY, "guarantee": "sometimes"}, "unknown guarantee 'sometimes'"),
    ],
    ids=["missing-row", "missing-column", "unplanned", "other-guarantee", "unknown-guarantee"],
)
def test_a_row_that_does_not_match_its_manifest_is_refused(records: list[dict[str, Any]], entry: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        pair_rows(records, manifest(entry), "matrix.json")


def test_the_rules_import_no_great_expectations() -> None:
    """The verdict rules load without Great Expectations (nor pandas): judging is pure."""
    code = "import sys, acklab.checker.verdict; print(sorted(m for m in sys.modules if m.split('.')[0] in ('great_expectations', 'pandas')))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
