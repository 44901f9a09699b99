"""The Spark audit (the *checker* seam): every scenario's send log against what its Kafka topic holds.

Submitted with spark-submit through the thin entry ``spark/delivery_matrix.py``
(``acklab.checker.submit`` builds the command)::

    spark-submit spark/delivery_matrix.py --manifest runs/<id>/manifest.json --out runs/<id>/audit

All scenarios of a run are audited in one job. The scenarios are dealt to ``defaultParallelism``
Spark tasks (``shares``); a task reads its scenarios' topics from Kafka (``read_committed``,
``acklab.checker.topic_read``), or their rows of an earlier run's records archive, and for each
scenario computes the per-message outcome table and the matrix row from its records and send log
(``acklab.checker.scenario_audit``). Each task writes one Parquet file of the topic-records archive
and one of the outcome table; only matrix rows reach the driver, where the matrix's conservation
identities (``IDENTITIES``) are checked before it is written. Schemas are
``acklab.store.schemas``', the matrix's columns and identities ``acklab.store.contract``'s, the file
layout ``acklab.store.runs``'s (the driver and the executors need ``plugins/`` on their path: the
project's venv, or PYTHONPATH as in docker-compose.yaml).

Outcome of a message (exclusive), with ``copies`` = number of topic records carrying its id:

========================  =========================================
aborted_visible           send-log ``aborted``, copies >= 1
aborted_clean             send-log ``aborted``, copies == 0
delivered                 acked, copies == 1
lost                      acked, copies == 0
acked_duplicated          acked, copies > 1
failed_clean              failed, copies == 0
indeterminate             failed or unknown, copies >= 1
unknown_absent            unknown, copies == 0
unexpected                id in the topic, not in the send log
========================  =========================================

Only the first two rows apply to messages of aborted transactions. A planned message never handed
to ``produce()`` (send-log state ``unsent``) is in no class: it counts in ``unsent`` and
``planned = sent + unsent``. Flags and other counts:

- ``refused`` / ``fatal``: send-log flags: failed at ``produce()`` itself / failed by the producer's
  fatal error (sent or not).

- ``duplicated`` / ``duplicates``: sent messages with copies > 1 / their extra copies.
- ``unexpected`` (matrix): records whose id is unparseable or not in the send log.
- ``reordered``: messages with a first copy (lowest offset of its id within a partition and key)
  whose sequence is below that of an earlier first copy of the same key in that partition.
- ``misrouted``: acked, and its acked partition or a partition holding a copy of it in the topic
  it was sent to is not its ``expected_partition`` (when the send log knows it).
- ``misdirected``: sent, and a copy of it was read from another of the scenario's topics than the
  one the send log says it was sent to (a load over several topics, ``LoadSpec.topics``; a null
  topic on either side is the scenario's own topic).
- ``offset_mismatch``: acked with partition and offset >= 0, present, not misrouted or misdirected, but no copy
  of it sits at the acked (partition, offset). A message with no copy at all is ``lost``, not a
  mismatch.

Ack latencies are exact percentiles (linear interpolation between the closest ranks, as numpy's
default) of ``ack_ts - send_ts`` rounded to the microsecond, over acked messages. The longest ack
gap is the longest interval without an ack between the first send and the last ack; its overlap
with the union of the scenario's fault windows (manifest ``fault_timeline``; a fault without
``ended`` lasts to the end of the gap) is ``ack_gap_fault_overlap_s``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from confluent_kafka.admin import AdminClient
from pyspark import SparkConf, SparkContext

from acklab.checker.pipeline_audit import audit_pipeline
from acklab.checker.pipeline_evidence import acked_inputs, interventions, logs_folder, processor_events
from acklab.checker.scenario_audit import matrix_row, outcome_table
from acklab.checker.topic_read import read_outputs, read_partitions
from acklab.store.contract import IDENTITIES, PIPELINE_IDENTITIES
from acklab.store.runs import AuditDir, FaultRecord, Manifest, RunDir, ScenarioEntry, write_json
from acklab.store.schemas import (
    MATRIX,
    MATRIX_DESCRIPTIVE,
    MATRIX_PIPELINE,
    OUTCOME_TABLE,
    PIPELINE_OUTPUT_RECORDS,
    SEND_LOG,
    SEND_LOG_DEFAULTS,
    TOPIC_RECORDS,
    TOPIC_RECORDS_ADDED,
)

MATRIX_COLUMNS = tuple(MATRIX.names)
# A task reads its scenarios' topics in batches of about this many planned messages: few enough to
# hold their records (about 50 bytes each), and each batch costs a consumer about a second before its
# first record (2.96M records of 74 topics: 8.3 s in one batch, 22.2 s in batches of 8 topics).
MESSAGES_PER_READ = 4_000_000


class ConservationError(ValueError):
    """The matrix does not balance: the audit itself is wrong, not the cluster."""


def fault_windows(timeline: Iterable[FaultRecord]) -> list[tuple[float, float]]:
    """The union of a fault timeline's [started, ended] windows as sorted disjoint intervals.

    Entries that never started are ignored; one without ``ended`` lasts forever (``inf``).
    """
    spans = sorted((e.started, math.inf if e.ended is None else e.ended) for e in timeline if e.started is not None)
    merged: list[tuple[float, float]] = []
    for start, end in spans:
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def read_send_log(run: RunDir, scenario: ScenarioEntry) -> pa.Table:
    """A scenario's send log in ``SEND_LOG``'s columns and types.

    Optional columns it lacks take their ``SEND_LOG_DEFAULTS``; a null ``aborted``, ``refused`` or
    ``fatal`` is false. A scenario whose evidence is marked incomplete may lack its send log and then
    has no rows; a missing send log of a complete scenario, or a missing required column, is an error.
    """
    path = (run.root / scenario.send_log).resolve() if scenario.send_log else None
    if path is None or not path.exists():
        if scenario.evidence_complete:
            raise FileNotFoundError(f"{scenario.scenario}: send log {path} is missing")
        return SEND_LOG.empty_table()
    table = pq.read_table(path)
    columns = []
    for field in SEND_LOG:
        if field.name in table.column_names:
            column = table[field.name].cast(field.type)
        elif field.name in SEND_LOG_DEFAULTS:
            column = pa.nulls(table.num_rows, field.type) if SEND_LOG_DEFAULTS[field.name] is None else pa.array(
                [SEND_LOG_DEFAULTS[field.name]] * table.num_rows, field.type
            )
        else:
            raise ValueError(f"{scenario.scenario}: send log {path} lacks column {field.name!r}")
        if field.name in ("aborted", "refused", "fatal"):
            column = pc.fill_null(column, False)
        columns.append(column)
    return pa.Table.from_arrays(columns, schema=SEND_LOG)


def check_conservation(rows: Iterable[Mapping[str, Any]], planned: Mapping[str, int] | None = None) -> None:
    """Raise ``ConservationError`` naming every scenario and identity of ``IDENTITIES`` that fails,
    and every scenario whose send log does not have the ``planned`` rows its manifest entry records."""
    broken = []
    for row in rows:
        expected = (planned or {}).get(row["scenario"])
        if expected is not None and row["planned"] != expected:
            broken.append(f"{row['scenario']}: the send log has {row['planned']} rows, the manifest planned {expected}")
        for total, parts in (*IDENTITIES, *(PIPELINE_IDENTITIES if row.get("processing") else ())):
            summed = sum(row[p] for p in parts)
            if row[total] != summed:
                terms = " + ".join(f"{p}={row[p]}" for p in parts)
                broken.append(f"{row['scenario']}: {total}={row[total]} != {terms} = {summed}")
    if broken:
        raise ConservationError("delivery matrix does not balance:\n  " + "\n  ".join(broken))


def shares(scenarios: Sequence[ScenarioEntry], tasks: int) -> list[list[ScenarioEntry]]:
    """``scenarios`` dealt to ``tasks`` shares of about equal planned messages, largest first."""
    dealt: list[list[ScenarioEntry]] = [[] for _ in range(tasks)]
    load = [0] * tasks
    for scenario in sorted(scenarios, key=lambda s: -(s.planned or 0)):
        least = load.index(min(load))
        dealt[least].append(scenario)
        load[least] += scenario.planned or 0
    return dealt


@dataclass(frozen=True)
class Source:
    """Where a task finds topic records: a Kafka cluster (``bootstrap`` and each scenario topic's
    partitions, as listed before the job) or a records archive."""

    bootstrap: str | None = None
    partitions: Mapping[str, Sequence[int]] | None = None
    archive: Path | None = None

    def records(self, batch: Sequence[ScenarioEntry]) -> pa.Table:
        """The ``TOPIC_RECORDS`` rows of ``batch``'s scenarios."""
        if self.archive is not None:
            names = [s.scenario for s in batch]
            table = pq.read_table(self.archive, filters=[("scenario", "in", names)])
            for name in TOPIC_RECORDS_ADDED:
                if name not in table.column_names:
                    table = table.append_column(name, pa.nulls(table.num_rows, TOPIC_RECORDS.field(name).type))
            return table.select(TOPIC_RECORDS.names).cast(TOPIC_RECORDS)
        assert self.bootstrap is not None and self.partitions is not None
        topics = {topic: s.scenario for s in batch for topic in s.load_topics}
        listed = [(topic, partition) for topic in topics for partition in self.partitions.get(topic, ())]
        return read_partitions(self.bootstrap, listed, topics)

    def outputs(self, batch: Sequence[ScenarioEntry]) -> dict[str, pa.Table]:
        """The ``PIPELINE_OUTPUT_RECORDS`` rows of ``batch``'s pipeline scenarios' output topics, by
        scenario (read from Kafka together: `acklab.checker.topic_read.read_outputs`)."""
        pipelines = [s for s in batch if s.pipeline is not None]
        if not pipelines:
            return {}
        if self.archive is not None:
            archive = self.archive.parent / self.archive.name.replace("topic_records", "pipeline_records")
            table = pq.read_table(archive, filters=[("scenario", "in", [s.scenario for s in pipelines])]).cast(PIPELINE_OUTPUT_RECORDS)
            return {s.scenario: table.filter(pc.equal(table["scenario"], s.scenario)) for s in pipelines}
        assert self.bootstrap is not None
        return read_outputs(self.bootstrap, [(s.pipeline.output_topic, s.partitions or 0, s.scenario) for s in pipelines if s.pipeline is not None])


def audit_share(run: RunDir, share: Sequence[ScenarioEntry], source: Source, out: AuditDir, index: int) -> Iterator[dict[str, Any]]:
    """Audit one task's scenarios: write its file of the outcome table (and of the records archive,
    when reading Kafka) and yield each scenario's matrix row."""
    name = f"part-{index:05d}.parquet"
    writers = {"outcomes": _Writer(out.outcomes / name, OUTCOME_TABLE)}
    if source.archive is None:
        writers["records"] = _Writer(out.topic_records / name, TOPIC_RECORDS)
        writers["pipeline"] = _Writer(out.pipeline_records / name, PIPELINE_OUTPUT_RECORDS)
    try:
        # An archive is read once per task.
        for batch in ([list(share)] if share else []) if source.archive is not None else read_batches(share, MESSAGES_PER_READ):
            records = source.records(batch)
            if "records" in writers:
                writers["records"].write(records)
            by_scenario = split_by_scenario(records)
            outputs = source.outputs(batch)
            if "pipeline" in writers:
                for table in outputs.values():
                    writers["pipeline"].write(table)
            for scenario in batch:
                own = by_scenario.get(scenario.scenario, TOPIC_RECORDS.empty_table())
                send_log = read_send_log(run, scenario)
                outcomes = outcome_table(scenario.scenario, send_log, own, scenario.topic)
                writers["outcomes"].write(outcomes)
                meta = {column: getattr(scenario, column) for column in MATRIX_DESCRIPTIVE.names}
                row = meta | matrix_row(send_log, own, outcomes, fault_windows(scenario.fault_timeline))
                row |= pipeline_columns(run, scenario, send_log, outputs.get(scenario.scenario))
                yield {column: row[column] for column in MATRIX_COLUMNS}
        for writer in writers.values():
            writer.close()
    finally:
        for writer in writers.values():
            writer.abandon()


def archive_records(run: RunDir, scenarios: Sequence[ScenarioEntry], bootstrap: str, out: AuditDir, name: str) -> int:
    """Read `scenarios`' topics (and their pipelines' committed output) from the cluster at `bootstrap`
    into one file `name` of each records archive in `out` (`topic_records/`, `pipeline_records/`),
    as the audit would archive them, so a later audit reads the archive instead (a run's shares
    before their cluster goes). Returns the topic records written."""
    source = Source(bootstrap=bootstrap, partitions=topic_partitions(bootstrap, [t for s in scenarios for t in s.load_topics]))
    out.topic_records.mkdir(parents=True, exist_ok=True)
    out.pipeline_records.mkdir(parents=True, exist_ok=True)
    records = _Writer(out.topic_records / name, TOPIC_RECORDS)
    outputs = _Writer(out.pipeline_records / name, PIPELINE_OUTPUT_RECORDS)
    written = 0
    try:
        for batch in read_batches(scenarios, MESSAGES_PER_READ):
            table = source.records(batch)
            records.write(table)
            written += table.num_rows
            for table in source.outputs(batch).values():
                outputs.write(table)
        records.close()
        outputs.close()
    finally:
        records.abandon()
        outputs.abandon()
    return written


def pipeline_columns(run: RunDir, scenario: ScenarioEntry, send_log: pa.Table, outputs: pa.Table | None) -> dict[str, Any]:
    """A pipeline scenario's matrix columns (`MATRIX_PIPELINE`: all null for a producer scenario):
    its committed output `outputs` (`Source.outputs`) audited against its acked inputs and its
    processors' logs (`acklab.checker.pipeline_audit`)."""
    pipeline = scenario.pipeline
    if pipeline is None:
        return dict.fromkeys(MATRIX_PIPELINE.names)
    assert outputs is not None, f"{scenario.scenario}: its pipeline's output was not read"
    counts, timeline = audit_pipeline(
        acked_inputs(send_log), outputs, processor_events(logs_folder(run, scenario)), pipeline.committed, pipeline.style,
        interventions(scenario),
    )
    return {
        "processing": pipeline.style, "processors": pipeline.processors, "drain_s": pipeline.drain_s, **counts,
        "pipeline_timeline": json.dumps(timeline, separators=(",", ":")),
    }


def read_batches(share: Sequence[ScenarioEntry], messages: int) -> list[list[ScenarioEntry]]:
    """``share`` in consecutive batches of at most ``messages`` planned messages (a larger scenario alone)."""
    batches: list[list[ScenarioEntry]] = []
    size = 0
    for scenario in share:
        planned = scenario.planned or 0
        if not batches or size + planned > messages:
            batches.append([])
            size = 0
        batches[-1].append(scenario)
        size += planned
    return batches


def split_by_scenario(records: pa.Table) -> dict[str, pa.Table]:
    """``records``' rows per scenario (each in the table's order)."""
    if not records.num_rows:
        return {}
    encoded = pc.dictionary_encode(records["scenario"].combine_chunks())
    order = np.argsort(encoded.indices.to_numpy(), kind="stable")
    grouped = records.take(order)
    bounds = np.searchsorted(encoded.indices.to_numpy()[order], np.arange(len(encoded.dictionary) + 1))
    return {
        name: grouped.slice(bounds[index], bounds[index + 1] - bounds[index])
        for index, name in enumerate(encoded.dictionary.to_pylist())
    }


class _Writer:
    """One Parquet file written in row groups under a hidden name, renamed into place on ``close``."""

    def __init__(self, path: Path, schema: pa.Schema) -> None:
        self.path, self.partial = path, path.with_name(f".{path.name}.partial")
        self.writer: pq.ParquetWriter | None = pq.ParquetWriter(self.partial, schema)

    def write(self, table: pa.Table) -> None:
        assert self.writer is not None
        self.writer.write_table(table)

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None
            self.partial.replace(self.path)

    def abandon(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None
            self.partial.unlink(missing_ok=True)


def topic_partitions(bootstrap: str, topics: Iterable[str]) -> dict[str, list[int]]:
    """Each of ``topics`` the cluster has, with its partitions (a topic it lacks has no records)."""
    listed = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=60).topics
    return {topic: sorted(listed[topic].partitions) for topic in topics if topic in listed}


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--manifest", required=True, help="run manifest.json")
    parser.add_argument("--out", required=True, help="output directory")
    parser.add_argument("--bootstrap-servers", help="overrides the manifest's bootstrap_servers")
    parser.add_argument("--topic-records", help="audit this Parquet archive instead of reading Kafka")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    """Audit a run: write the topic records (when Kafka is read), the outcome table and the matrix
    (Parquet and JSON) into `--out`."""
    args = _parse_args(argv)
    run = RunDir.of_manifest(Path(args.manifest))
    manifest = Manifest.model_validate_json(Path(args.manifest).read_text())
    out = AuditDir(Path(args.out).resolve())
    out.root.mkdir(parents=True, exist_ok=True)
    # The tasks import acklab, pyarrow and confluent-kafka: their Python is the driver's unless set.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    context = SparkContext.getOrCreate(SparkConf().setAppName("acklab-delivery-matrix"))  # RDDs only: no Spark SQL session

    if args.topic_records:
        source = Source(archive=Path(args.topic_records).resolve())
    else:
        bootstrap = args.bootstrap_servers or manifest.bootstrap_servers
        source = Source(bootstrap=bootstrap, partitions=topic_partitions(bootstrap, [t for s in manifest.scenarios for t in s.load_topics]))
    for folder in (out.outcomes, *([] if args.topic_records else [out.topic_records, out.pipeline_records])):
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
    tasks = context.defaultParallelism
    dealt = shares(manifest.scenarios, tasks)

    def audit(index: int, _: Iterable[int]) -> Iterator[dict[str, Any]]:
        return audit_share(run, dealt[index], source, out, index)

    rows = sorted(context.parallelize(range(tasks), tasks).mapPartitionsWithIndex(audit).collect(), key=lambda row: row["scenario"])
    check_conservation(rows, {s.scenario: s.planned for s in manifest.scenarios if s.planned is not None})

    table = pa.Table.from_pylist(rows, schema=MATRIX)  # a few hundred rows, written here: no Spark job
    shutil.rmtree(out.matrix_parquet, ignore_errors=True)
    out.matrix_parquet.mkdir()
    matrix = _Writer(out.matrix_parquet / "part-00000.parquet", MATRIX)
    try:
        matrix.write(table)
        matrix.close()
    finally:
        matrix.abandon()
    write_json(out.matrix_json, rows)
    print(f"matrix: {out.matrix_json}")
