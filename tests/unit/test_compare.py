"""The version comparison report from two validated runs (files as the pipeline writes them)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from acklab.report.ci_results import ComparisonResults, RunResults, ScenarioResult, write_run_results
from acklab.report.compare import build_comparison
from acklab.store.runs import ComparisonDir, RunDir


def _run(root: Path, name: str, version: str, statuses: dict[str, str], client: str = "2.16.1") -> Path:
    run = RunDir(root / name)
    run.audit.root.mkdir(parents=True)
    run.report.root.mkdir()
    run.report.heatmap.write_bytes(b"\x89PNG")
    rows = [{"scenario": s, "lost": 0 if v == "pass" else 7, "duplicates": 0, "failed": 0, "reordered": 0} for s, v in statuses.items()]
    run.matrix_json.write_text(json.dumps(rows))
    scenarios = [{"scenario": s, "client_version": client} for s in statuses]
    run.manifest.write_text(json.dumps({"run_id": name, "topology": {"kafka_version": version}, "scenarios": scenarios}))
    status = "fail" if "fail" in statuses.values() else "pass"
    run.write_result({"status": status, "scenarios": statuses, "matrix": str(run.matrix_json)})
    scenario_results = [
        ScenarioResult(scenario=s, verdict=v, guarantee="exactly-once", fault=s.split("__")[1], client=f"librdkafka {client}", reason=None, failed=[], row=row)
        for (s, v), row in zip(statuses.items(), rows, strict=True)
    ]
    write_run_results(run, RunResults(
        run_id=name, status=status, kafka_version=version, client=f"librdkafka {client}", controls=[], scenarios=scenario_results,
        failing=[s for s, v in statuses.items() if v != "pass"], matrix=str(run.matrix_json),
    ))
    return run.root


def test_differing_verdicts_are_called_out(isolated_run_store: Path) -> None:
    old = _run(isolated_run_store, "r-a", "3.9.2", {"idempotent__leader-kill": "pass", "leader-ack__none": "pass"})
    new = _run(isolated_run_store, "r-b", "4.3.1", {"idempotent__leader-kill": "fail", "leader-ack__none": "pass"})
    comparison = build_comparison([new, old])
    assert [r.kafka_version for r in comparison.runs] == ["3.9.2", "4.3.1"]
    assert comparison.differing == ["idempotent__leader-kill"] and comparison.status == "fail"
    assert "DIFFERS idempotent__leader-kill: 3.9.2-librdkafka-2.16.1 pass, 4.3.1-librdkafka-2.16.1 fail" in comparison.summary_lines()
    html = comparison.html.read_text()
    assert "heatmap-3.9.2-librdkafka-2.16.1.png" in html and "heatmap-4.3.1-librdkafka-2.16.1.png" in html and "idempotent__leader-kill" in html
    folder = ComparisonDir(comparison.html.parent)
    results = ComparisonResults.model_validate_json(folder.results_json.read_text())  # one entry per pair, as each run's own
    assert (results.status, results.differing) == ("fail", ["idempotent__leader-kill"])
    assert [(p.results.kafka_version, p.results.failing) for p in results.pairs] == [("3.9.2", []), ("4.3.1", ["idempotent__leader-kill"])]
    assert folder.junit_xml.read_text().count("<testsuite ") == 2


def test_pairs_of_kafka_and_client_versions_are_compared(isolated_run_store: Path) -> None:
    runs = [
        _run(isolated_run_store, f"p-{k}-{c}", k, {"idempotent__ack-loss": "fail" if c == "2.2.0" else "pass"}, c)
        for k in ("3.5.2", "4.3.1") for c in ("2.2.0", "2.3.0")
    ]
    comparison = build_comparison(runs)
    assert [r.label for r in comparison.runs] == [
        "Kafka 3.5.2 / librdkafka 2.2.0", "Kafka 3.5.2 / librdkafka 2.3.0", "Kafka 4.3.1 / librdkafka 2.2.0", "Kafka 4.3.1 / librdkafka 2.3.0",
    ]
    assert comparison.differing == ["idempotent__ack-loss"]
    assert comparison.summary_lines()[0] == (
        "DIFFERS idempotent__ack-loss: 3.5.2-librdkafka-2.2.0 fail, 3.5.2-librdkafka-2.3.0 pass, 4.3.1-librdkafka-2.2.0 fail, 4.3.1-librdkafka-2.3.0 pass"
    )


@pytest.mark.parametrize("statuses", [{"a__none": "pass"}])
def test_same_verdicts_pass(isolated_run_store: Path, statuses: dict[str, str]) -> None:
    runs = [_run(isolated_run_store, f"s-{v}", v, statuses) for v in ("4.3.1", "3.9.2")]
    comparison = build_comparison(runs)
    assert comparison.status == "pass" and comparison.differing == []
