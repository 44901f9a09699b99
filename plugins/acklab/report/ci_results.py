"""A run's results where CI systems and scripts look: one JSON object (`RunResults`: the run's status,
its negative controls, each row with its verdict, guarantee and the expectations it failed with their
observed values) and JUnit XML (`junit_xml`: a testsuite per (Kafka version, client) pair, a testcase
per scenario). Both are written into every run folder by `acklab.orchestration.pipeline.write_result`
(`results.json`, `junit.xml`) and into every version comparison's folder (`ComparisonResults`); `acklab
run --json` prints the object, `--junit PATH` writes the XML there too.

A script decides from `status` alone (`pass`, `fail`: a documented guarantee broken, `incomplete`:
evidence short or a fault without effect, `invalid`: a negative control not caught exactly, so no
verdict of the run can be trusted) and lists `scenarios` whose `verdict` is not `pass`. In the XML a
failed scenario is a `<failure>`, an incomplete one an `<error>` (a skip would read green), and each
negative control a testcase of its own that fails unless it was caught.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from junitparser import Error, Failure, JUnitXml, TestCase, TestSuite
from pydantic import BaseModel, Field

from acklab.checker.verdict import RowStatus, ScenarioVerdict, Status, Verdict, overall, show
from acklab.store.runs import RunDir, write_json
from acklab.workload import families

SCHEMA_VERSION = 1
CONTROL_SUITE = "negative-controls"  # the controls' testcases' classname, after their pair


class FailedCheck(BaseModel):
    """One expectation a row did not meet."""

    suite: str = Field(description="the GX suite that holds it")
    kind: str = Field(description="integrity, guarantee, availability, evidence or efficacy")
    expects: str = Field(description="what it expects, e.g. `lost == 0`")
    column: str | None = Field(description="the matrix column it reads (null: a row-level check)")
    observed: Any = Field(description="the value the row had")


class ScenarioResult(BaseModel):
    """One matrix row with its verdict."""

    scenario: str = Field(description="`<profile or pipeline>__<fault>`")
    verdict: RowStatus = Field(description="the row's verdict: pass, fail or incomplete")
    guarantee: str = Field(description="the guarantee class the model expects of it")
    fault: str | None = Field(description="its fault schedule's label")
    client: str = Field(description="the client that ran it, e.g. `kafka-clients 4.3.1 (Java)`")
    reason: str | None = Field(description="why it is not a pass beyond its failed expectations (a fault without effect, evidence short...)")
    failed: list[FailedCheck] = Field(description="the expectations it failed, with the observed values")
    fatal_error: str | None = Field(None, description="the producer's fatal error, if it raised one")
    why: list[str] = Field(default_factory=list, description="why it is not a pass, each part as the console says it")
    row: dict[str, Any] = Field(description="its delivery-matrix row (`audit/matrix.json`)")

    def message(self) -> str:
        """One line: why the row is not a pass."""
        return "; ".join(self.why) or self.verdict


class ControlResult(BaseModel):
    """One negative control: an anomaly planted on purpose that the checker must count exactly."""

    scenario: str = Field(description="the control's scenario, e.g. `negative-control__planted-loss`")
    caught: bool = Field(description="its row is red with the checker's count equal to what was planted")
    planted: int | None = Field(description="what was planted (e.g. records swallowed)")
    counted: int | None = Field(description="what the checker counted (e.g. records lost)")
    line: str = Field(description="the sentence the console prints for it")


class RunResults(BaseModel):
    """A run's results (`results.json`, `acklab run --json`)."""

    schema_version: int = Field(SCHEMA_VERSION, description="bumped when a field changes meaning or goes")
    run_id: str = Field(description="the run folder's name in the run store")
    status: Status = Field(description="pass, fail, incomplete or invalid (`acklab.checker.verdict`)")
    kafka_version: str = Field(description="the cluster's Kafka version")
    client: str = Field(description="the run's first client (each row names its own)")
    controls: list[ControlResult] = Field(description="the negative controls (none: nothing showed the run could go red)")
    scenarios: list[ScenarioResult] = Field(description="every row but the controls, in matrix order")
    failing: list[str] = Field(description="the scenarios whose verdict is not pass")
    matrix: str = Field(description="absolute path of the run's delivery matrix (its `audit/matrix.json`)")
    html: str | None = Field(None, description="absolute path of the run's HTML report")


class PairResults(BaseModel):
    """One (Kafka version, client) pair of a version comparison."""

    label: str = Field(description="e.g. `Kafka 4.3.1 / java 4.3.1`")
    results: RunResults = Field(description="that pair's run's results, as its own `results.json`")


class ComparisonResults(BaseModel):
    """A version comparison's results (its folder's `results.json`, `acklab run --json` with several versions)."""

    schema_version: int = Field(SCHEMA_VERSION, description="as a run's")
    status: Status = Field(description="the worst status of its pairs")
    differing: list[str] = Field(description="the scenarios whose verdict differs between pairs")
    pairs: list[PairResults] = Field(description="one entry per (Kafka version, client) pair, oldest first")


def run_results(run: RunDir, verdict: Verdict, html: str | None = None) -> RunResults:
    """The results of a validated run from its verdict, manifest and matrix."""
    manifest = run.read_manifest()
    rows = {row["scenario"]: row for row in run.read_matrix()}
    scenarios = [_scenario(s, rows.get(s.scenario, {})) for s in verdict.checked]
    return RunResults(
        run_id=run.run_id,
        status=verdict.status,
        kafka_version=str(manifest.topology["kafka_version"]),
        client=families.row_label(next(iter(rows.values()), {"client_family": manifest.client_family, "client_version": manifest.client_version})),
        controls=[
            ControlResult(scenario=c.scenario, caught=c.caught, planted=c.planted, counted=c.counted, line=c.line()) for c in verdict.controls
        ],
        scenarios=scenarios,
        failing=[s.scenario for s in scenarios if s.verdict != "pass"],
        matrix=str(run.matrix_json),
        html=html,
    )


def _scenario(verdict: ScenarioVerdict, row: Mapping[str, Any]) -> ScenarioResult:
    return ScenarioResult(
        scenario=verdict.scenario, verdict=verdict.status, guarantee=verdict.guarantee, fault=verdict.fault, client=families.row_label(row),
        reason=verdict.reason, fatal_error=verdict.fatal_error, why=verdict.why(), row=dict(row),
        failed=[FailedCheck(suite=f.suite, kind=f.kind, expects=f.expects, column=f.column, observed=f.observed) for f in verdict.failed],
    )


def comparison_results(pairs: Sequence[tuple[str, RunResults]], differing: Sequence[str]) -> ComparisonResults:
    return ComparisonResults(
        status=overall({results.status for _, results in pairs}), differing=list(differing),
        pairs=[PairResults(label=label, results=results) for label, results in pairs],
    )


def junit_xml(pairs: Sequence[tuple[str, RunResults]]) -> JUnitXml:
    """One testsuite per pair (named by its label), one testcase per scenario and per negative
    control, each classname led by the pair (`<pair>.<guarantee class>`, `<pair>.negative-controls`):
    CI systems key a testcase by classname and name, and the same scenario of two pairs is two tests."""
    document = JUnitXml("acklab")
    for label, results in pairs:
        suite = TestSuite(_xml_text(label))
        suite.add_property("run_id", results.run_id)
        suite.add_property("status", results.status)
        pair = _slug(label)
        for control in results.controls:
            case = TestCase(control.scenario, classname=f"{pair}.{CONTROL_SUITE}")
            if not control.caught:
                case.result = [Failure(_xml_text(control.line), "ControlNotCaught")]
            suite.add_testcase(case)
        for scenario in results.scenarios:
            case = TestCase(scenario.scenario, classname=f"{pair}.{scenario.guarantee}")
            if scenario.verdict == "fail":
                failure = Failure(_xml_text(scenario.message()), "GuaranteeViolated")
                failure.text = _xml_text("\n".join(f"{f.suite} ({f.kind}): {f.expects}, observed {show(f.observed)}" for f in scenario.failed)) or None
                case.result = [failure]
            elif scenario.verdict == "incomplete":
                case.result = [Error(_xml_text(scenario.message()), "Incomplete")]
            suite.add_testcase(case)
        suite.update_statistics()
        document.add_testsuite(suite)
    document.update_statistics()
    return document


def _slug(label: str) -> str:
    """A pair label as one classname segment: `Kafka 4.3.1 / kafka-clients 4.3.1 (Java)` -> `kafka-4_3_1-kafka-clients-4_3_1-java`."""
    return re.sub(r"[^a-z0-9_]+", "-", label.lower().replace(".", "_")).strip("-")


_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _xml_text(text: str) -> str:
    """`text` without the characters XML 1.0 cannot hold (a client's error text may carry control characters)."""
    return _NOT_XML.sub("\ufffd", text)


def write_run_results(run: RunDir, results: RunResults) -> None:
    """`results.json` and `junit.xml` in the run folder."""
    write_json(run.results_json, results.model_dump(mode="json"))
    junit_xml([(pair_label(results), results)]).write(str(run.junit_xml), pretty=True)


def pair_label(results: RunResults) -> str:
    return f"Kafka {results.kafka_version} / {results.client}"


def read_run_results(run: RunDir) -> RunResults:
    return RunResults.model_validate_json(run.results_json.read_text())
