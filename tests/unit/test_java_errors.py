"""librdkafka errors shown the way Java users quote them: every mapped name is one librdkafka
reports, every error acklab's faults can answer with is mapped, and the pages show both."""

from __future__ import annotations

import json
from pathlib import Path

from confluent_kafka import KafkaError

from acklab.plan.presets import PRESETS
from acklab.proxy.codes import ERRORS, PRODUCE_ERRORS
from acklab.report.field_notes import build_field_notes
from acklab.store.runs import Manifest, RunDir, ScenarioEntry
from acklab.workload.java_errors import JAVA_ERRORS, with_java


def test_every_mapped_name_is_a_librdkafka_error() -> None:
    assert [name for name in JAVA_ERRORS if not isinstance(getattr(KafkaError, name, None), int)] == []


def test_every_error_a_fault_can_answer_with_and_every_local_failure_has_its_java_exception() -> None:
    injectable = {KafkaError(ERRORS[name].code).name() for name in PRODUCE_ERRORS}
    local = {"_MSG_TIMED_OUT", "_TIMED_OUT", "_TRANSPORT", "_FATAL", "MSG_SIZE_TOO_LARGE", "OUT_OF_ORDER_SEQUENCE_NUMBER"}
    assert sorted((injectable | local) - set(JAVA_ERRORS)) == []
    assert JAVA_ERRORS["NOT_ENOUGH_REPLICAS"].text() == (
        "org.apache.kafka.common.errors.NotEnoughReplicasException: Messages are rejected since there are fewer in-sync replicas than required."
    )
    assert JAVA_ERRORS["NOT_LEADER_FOR_PARTITION"].exception == "NotLeaderOrFollowerException"  # Kafka renamed code 6
    assert JAVA_ERRORS["_FATAL"].text().startswith("org.apache.kafka.common.KafkaException: ")


def test_errors_come_most_frequent_first_with_both_clients_texts() -> None:
    rows = with_java({"_MSG_TIMED_OUT": 3, "NOT_ENOUGH_REPLICAS": 40, "_NOT_A_REAL_ONE": 1})
    assert [(r["name"], r["count"]) for r in rows] == [("NOT_ENOUGH_REPLICAS", 40), ("_MSG_TIMED_OUT", 3), ("_NOT_A_REAL_ONE", 1)]
    assert rows[1]["librdkafka"] == "Local: Message timed out"
    assert rows[1]["java"].startswith("org.apache.kafka.common.errors.TimeoutException: Expiring <n> record(s) for <topic>-<partition>")
    assert "max.block.ms" in rows[1]["note"]
    assert (rows[2]["librdkafka"], rows[2]["java"]) == ("", "")


def _preset_run(root: Path, scenario: str, errors: dict[str, int]) -> RunDir:
    run = RunDir(root / "20260101T000000-abcdef")
    run.root.mkdir(parents=True)
    run.write_manifest(Manifest(
        run_id=run.run_id, bootstrap_servers="", topology={}, preset="field-notes-1-broker-down-before-first-send",
        scenarios=[ScenarioEntry(scenario=scenario, delivery_errors=errors)],
    ))
    html = run.root / "report.html"
    html.write_text("")
    run.write_result({"status": "pass", "html": str(html), "observations": [], "beliefs": []})
    return run


def test_the_field_notes_page_shows_each_error_with_its_java_exception(tmp_path: Path) -> None:
    (observation, *_) = PRESETS["field-notes-1-broker-down-before-first-send"].observations
    run = _preset_run(tmp_path, observation.scenario, {"_MSG_TIMED_OUT": 200})
    page = build_field_notes([run.root]).html.read_text()
    row = page[page.index("<td>_MSG_TIMED_OUT</td>"):]
    assert row.startswith("<td>_MSG_TIMED_OUT</td><td>200</td><td>Local: Message timed out</td>")
    assert "<code>org.apache.kafka.common.errors.TimeoutException: Expiring &lt;n&gt; record(s) for &lt;topic&gt;-&lt;partition&gt;" in row


def test_the_run_report_shows_each_error_with_its_java_exception(tmp_path: Path) -> None:
    from acklab.report.html import COLUMNS, build_report

    run = _preset_run(tmp_path, "fn3-acks-all__replicas-down", {"NOT_ENOUGH_REPLICAS": 7, "_MSG_TIMED_OUT": 2})
    run.matrix_json.parent.mkdir(parents=True, exist_ok=True)
    run.matrix_json.write_text(json.dumps([{**dict.fromkeys(COLUMNS, 0), "scenario": "fn3-acks-all__replicas-down", "profile": "fn3-acks-all", "fault": "replicas-down", "guarantee": "at-least-once"}]))
    page = build_report(run, {"fn3-acks-all__replicas-down": "pass"}, "pass", None, [], [], [], [], []).read_text()
    errors = page[page.index("<h2>Delivery errors</h2>"):page.index("<h2>Beliefs</h2>")]
    assert errors.index("<td>NOT_ENOUGH_REPLICAS</td><td>7</td>") < errors.index("<td>_MSG_TIMED_OUT</td><td>2</td>")
    assert "<code>org.apache.kafka.common.errors.NotEnoughReplicasException: Messages are rejected since there are fewer in-sync" in errors
