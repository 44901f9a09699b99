"""The Spark audit (the *checker* seam): every scenario's send log against what its Kafka topic holds.

Submitted with spark-submit through the thin entry ``spark/delivery_matrix.py``
(``acklab.checker.submit`` builds the command)::

    spark-submit spark/delivery_matrix.py --manifest runs/<id>/manifest.json --out runs/<id>/audit

All scenarios of a run are audited in one job. Kafka is read once (``read_committed``, one Spark
task per core: ``archive_topic_records``) into the Parquet archive of topic records; the per-message outcome table
(a ``scenario`` column) is computed from the archive and the send logs, and the matrix (one row
per scenario) from the three. Message-level data stays in Spark; only rows per scenario reach the
driver, where the matrix's conservation identities (``IDENTITIES``) are checked before it is
written. Schemas are ``acklab.store.schemas``' (Spark's are derived from them), the matrix's
columns and identities ``acklab.store.contract``'s, the file layout ``acklab.store.runs``'s (the
driver needs ``plugins/`` on its path: the project's venv, or PYTHONPATH as in docker-compose.yaml).

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
- ``misrouted``: acked, acked partition != ``expected_partition`` (when the send log knows it).
- ``offset_mismatch``: acked with partition and offset >= 0, present, but no copy of it sits at
  the acked (partition, offset). A message with no copy at all is ``lost``, not a mismatch.

Ack latencies are exact percentiles (linear interpolation between the closest ranks, as numpy's
default) of ``ack_ts - send_ts`` rounded to the microsecond, over acked messages. The longest ack
gap is the longest interval without an ack between the first send and the last ack; its overlap
with the union of the scenario's fault windows (manifest ``fault_timeline``; a fault without
``ended`` lasts to the end of the gap) is ``ack_gap_fault_overlap_s``.
"""

from __future__ import annotations

import argparse
import math
import shutil
from collections.abc import Iterable, Mapping, Sequence
from functools import reduce
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import pyarrow.parquet as pq
from confluent_kafka.admin import AdminClient
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, DoubleType, StructField, StructType

from acklab.checker.topic_read import write_share
from acklab.store.contract import COUNT_COLUMNS, IDENTITIES, SENT_OUTCOMES, STATES, UNSENT
from acklab.store.runs import AuditDir, FaultRecord, Manifest, RunDir, write_json
from acklab.store.schemas import MATRIX, MATRIX_DESCRIPTIVE, OUTCOME_TABLE, SEND_LOG, SEND_LOG_DEFAULTS, TOPIC_RECORDS, spark_schema

SEND_LOG_SCHEMA = spark_schema(SEND_LOG, with_scenario=True)
RECORD_SCHEMA = spark_schema(TOPIC_RECORDS)
OUTCOME_SCHEMA = spark_schema(OUTCOME_TABLE)
META_SCHEMA = spark_schema(MATRIX_DESCRIPTIVE)
WINDOW_TYPE = StructType([StructField("start", DoubleType()), StructField("end", DoubleType())])
SCENARIO_SCHEMA = StructType([*META_SCHEMA.fields, StructField("fault_windows", ArrayType(WINDOW_TYPE), False)])
MATRIX_COLUMNS = tuple(MATRIX.names)
LATENCY_PERCENTILES = (0.5, 0.95, 0.99)

# Acks are bucketed by time to find the longest gap in parallel (see longest_ack_gaps).
_GAP_FINE_S = 0.001
_GAP_BUCKET_S = 1.0


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


def build_scenarios_meta(spark: SparkSession, manifest: Manifest) -> DataFrame:
    """One row per manifest scenario: the descriptive matrix columns and its fault windows."""
    rows = [
        (*(getattr(s, name) for name in META_SCHEMA.fieldNames()), fault_windows(s.fault_timeline))
        for s in manifest.scenarios
    ]
    return spark.createDataFrame(rows, SCENARIO_SCHEMA)


def read_send_logs(spark: SparkSession, manifest: Manifest, run: RunDir) -> DataFrame:
    """All scenarios' send logs with a ``scenario`` column, cast to ``SEND_LOG_SCHEMA``.

    Send logs of the same Parquet schema are read in one scan (the scenario comes from each row's
    file), so a run of many scenarios costs a few scans, not one per scenario. Optional columns
    missing from a send log take their ``SEND_LOG_DEFAULTS``; a null ``aborted`` is false. A
    scenario whose evidence is marked incomplete may lack its send log and then contributes no
    rows; a missing send log of a complete scenario, or a missing required column, is an error.
    """
    by_schema: dict[tuple[tuple[str, str], ...], dict[Path, str]] = {}
    for scenario in manifest.scenarios:
        path = (run.root / scenario.send_log).resolve() if scenario.send_log else None
        if path is None or not path.exists():
            if scenario.evidence_complete:
                raise FileNotFoundError(f"{scenario.scenario}: send log {path} is missing")
            continue
        schema = pq.read_schema(path)
        for field in SEND_LOG_SCHEMA.fields[1:]:
            if field.name not in schema.names and field.name not in SEND_LOG_DEFAULTS:
                raise ValueError(f"{scenario.scenario}: send log {path} lacks column {field.name!r}")
        by_schema.setdefault(tuple((f.name, str(f.type)) for f in schema), {})[path] = scenario.scenario
    frames = [_read_same_schema(spark, files, [name for name, _ in schema]) for schema, files in by_schema.items()]
    return reduce(DataFrame.unionByName, frames) if frames else spark.createDataFrame([], SEND_LOG_SCHEMA)


def _read_same_schema(spark: SparkSession, files: Mapping[Path, str], present: Sequence[str]) -> DataFrame:
    """One scan of send logs sharing a schema (columns ``present``); ``files``: path -> scenario."""
    raw = spark.read.parquet(*map(str, files))
    # Spark names each file by a URI of its own making (as input_file_name() spells it): map those
    # back to the paths given.
    uris = {Path(unquote(urlparse(uri).path)): uri for uri in raw.inputFiles()}
    if set(uris) != set(files):
        raise RuntimeError(f"Spark read {sorted(uris)}, expected {sorted(files)}")
    # Each row's scenario by a broadcast join on its file (see _by_index).
    scenarios = spark.createDataFrame([(uris[path], name) for path, name in files.items()], "_uri string, scenario string")
    raw = raw.withColumn("_uri", F.input_file_name()).join(F.broadcast(scenarios), "_uri")
    columns = [F.col("scenario")]
    for field in SEND_LOG_SCHEMA.fields[1:]:
        column = F.col(field.name) if field.name in present else F.lit(SEND_LOG_DEFAULTS[field.name])
        if field.name in ("aborted", "refused", "fatal"):
            column = F.coalesce(column, F.lit(False))
        columns.append(column.cast(field.dataType).alias(field.name))
    return raw.select(*columns)


def archive_topic_records(spark: SparkSession, manifest: Manifest, bootstrap: str, archive: Path) -> int:
    """Read every committed record of every scenario topic into the Parquet directory ``archive``
    (``RECORD_SCHEMA``), replaced whole; return the records read.

    The topics' partitions are dealt round robin to ``defaultParallelism`` Spark tasks; each reads its
    share with one consumer into one file (``acklab.checker.topic_read``). A scenario topic the
    cluster does not have contributes no records.
    """
    scenario_of = {s.topic: s.scenario for s in manifest.scenarios if s.topic}
    admin = AdminClient({"bootstrap.servers": bootstrap})
    listed = admin.list_topics(timeout=60).topics
    partitions = sorted((topic, p) for topic in scenario_of if topic in listed for p in listed[topic].partitions)
    tasks = spark.sparkContext.defaultParallelism
    shares = [partitions[index::tasks] for index in range(tasks)]
    shutil.rmtree(archive, ignore_errors=True)
    archive.mkdir(parents=True)

    def read_share(index: int, _: Iterable[int]) -> Iterable[int]:
        yield write_share(bootstrap, shares[index], scenario_of, archive / f"part-{index:05d}.parquet")

    return sum(spark.sparkContext.parallelize(range(tasks), tasks).mapPartitionsWithIndex(read_share).collect())


def _by_index(frame: DataFrame, names: Sequence[str]) -> DataFrame:
    """``frame`` with ``scenario`` replaced by its index in ``names``; rows of other scenarios dropped.

    Message-level shuffles, sorts and hash aggregations keyed by an int are several times cheaper
    than by a string. The index is found by a broadcast hash join, as the send logs' scenario is
    (``read_send_logs``): a literal map is searched key by key, and with both lookups one scan of
    the standard matrix's send logs (11.8M rows, 295 scenarios) took 6.8 s by maps, 2.2 s by joins.
    """
    indexes = frame.sparkSession.createDataFrame(list(enumerate(names)), "_index int, scenario string")
    return frame.join(F.broadcast(indexes), "scenario").drop("scenario").withColumnRenamed("_index", "scenario")


def _name(names: Sequence[str]) -> Column:
    """The scenario name of an index made by ``_by_index``."""
    return F.get(F.array(*map(F.lit, names)), F.col("scenario")).alias("scenario")


def _copies(records: DataFrame) -> DataFrame:
    """Records with a parsed id, flagged ``first`` (lowest offset of its id in its partition and key)
    and ``late`` (a first copy whose seq is below an earlier first copy's of the same partition and key).

    One shuffle by (scenario, partition, key) serves both windows.
    """
    by_key = ("scenario", "partition", "key")
    in_key = Window.partitionBy(*by_key).orderBy("offset")
    in_message = Window.partitionBy(*by_key, "id").orderBy("offset")
    first = records.where(F.col("id").isNotNull()).repartition(*by_key).withColumn(
        "first", F.row_number().over(in_message) == 1
    )
    earlier_max = F.max(F.when(F.col("first"), F.col("seq"))).over(in_key.rowsBetween(Window.unboundedPreceding, -1))
    return first.select(
        "scenario",
        "id",
        F.col("partition").alias("copy_partition"),
        F.col("offset").alias("copy_offset"),
        (F.col("first") & F.coalesce(F.col("seq") < earlier_max, F.lit(False))).alias("late"),
    )


def compute_outcomes(send_logs: DataFrame, records: DataFrame, scenarios: Sequence[str]) -> DataFrame:
    """The per-message outcome table (``OUTCOME_SCHEMA``) of ``scenarios``: every send-log message and
    every id found only in the topic, with its copies, outcome and anomaly flags (module docstring).

    Send-log rows (at their acked location) and copies (at theirs) are unioned and shuffled once by
    (scenario, id). Two hash aggregations follow without another shuffle: by location, where a
    message's acked location meets its copies there, then by message.
    """
    state_code = F.coalesce(*(F.when(F.col("state") == name, code) for code, name in enumerate(STATES)), F.lit(-1))
    sent = _by_index(send_logs.where(F.col("state") != UNSENT), scenarios).select(
        "scenario",
        "id",
        F.col("partition").alias("loc_partition"),
        F.col("offset").alias("loc_offset"),
        F.lit(True).alias("is_sent"),
        state_code.alias("state_code"),
        "aborted",
        "expected_partition",
    )
    copies = _copies(_by_index(records, scenarios)).select(
        "scenario",
        "id",
        F.col("copy_partition").alias("loc_partition"),
        F.col("copy_offset").alias("loc_offset"),
        F.lit(1).alias("copy"),
        "late",
    )
    rows = sent.unionByName(copies, allowMissingColumns=True).repartition("scenario", "id")
    at_location = rows.groupBy("scenario", "id", "loc_partition", "loc_offset").agg(
        F.max("is_sent").alias("is_sent"),
        F.max("state_code").alias("state_code"),
        F.max("aborted").alias("aborted"),
        F.max("expected_partition").alias("expected_partition"),
        F.sum("copy").alias("copies"),
        F.max("late").alias("late"),
    )
    sent_here = F.coalesce(F.col("is_sent"), F.lit(False))
    message = at_location.groupBy("scenario", "id").agg(
        F.max(sent_here).alias("is_sent"),
        F.max("state_code").alias("state_code"),
        F.max("aborted").alias("aborted"),
        F.max(F.when(sent_here, F.col("loc_partition"))).alias("partition"),
        F.max(F.when(sent_here, F.col("loc_offset"))).alias("offset"),
        F.max("expected_partition").alias("expected_partition"),
        F.coalesce(F.sum("copies"), F.lit(0)).alias("copies"),
        F.max(sent_here & (F.col("copies") > 0)).alias("at_ack"),
        F.coalesce(F.max("late"), F.lit(False)).alias("reordered"),
    )

    code, n = F.col("state_code"), F.col("copies")
    acked, failed, unknown = (code == index for index in range(len(STATES)))
    outcome = (
        F.when(~F.col("is_sent"), "unexpected")
        .when(F.col("aborted"), F.when(n > 0, "aborted_visible").otherwise("aborted_clean"))
        .when(acked & (n == 0), "lost")
        .when(acked & (n == 1), "delivered")
        .when(acked, "acked_duplicated")
        .when((failed | unknown) & (n > 0), "indeterminate")
        .when(failed, "failed_clean")
        .when(unknown, "unknown_absent")
    )
    misrouted = acked & (F.col("partition") != F.col("expected_partition"))
    offset_mismatch = acked & (F.col("offset") >= 0) & F.col("partition").isNotNull() & (n > 0) & ~F.col("at_ack")
    return message.select(
        _name(scenarios),
        "id",
        F.get(F.array(*map(F.lit, STATES)), code).alias("state"),
        "aborted",
        "partition",
        "offset",
        "expected_partition",
        "copies",
        # A state outside the contract has no outcome; the identities then report it.
        F.coalesce(outcome, F.lit("invalid_state")).alias("outcome"),
        F.coalesce(misrouted, F.lit(False)).alias("misrouted"),
        F.coalesce(offset_mismatch, F.lit(False)).alias("offset_mismatch"),
        "reordered",
    )


def exact_percentile(ascending: Column, fraction: float) -> Column:
    """The ``fraction`` percentile of an ascending array of numbers as a double (null if the array is
    empty or null): linear interpolation between the closest ranks, the arithmetic of Spark's
    ``percentile()`` and numpy's default."""
    position = (F.size(ascending) - 1) * F.lit(fraction)
    lower, higher = F.floor(position), F.ceil(position)
    low, high = F.get(ascending, lower).cast("double"), F.get(ascending, higher).cast("double")
    return F.when((lower == higher) | (low == high), low).otherwise((higher - position) * low + (position - lower) * high)


def _gap(start: Column, end: Column) -> Column:
    """A gap as a struct whose order is: longest first, then earliest."""
    return F.struct((start - end).alias("neg"), start.alias("start"), end.alias("end"))


def _bucket_gaps(acks: DataFrame, starts: DataFrame, width_s: float, *, within: bool) -> DataFrame:
    """``scenario, gap``: the longest gap between time buckets of ``width_s`` (from the buckets'
    first and last acks), and with ``within`` also inside buckets (a window over each bucket)."""
    bucketed = acks.where(F.col("ts").isNotNull()).withColumn("bucket", F.floor(F.col("ts") / width_s))
    inner = []
    if within:
        bucketed = bucketed.withColumn("prev", F.lag("ts").over(Window.partitionBy("scenario", "bucket").orderBy("ts")))
        inner = [F.min(F.when(F.col("prev").isNotNull(), _gap(F.col("prev"), F.col("ts")))).alias("inner")]
    buckets = bucketed.groupBy("scenario", "bucket").agg(F.min("ts").alias("first"), F.max("ts").alias("last"), *inner)
    previous_last = F.lag("last").over(Window.partitionBy("scenario").orderBy("bucket"))
    across = _gap(F.coalesce(previous_last, F.col("start")), F.col("first"))
    candidates = buckets.join(starts, "scenario").select("scenario", across.alias("across"), *(["inner"] if within else []))
    longest = F.least(F.min("across"), F.min("inner")) if within else F.min("across")
    return candidates.groupBy("scenario").agg(longest.alias("gap"))


def longest_ack_gaps(spark: SparkSession, acks: DataFrame, starts: DataFrame) -> DataFrame:
    """Per scenario the longest interval without an ack: ``scenario, gap_start, gap_end``.

    ``acks``: ``scenario, ts`` (ack times); ``starts``: ``scenario, start`` (first send). The
    intervals considered are start→first ack and every ack→next ack; ties go to the earliest.
    A gap inside a time bucket is shorter than the bucket, so when the longest gap between
    ``_GAP_FINE_S`` buckets is longer, it is the answer (no sort needed). Scenarios whose acks never
    pause that long are computed exactly in ``_GAP_BUCKET_S`` buckets with a window per bucket.
    Runs Spark jobs at once; only one row per scenario reaches the driver.
    """
    rows = _bucket_gaps(acks, starts, _GAP_FINE_S, within=False).collect()
    # The slack covers rounding of ts / width at epoch magnitudes (well below a microsecond).
    decided = [row for row in rows if -row.gap.neg > _GAP_FINE_S + 1e-6]
    rest = sorted({row.scenario for row in rows} - {row.scenario for row in decided})
    if rest:
        decided += _bucket_gaps(acks.where(F.col("scenario").isin(rest)), starts, _GAP_BUCKET_S, within=True).collect()
    schema = StructType([acks.schema["scenario"], StructField("gap_start", DoubleType()), StructField("gap_end", DoubleType())])
    return spark.createDataFrame([(row.scenario, row.gap.start, row.gap.end) for row in decided], schema)


def compute_matrix(
    outcomes: DataFrame, records: DataFrame, send_logs: DataFrame, scenarios: DataFrame
) -> DataFrame:
    """One row per ``scenarios`` scenario with ``MATRIX_COLUMNS`` (counts 0 when none), unordered.

    States, latencies and ack times come from the send logs, classes and flags from the outcome
    table, ``records_read`` and unparseable records from the topic records. The ack gaps are
    computed at once (``longest_ack_gaps``); the rest when the result is collected.
    """
    names = [row.scenario for row in scenarios.select("scenario").collect()]
    outcomes, records, send_logs, scenarios = (
        _by_index(frame, names) for frame in (outcomes, records, send_logs, scenarios)
    )
    state, aborted = F.col("state"), F.col("aborted")
    acked = state == "acked"
    latency_us = F.round((F.col("ack_ts") - F.col("send_ts")) * 1e6).cast("long")
    # Cached: the ack gaps need the first sends before the matrix is collected.
    by_send = send_logs.groupBy("scenario").agg(
        F.count(F.lit(1)).alias("planned"),
        F.count_if(state != UNSENT).alias("sent"),
        *(F.count_if(state == name).alias(name) for name in (*STATES, UNSENT)),
        F.count_if("refused").alias("refused"),
        F.count_if("fatal").alias("fatal"),
        F.count_if(aborted).alias("aborted"),
        F.count_if(acked & aborted).alias("aborted_acked"),
        F.min("send_ts").alias("first_send"),
        # acked messages per second from the first send to the last ack
        F.try_divide(F.count_if(acked), F.max(F.when(acked, F.col("ack_ts"))) - F.min("send_ts")).alias("acked_per_s"),
        # Ack latencies sorted, for exact percentiles. The matrix of the standard matrix's archive took
        # 40-50 s with percentile() (a count per distinct value in a map), 30-37 s with these.
        F.sort_array(F.collect_list(F.when(acked, latency_us))).alias("latencies_us"),
    ).cache()
    n, outcome = F.col("copies"), F.col("outcome")
    sent_dup = (outcome != "unexpected") & (n > 1)
    by_outcome = outcomes.groupBy("scenario").agg(
        *(F.count_if(outcome == name).alias(name) for name in SENT_OUTCOMES),
        F.sum(F.when(outcome == "unexpected", n)).alias("unexpected_copies"),
        F.count_if(sent_dup).alias("duplicated"),
        F.sum(F.when(sent_dup, n - 1)).alias("duplicates"),
        *(F.count_if(name).alias(name) for name in ("reordered", "misrouted", "offset_mismatch")),
    )
    by_record = records.groupBy("scenario").agg(
        F.count(F.lit(1)).alias("records_read"), F.count_if(F.col("id").isNull()).alias("unparseable")
    )

    acks = send_logs.where(acked)
    gaps = longest_ack_gaps(
        send_logs.sparkSession,
        acks.select("scenario", F.col("ack_ts").alias("ts")),
        by_send.select("scenario", F.col("first_send").alias("start")),
    )

    joined = reduce(
        lambda left, right: left.join(right, "scenario", "left"),
        (by_send, by_outcome, by_record, gaps),
        scenarios,
    )
    counts = {c: F.coalesce(F.col(c), F.lit(0)).cast("long") for c in COUNT_COLUMNS}
    counts["unexpected"] = (
        F.coalesce(F.col("unparseable"), F.lit(0)) + F.coalesce(F.col("unexpected_copies"), F.lit(0))
    ).cast("long")
    gap_start, gap_end = F.col("gap_start"), F.col("gap_end")
    overlap = F.aggregate(
        "fault_windows",
        F.lit(0.0),
        lambda total, w: total + F.greatest(F.lit(0.0), F.least(w["end"], gap_end) - F.greatest(w["start"], gap_start)),
    )
    return joined.select(
        _name(names),
        *META_SCHEMA.fieldNames()[1:],
        *(column.alias(name) for name, column in counts.items()),
        *(
            (exact_percentile(F.col("latencies_us"), fraction) / 1000).alias(name)
            for fraction, name in zip(LATENCY_PERCENTILES, ("ack_latency_p50_ms", "ack_latency_p95_ms", "ack_latency_p99_ms"), strict=True)
        ),
        (F.array_max("latencies_us") / 1000).alias("ack_latency_max_ms"),
        "acked_per_s",
        (gap_end - gap_start).alias("longest_ack_gap_s"),
        F.when(gap_end.isNotNull(), overlap).alias("ack_gap_fault_overlap_s"),
    )


def check_conservation(rows: Iterable[Mapping[str, Any]], planned: Mapping[str, int] | None = None) -> None:
    """Raise ``ConservationError`` naming every scenario and identity of ``IDENTITIES`` that fails,
    and every scenario whose send log does not have the ``planned`` rows its manifest entry records."""
    broken = []
    for row in rows:
        expected = (planned or {}).get(row["scenario"])
        if expected is not None and row["planned"] != expected:
            broken.append(f"{row['scenario']}: the send log has {row['planned']} rows, the manifest planned {expected}")
        for total, parts in IDENTITIES:
            summed = sum(row[p] for p in parts)
            if row[total] != summed:
                terms = " + ".join(f"{p}={row[p]}" for p in parts)
                broken.append(f"{row['scenario']}: {total}={row[total]} != {terms} = {summed}")
    if broken:
        raise ConservationError("delivery matrix does not balance:\n  " + "\n  ".join(broken))


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
    spark = SparkSession.builder.appName("acklab-delivery-matrix").getOrCreate()

    if args.topic_records:
        archive = str(Path(args.topic_records).resolve())
    else:
        archive = str(out.topic_records)
        archive_topic_records(spark, manifest, args.bootstrap_servers or manifest.bootstrap_servers, out.topic_records)
    # Everything below is computed from files, so Kafka is read once and the evidence is what was audited.
    records = spark.read.parquet(archive).select(*(F.col(f.name).cast(f.dataType) for f in RECORD_SCHEMA.fields))
    send_logs = read_send_logs(spark, manifest, run)

    names = [scenario.scenario for scenario in manifest.scenarios]
    # Unpartitioned, scenario a column: a write partitioned by scenario sorts each task's rows by
    # scenario first (the standard matrix's re-audit: 136 s partitioned, 106 s not).
    compute_outcomes(send_logs, records, names).write.mode("overwrite").parquet(str(out.outcomes))
    outcomes = spark.read.schema(OUTCOME_SCHEMA).parquet(str(out.outcomes))

    matrix = compute_matrix(outcomes, records, send_logs, build_scenarios_meta(spark, manifest))
    # Sorted here: orderBy's range partitioning samples its input first, running the plan twice.
    rows = sorted(matrix.collect(), key=lambda row: row.scenario)
    check_conservation((row.asDict() for row in rows), {s.scenario: s.planned for s in manifest.scenarios if s.planned is not None})

    spark.createDataFrame(rows, matrix.schema).write.mode("overwrite").parquet(str(out.matrix_parquet))
    write_json(out.matrix_json, [row.asDict() for row in rows])
    print(f"matrix: {out.matrix_json}")
