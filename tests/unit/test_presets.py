"""Presets: each plans as a valid run, and its claims are checked against evidence, not printed."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from acklab.base.spec import SpecError
from acklab.plan.checks import (
    AffectedVersions,
    AllOf,
    Check,
    ClientStatistic,
    DeliveryErrors,
    Evidence,
    FatalError,
    FaultsCoverLoad,
    FixedIn,
    LongestSendPause,
    MatrixCount,
    ProducerLogLines,
    parse_check,
)
from acklab.plan.planner import make_plan
from acklab.plan.preset_files import load_presets
from acklab.plan.presets import BUGS, FIELD_NOTES, PRESETS, observe, with_preset
from acklab.store.runs import FaultRecord, Manifest, RunDir, ScenarioEntry
from acklab.workload import java_client, librdkafka


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_every_preset_plans_and_names_its_claims_scenarios(name: str) -> None:
    plan = make_plan(with_preset(name, {}))
    assert plan.params.preset == name
    scenarios = {s.name for s in plan.scenarios}
    assert PRESETS[name].observations and {o.scenario for o in PRESETS[name].observations} <= scenarios
    assert PRESETS[name].source.startswith("field-notes #") == (name in FIELD_NOTES) != (name in BUGS)


def test_every_field_note_is_covered() -> None:
    sources = {PRESETS[name].source for name in FIELD_NOTES}
    assert sources == {f"field-notes #{n}" for n in range(1, 9)}


def test_an_unknown_preset_is_refused_in_one_line() -> None:
    with pytest.raises(SpecError, match="unknown preset 'nope'; valid: field-notes-1"):
        make_plan({"preset": "nope"})


FN1_SCENARIO = "fn1-acks1__leader-restart-before-load"
FN1_BLOCK_MS = 2000  # the preset's Java max.block.ms


def count(column: str, op: str, value: int) -> Check:
    return MatrixCount(column=column, op=op, value=value)


def client_stat(counter: str, op: str, value: int) -> Check:
    return ClientStatistic(counter=counter, op=op, value=value)


def errors(*names: str) -> Check:
    return DeliveryErrors(any_of=list(names))


def fatal(text: str) -> Check:
    return FatalError(contains=text)


def both(*checks: Check) -> Check:
    return AllOf(checks=list(checks))


def fixed_in(component: str, version: str, before: Check, after: Check) -> Check:
    return FixedIn(component=component, version=version, before=before, after=after)


def evidence(row: dict, kafka_version: str = "4.3.1", **entry: object) -> Evidence:
    return Evidence({"planned": 1000, **row}, ScenarioEntry(scenario="p__f", **entry), RunDir(Path("/nonexistent")), kafka_version)


def test_a_bug_check_expects_the_bug_before_its_fix_and_not_from_it_on() -> None:
    desync = "p0: OUT_OF_ORDER_SEQUENCE_NUMBER: ProduceRequest ... failed due to sequence desynchronization"
    client = fixed_in("client", "2.3.0", fatal("OUT_OF_ORDER_SEQUENCE_NUMBER"), count("fatal", "==", 0))
    assert client(evidence({"fatal": 800}, client_version="2.2.0", fatal_error=desync)) == (True, f"client 2.2.0: fatal error: {desync}")
    assert client(evidence({"fatal": 0}, client_version="2.2.0")) == (False, "client 2.2.0: no fatal error")
    assert client(evidence({"fatal": 0}, client_version="2.16.1")) == (True, "client 2.16.1: fatal = 0 of 1,000 planned")
    assert client(evidence({"fatal": 800}, client_version="2.10.0", fatal_error=desync))[0] is False  # 2.10 > 2.3: numeric order
    broker = fixed_in("kafka", "3.6.0", count("hanging_partitions", ">", 0), count("hanging_partitions", "==", 0))
    assert broker(evidence({"hanging_partitions": 1}, kafka_version="3.5.2")) == (True, "kafka 3.5.2: hanging_partitions = 1 of 1,000 planned")
    assert broker(evidence({"hanging_partitions": 0}, kafka_version="3.5.2"))[0] is False
    assert broker(evidence({"hanging_partitions": 0}, kafka_version="3.6.2"))[0] is True


def test_checks_compare_measurements_with_the_claim() -> None:
    assert count("duplicates", ">", 0)(evidence({"duplicates": 12})) == (True, "duplicates = 12 of 1,000 planned")
    assert count("lost", "==", 0)(evidence({"lost": 3}))[0] is False
    seen = evidence({}, delivery_errors={"_MSG_TIMED_OUT": 40, "NOT_ENOUGH_REPLICAS": 2})
    assert errors("NOT_ENOUGH_REPLICAS")(seen) == (True, "delivery errors: _MSG_TIMED_OUT x40, NOT_ENOUGH_REPLICAS x2")
    assert errors("_TIMED_OUT")(seen)[0] is False
    stats = evidence({}, producer_stats={"req_timeouts": 4, "disconnects": 0})
    assert both(client_stat("req_timeouts", ">", 0), client_stat("disconnects", ">", 0))(stats) == (
        False, "client statistics req_timeouts = 4; client statistics disconnects = 0"
    )


def test_field_note_1_stops_the_broker_before_the_producer_and_keeps_it_down_past_the_load() -> None:
    plan = make_plan(with_preset("field-notes-1-broker-down-before-first-send", {}))
    java, rdkafka = plan.checked  # the write-up's Java client first, librdkafka beside it
    assert (java.name, java.client.family, rdkafka.client.family) == (FN1_SCENARIO, "java", "librdkafka")
    assert plan.topology.broker_ids == [1] and java.schedule == rdkafka.schedule
    (step,) = java.schedule
    assert (step.fault, step.before_load, step.at_s) == ("leader-restart", True, 0.0)
    sending_s = plan.params.messages / (plan.params.rate or 1)
    # down for the whole load: librdkafka's last record expires a delivery timeout after it was produced,
    # each of Java's send() calls blocks max.block.ms
    assert step.duration_s >= sending_s + rdkafka.profile.delivery_timeout_ms / 1000 + 3
    assert step.duration_s >= plan.params.messages * FN1_BLOCK_MS / 1000 + 3
    assert librdkafka.config(rdkafka.profile)["acks"] == "1" and rdkafka.profile.retries == 10
    assert java_client.config(java.profile) == {"acks": "1", "request.timeout.ms": "1000", "retries": "10", "max.block.ms": str(FN1_BLOCK_MS)}
    # Java's documented adjustment (3.2+): acks=1 with idempotence unset turns it off
    assert (java.profile.acks, java.profile.enable_idempotence, java.profile.retries) == ("1", False, 10)
    for scenario in plan.checked:  # the model lets a leader-ack write fail cleanly under a fault: no bound on failed_clean
        assert str(scenario.expected.guarantee) == "leader-durable"
        assert not [e for e in scenario.expected.expectations if e.column in ("failed", "failed_clean")]


def test_faults_cover_load_needs_the_fault_in_effect_before_the_load_and_until_it_ended() -> None:
    def timeline(effective_at: float, ended: float) -> Evidence:
        event = FaultRecord(fault="leader-restart", effective=True, effective_at=effective_at, ended=ended, effect="broker 1 down")
        return evidence({}, fault_timeline=[event], fault_effective=True, load_started=100.0, load_ended=107.0)

    assert FaultsCoverLoad()(timeline(99.6, 114.0)) == (
        True, "leader-restart in effect -0.4 s to +14.0 s (load: 0.0 s to 7.0 s): broker 1 down"
    )
    assert FaultsCoverLoad()(timeline(101.0, 114.0))[0] is False  # took effect after the first send
    assert FaultsCoverLoad()(timeline(99.0, 105.0))[0] is False  # back before the load ended
    assert FaultsCoverLoad()(evidence({}))[0] is False


def test_an_error_check_names_the_java_exception_on_the_java_client() -> None:
    java = evidence({}, client_family="java", delivery_errors={"TimeoutException": 200})
    assert errors("_MSG_TIMED_OUT")(java) == (True, "delivery errors: TimeoutException x200")
    assert errors("NOT_ENOUGH_REPLICAS")(java)[0] is False
    assert errors("NOT_ENOUGH_REPLICAS")(evidence({}, client_family="java", delivery_errors={"NotEnoughReplicasException": 3}))[0]


def test_kafka_13598_expects_duplicates_only_on_the_affected_versions() -> None:
    (observation,) = PRESETS["kafka-13598"].observations
    check = observation.check
    assert check == AffectedVersions(
        component="client", versions=["3.0.0", "3.1.0"], affected=count("duplicates", ">", 0), unaffected=count("duplicates", "==", 0)
    )
    assert check(evidence({"duplicates": 4177}, client_version="3.1.0")) == (True, "client 3.1.0: duplicates = 4,177 of 1,000 planned")
    assert check(evidence({"duplicates": 0}, client_version="3.1.1"))[0] is True  # fixed in 3.0.1, 3.1.1 and 3.2.0
    assert check(evidence({"duplicates": 3}, client_version="3.2.3"))[0] is False


def _manifest(preset: str, *entries: ScenarioEntry) -> Manifest:
    return Manifest(run_id="r", params=[{"preset": preset}], scenarios=list(entries))


def test_an_observation_is_checked_on_each_client_or_only_on_its_family(tmp_path: Path) -> None:
    """field note #2 side by side: the family-free claims once per client, the Java and librdkafka ones on their own."""
    name = "field-notes-2-broker-down-after-metadata"
    java = ScenarioEntry(scenario="fn2-acks1__leader-kill", profile="fn2-acks1", fault="leader-kill", client_family="java",
                         client_version="4.3.1", delivery_errors={"TimeoutException": 5})
    rdkafka = ScenarioEntry(scenario="fn2-acks1.librdkafka__leader-kill", profile="fn2-acks1", fault="leader-kill",
                            client_version="2.16.1", librdkafka_version="2.16.0", delivery_errors={"_MSG_TIMED_OUT": 5})
    rows = [{"scenario": e.scenario, "planned": 10, "lost": 0, "client_family": e.client_family, "client_version": e.client_version,
             "librdkafka_version": e.librdkafka_version} for e in (java, rdkafka)]
    seen = observe(RunDir(tmp_path), _manifest(name, java, rdkafka), rows, {})
    by_claim: dict[str, list[tuple[str, str]]] = {}
    for item in seen:
        by_claim.setdefault(item["claim"], []).append((item["scenario"], item["client"]))
    assert by_claim["queued records expire with a timeout error"] == [
        ("fn2-acks1__leader-kill", "kafka-clients 4.3.1 (Java)"), ("fn2-acks1.librdkafka__leader-kill", "confluent-kafka 2.16.1 (librdkafka 2.16.0)"),
    ]
    java_only = [c for c in by_claim if "request.timeout.ms + linger.ms" in c]
    assert java_only and all(s == [("fn2-acks1__leader-kill", "kafka-clients 4.3.1 (Java)")] for c, s in by_claim.items() if c in java_only)
    timeouts = [item for item in seen if item["claim"] == "queued records expire with a timeout error"]
    assert [item["status"] for item in timeouts] == ["reproduced", "reproduced"]  # TimeoutException on Java, _MSG_TIMED_OUT on librdkafka
    # A run of the Java client alone leaves librdkafka's claims out
    alone = observe(RunDir(tmp_path), _manifest(name, java.model_copy(update={"scenario": "fn2-acks1__leader-kill"})), rows[:1], {})
    assert alone and {item["client"] for item in alone} == {"kafka-clients 4.3.1 (Java)"}
    assert not [item for item in alone if "delivery timeout (5000 ms)" in item["claim"]]


def test_the_field_notes_run_the_java_client_first_with_librdkafka_beside_it() -> None:
    for name in FIELD_NOTES:
        plan = make_plan(with_preset(name, {}))
        assert [c.family for c in dict.fromkeys(s.client for s in plan.scenarios)] == ["java", "librdkafka"], name
        # a chosen client replaces the preset's clients
        alone = make_plan(with_preset(name, {"client": "librdkafka"}))
        assert {s.client.family for s in alone.scenarios} == {"librdkafka"}, name


def test_producer_log_lines_quote_the_java_error_the_write_ups_quote(tmp_path: Path) -> None:
    run = RunDir(tmp_path)
    logs = run.scenario("s__f").producers
    logs.mkdir(parents=True)
    (logs / "p0.log").write_text("p0 first TimeoutException: Topic t not present in metadata after 2000 ms.\n")
    seen = Evidence({}, ScenarioEntry(scenario="s__f"), run, "4.3.1")
    assert ProducerLogLines(text="not present in metadata after 2000 ms")(seen) == (
        True, "1 producer log lines with 'not present in metadata after 2000 ms': p0 first TimeoutException: Topic t not present in metadata after 2000 ms."
    )
    assert ProducerLogLines(text="has passed since batch creation")(seen)[0] is False


def test_processor_events_count_a_pipelines_overran_calls_and_quote_the_first(tmp_path: Path) -> None:
    from acklab.plan.checks import ProcessorEvents
    from acklab.store.runs import PipelineEvidence

    run = RunDir(tmp_path)
    logs = tmp_path / "scenarios" / "pipeline-eos__f" / "processors"
    logs.mkdir(parents=True)
    (logs / "processor-0.0.jsonl").write_text(
        '{"t":1.0,"ev":"batch","txn":2}\n'
        '{"t":2.0,"ev":"overran","txn":2,"call":"send_offsets_to_transaction","timeout_s":30.0,"waited_s":40.0}\n'
    )
    (logs / "processor-1.0.jsonl").write_text('{"t":3.0,"ev":"overran","txn":1,"call":"commit_transaction","timeout_s":30.0,"waited_s":40.0}\n')
    pipeline = PipelineEvidence(style="eos", processors=2, group_id="g", output_topic="o", logs="scenarios/pipeline-eos__f/processors")
    seen = Evidence({}, ScenarioEntry(scenario="pipeline-eos__f", pipeline=pipeline), run, "4.3.1")
    assert ProcessorEvents(event="overran", where={"call": "send_offsets_to_transaction"})(seen) == (
        True, "1 processor overran events with call=send_offsets_to_transaction (of 2 overran events); the first, processor-0.0: "
        "txn=2, call=send_offsets_to_transaction, timeout_s=30.0, waited_s=40.0"
    )
    assert ProcessorEvents(event="overran", where={"txn": True})(seen) == (False, "0 processor overran events with txn=True (of 2 overran events)")
    assert ProcessorEvents(event="overran", at_least=2)(seen)[0] is True
    assert ProcessorEvents(event="overran", at_least=3)(seen)[0] is False
    assert ProcessorEvents(event="overran")(Evidence({}, ScenarioEntry(scenario="p__f"), run, "4.3.1")) == (False, "not a pipeline scenario: no processor logs")


def test_send_paused_measures_the_longest_gap_between_a_producers_sends(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    run = RunDir(tmp_path)
    log = tmp_path / "send_log.parquet"
    # p0 sends at 0, 1, 13 s (a send() blocked 12 s); p1's sends interleave but do not hide p0's pause
    pq.write_table(pa.table({"producer": ["p0", "p1", "p0", "p1", "p0"], "send_ts": [100.0, 100.5, 101.0, 106.0, 113.0]}), log)
    seen = Evidence({}, ScenarioEntry(scenario="s__f", send_log="send_log.parquet"), run, "4.3.1")
    assert LongestSendPause(at_least_s=10.0)(seen) == (True, "the longest pause between two sends was 12.0 s")
    assert LongestSendPause(at_least_s=12.5)(seen)[0] is False


# --- presets as data: the checks' presets-file form, the files, and a team's own file ----------------------------------


def test_a_check_is_named_with_its_arguments_and_combines_with_others() -> None:
    raw = {"fixed_in": {"component": "kafka", "version": "3.6.0", "before": {"all_of": [{"matrix_count": {"column": "lost", "op": ">", "value": 0}}]},
                        "after": {"faults_cover_load": None}}}
    assert parse_check(raw) == FixedIn(
        component="kafka", version="3.6.0", before=AllOf(checks=[count("lost", ">", 0)]), after=FaultsCoverLoad()
    )
    assert parse_check({"delivery_errors": ["_MSG_TIMED_OUT"]}) == errors("_MSG_TIMED_OUT")  # one argument: given alone


@pytest.mark.parametrize(("raw", "message"), [
    ({"cont": {"column": "lost"}}, "unknown check 'cont'; valid: matrix_count, delivery_errors,"),
    ({"matrix_count": {"column": "lost", "op": "==", "value": 0}, "fatal_error": {"contains": "x"}}, "a check is one mapping of a check name to its arguments"),
    ("matrix_count", "a check is one mapping"),
    ({"matrix_count": {"column": "lost", "op": "=", "value": 0}}, "matrix_count.op: Input should be '==', '>', '>=', '<' or '<='"),
    ({"matrix_count": {"column": "lost", "op": "==", "value": 0, "extra": 1}}, "matrix_count.extra: Extra inputs are not permitted"),
    ({"all_of": [{"matrix_count": {"column": "lost", "op": "==", "value": "none"}}]}, "all_of.checks.0: matrix_count.value: Input should be a valid integer"),
    ({"fixed_in": {"component": "broker", "version": "3.6.0", "before": {"faults_cover_load": {}}, "after": {"faults_cover_load": {}}}},
     "fixed_in.component: Input should be 'kafka' or 'client'"),
])
def test_a_bad_check_is_refused_in_one_line_saying_what_is_allowed(raw: object, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)) as refused:
        parse_check(raw)
    assert "\n" not in str(refused.value)


TEAM_FILE = """\
team-acks-all-no-loss:
  source: our runbook, section 4
  description: acks=all and idempotence lose nothing when the leader is killed
  params: {topology: three-brokers, profiles: [idempotent], faults: [leader-kill], messages: 2000, rate: 500.0}
  observations:
  - claim: no acknowledged record is lost
    scenario: idempotent__leader-kill
    check: {matrix_count: {column: lost, op: '==', value: 0}}
  - claim: the Java client retries without duplicates
    scenario: idempotent__leader-kill
    families: [java]
    check: {claim_bounds: {claim: guarantee_exactly-once, columns: [duplicates]}}
"""


def test_a_team_presets_file_plans_and_is_observed_as_the_catalogs_are(tmp_path: Path) -> None:
    from acklab.plan.preset_files import load_presets

    path = tmp_path / "team.yaml"
    path.write_text(TEAM_FILE)
    (found,) = load_presets(path).values()
    assert found.observations[1].families == ("java",) and found.observations[1].restates == "guarantee_exactly-once"
    params = with_preset("team-acks-all-no-loss", {"client": "java"}, str(path))
    assert params == {**found.params, "preset": "team-acks-all-no-loss", "presets_file": str(path), "client": "java"}
    plan = make_plan(params)
    assert plan.params.presets_file == str(path) and {s.name for s in plan.checked} == {"idempotent__leader-kill"}
    entry = ScenarioEntry(scenario="idempotent__leader-kill", profile="idempotent", fault="leader-kill", client_family="java", client_version="4.3.1")
    row = {"scenario": entry.scenario, "planned": 2000, "lost": 0, "duplicates": 0, "client_family": "java", "client_version": "4.3.1"}
    manifest = Manifest(run_id="r", params=[plan.params.model_dump(mode="json")], scenarios=[entry])
    seen = observe(RunDir(tmp_path), manifest, [row], {})
    assert [(item["claim"], item["status"], item["restates"]) for item in seen] == [
        ("no acknowledged record is lost", "reproduced", None),
        ("the Java client retries without duplicates", "reproduced", "guarantee_exactly-once"),
    ]
    with pytest.raises(SpecError, match=f"unknown preset 'kafka-14402' in presets file {re.escape(str(path))}; valid: team-acks-all-no-loss"):
        make_plan(with_preset("team-acks-all-no-loss", {}, str(path)) | {"preset": "kafka-14402"})


@pytest.mark.parametrize(("change", "message"), [
    (("check: {matrix_count: {column: lost, op: '==', value: 0}}", "check: {cont: {column: lost}}"),
     "preset team-acks-all-no-loss: observations.0.check: unknown check 'cont'; valid: matrix_count"),
    (("families: [java]", "families: [jav]"), "observations.1.families: unknown client family 'jav'; valid: librdkafka, java"),
    (("messages: 2000", "mesages: 2000"), "preset team-acks-all-no-loss: params: mesages: Extra inputs are not permitted"),
    (("scenario: idempotent__leader-kill", "scenario: acks-all__leader-kill"),
     "preset team-acks-all-no-loss: observations.0.scenario: 'acks-all__leader-kill' is not of one of its profiles (idempotent)"),
    (("  source: our runbook, section 4\n", ""), "preset team-acks-all-no-loss: source: Field required"),
    (("  description:", "  descripton:"), "preset team-acks-all-no-loss: description: Field required"),
    (("params: {", "params: {preset: other, "), "preset team-acks-all-no-loss: params: a preset's params do not name a preset (its name does)"),
    ((TEAM_FILE, "- team\n"), "expected a mapping of preset name -> {source, description, params, observations}"),
    (("  observations:", "  observations: ["), "not valid YAML at line"),
])
def test_a_bad_presets_file_is_refused_in_one_line_naming_the_file_and_the_preset(tmp_path: Path, change: tuple[str, str], message: str) -> None:
    from acklab.plan.preset_files import load_presets

    path = tmp_path / "team.yaml"
    assert change[0] in TEAM_FILE
    path.write_text(TEAM_FILE.replace(*change))
    with pytest.raises(SpecError) as refused:
        load_presets(path)
    assert str(refused.value).startswith(f"presets file {path}") and message in str(refused.value) and "\n" not in str(refused.value), refused.value


def test_a_trigger_names_a_presets_file_by_name_in_the_catalog_or_the_team_folder_never_by_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from acklab.plan.preset_files import PRESETS_DIR_ENV, catalog_folder, resolve_presets_file

    assert resolve_presets_file("bugs", paths=False) == catalog_folder() / "bugs.yaml"
    (tmp_path / "team.yaml").write_text(TEAM_FILE)
    monkeypatch.setenv(PRESETS_DIR_ENV, str(tmp_path))
    assert resolve_presets_file("team", paths=False) == tmp_path / "team.yaml"
    for path in ("/etc/passwd", "../catalog/presets/bugs", "team.yaml", str(tmp_path / "team.yaml"), "~/x"):
        with pytest.raises(SpecError, match="a DAG run names a presets file by NAME .* not by path$"):
            resolve_presets_file(path, paths=False)
    with pytest.raises(SpecError, match=f"presets_file 'nope': no nope.yaml in .* or {re.escape(str(tmp_path))} "):
        resolve_presets_file("nope", paths=False)
    (tmp_path / "bugs.yaml").write_text(TEAM_FILE)
    with pytest.raises(SpecError, match="both .* exist; rename the one in ACKLAB_PRESETS_DIR"):
        resolve_presets_file("bugs", paths=False)
    assert resolve_presets_file(str(tmp_path / "team.yaml"), paths=True) == tmp_path / "team.yaml"  # the CLI's own user


def test_a_dag_run_is_refused_a_presets_file_path_before_anything_starts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from acklab.orchestration import tasks

    (tmp_path / "team.yaml").write_text(TEAM_FILE)
    with pytest.raises(SpecError, match="^presets_file '.*team.yaml': a DAG run names a presets file by NAME"):
        tasks.plan_run({"preset": "team-acks-all-no-loss", "presets_file": str(tmp_path / "team.yaml")}, create=False)
    monkeypatch.setenv("ACKLAB_PRESETS_DIR", str(tmp_path))
    planned = tasks.plan_run({"preset": "team-acks-all-no-loss", "presets_file": "team"}, create=False)
    assert planned["params"]["presets_file"] == "team" and planned["params"]["preset"] == "team-acks-all-no-loss"


def test_the_preset_code_never_branches_on_a_client_familys_name() -> None:
    """Which client an observation is about is data (its `families`); the checks ask the family objects."""
    import ast

    from acklab.base.paths import PROJECT_ROOT
    from acklab.workload.families import FAMILIES

    for module in ("checks", "preset_files", "presets"):
        tree = ast.parse((PROJECT_ROOT / "plugins" / "acklab" / "plan" / f"{module}.py").read_text())
        literals = {node.value for node in ast.walk(tree) if isinstance(node, ast.Constant) and isinstance(node.value, str)}
        assert not literals & set(FAMILIES), module


def test_every_catalog_presets_file_shows_how_a_preset_is_written() -> None:
    from acklab.plan.preset_files import catalog_folder

    for path in sorted(catalog_folder().glob("*.yaml")):
        head = path.read_text().split("\n\n", 1)[0]
        assert all(word in head for word in ("# For example:", "all_of", "fixed_in", "affected_versions", "families")), path


def test_the_checks_page_is_current_and_documents_every_check_and_argument() -> None:
    from acklab.plan.checks import CHECKS
    from acklab.report.checks_doc import DOC, checks_markdown

    page = checks_markdown()
    assert DOC.read_text() == page, "docs/checks.md is stale: run `acklab checks-doc`"
    for name, check in CHECKS.items():
        assert f"## `{name}`" in page and check.__doc__
        assert all(f"| `{field}` |" in page and info.description for field, info in check.model_fields.items()), name


def _acklab(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ACKLAB_RUNS": str(tmp_path / "runs"), "COLUMNS": "200"}
    return subprocess.run([str(Path(sys.executable).parent / "acklab"), *args], capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)


def test_acklab_presets_lists_a_teams_presets_file(tmp_path: Path) -> None:
    (tmp_path / "team.yaml").write_text(TEAM_FILE)
    listed = _acklab(tmp_path, "presets", "--presets-file", "team.yaml", "--json")
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout) == [{
        "name": "team-acks-all-no-loss", "source": "our runbook, section 4",
        "description": "acks=all and idempotence lose nothing when the leader is killed",
    }]
    (tmp_path / "bad.yaml").write_text(TEAM_FILE.replace("op: '=='", "op: '='"))
    refused = _acklab(tmp_path, "presets", "--presets-file", "bad.yaml")
    assert refused.returncode == 2 and "observations.0.check: matrix_count.op: Input should be '==', '>', '>=', '<' or '<='" in refused.stdout + refused.stderr


def test_acklab_run_refuses_a_bad_presets_file_in_one_line_before_any_broker_starts(tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text(TEAM_FILE.replace("families: [java]", "families: [jav]"))
    refused = _acklab(tmp_path, "run", "--presets-file", "bad.yaml", "--preset", "team-acks-all-no-loss")
    said = (refused.stdout + refused.stderr).strip()
    assert refused.returncode == 2, said
    assert said == (
        f"error: presets file {tmp_path / 'bad.yaml'}: preset team-acks-all-no-loss: observations.1.families: "
        "unknown client family 'jav'; valid: librdkafka, java"
    ), said
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").glob("2*"))  # no run folder, no cluster
    (tmp_path / "team.yaml").write_text(TEAM_FILE)
    unknown = _acklab(tmp_path, "run", "--presets-file", "team.yaml", "--preset", "kafka-14402")
    assert unknown.returncode == 2 and "unknown preset 'kafka-14402' in presets file" in unknown.stdout + unknown.stderr
    alone = _acklab(tmp_path, "run", "--presets-file", "team.yaml")
    assert alone.returncode == 2 and "--presets-file names the file of --preset" in alone.stdout + alone.stderr


def test_kafka_17754_reads_an_endtxn_replays_answer_and_names_the_pipelines_scenario() -> None:
    """A replayed EndTxn has one answer, not one per partition: NONE is taken, an error refused; the
    preset's claims name the pipeline scenario as `pipeline-<style>__<faults>`."""
    observations = PRESETS["kafka-17754"].observations
    assert {o.scenario for o in observations} == {"pipeline-eos__withhold-replay+withhold-replay+withhold-replay"}

    def replayed(*answers: str) -> list[dict]:
        held = [{"api": "EndTxn", "correlation_id": n, "queued": False, "held_at": 1.0, "released_at": 6.0, "answer": a} for n, a in enumerate(answers)]
        return [{"fault": "withhold-replay", "withheld": held}]

    taken, duplicated, java = (o.check for o in observations)
    assert taken(evidence({}, fault_timeline=replayed("CONCURRENT_TRANSACTIONS", "NONE")))[0] is True
    assert taken(evidence({}, fault_timeline=replayed("CONCURRENT_TRANSACTIONS", "PRODUCER_FENCED")))[0] is False
    assert duplicated(evidence({"processed_duplicated": 57}))[0] is True
    fenced = replayed("PRODUCER_FENCED", "CONCURRENT_TRANSACTIONS")
    assert java(evidence({"processed_duplicated": 0}, client_version="4.3.1", fault_timeline=fenced))[0] is True
    assert java(evidence({"processed_duplicated": 3}, client_version="4.3.1", fault_timeline=fenced))[0] is False
    assert java(evidence({"processed_duplicated": 0}, client_version="3.9.1", fault_timeline=replayed("NONE")))[0] is True  # version 1 takes it
    assert java(evidence({"processed_duplicated": 0}, kafka_version="3.9.2", client_version="4.3.1", fault_timeline=replayed("NONE")))[0] is True


def test_a_tracker_entry_comes_with_its_state_and_the_date_it_was_read(tmp_path: Path) -> None:
    """A state is that of a tracker entry; every catalog bug with a tracker entry says its state (a team's may not)."""
    assert all(preset.tracker_state is not None for preset in BUGS.values() if preset.tracker)
    body = {"source": "x", "description": "y", "params": {"profiles": ["leader-ack"], "faults": ["leader-kill"]},
            "observations": [{"claim": "c", "scenario": "leader-ack__leader-kill", "check": {"matrix_count": {"column": "lost", "op": ">", "value": 0}}}]}
    state = {"state": "open", "seen": "open, no fix merged", "checked": "2026-12-01"}
    for extra, error in (
        ({"tracker_state": state}, "tracker_state is the state of the tracker entry"),
        ({"tracker": "https://example.invalid/1", "tracker_state": {**state, "state": "stale"}}, "tracker_state.state"),
        ({"tracker": "https://example.invalid/1", "tracker_state": {**state, "checked": "soon"}}, "tracker_state.checked"),
    ):
        path = tmp_path / "presets.yaml"
        path.write_text(yaml.safe_dump({"ours": {**body, **extra}}))
        with pytest.raises(SpecError, match=error):
            load_presets(path)
    path.write_text(yaml.safe_dump({"ours": {**body, "tracker": "https://example.invalid/1", "tracker_state": state}}))
    assert load_presets(path)["ours"].tracker_state.checked.isoformat() == "2026-12-01"
    path.write_text(yaml.safe_dump({"ours": {**body, "tracker": "https://example.invalid/1"}}))
    assert load_presets(path)["ours"].tracker_state is None
