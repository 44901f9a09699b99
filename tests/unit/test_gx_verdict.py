"""Verdicts from real Great Expectations runs on small delivery matrices and their manifests: the
suites of the model (`acklab.checker.gx_suites`), their project (`acklab.checker.gx_project`) and
validation (`acklab.checker.gx_validation`).

Each row's expectations come from the guarantee model, as `make_plan` records them; the counts
balance (conservation), so a planted anomaly breaks exactly the expectation it targets.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import re
from pathlib import Path
from typing import Any

import pytest

from acklab.checker import audit, gx_suites
from acklab.checker.gx_project import ensure_project
from acklab.checker.gx_suites import INTEGRITY_SUITE, MODEL_PAGE, build_suites
from acklab.checker.gx_validation import gx_run_name, validate_matrix
from acklab.checker.verdict import GuaranteeViolation, ScenarioVerdict, Verdict
from acklab.cluster.topology import load_topology
from acklab.model.guarantees import expect, suite_expectations
from acklab.nemesis.faults import PLANTING
from acklab.nemesis.schedule import schedule_for
from acklab.orchestration.tasks import gate
from acklab.store.runs import RunDir
from acklab.store.schemas import MATRIX_DESCRIPTIVE, MATRIX_PIPELINE
from acklab.workload import java_client
from acklab.workload.client import Client
from acklab.workload.profiles import ProducerProfile, get_profile

THREE = load_topology("three-brokers")


def counts(
    delivered: int = 1000,
    lost: int = 0,
    acked_duplicated: int = 0,
    failed_clean: int = 0,
    indeterminate: int = 0,
    unknown_absent: int = 0,
    aborted_clean: int = 0,
    aborted_visible: int = 0,
    unexpected: int = 0,
    unsent: int = 0,
    **flags: int,
) -> dict[str, int]:
    """Matrix counts from message outcomes, balanced as the Spark job's identities require.

    Records of aborted transactions are purged, so they count as failed; every duplicated
    message has one extra copy.
    """
    aborted = aborted_clean + aborted_visible
    acked = delivered + lost + acked_duplicated
    failed = failed_clean + indeterminate + aborted
    sent = acked + failed + unknown_absent
    return {
        "planned": sent + unsent,
        "sent": sent,
        "unsent": unsent,
        "refused": 0,
        "fatal": 0,
        "acked": acked,
        "failed": failed,
        "unknown": unknown_absent,
        "records_read": delivered + acked_duplicated + indeterminate + aborted_visible + acked_duplicated + unexpected,
        "delivered": delivered,
        "lost": lost,
        "duplicated": acked_duplicated,
        "duplicates": acked_duplicated,
        "acked_duplicated": acked_duplicated,
        "failed_clean": failed_clean,
        "indeterminate": indeterminate,
        "unknown_absent": unknown_absent,
        "unexpected": unexpected,
        "reordered": 0,
        "misrouted": 0,
        "offset_mismatch": 0,
        "misdirected": 0,
        "aborted": aborted,
        "aborted_acked": 0,
        "aborted_clean": aborted_clean,
        "aborted_visible": aborted_visible,
        **flags,
    }


class Run:
    """A run directory with a manifest (expectations from the model) and a matrix."""

    def __init__(self, path: Path) -> None:
        self.path, self.rows, self.entries = path, [], []

    def add(
        self, name: str, profile: str | ProducerProfile, fault: str = "leader-kill", duration_s: float = 10.0, client: Client | None = None,
        **outcomes: Any,
    ) -> None:
        profile = get_profile(profile) if isinstance(profile, str) else profile
        expected = expect(profile, THREE, schedule_for(fault, 2.0, duration_s), client)
        reordered = outcomes.pop("reordered", 0)
        flags = {k: outcomes.pop(k) for k in ("fault_effective", "evidence_complete", "incomplete_reason", "fatal_error") if k in outcomes}
        planted, control = outcomes.pop("planted_lost", None), outcomes.pop("control", False)
        self.entries.append(
            {
                "scenario": name,
                "control": control,
                "guarantee": str(expected.guarantee),
                "guarantee_reason": expected.reason,
                "expectations": [e.as_dict() for e in expected.expectations],
                "fault_effect": "leader of partition 0 moved 1 -> 2 in 3.1s",
            }
        )
        self.rows.append(
            {
                "scenario": name,
                "profile": profile.name,
                "fault": fault,
                "guarantee": str(expected.guarantee),
                "guarantee_reason": expected.reason,
                "client_version": client.version if client else "2.16.1",
                "client_family": client.family if client else "librdkafka", "librdkafka_version": client.librdkafka if client else "2.16.0",
                "partitioner": profile.partitioner,
                "producers": 1,
                "transactional": profile.transaction is not None,
                "fault_effective": True,
                "evidence_complete": True,
                "incomplete_reason": None,
                "fatal_error": None,
                "hanging_partitions": 0 if profile.transaction is not None else None,
                "hanging_detail": None,
                **{plants.column: None for plants in PLANTING.values()},
                "planted_lost": planted,
                "control": control,
                **dict.fromkeys(MATRIX_PIPELINE.names),
                **flags,
                **counts(**outcomes),
                "reordered": reordered,
                "ack_latency_p50_ms": 3.1,
                "ack_latency_p95_ms": 20.0,
                "ack_latency_p99_ms": 40.0,
                "ack_latency_max_ms": 900.0,
                "acked_per_s": 5000.0,
                "longest_ack_gap_s": 3.2,
                "ack_gap_fault_overlap_s": 3.0,
            }
        )

    def judge(self, root: Path, name: str) -> Verdict:
        (self.path / "audit").mkdir(parents=True, exist_ok=True)
        (self.path / "manifest.json").write_text(json.dumps({"run_id": self.path.name, "scenarios": self.entries}))
        (self.path / "audit" / "matrix.json").write_text(json.dumps(self.rows))
        return validate_matrix(RunDir(self.path), root, name)


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One GX project shared by the module: creating it (and importing GX) is the slow part."""
    root = tmp_path_factory.mktemp("expectations")
    ensure_project(root)
    return root


@pytest.fixture
def run(tmp_path: Path) -> Run:
    return Run(tmp_path / "run")


def by_scenario(verdict: Verdict) -> dict[str, ScenarioVerdict]:
    return {scenario.scenario: scenario for scenario in verdict.scenarios}


def failures(scenario: ScenarioVerdict) -> list[tuple[str, str, Any]]:
    return [(f.suite, f.expects, f.observed) for f in scenario.failed]


TRANSACTIONAL_OK = {"delivered": 900, "aborted_clean": 100}


def test_every_class_holds_and_data_docs_show_it(root: Path, run: Run) -> None:
    run.add("amo", "at-most-once", lost=40, delivered=960)  # loss allowed under a fault
    run.add("leader", "leader-ack", lost=40, delivered=940, acked_duplicated=20)
    run.add("alo", "at-least-once", acked_duplicated=20, delivered=980)
    # librdkafka documents reordering without idempotence: a belief's finding, never a failure.
    run.add("ordered", "at-least-once-ordered", reordered=7)
    run.add("eos", "idempotent")
    run.add("txn", "transactional", **TRANSACTIONAL_OK)
    verdict = run.judge(root, "all-hold")

    assert [(s.scenario, s.status, s.failed) for s in verdict.scenarios] == [
        (name, "pass", ()) for name in ("amo", "leader", "alo", "ordered", "eos", "txn")
    ]
    assert verdict.failure() == ""
    assert verdict.summary_lines()[5] == (
        "PASS eos [exactly-once] (planned=1000, sent=1000, acked=1000, failed=0, lost=0, duplicates=0, reordered=0)"
    )

    assert verdict.data_docs_index is not None and verdict.data_docs_index.is_file()
    site = verdict.data_docs_index.parent
    index = verdict.data_docs_index.read_text()
    # One validation per suite, of the rows that name it.
    for suite in (INTEGRITY_SUITE, "guarantee_exactly-once", "availability_outage-outlasted", "guarantee_at-most-once"):
        assert len(list((site / "validations" / suite / gx_run_name("all-hold")).glob("*/*.html"))) == 1, suite
    assert "all-hold" in index
    model_page = (site / MODEL_PAGE).read_text()
    assert "<td>idempotent</td><td>exactly-once</td><td>ack-loss</td>" in model_page
    assert f'href="../{MODEL_PAGE}"' in (site / "expectations" / "guarantee_exactly-once.html").read_text()


def test_a_planted_violation_in_each_class_fails_exactly_that_expectation(root: Path, run: Run) -> None:
    run.add("amo-dup", "at-most-once", acked_duplicated=2, delivered=998)
    run.add("leader-misrouted", "leader-ack", misrouted=3)
    run.add("alo-lost", "at-least-once", lost=3, delivered=997)
    run.add("ordered-misrouted", "at-least-once-ordered", misrouted=5)
    run.add("eos-dup", "idempotent", acked_duplicated=2, delivered=998)
    run.add("txn-aborted-read", "transactional", delivered=900, aborted_clean=96, aborted_visible=4)
    run.add("alo-moved", "at-least-once", offset_mismatch=1)
    run.add("amo-elsewhere", "at-most-once", misdirected=2)
    run.add("eos-elsewhere", "idempotent", misdirected=1)
    verdict = run.judge(root, "planted")
    scenarios = by_scenario(verdict)

    assert {name: failures(s) for name, s in scenarios.items()} == {
        "amo-dup": [("guarantee_at-most-once", "duplicates == 0", 2)],
        "leader-misrouted": [("guarantee_leader-durable", "misrouted == 0", 3)],
        "alo-lost": [("guarantee_at-least-once", "lost == 0", 3)],
        "ordered-misrouted": [("guarantee_at-least-once-ordered", "misrouted == 0", 5)],
        "eos-dup": [("guarantee_exactly-once", "duplicates == 0", 2)],
        "txn-aborted-read": [("guarantee_transactional", "aborted_visible == 0", 4)],
        "alo-moved": [("guarantee_at-least-once", "offset_mismatch == 0", 1)],
        "amo-elsewhere": [("guarantee_at-most-once", "misdirected == 0", 2)],
        "eos-elsewhere": [("guarantee_exactly-once", "misdirected == 0", 1)],
    }
    assert {s.status for s in scenarios.values()} == {"fail"}
    assert scenarios["eos-dup"].summary_line() == (
        "FAIL eos-dup [exactly-once] guarantee_exactly-once: duplicates == 0, observed 2 "
        "(planned=1000, sent=1000, acked=1000, failed=0, lost=0, duplicates=2, reordered=0)"
    )
    with pytest.raises(GuaranteeViolation) as raised:
        gate({"failure": verdict.failure(), "html": "report.html"})  # the matrix DAG's verdict task
    assert str(raised.value).splitlines() == verdict.summary_lines()[1:]  # the first says there was no negative control


def test_each_row_carries_its_own_planned_reason(root: Path, run: Run) -> None:
    """Rows of one suite are validated together, yet each is held to its own manifest entry's reason."""
    run.add("alo-1", "at-least-once")
    run.add("alo-2", "at-least-once")
    run.add("alo-3", "at-least-once")
    run.rows[1]["guarantee_reason"] = "a reason of another row"
    scenarios = by_scenario(run.judge(root, "reasons"))

    assert [scenarios[name].status for name in ("alo-1", "alo-2", "alo-3")] == ["pass", "fail", "pass"]
    [(suite, expects, observed)] = failures(scenarios["alo-2"])
    assert (suite, expects) == ("guarantee_at-least-once", "guarantee_reason as planned")
    assert str(observed).startswith("a reason of another row vs ")


def test_without_a_fault_nothing_may_be_lost_or_duplicated(root: Path, run: Run) -> None:
    run.add("leader-lost", "leader-ack", "none", lost=1, delivered=999)
    run.add("alo-dup", "at-least-once", "none", acked_duplicated=1, delivered=999)
    run.add("amo-failed", "at-most-once", "none", failed_clean=2, delivered=998)
    run.add("leader-ok", "leader-ack", "none")
    scenarios = by_scenario(run.judge(root, "no-fault"))

    assert failures(scenarios["leader-lost"]) == [("guarantee_leader-durable", "lost == 0", 1)]
    assert failures(scenarios["alo-dup"]) == [("guarantee_at-least-once", "duplicates == 0", 1)]
    assert failures(scenarios["amo-failed"]) == [("availability_healthy-cluster", "failed_clean == 0", 2)]
    assert [scenarios[name].status for name in ("leader-lost", "alo-dup", "amo-failed", "leader-ok")] == [
        "fail", "fail", "fail", "pass"
    ]


def test_availability(root: Path, run: Run) -> None:
    run.add("leader-refused", "leader-ack", "replicas-down", failed_clean=5, delivered=995)
    run.add("alo-failed", "at-least-once", "leader-kill", indeterminate=2, delivered=998)
    run.add("waited", "at-least-once", "replicas-down")
    run.add("no-effect-failed", "leader-ack", "replicas-down", failed_clean=5, delivered=995, fault_effective=False)
    scenarios = by_scenario(run.judge(root, "availability"))

    assert failures(scenarios["leader-refused"]) == [("availability_outage-outlasted", "failed_clean == 0", 5)]
    assert failures(scenarios["alo-failed"]) == [("availability_outage-outlasted", "indeterminate == 0", 2)]
    assert [scenarios[n].status for n in ("leader-refused", "alo-failed", "waited")] == ["fail", "fail", "pass"]
    assert scenarios["no-effect-failed"].status == "incomplete"


def test_fault_efficacy(root: Path, run: Run) -> None:
    # Field note 3: acks=all, retries=5, replicas down: refused writes end failed, none lost.
    run.add("refused", "at-least-once-bounded", "replicas-down", failed_clean=300, delivered=700)
    run.add("not-refused", "at-least-once-bounded", "replicas-down")
    run.add("alo-ack-loss", "at-least-once", "ack-loss", acked_duplicated=12, delivered=988)
    run.add("alo-ack-loss-no-dup", "at-least-once", "ack-loss")
    run.add("eos-ack-loss", "idempotent", "ack-loss")
    run.add("txn-no-abort", "transactional")
    run.add("no-effect", "at-least-once", fault_effective=False)
    run.add("no-effect-lost", "at-least-once", fault_effective=False, lost=7, delivered=993)
    verdict = run.judge(root, "efficacy")
    scenarios = by_scenario(verdict)

    assert scenarios["alo-ack-loss"].status == scenarios["eos-ack-loss"].status == scenarios["refused"].status == "pass"
    assert scenarios["not-refused"].status == "incomplete"
    assert failures(scenarios["not-refused"]) == [("efficacy_replicas-down-refusals", "failed_clean >= 1", 0)]
    ineffective = scenarios["alo-ack-loss-no-dup"]
    assert ineffective.status == "incomplete"
    assert failures(ineffective) == [("efficacy_ack-loss-duplicates", "duplicates >= 1", 0)]
    assert ineffective.summary_line().startswith(
        "INCOMPLETE alo-ack-loss-no-dup [at-least-once] fault ineffective: the anomaly it must cause did not show; "
        "efficacy_ack-loss-duplicates: duplicates >= 1, observed 0 ("
    )
    assert scenarios["txn-no-abort"].status == "incomplete"
    assert failures(scenarios["txn-no-abort"]) == [("efficacy_transaction-aborts", "aborted >= 1", 0)]
    assert scenarios["no-effect"].status == "incomplete"
    assert scenarios["no-effect"].reason == "fault ineffective (leader of partition 0 moved 1 -> 2 in 3.1s)"
    # A broken promise is a failure whether or not the fault took effect.
    assert scenarios["no-effect-lost"].status == "fail"
    assert verdict.status == "fail"


def test_incomplete_evidence_never_passes(root: Path, run: Run) -> None:
    run.add("no-evidence", "idempotent", evidence_complete=False, incomplete_reason="send log missing")
    run.add("no-evidence-lost", "idempotent", evidence_complete=False, lost=3, delivered=997)
    run.add("fine", "leader-ack")
    verdict = run.judge(root, "incomplete")
    scenarios = by_scenario(verdict)

    assert verdict.status == "incomplete"
    assert (scenarios["no-evidence"].status, scenarios["no-evidence"].reason) == ("incomplete", "send log missing")
    assert (scenarios["no-evidence-lost"].status, scenarios["no-evidence-lost"].reason) == ("incomplete", "evidence incomplete")
    assert scenarios["fine"].status == "pass"
    assert re.search("(?s)no-evidence.*no-evidence-lost", verdict.failure())


def test_a_load_short_of_its_plan_never_passes(root: Path, run: Run) -> None:
    """The false green of a load that sent nothing: every way a row can fall short of its plan is
    incomplete (with what fell short), even when what was sent balances and breaks no promise."""
    run.add("sent-nothing", "leader-ack", "none", delivered=0, unsent=20000)
    run.add("stopped-early", "idempotent", delivered=600, unsent=400)
    run.add("refused", "leader-ack", failed_clean=20000, delivered=0, refused=20000)
    run.add("unreported", "at-least-once", unknown_absent=5, delivered=995)
    run.add("short-and-lossy", "idempotent", lost=3, delivered=597, unsent=400)
    run.add("full", "idempotent")
    scenarios = by_scenario(run.judge(root, "short"))

    assert {name: s.status for name, s in scenarios.items()} == {
        "sent-nothing": "incomplete", "stopped-early": "incomplete", "refused": "incomplete",
        "unreported": "incomplete", "short-and-lossy": "incomplete", "full": "pass",
    }
    assert scenarios["sent-nothing"].reason == (
        "the load did not happen as planned (evidence_load-as-planned: unsent == 0, observed 20000)"
    )
    assert "refused == 0, observed 20000" in scenarios["refused"].reason
    assert "unknown == 0, observed 5" in scenarios["unreported"].reason
    assert scenarios["sent-nothing"].summary_line().endswith("(planned=20000, sent=0, acked=0, failed=0, lost=0, duplicates=0, reordered=0)")


def test_a_fatal_producer_error_fails_an_idempotent_scenario_and_is_named(root: Path, run: Run) -> None:
    """Messages a fatal error failed are not a gap in the evidence but a verdict: the idempotent
    producer must recover from every catalog fault on a replicated, clean-election topic."""
    error = "p0: OUT_OF_ORDER_SEQUENCE_NUMBER: Broker: Broker received an out of order sequence number"
    run.add("desync", "idempotent", "ack-loss", delivered=700, failed_clean=300, fatal=300, fatal_error=error)
    scenarios = by_scenario(run.judge(root, "fatal"))

    desync = scenarios["desync"]
    assert desync.status == "fail"
    assert failures(desync) == [
        ("availability_idempotence-recovers", "fatal == 0", 300),
        ("availability_outage-outlasted", "failed_clean == 0", 300),
    ]
    assert f"fatal producer error ({error})" in desync.summary_line()


def test_a_fatal_error_is_a_fail_even_when_it_leaves_messages_of_unknown_outcome(root: Path, run: Run) -> None:
    """A transactional producer that dies of a fatal error mid-transaction never learns that
    transaction's outcome: its messages are unknown, yet the fatal error alone decides the verdict."""
    error = "p0: OUT_OF_ORDER_SEQUENCE_NUMBER: ProduceRequest failed due to sequence desynchronization"
    gap = "564 messages of unknown outcome (no delivery report, or a transaction whose outcome was never learned)"
    run.add("txn-desync", "transactional", "ack-loss", delivered=3000, unknown_absent=564, fatal=26436, fatal_error=error,
            evidence_complete=False, incomplete_reason=gap)
    run.add("txn-gap", "transactional", "ack-loss", delivered=3000, unknown_absent=564, evidence_complete=False, incomplete_reason=gap)
    scenarios = by_scenario(run.judge(root, "fatal-unknown"))

    assert scenarios["txn-desync"].status == "fail"
    assert ("availability_idempotence-recovers", "fatal == 0", 26436) in failures(scenarios["txn-desync"])
    assert scenarios["txn-gap"].status == "incomplete"  # without a fatal error the gap stays a gap


def test_every_manifest_scenario_needs_a_matrix_row(root: Path, run: Run) -> None:
    run.add("judged", "leader-ack")
    run.add("dropped", "idempotent")
    del run.rows[1]
    with pytest.raises(ValueError, match="no matrix row for scenario.s. dropped"):
        run.judge(root, "dropped-row")


def test_integrity(root: Path, run: Run) -> None:
    run.add("negative", "leader-ack", unexpected=-1)
    run.add("unbalanced", "leader-ack")
    run.add("missing", "at-least-once")
    run.add("null", "at-least-once", failed=None)
    run.rows[1]["sent"] = 999
    del run.rows[2]["reordered"], run.rows[2]["ack_gap_fault_overlap_s"], run.rows[2]["partitioner"]
    scenarios = by_scenario(run.judge(root, "integrity"))

    assert {s.status for s in scenarios.values()} == {"fail"}
    assert failures(scenarios["negative"]) == [(INTEGRITY_SUITE, "unexpected >= 0", -1)]
    assert failures(scenarios["unbalanced"]) == [
        (INTEGRITY_SUITE, "planned == sent + unsent", "1000 vs 999"),
        (INTEGRITY_SUITE, "sent == acked + failed + unknown", "999 vs 1000"),
        (INTEGRITY_SUITE, "sent == delivered + lost + acked_duplicated + failed_clean + indeterminate + unknown_absent + aborted_clean + aborted_visible", "999 vs 1000"),
    ]
    assert failures(scenarios["missing"]) == [
        (INTEGRITY_SUITE, "no matrix column is missing", "partitioner, reordered, ack_gap_fault_overlap_s"),
        (INTEGRITY_SUITE, "reordered is not null", None),
    ]
    assert (INTEGRITY_SUITE, "failed is not null", None) in failures(scenarios["null"])


def test_manifest_must_match_the_matrix_and_the_model(root: Path, run: Run) -> None:
    run.add("ok", "at-least-once")
    run.rows[0]["guarantee"] = "exactly-once"
    with pytest.raises(ValueError, match="'ok' claims guarantee 'exactly-once', its manifest entry 'at-least-once'"):
        run.judge(root, "mismatch")

    run.rows[0]["guarantee"] = run.entries[0]["guarantee"] = "at-least-twice"
    with pytest.raises(ValueError, match="'ok': unknown guarantee 'at-least-twice'; expected one of .*transactional"):
        run.judge(root, "unknown")

    run.rows[0]["guarantee"] = run.entries[0]["guarantee"] = "at-least-once"
    run.entries[0]["expectations"] = [e for e in run.entries[0]["expectations"] if e["column"] != "lost"]
    with pytest.raises(ValueError, match="suite guarantee_at-least-once.*the model changed since the run was planned"):
        run.judge(root, "stale")

    del run.entries[0]["expectations"]
    with pytest.raises(ValueError, match="'ok' has no recorded expectations"):
        run.judge(root, "unplanned")
    (run.path / "manifest.json").unlink()
    with pytest.raises(ValueError, match="no manifest"):
        validate_matrix(RunDir(run.path), root, "no-manifest")
    # Nothing was validated: the store keeps results as validations/<suite>/<run name>/...
    store = root / "gx" / "uncommitted" / "validations"
    assert not [p for name in ("mismatch", "unknown", "stale", "unplanned", "no-manifest") for p in store.glob(f"*/{gx_run_name(name)}")]


def test_a_run_id_that_reads_as_a_date_renders_its_data_docs(root: Path, run: Run, caplog: pytest.LogCaptureFixture) -> None:
    """dateutil reads ``...-5093ad`` as a UTC offset of -50:93; GX compared it with the run time and
    logged a data docs rendering error instead of the run's validation pages."""
    run.add("ok", "at-least-once")
    name = "20261207T000311-5093ad"
    with caplog.at_level("ERROR"):
        verdict = run.judge(root, name)
    assert [record.getMessage()[:200] for record in caplog.records if record.levelname == "ERROR"] == []
    assert verdict.run_name == name and verdict.scenarios[0].status == "pass"
    site = root / "gx" / "uncommitted" / "data_docs" / "local_site" / "validations"
    assert list(site.glob(f"**/{gx_run_name(name)}/**/*.html"))


def test_empty_matrix_is_an_error(root: Path, run: Run) -> None:
    with pytest.raises(ValueError, match="no rows"):
        run.judge(root, "empty")


@pytest.mark.parametrize(
    ("lost", "complete", "status"),
    [(50, True, "pass"), (49, True, "invalid"), (51, True, "invalid"), (0, True, "invalid"), (50, False, "invalid")],
    ids=["caught", "one-missed", "one-extra", "none-seen", "control-incomplete"],
)
def test_the_run_is_invalid_unless_its_negative_control_is_caught_exactly(root: Path, tmp_path: Path, lost: int, complete: bool, status: str) -> None:
    run = Run(tmp_path / "run")
    run.add("negative-control__planted-loss", "idempotent", "planted-loss", control=True, planted_lost=50, lost=lost, delivered=1000 - lost,
            evidence_complete=complete)
    run.add("fine", "leader-ack")
    verdict = run.judge(root, f"control-{lost}")

    assert verdict.status == status
    assert [s.scenario for s in verdict.checked] == ["fine"]  # the control is not a row of the matrix proper
    first = verdict.summary_lines()[0]
    if status == "pass":
        assert first == "negative control caught: the proxy swallowed 50 records, the checker counted 50 lost (negative-control__planted-loss red, as it must be)"
        assert verdict.failure() == ""
    else:
        assert first.startswith(f"INVALID: the negative control was not caught exactly: the proxy swallowed 50 records, the checker counted {lost} lost")
        assert verdict.failure().startswith("INVALID")


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
    names = sorted([INTEGRITY_SUITE, *suite_expectations()])
    assert sorted(s.name for s in context.suites.all()) == names
    assert sorted(v.name for v in context.validation_definitions.all()) == names
    assert sorted(c.name for c in context.checkpoints.all()) == names
    [datasource] = context.data_sources.all().values()
    [asset] = datasource.assets
    assert len(asset.batch_definitions) == 1


def test_validations_of_one_gx_project_take_turns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`validate_matrix` validates holding the GX project's lock, which another validation (another
    process: the version DAG's pairs validated on two workers at once) waits for; it is free again afterwards."""
    from acklab.checker import gx_validation

    lock = tmp_path / "gx" / "uncommitted" / "validation.lock"

    def taken() -> bool:
        with lock.open("a") as other:  # an open file of its own, as another process's
            try:
                fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
            return False

    held: list[bool] = []

    def validate(run: Any, root: Path, run_name: str) -> str:
        held.append(root == tmp_path and taken())
        return run_name

    monkeypatch.setattr(gx_validation, "_validate", validate)
    assert gx_validation.validate_matrix(RunDir(tmp_path / "runs" / "r1"), tmp_path, "r1") == "r1"
    assert held == [True] and not taken()


def test_the_committed_project_is_current() -> None:
    """expectations/gx holds what ensure_project writes for the current model (ids aside)."""

    def content(suite: dict[str, Any]) -> dict[str, Any]:
        expectations = [{k: v for k, v in e.items() if k != "id"} for e in suite["expectations"]]
        return {**{k: v for k, v in suite.items() if k not in ("id", "meta")}, "expectations": expectations}

    committed = Path(__file__).resolve().parents[2] / "expectations" / "gx" / "expectations"
    stored = {p.stem: content(json.loads(p.read_text())) for p in committed.glob("*.json")}
    built = {suite.name: content(json.loads(json.dumps(suite.to_json_dict()))) for suite in build_suites()}
    assert stored == built, "run ensure_project on expectations/ (e.g. `make run`) and commit expectations/gx"


def test_integrity_follows_the_spark_matrix_contract() -> None:
    """The integrity suite requires every column the Spark job writes, no more, and names only
    descriptive columns the matrix has."""
    assert gx_suites.MATRIX_COLUMNS == audit.MATRIX_COLUMNS
    assert set(gx_suites.IDENTITY_COLUMNS) <= set(MATRIX_DESCRIPTIVE.names)


def test_one_request_in_flight_keeps_order_on_java_and_is_only_a_belief_on_librdkafka(root: Path, run: Run) -> None:
    """The Java client documents that max.in.flight=1 keeps order: a reordering there is a red row;
    librdkafka documents that retries may reorder: there the same row passes (a refuted belief)."""
    java = Client("4.3.1", "", "python", family="java")
    run.add("java-reordered", java_client.resolve(get_profile("at-least-once-ordered"), java), client=java, reordered=5)
    run.add("java-in-order", java_client.resolve(get_profile("at-least-once-ordered"), java), client=java)
    run.add("librdkafka-reordered", "at-least-once-ordered", reordered=5)
    scenarios = by_scenario(run.judge(root, "ordering"))
    assert failures(scenarios["java-reordered"]) == [("guarantee_in-flight-1-keeps-order", "reordered == 0", 5)]
    assert [scenarios[n].status for n in ("java-reordered", "java-in-order", "librdkafka-reordered")] == ["fail", "pass", "pass"]
