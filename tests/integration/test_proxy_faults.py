"""The protocol-aware proxy faults on a real 3-broker cluster (RF=3, min.insync.replicas=2) with
librdkafka producers, audited by the real Spark job and judged by the GX verdict: injected
retriable errors are retried (nothing lost, nothing failed), errors reported after the append
duplicate at-least-once writes but not idempotent ones, held requests are released after their
delay and acknowledged only then, a Metadata answer whose topics the proxy failed is read and
retried. Short loads (3 s, faults of 2 s) on one cluster."""

from __future__ import annotations

from pathlib import Path

import pytest

from acklab.checker.gx_validation import validate_matrix
from acklab.checker.verdict import Verdict
from acklab.plan.planner import make_plan

from .helpers import run_audited

pytestmark = pytest.mark.integration

HOLD_S = 1.0
PROFILES = ["at-least-once", "idempotent"]
SCHEDULES = [
    {"fault": "error-inject", "options": {"error": "NOT_ENOUGH_REPLICAS"}},
    {"fault": "error-after-append"},
    {"fault": "request-hold", "options": {"delay_s": HOLD_S}},
]

METADATA_ERROR = {  # from before the producers start: librdkafka asks for the topic's metadata only then
    "fault": "error-inject", "target": "every-broker", "before_load": True, "at_s": 0, "duration_s": 2,
    "options": {"apis": ["Metadata"], "error": "UNKNOWN_TOPIC_OR_PARTITION"},
}

Audited = tuple[dict[str, dict], dict[str, dict], Verdict]


@pytest.fixture(scope="module")
def audited(tmp_path_factory: pytest.TempPathFactory) -> Audited:
    """Each fault's group on one cluster, one Spark audit, then the GX verdict."""
    run = run_audited([
        make_plan({"profiles": PROFILES, "schedule": [{**step, "at_s": 0.5, "duration_s": 2}], "messages": 6000, "rate": 2000})
        for step in SCHEDULES
    ] + [make_plan({"profiles": PROFILES, "schedule": [METADATA_ERROR], "messages": 6000, "rate": 2000})])
    verdict = validate_matrix(run, Path(tmp_path_factory.mktemp("expectations")), run.run_id)
    manifest = {s.scenario: s.model_dump() for s in run.read_manifest().scenarios}
    return manifest, {row["scenario"]: row for row in run.read_matrix()}, verdict


def counts(manifest: dict[str, dict], scenario: str) -> dict[str, int]:
    (event,) = manifest[scenario]["fault_timeline"]
    assert event["effective"], event
    return event["counts"]


def test_every_scenario_passes_its_model_expectations(audited: Audited) -> None:
    _, _, verdict = audited
    assert verdict.status == "pass", verdict.summary_lines()
    assert len(verdict.checked) == len(PROFILES) * (len(SCHEDULES) + 1)


def test_injected_retriable_errors_are_retried(audited: Audited) -> None:
    manifest, rows, _ = audited
    for profile in PROFILES:
        scenario = f"{profile}__error-inject"
        assert counts(manifest, scenario)["injected_errors"] > 0
        row = rows[scenario]
        assert (row["lost"], row["failed"], row["duplicates"], row["acked"]) == (0, 0, 0, row["sent"]), row
        assert row["ack_latency_max_ms"] > 1000  # written only after the refusals of the 2 s window
        assert manifest[scenario]["delivery_errors"] == {}


def test_metadata_answers_failed_by_the_proxy_are_read_and_retried(audited: Audited) -> None:
    """UNKNOWN_TOPIC_OR_PARTITION on every topic of the brokers' own Metadata answers (v13 from
    librdkafka 2.16): the client keeps its records queued and asks again until the window ends."""
    manifest, rows, _ = audited
    for profile in PROFILES:
        scenario = f"{profile}__error-inject-before-load"
        seen = counts(manifest, scenario)
        assert seen["injected_topic_errors"] >= 1 and seen["requests.3.v13"] >= seen["injected_errors"], seen
        assert "unanswerable.Metadata" not in seen
        row = rows[scenario]
        assert (row["lost"], row["failed"], row["duplicates"], row["acked"]) == (0, 0, 0, row["sent"]), row


def test_errors_after_the_append_duplicate_at_least_once_but_not_idempotent(audited: Audited) -> None:
    manifest, rows, _ = audited
    assert counts(manifest, "at-least-once__error-after-append")["replaced_errors"] > 0
    assert rows["at-least-once__error-after-append"]["duplicates"] > 0
    assert rows["at-least-once__error-after-append"]["lost"] == 0
    idempotent = rows["idempotent__error-after-append"]
    assert (idempotent["duplicates"], idempotent["lost"], idempotent["acked"]) == (0, 0, idempotent["sent"]), idempotent


def test_held_requests_are_released_after_their_delay(audited: Audited) -> None:
    manifest, rows, _ = audited
    for profile in PROFILES:
        scenario = f"{profile}__request-hold"
        held = counts(manifest, scenario)
        assert held["held_requests"] > 0 and held["released_requests"] == held["held_requests"], held
        row = rows[scenario]
        assert row["ack_latency_max_ms"] >= HOLD_S * 1000
        assert (row["lost"], row["failed"], row["acked"]) == (0, 0, row["sent"]), row


def test_produce_version_on_the_wire(audited: Audited) -> None:
    """librdkafka 2.16 negotiates Produce v10 with Kafka 4.3.1 (the codec reads 3-13)."""
    manifest, _, _ = audited
    versions = {key for key in counts(manifest, "at-least-once__error-inject") if key.startswith("requests.0.")}
    assert versions == {"requests.0.v10"}
