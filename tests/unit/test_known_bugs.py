"""The known-bugs page reads the run store: each bug preset with the versions its runs were red and green on."""

from __future__ import annotations

from pathlib import Path

import pytest

from acklab.report.known_bugs import known_bugs, write_known_bugs
from acklab.store.runs import Manifest, RunDir, ScenarioEntry, write_json


def _run(root: Path, name: str, preset: str | None, kafka: str, status: str, presets_file: str | None = None) -> None:
    run = RunDir(root / name)
    entry = ScenarioEntry(
        scenario="txn__withhold-replay", profile="txn", fault="withhold-replay", guarantee="transactional",
        client_family="java", client_version="4.3.1", planned=10,
    )
    params = [{"preset": preset, "presets_file": presets_file}] if preset else [{}]
    run.write_manifest(Manifest(run_id=name, topology={"name": "three-brokers", "kafka_version": kafka}, params=params, scenarios=[entry]))
    write_json(run.result, {"status": status, "scenarios": {entry.scenario: status}})


def test_each_bug_preset_lists_the_versions_its_runs_were_red_and_green_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACKLAB_RUNS", str(tmp_path))
    _run(tmp_path, "20261125T000001-aaaaaa", "kafka-14402", "3.5.2", "fail")
    _run(tmp_path, "20261125T000002-bbbbbb", "kafka-14402", "3.6.2", "pass")
    _run(tmp_path, "20261125T000003-cccccc", "kafka-14402", "3.6.2", "pass")  # the same versions again: listed once
    _run(tmp_path, "20261125T000004-dddddd", "kafka-14402", "3.9.2", "incomplete")
    _run(tmp_path, "20261125T000005-eeeeee", None, "3.5.2", "fail")  # no preset: not a bug run
    _run(tmp_path, "20261125T000006-ffffff", "field-notes-4-acks-all-no-loss", "3.5.2", "fail")  # not a bug preset
    _run(tmp_path, "20261125T000007-gggggg", "kafka-14402", "3.4.1", "fail", presets_file="/teams/ours.yaml")  # a team's own preset of that name
    bugs = {bug.preset: bug for bug in known_bugs()}
    found = bugs["kafka-14402"]
    assert (found.red, found.green, found.incomplete, found.runs) == (
        ["Kafka 3.5.2 / java 4.3.1"], ["Kafka 3.6.2 / java 4.3.1"], ["Kafka 3.9.2 / java 4.3.1"], 4,
    )
    assert found.rates == {"Kafka 3.5.2 / java 4.3.1": [1, 1], "Kafka 3.6.2 / java 4.3.1": [0, 2]}  # the incomplete run counts in neither
    assert found.last_ran is not None and found.tracker == "https://issues.apache.org/jira/browse/KAFKA-14402"
    assert bugs["librdkafka-4438"].runs == 0 and bugs["librdkafka-4438"].last_ran is None
    page = write_known_bugs().read_text()
    assert 'href="https://issues.apache.org/jira/browse/KAFKA-14402"' in page and "Kafka 3.5.2 / java 4.3.1" in page
    assert "Kafka 3.6.2 / java 4.3.1: 0 red of 2 runs" in page and "Kafka 3.5.2 / java 4.3.1: 1 red of 1 run<" in page
    assert page.count("<td>never</td>") == len(bugs) - 1


def test_each_bug_preset_names_its_tracker_state_and_its_repro_folders(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every catalog bug with a tracker entry says the state it was seen in and when; a repro folder is
    listed under the bug preset whose run it was made from, and nowhere else."""
    monkeypatch.setenv("ACKLAB_RUNS", str(tmp_path))
    _run(tmp_path, "20261125T000001-aaaaaa", "kafka-14402", "3.5.2", "fail")
    _run(tmp_path, "20261125T000002-bbbbbb", None, "3.5.2", "fail")
    for name in ("20261125T000001-aaaaaa-txn__withhold-replay", "20261125T000002-bbbbbb-txn__withhold-replay", "20261125T000009-zzzzzz-x"):
        (tmp_path / "repros" / name).mkdir(parents=True)
        (tmp_path / "repros" / name / "run.sh").write_text("#!/bin/sh\n")
    bugs = {bug.preset: bug for bug in known_bugs()}
    assert bugs["kafka-14402"].repros == [str(tmp_path / "repros" / "20261125T000001-aaaaaa-txn__withhold-replay")]
    assert sum(len(bug.repros) for bug in bugs.values()) == 1
    for bug in bugs.values():
        if bug.tracker:
            assert bug.state in {"open", "fixed", "not a bug"} and bug.seen and len(bug.checked) == 10, bug
    assert bugs["kafka-14402"].state == "fixed"
    page = write_known_bugs().read_text()
    assert f"(read {bugs['kafka-14402'].checked})" in page and "20261125T000001-aaaaaa-txn__withhold-replay" in page


def test_a_run_of_two_clients_counts_each_client_on_its_own(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A preset run on both client families is red for the client whose scenario failed and green for the other."""
    monkeypatch.setenv("ACKLAB_RUNS", str(tmp_path))
    for n, statuses in enumerate(({"a": "fail", "a.java": "pass"}, {"a": "fail", "a.java": "pass"}, {"a": "incomplete", "a.java": "pass"})):
        run = RunDir(tmp_path / f"20261201T00000{n}-aaaaa{n}")
        entries = [
            ScenarioEntry(scenario=name, profile="p", fault="ack-loss", guarantee="exactly-once", client_family=family, client_version=version, planned=10)
            for name, family, version in (("a", "librdkafka", "2.16.1"), ("a.java", "java", "4.3.1"))
        ]
        run.write_manifest(Manifest(run_id=run.root.name, topology={"name": "three-brokers", "kafka_version": "4.3.1"},
                                    params=[{"preset": "librdkafka-4953"}], scenarios=entries))
        write_json(run.result, {"status": "fail" if "fail" in statuses.values() else "incomplete", "scenarios": statuses})
    bug = next(bug for bug in known_bugs() if bug.preset == "librdkafka-4953")
    assert (bug.red, bug.green, bug.incomplete, bug.runs) == (["Kafka 4.3.1 / librdkafka 2.16.1"], ["Kafka 4.3.1 / java 4.3.1"], ["Kafka 4.3.1 / librdkafka 2.16.1"], 3)
    assert bug.rates == {"Kafka 4.3.1 / java 4.3.1": [0, 3], "Kafka 4.3.1 / librdkafka 2.16.1": [2, 2]}
