"""Beliefs: which scenarios test them, and how a row confirms, refutes or leaves them untested."""

from __future__ import annotations

from acklab.cluster.topology import load_topology
from acklab.model.beliefs import applying, describe, findings, summary
from acklab.model.setting import Setting
from acklab.nemesis.schedule import schedule_for
from acklab.workload.profiles import get_profile

THREE = load_topology("three-brokers")


def beliefs_of(profile: str, fault: str) -> tuple[str, ...]:
    return applying(Setting.of(get_profile(profile), THREE, schedule_for(fault, 10.0, 2.0)))


def test_one_request_in_flight_without_idempotence_tests_the_order_belief_under_a_fault() -> None:
    assert "in-flight-1-keeps-order" in beliefs_of("at-least-once-ordered", "leader-pause")
    assert "in-flight-1-keeps-order" not in beliefs_of("idempotent", "leader-pause")  # a guarantee there
    assert "in-flight-1-keeps-order" not in beliefs_of("at-least-once", "leader-pause")  # 5 in flight
    assert beliefs_of("at-least-once-ordered", "none") == ()  # undisturbed proves nothing


def test_acks_all_no_loss_is_tested_by_acks_all_profiles_only() -> None:
    assert "acks-all-no-loss" in beliefs_of("at-least-once", "leader-kill")
    assert "acks-all-no-loss" not in beliefs_of("leader-ack", "leader-kill")


def row(scenario: str, **counts: int) -> dict:
    return {"scenario": scenario, "fault": "leader-pause", "acked": 40_000, "client_version": "2.16.1",
            "client_family": "librdkafka", "librdkafka_version": "2.16.0", "reordered": 0, "lost": 0, "misrouted": 0, **counts}


def test_reordering_refutes_and_an_incomplete_scenario_tests_nothing() -> None:
    rows = [row("a", reordered=8564), row("b"), row("c", reordered=3)]
    tests = {name: ["in-flight-1-keeps-order"] for name in "abc"}
    found = findings(rows, tests, {"a": "pass", "b": "pass", "c": "incomplete"})
    assert [f.status for f in found] == ["refuted", "confirmed", "untested"]
    assert found[0].evidence == "reordered = 8,564 of 40,000 acknowledged under leader-pause"
    (item,) = summary(found)
    assert item["status"] == "refuted" and item["evidence"] == ["a: " + found[0].evidence]
    assert describe(item).startswith("BELIEF REFUTED in-flight-1-keeps-order (confluent-kafka 2.16.1 (librdkafka 2.16.0)): a: reordered")


def test_a_belief_confirmed_by_every_scenario_is_confirmed_per_client() -> None:
    rows = [row("a"), {**row("b"), "client_version": "2.0.2", "lost": 7}]
    found = findings(rows, {"a": ["acks-all-no-loss"], "b": ["acks-all-no-loss"]}, {"a": "pass", "b": "fail"})
    assert {(i["client"].split()[1], i["status"]) for i in summary(found)} == {("2.16.1", "confirmed"), ("2.0.2", "refuted")}
