"""The run store and the evidence contract: layout, typed manifest, generated documentation."""

from __future__ import annotations

from pathlib import Path

from acklab.checker.pipeline_audit import PIPELINE_COUNTS
from acklab.report import evidence_doc as doc
from acklab.store.contract import COUNT_COLUMNS, COUNT_DOCS, IDENTITIES, METRIC_COLUMNS, PIPELINE_COUNT_COLUMNS, PIPELINE_IDENTITIES
from acklab.store.runs import Manifest, RunDir, ScenarioEntry
from acklab.store.schemas import MATRIX, MATRIX_PIPELINE, OUTCOME_TABLE, PIPELINE_OUTPUT_RECORDS, SEND_LOG, TOPIC_RECORDS, describe


def test_docs_evidence_is_current() -> None:
    assert doc.DOC.read_text() == doc.to_markdown(), "docs/evidence.md is stale: run `acklab evidence-doc`"


def test_every_column_is_described_and_every_count_documented() -> None:
    for schema in (SEND_LOG, TOPIC_RECORDS, OUTCOME_TABLE, PIPELINE_OUTPUT_RECORDS, MATRIX):
        assert [f.name for f in schema if not describe(f)] == []
    assert set(COUNT_COLUMNS) == set(COUNT_DOCS)
    assert {total for total, _ in IDENTITIES} | {p for _, parts in IDENTITIES for p in parts} <= set(COUNT_COLUMNS)
    assert {total for total, _ in PIPELINE_IDENTITIES} | {p for _, parts in PIPELINE_IDENTITIES for p in parts} <= set(PIPELINE_COUNT_COLUMNS)
    metrics_end = len(MATRIX.names) - len(MATRIX_PIPELINE)
    assert MATRIX.names[metrics_end - len(METRIC_COLUMNS) : metrics_end] == list(METRIC_COLUMNS)
    assert MATRIX.names[metrics_end:] == MATRIX_PIPELINE.names
    assert set(PIPELINE_COUNT_COLUMNS) == set(PIPELINE_COUNTS)  # the audit computes every documented count


def test_a_manifest_round_trips_through_the_run_folder(tmp_path: Path) -> None:
    run = RunDir(tmp_path / "r1")
    entry = ScenarioEntry(scenario="a__none", send_log=run.relative(run.scenario("a__none").send_log), planned=10)
    run.write_entry(entry)
    assert run.read_entry("a__none") == entry
    run.write_manifest(Manifest(run_id=run.run_id, scenarios=[entry]))
    assert run.read_manifest().entry("a__none").send_log == "scenarios/a__none/send_log.parquet"
    assert RunDir.of_manifest(run.manifest) == run
    assert run.audit.matrix_json == tmp_path / "r1" / "audit" / "matrix.json"
    assert [p.name for p in tmp_path.rglob("*.tmp")] == []
