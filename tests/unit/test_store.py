"""The run store and the evidence contract: layout, typed manifest, generated documentation."""

from __future__ import annotations

from pathlib import Path

from acklab.report import evidence_doc as doc
from acklab.store.contract import COUNT_COLUMNS, COUNT_DOCS, IDENTITIES, METRIC_COLUMNS
from acklab.store.runs import Manifest, RunDir, ScenarioEntry
from acklab.store.schemas import MATRIX, OUTCOME_TABLE, SEND_LOG, TOPIC_RECORDS, describe


def test_docs_evidence_is_current() -> None:
    assert doc.DOC.read_text() == doc.to_markdown(), "docs/evidence.md is stale: run `acklab evidence-doc`"


def test_every_column_is_described_and_every_count_documented() -> None:
    for schema in (SEND_LOG, TOPIC_RECORDS, OUTCOME_TABLE, MATRIX):
        assert [f.name for f in schema if not describe(f)] == []
    assert set(COUNT_COLUMNS) == set(COUNT_DOCS)
    assert {total for total, _ in IDENTITIES} | {p for _, parts in IDENTITIES for p in parts} <= set(COUNT_COLUMNS)
    assert MATRIX.names[-len(METRIC_COLUMNS):] == list(METRIC_COLUMNS)


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
