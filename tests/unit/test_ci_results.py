"""The results where CI systems look: the JSON object's shape and the JUnit XML (validated against
a JUnit schema kept here and read back with junitparser), and the exit codes a CI step branches on."""

from __future__ import annotations

from pathlib import Path

import pytest
import xmlschema
from junitparser import Error, Failure, JUnitXml

from acklab.orchestration.cli.common import ExitCode
from acklab.report.ci_results import (
    CONTROL_SUITE,
    ControlResult,
    FailedCheck,
    RunResults,
    ScenarioResult,
    comparison_results,
    junit_xml,
    pair_label,
)

SCHEMA = xmlschema.XMLSchema(Path(__file__).parents[1] / "data" / "junit.xsd")


def _results(status: str = "fail", caught: bool = True, kafka: str = "4.3.1") -> RunResults:
    lost = FailedCheck(suite="exactly-once", kind="guarantee", expects="lost == 0", column="lost", observed=812)
    scenarios = [
        ScenarioResult(scenario="idempotent__planted-loss", verdict="fail", guarantee="exactly-once", fault="planted-loss",
                       client="confluent-kafka 2.16.1 (librdkafka 2.16.0)", reason=None, failed=[lost], row={"lost": 812},
                       why=["exactly-once: lost == 0, observed 812", "fatal producer error (\x1b[31mboom)"]),
        ScenarioResult(scenario="leader-ack__leader-pause", verdict="incomplete", guarantee="leader-durable", fault="leader-pause",
                       client="confluent-kafka 2.16.1 (librdkafka 2.16.0)", reason="fault ineffective (no leader change within 10 s)", failed=[], row={},
                       why=["fault ineffective (no leader change within 10 s)"]),
        ScenarioResult(scenario="idempotent__none", verdict="pass", guarantee="exactly-once", fault="none",
                       client="confluent-kafka 2.16.1 (librdkafka 2.16.0)", reason=None, failed=[], row={}),
    ]
    control = ControlResult(scenario="negative-control__planted-loss", caught=caught, planted=500, counted=500 if caught else 0,
                            line="negative control caught" if caught else "INVALID: the negative control was not caught exactly")
    return RunResults(
        run_id="20261129T120000-abcdef", status=status, kafka_version=kafka, client="confluent-kafka 2.16.1 (librdkafka 2.16.0)",
        controls=[control], scenarios=scenarios, failing=[s.scenario for s in scenarios if s.verdict != "pass"], matrix="audit/matrix.json",
    )


def _written(document: JUnitXml, tmp_path: Path) -> Path:
    path = tmp_path / "junit.xml"
    document.write(str(path), pretty=True)
    SCHEMA.validate(path)  # raises with the offending element
    return path


def test_the_junit_file_validates_and_names_each_red_row_with_its_expectation_and_observed_value(tmp_path: Path) -> None:
    results = _results()
    path = _written(junit_xml([(pair_label(results), results)]), tmp_path)
    (suite,) = JUnitXml.fromfile(str(path))
    assert suite.name == "Kafka 4.3.1 / confluent-kafka 2.16.1 (librdkafka 2.16.0)"
    assert (suite.tests, suite.failures, suite.errors, suite.skipped) == (4, 1, 1, 0)
    cases = {case.name: case for case in suite}
    (failure,) = cases["idempotent__planted-loss"].result
    assert isinstance(failure, Failure) and failure.message.startswith("exactly-once: lost == 0, observed 812; fatal producer error (")
    assert "\x1b" not in path.read_text()  # a client's control characters would make the file unreadable XML
    (error,) = cases["leader-ack__leader-pause"].result
    assert isinstance(error, Error) and "fault ineffective" in error.message  # incomplete is an error: a skip would read green
    assert cases["idempotent__none"].is_passed and cases["negative-control__planted-loss"].is_passed
    assert cases["negative-control__planted-loss"].classname == f"kafka-4_3_1-confluent-kafka-2_16_1-librdkafka-2_16_0.{CONTROL_SUITE}"
    assert cases["idempotent__none"].classname == "kafka-4_3_1-confluent-kafka-2_16_1-librdkafka-2_16_0.exactly-once"


def test_a_control_not_caught_is_a_failing_testcase(tmp_path: Path) -> None:
    results = _results("invalid", caught=False)
    (suite,) = JUnitXml.fromfile(str(_written(junit_xml([(pair_label(results), results)]), tmp_path)))
    control = next(case for case in suite if case.classname.endswith(CONTROL_SUITE))
    assert not control.is_passed and "INVALID" in control.result[0].message


def test_a_comparison_has_a_testsuite_per_pair_and_the_worst_status(tmp_path: Path) -> None:
    red, green = _results(kafka="3.9.2"), _results("pass", kafka="4.3.1")
    green = green.model_copy(update={"scenarios": [s.model_copy(update={"verdict": "pass", "failed": [], "reason": None}) for s in green.scenarios], "failing": []})
    pairs = [(pair_label(red), red), (pair_label(green), green)]
    suites = list(JUnitXml.fromfile(str(_written(junit_xml(pairs), tmp_path))))
    assert [(s.name, s.failures) for s in suites] == [(pair_label(red), 1), (pair_label(green), 0)]
    keys = [(case.classname, case.name) for suite in suites for case in suite]
    assert len(keys) == len(set(keys)) == 8  # the same scenario of two pairs is two tests to a CI system
    document = comparison_results(pairs, ["idempotent__planted-loss"])
    assert document.status == "fail" and [p.label for p in document.pairs] == [pair_label(red), pair_label(green)]


def test_a_script_decides_from_the_json_alone() -> None:
    document = RunResults.model_validate_json(_results().model_dump_json())
    assert document.status == "fail"
    assert {s.scenario: [f.expects for f in s.failed] for s in document.scenarios if s.verdict == "fail"} == {
        "idempotent__planted-loss": ["lost == 0"]
    }
    assert document.failing == ["idempotent__planted-loss", "leader-ack__leader-pause"]


@pytest.mark.parametrize(("status", "code"), [("pass", 0), ("fail", 1), ("incomplete", 3), ("invalid", 4)])
def test_each_outcome_has_its_own_exit_code(status: str, code: int) -> None:
    assert ExitCode.of(status) == code
    assert len(set(ExitCode)) == len(ExitCode.__members__) == 6  # pass, fail, bad input, incomplete, invalid, error: each its own
    assert (ExitCode.BAD_INPUT, ExitCode.ERROR) == (2, 5)
