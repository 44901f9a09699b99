"""Verdicts from real Great Expectations runs on small delivery matrices."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from acklab.checker.verdict import (
    INTEGRITY_SUITE,
    GuaranteeViolation,
    ScenarioVerdict,
    Verdict,
    ensure_project,
    suite_name,
    validate_matrix,
)

GUARANTEE_PROFILES = {
    "at-most-once": "fire-and-forget",
    "leader-durable": "leader-ack",
    "at-least-once": "all-ack",
    "exactly-once": "idempotent",
}


def row(scenario: str, guarantee: str, **overrides: Any) -> dict[str, Any]:
    """A matrix row in which every guarantee holds, changed by ``overrides``."""
    profile = GUARANTEE_PROFILES[guarantee] if guarantee in GUARANTEE_PROFILES else "custom"
    values: dict[str, Any] = {
        "scenario": scenario,
        "profile": profile,
        "fault": "leader-kill",
        "guarantee": guarantee,
        "fault_effective": True,
        "evidence_complete": True,
        "incomplete_reason": None,
        "sent": 1000,
        "acked": 1000,
        "failed": 0,
        "unknown": 0,
        "records_read": 1000,
        "delivered": 1000,
        "lost": 0,
        "duplicated": 0,
        "duplicates": 0,
        "failed_clean": 0,
        "indeterminate": 0,
        "unknown_absent": 0,
        "unexpected": 0,
        "reordered": 0,
        "ack_latency_p50_ms": 3.1,
        "ack_latency_p99_ms": 40.0,
        "ack_latency_max_ms": 900.0,
        "acked_per_s": 5000.0,
    }
    values.update(overrides)
    return values


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One GX project shared by the module: creating it (and importing GX) is the slow part."""
    root = tmp_path_factory.mktemp("expectations")
    ensure_project(root)
    return root


def judge(root: Path, tmp_path: Path, run_name: str, rows: list[dict[str, Any]]) -> Verdict:
    matrix = tmp_path / "matrix.json"
    matrix.write_text(json.dumps(rows))
    return validate_matrix(matrix, root, run_name)


def by_scenario(verdict: Verdict) -> dict[str, ScenarioVerdict]:
    return {scenario.scenario: scenario for scenario in verdict.scenarios}


def test_all_guarantees_hold(root: Path, tmp_path: Path) -> None:
    rows = [row(f"ok-{guarantee}", guarantee) for guarantee in GUARANTEE_PROFILES]
    verdict = judge(root, tmp_path, "all-hold", rows)

    assert verdict.status == "pass"
    assert [s.status for s in verdict.scenarios] == ["pass"] * 4
    assert all(not s.failed for s in verdict.scenarios)
    verdict.raise_for_status()
    assert verdict.summary_lines()[3] == (
        "PASS ok-exactly-once [exactly-once] "
        "(sent=1000, acked=1000, lost=0, duplicates=0, reordered=0)"
    )

    assert verdict.data_docs_index is not None and verdict.data_docs_index.is_file()
    index = verdict.data_docs_index.read_text()
    site = verdict.data_docs_index.parent
    for guarantee in GUARANTEE_PROFILES:
        run = f"all-hold__ok-{guarantee}"
        assert run in index
        for suite in (INTEGRITY_SUITE, suite_name(guarantee)):
            assert list((site / "validations" / suite / run).glob("*/*.html")), (suite, run)


def test_planted_violations_fail_on_the_right_column(root: Path, tmp_path: Path) -> None:
    rows = [
        row("alo-lost", "at-least-once", lost=3, delivered=997, records_read=997),
        row("eos-dup", "exactly-once", duplicates=2, duplicated=2, records_read=1002),
        row("eos-reorder", "exactly-once", reordered=5),
        row("amo-negative", "at-most-once", unknown=-1),
        row("leader-lost", "leader-durable", lost=40, delivered=960, records_read=960),
        row("amo-lost", "at-most-once", lost=100, delivered=900, records_read=900),
    ]
    verdict = judge(root, tmp_path, "planted", rows)
    scenarios = by_scenario(verdict)

    expected = {
        "alo-lost": ("guarantee_at-least-once", "lost", 3),
        "eos-dup": ("guarantee_exactly-once", "duplicates", 2),
        "eos-reorder": ("guarantee_exactly-once", "reordered", 5),
        "amo-negative": (INTEGRITY_SUITE, "unknown", -1),
    }
    assert verdict.status == "fail"
    assert {name for name, s in scenarios.items() if s.status == "fail"} == set(expected)
    assert scenarios["leader-lost"].status == "pass"
    assert scenarios["amo-lost"].status == "pass"
    for name, (suite, column, observed) in expected.items():
        [failure] = scenarios[name].failed
        assert (failure.suite, failure.column, failure.observed) == (suite, column, observed)
        assert failure.expectation_type == "expect_column_values_to_be_between"

    assert verdict.summary_lines()[1] == (
        "FAIL eos-dup [exactly-once] expect_column_values_to_be_between(duplicates) observed 2 "
        "(sent=1000, acked=1000, lost=0, duplicates=2, reordered=0)"
    )
    with pytest.raises(GuaranteeViolation) as raised:
        verdict.raise_for_status()
    assert str(raised.value).splitlines() == [
        line for line in verdict.summary_lines() if line.startswith("FAIL ")
    ]


def test_missing_count_fails_integrity(root: Path, tmp_path: Path) -> None:
    bad = row("no-reordered", "at-least-once", failed=None)
    del bad["reordered"]
    [scenario] = judge(root, tmp_path, "missing", [bad]).scenarios

    assert scenario.status == "fail"
    failures = {(f.expectation_type, f.column): f.observed for f in scenario.failed}
    assert failures[("expect_column_values_to_not_be_null", "failed")] is None
    assert "does not exist" in failures[("expect_column_values_to_not_be_null", "reordered")]


def test_incomplete_evidence_never_passes(root: Path, tmp_path: Path) -> None:
    rows = [
        row("no-evidence", "exactly-once", evidence_complete=False,
            incomplete_reason="send log missing"),
        row("no-effect", "at-least-once", fault_effective=False),
        row("no-effect-lost", "at-least-once", fault_effective=False, lost=7),
        row("fine", "leader-durable"),
    ]
    verdict = judge(root, tmp_path, "incomplete", rows)
    scenarios = by_scenario(verdict)

    assert verdict.status == "incomplete"
    assert scenarios["no-evidence"].status == "incomplete"
    assert scenarios["no-evidence"].reason == "send log missing"
    assert scenarios["no-effect"].status == "incomplete"
    assert scenarios["no-effect"].reason == "fault ineffective"
    assert scenarios["no-effect-lost"].status == "incomplete"
    assert [f.column for f in scenarios["no-effect-lost"].failed] == ["lost"]
    assert scenarios["fine"].status == "pass"
    assert verdict.summary_lines()[0].startswith(
        "INCOMPLETE no-evidence [exactly-once] send log missing ("
    )
    with pytest.raises(GuaranteeViolation, match="(?s)no-evidence.*no-effect-lost"):
        verdict.raise_for_status()


def test_fail_outranks_incomplete() -> None:
    def scenario(name: str, status: Any) -> ScenarioVerdict:
        return ScenarioVerdict(name, "at-least-once", status, (), {})

    mixed = Verdict("r", (scenario("a", "incomplete"), scenario("b", "fail")), None)
    assert mixed.status == "fail"
    assert Verdict("r", (scenario("a", "pass"),), None).status == "pass"


def test_unknown_guarantee_is_a_clear_error(root: Path, tmp_path: Path) -> None:
    rows = [row("ok", "at-least-once"), row("odd", "at-least-twice")]
    with pytest.raises(ValueError, match="'odd': unknown guarantee 'at-least-twice'.*exactly-once"):
        judge(root, tmp_path, "unknown", rows)
    # The matrix is rejected before any row is validated.
    assert not list((root / "gx" / "uncommitted" / "validations").glob("*/unknown__*"))


def test_empty_matrix_is_an_error(root: Path, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no rows"):
        judge(root, tmp_path, "empty", [])


def test_ensure_project_is_idempotent(root: Path) -> None:
    def committed() -> dict[str, str]:
        files = (p for p in (root / "gx").rglob("*") if p.is_file())
        return {
            str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in files
            if "uncommitted" not in p.parts
        }

    before = committed()
    context = ensure_project(root)
    context = ensure_project(root)

    assert committed() == before
    names = sorted([INTEGRITY_SUITE] + [suite_name(g) for g in GUARANTEE_PROFILES])
    assert sorted(s.name for s in context.suites.all()) == names
    assert sorted(v.name for v in context.validation_definitions.all()) == names
    assert sorted(c.name for c in context.checkpoints.all()) == names
    [datasource] = context.data_sources.all().values()
    [asset] = datasource.assets
    assert len(asset.batch_definitions) == 1
