"""Run history and regression detection on a real SQLite file."""

from __future__ import annotations

from pathlib import Path

from acklab.report.history import record_run, regressions, unverified


def rows(*scenarios: str) -> list[dict]:
    return [{"scenario": s, "profile": s.split("__")[0], "fault": s.split("__")[1], "guarantee": "exactly-once"} for s in scenarios]


def test_planted_regression_is_detected(tmp_path: Path) -> None:
    scenarios = ("idempotent__leader-kill", "at-least-once__ack-loss")
    record_run("r1", 1.0, "pass", "three-brokers", "4.3.1", rows(*scenarios), dict.fromkeys(scenarios, "pass"), tmp_path / "history.sqlite")
    record_run("r2", 2.0, "fail", "three-brokers", "4.3.1", rows(*scenarios),
               {"idempotent__leader-kill": "fail", "at-least-once__ack-loss": "pass"}, tmp_path / "history.sqlite")
    (found,) = regressions("r2", tmp_path / "history.sqlite")
    assert (found.scenario, found.status, found.last_green_run) == ("idempotent__leader-kill", "fail", "r1")


def test_no_regression_without_an_earlier_green_run_or_on_another_version(tmp_path: Path) -> None:
    scenario = ("idempotent__leader-kill",)
    record_run("r1", 1.0, "fail", "three-brokers", "4.3.1", rows(*scenario), {scenario[0]: "pass"}, tmp_path / "history.sqlite")
    record_run("r2", 2.0, "pass", "three-brokers", "3.9.2", rows(*scenario), {scenario[0]: "pass"}, tmp_path / "history.sqlite")
    record_run("r3", 3.0, "fail", "three-brokers", "4.3.1", rows(*scenario), {scenario[0]: "fail"}, tmp_path / "history.sqlite")
    assert regressions("r3", tmp_path / "history.sqlite") == []  # r1 was not green; r2 is another Kafka version
    record_run("r4", 4.0, "pass", "three-brokers", "4.3.1", rows(*scenario), {scenario[0]: "pass"}, tmp_path / "history.sqlite")
    record_run("r5", 5.0, "incomplete", "three-brokers", "4.3.1", rows(*scenario), {scenario[0]: "incomplete"}, tmp_path / "history.sqlite")
    assert regressions("r5", tmp_path / "history.sqlite") == []  # incomplete is not a regression, it is no evidence
    (lost,) = unverified("r5", tmp_path / "history.sqlite")  # ... but the guarantee is no longer verified
    assert (lost.scenario, lost.status, lost.last_green_run) == ("idempotent__leader-kill", "incomplete", "r4")
