"""docs/evidence.md, generated from the run store's layout and models (`acklab.store.runs`), the Arrow
schemas (`acklab.store.schemas`) and the matrix contract (`acklab.store.contract`).
`acklab evidence-doc` rewrites it; a unit test checks the committed copy is current."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import pyarrow as pa
from pydantic import BaseModel

from acklab.base.paths import PROJECT_ROOT
from acklab.report.ci_results import ComparisonResults, ControlResult, FailedCheck, PairResults, RunResults, ScenarioResult
from acklab.store.contract import IDENTITIES, OUTCOME_DOCS, PIPELINE_IDENTITIES, UNEXPECTED
from acklab.store.runs import (
    LAYOUT,
    EarlierAttempt,
    FaultRecord,
    GroupTiming,
    Intervention,
    Manifest,
    PipelineEvidence,
    ScenarioEntry,
    WithheldBatch,
    WithheldRequest,
)
from acklab.store.schemas import (
    MATRIX,
    OUTCOME_TABLE,
    PIPELINE_OUTPUT_RECORDS,
    PRODUCER_STATS,
    SEND_LOG,
    SEND_LOG_DEFAULTS,
    TOPIC_RECORDS,
    describe,
)

DOC = PROJECT_ROOT / "docs" / "evidence.md"

INTRO = """\
The contract between workload, nemesis, checker and verdict. A run lives in `runs/<run_id>/`
(`ACKLAB_RUNS`); everything a verdict needs is in it, so a run can be re-audited after its cluster
is gone. Paths in the manifest are relative to the run folder."""

SEND_LOG_RULES = """\
Every planned message has exactly one row. A load of `messages` plans all of them; one with
`duration_s` that its clock ended plans what it sent by then. A message never handed to `produce()`
because the producer stopped early (SIGTERM, its parent gone, a non-fatal error) is `unsent`; one a
fatal error made undeliverable is `failed` with `fatal`. A second delivery report for a message, or
one for an id never sent, fails the load (`EvidenceError`) instead of producing a log.

Each producer process keeps its rows in numpy arrays and writes its part when its load is over; the
parent concatenates the parts into the send log through a temp file and one atomic rename. For
transactional profiles each producer uses `transactional.id` `acklab-<topic>-p<n>`; `txn` counts its
transactions from 0, which abort is deterministic (`abort_ratio`, evenly spread), and their records
are delivered first and then aborted, so they are in the log and must be invisible to read_committed
readers. The file's key-value metadata records the producers' client: `acklab.client_version`
(confluent-kafka) and `acklab.librdkafka_version`. Readers treat a column missing from an older send
log as its default: {defaults}."""

RECORDS_RULES = """\
Each record's key is the send log key (utf-8); its value starts with the ASCII text `<id>:<seq>:`,
both zero-padded to the digits of the scenario's largest id, followed by `x` padding to the
configured message size. Topics are read with `isolation.level=read_committed`."""

AUDIT_RULES = """\
The audit refuses to write a matrix that does not balance (`ConservationError`): per scenario the
send-log rows must be the manifest's `planned`, and each identity below must hold. States are
counted from the send log, classes from the outcome table and records from the archive, so a send
log listing an id twice or a state outside the contract breaks a balance."""


RESULTS_RULES = """\
Every run folder holds its results twice, for scripts (`results.json`) and for CI systems' test
reports (`junit.xml`); a version comparison's folder holds them for all its pairs. `acklab run --json`
prints the object (a comparison's with several versions) as the only thing on stdout, `--junit PATH`
copies the XML there. In the XML each (Kafka version, client) pair is a testsuite, each scenario a
testcase (classname: its guarantee class) that fails with its failed expectations and their observed
values, an incomplete scenario an `<error>`, and each negative control a testcase that fails unless it
was caught. `acklab run` exits 0 pass, 1 fail, 2 bad input, 3 incomplete, 4 invalid, 5 no verdict
(the run itself failed)."""


def _fields(model: type[BaseModel]) -> list[tuple[str, str, str]]:
    rows = []
    for name, field in model.model_fields.items():
        annotation = field.annotation.__name__ if isinstance(field.annotation, type) else str(field.annotation)
        annotation = annotation.replace("typing.", "").replace("acklab.store.runs.", "")
        rows.append((f"`{name}`", annotation, field.description or ""))
    return rows


PROCESSOR_FILES = (
    "A pipeline's processor files (`processors/`): per instance `i` and incarnation `n`, "
    "`processor-<i>.<n>.json` (its job), `processor-<i>.<n>.jsonl` (its log: one JSON event per line, the events of "
    "`acklab.workload.processing`) and `processor-<i>.<n>.stderr`."
)
PIPELINE_RULES = (
    "The pipeline identity holds for pipeline rows (`processing` set); its counts are those of "
    "`acklab.checker.pipeline_audit`, whose docstring defines each."
)


def _columns(schema: pa.Schema) -> list[tuple[str, str, str]]:
    return [(f"`{f.name}`", str(f.type) + ("" if f.nullable else ", not null"), describe(f)) for f in schema]


def _table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows]
    return [*lines, ""]


def to_markdown() -> str:
    """The whole document."""
    defaults = ", ".join(f"`{name}` {value!r}" for name, value in SEND_LOG_DEFAULTS.items())
    lines = ["# Evidence layout", "", "Generated by `acklab evidence-doc`; do not edit by hand.", "", INTRO, ""]
    lines += ["## The run folder", "", *_table(("path", "what"), ((f"`{path}`", what) for path, what in LAYOUT))]
    lines += ["## `manifest.json`", "", *_table(("field", "type", "meaning"), _fields(Manifest))]
    lines += ["### A scenario entry", "", *_table(("field", "type", "meaning"), _fields(ScenarioEntry))]
    lines += ["### A fault record (`fault_timeline`)", "", *_table(("field", "type", "meaning"), _fields(FaultRecord))]
    lines += ["### A withheld request (`withheld`)", "", *_table(("field", "type", "meaning"), _fields(WithheldRequest))]
    lines += ["### A withheld batch (`batches`)", "", *_table(("field", "type", "meaning"), _fields(WithheldBatch))]
    lines += ["### The group (`group`)", "", *_table(("field", "type", "meaning"), _fields(GroupTiming))]
    lines += ["### An earlier run (`earlier_attempts`)", "", *_table(("field", "type", "meaning"), _fields(EarlierAttempt))]
    lines += ["### A pipeline (`pipeline`)", "", *_table(("field", "type", "meaning"), _fields(PipelineEvidence))]
    lines += ["### A processor fault's intervention (`interventions`)", "", *_table(("field", "type", "meaning"), _fields(Intervention))]
    lines += [PROCESSOR_FILES, ""]
    lines += ["## Send log (`send_log.parquet`, one row per planned message)", "", *_table(("column", "type", "meaning"), _columns(SEND_LOG))]
    lines += [SEND_LOG_RULES.format(defaults=defaults), ""]
    lines += ["## Producer statistics (`producer_stats.parquet`)", "", *_table(("column", "type", "meaning"), _columns(PRODUCER_STATS))]
    lines += ["## Topic records (`audit/topic_records.parquet`)", "", *_table(("column", "type", "meaning"), _columns(TOPIC_RECORDS))]
    lines += [RECORDS_RULES, ""]
    lines += ["## Pipeline output records (`audit/pipeline_records.parquet`)", "", *_table(("column", "type", "meaning"), _columns(PIPELINE_OUTPUT_RECORDS))]
    lines += ["## Outcome table (`audit/outcomes.parquet`, one row per message of every scenario)", "", *_table(("column", "type", "meaning"), _columns(OUTCOME_TABLE))]
    classes = [*OUTCOME_DOCS.items(), (UNEXPECTED, "in the topic, not in the send log")]
    lines += ["Outcome classes (exclusive; `copies` = topic records carrying the id):", "", *_table(("outcome", "when"), ((f"`{n}`", d) for n, d in classes))]
    lines += ["## Delivery matrix (`audit/matrix.parquet`, `audit/matrix.json`: one row per scenario)", "", *_table(("column", "type", "meaning"), _columns(MATRIX))]
    identities = (*IDENTITIES, *PIPELINE_IDENTITIES)
    lines += [AUDIT_RULES, "", *_table(("identity",), ((f"`{total} = {' + '.join(parts)}`",) for total, parts in identities))]
    lines += [PIPELINE_RULES, ""]
    lines += ["## Results for CI systems (`results.json`, `junit.xml`, `acklab run --json`)", "", RESULTS_RULES, ""]
    lines += ["### `results.json`", "", *_table(("field", "type", "meaning"), _fields(RunResults))]
    lines += ["### A scenario (`scenarios`)", "", *_table(("field", "type", "meaning"), _fields(ScenarioResult))]
    lines += ["### A failed expectation (`failed`)", "", *_table(("field", "type", "meaning"), _fields(FailedCheck))]
    lines += ["### A negative control (`controls`)", "", *_table(("field", "type", "meaning"), _fields(ControlResult))]
    lines += ["### A version comparison's `results.json`", "", *_table(("field", "type", "meaning"), _fields(ComparisonResults))]
    lines += ["### A pair (`pairs`)", "", *_table(("field", "type", "meaning"), _fields(PairResults))]
    return "\n".join(lines).rstrip() + "\n"
