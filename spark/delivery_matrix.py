"""Delivery matrix: audit every scenario's send log against what its Kafka topic holds.

Submitted with spark-submit (the Spark Kafka connector jars passed with ``--jars``)::

    spark-submit --jars ... spark/delivery_matrix.py --manifest runs/<id>/manifest.json --out runs/<id>/audit

All scenarios of a run are audited in one job. Message-level data stays in Spark; only the matrix
(one row per scenario) reaches the driver, where its conservation identities are checked before
anything is written. The evidence contract is ``docs/evidence.md``.

Message classes, per scenario, with ``copies`` = number of topic records carrying the message's id:

========================  =========================================
delivered                 acked, copies == 1
lost                      acked, copies == 0
acked_duplicated          acked, copies > 1
failed_clean              failed, copies == 0
indeterminate             failed or unknown, copies >= 1
unknown_absent            unknown, copies == 0
duplicated / duplicates   copies > 1 (any state) / sum(copies - 1)
unexpected                records whose id is null (unparseable) or not in the send log
========================  =========================================

Ack latency percentiles are exact (Spark's ``percentile``, linear interpolation between the
closest ranks, as numpy's default), computed over acked messages.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterable, Mapping, Sequence
from functools import reduce
from pathlib import Path
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import (
    BooleanType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

SEND_LOG_SCHEMA = StructType(
    [
        StructField("scenario", StringType(), False),
        StructField("id", LongType()),
        StructField("key", StringType()),
        StructField("seq", LongType()),
        StructField("send_ts", DoubleType()),
        StructField("ack_ts", DoubleType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("error", StringType()),
        StructField("state", StringType()),
    ]
)

RECORD_SCHEMA = StructType(
    [
        StructField("scenario", StringType(), False),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("key", StringType()),
        StructField("id", LongType()),
        StructField("seq", LongType()),
    ]
)

META_SCHEMA = StructType(
    [
        StructField("scenario", StringType(), False),
        StructField("profile", StringType()),
        StructField("fault", StringType()),
        StructField("guarantee", StringType()),
        StructField("fault_effective", BooleanType()),
        StructField("evidence_complete", BooleanType()),
        StructField("incomplete_reason", StringType()),
    ]
)

COUNT_COLUMNS = (
    "sent",
    "acked",
    "failed",
    "unknown",
    "records_read",
    "delivered",
    "lost",
    "duplicated",
    "duplicates",
    "acked_duplicated",
    "failed_clean",
    "indeterminate",
    "unknown_absent",
    "unexpected",
    "reordered",
)
METRIC_COLUMNS = ("ack_latency_p50_ms", "ack_latency_p99_ms", "ack_latency_max_ms", "acked_per_s")
MATRIX_COLUMNS = tuple(META_SCHEMA.fieldNames()) + COUNT_COLUMNS + METRIC_COLUMNS

# total == sum(parts); each holds by definition of the classes in the module docstring.
IDENTITIES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("sent", ("acked", "failed", "unknown")),
    ("acked", ("delivered", "lost", "acked_duplicated")),
    (
        "sent",
        ("delivered", "lost", "acked_duplicated", "failed_clean", "indeterminate", "unknown_absent"),
    ),
    ("records_read", ("delivered", "acked_duplicated", "indeterminate", "duplicates", "unexpected")),
)

_VALUE_PREFIX = r"^([0-9]+):([0-9]+):"
# Enough bytes for "<id>:<seq>:" with two 19-digit int64s; longer numbers would overflow anyway.
_VALUE_PREFIX_BYTES = 48


class ConservationError(ValueError):
    """The matrix does not balance: the audit itself is wrong, not the cluster."""


def parse_value(value: Column) -> Column:
    """``struct<id: long, seq: long>`` from a binary record value starting with ``<id>:<seq>:``.

    Both fields are null when the prefix is absent, malformed or overflows int64.
    """
    head = F.substring(value, 1, _VALUE_PREFIX_BYTES).cast("string")
    id_, seq = (F.regexp_extract(head, _VALUE_PREFIX, group).try_cast("long") for group in (1, 2))
    parsed = id_.isNotNull() & seq.isNotNull()
    return F.struct(F.when(parsed, id_).alias("id"), F.when(parsed, seq).alias("seq"))


def build_scenarios_meta(spark: SparkSession, manifest: Mapping[str, Any]) -> DataFrame:
    """One row per manifest scenario with the descriptive matrix columns."""
    rows = [tuple(s.get(name) for name in META_SCHEMA.fieldNames()) for s in manifest["scenarios"]]
    return spark.createDataFrame(rows, META_SCHEMA)


def read_send_logs(spark: SparkSession, manifest: Mapping[str, Any], run_dir: str | Path) -> DataFrame:
    """All scenarios' send logs unioned, with a ``scenario`` column, cast to the contract types.

    A scenario whose evidence is marked incomplete may lack its send log and then contributes no
    rows; a missing send log of a complete scenario is an error.
    """
    frames = []
    for scenario in manifest["scenarios"]:
        rel = scenario.get("send_log")
        path = Path(run_dir) / rel if rel else None
        if path is None or not path.exists():
            if scenario.get("evidence_complete", True):
                raise FileNotFoundError(f"{scenario['scenario']}: send log {path} is missing")
            continue
        frames.append(
            spark.read.parquet(str(path)).select(
                F.lit(scenario["scenario"]).alias("scenario"),
                *(F.col(f.name).cast(f.dataType).alias(f.name) for f in SEND_LOG_SCHEMA.fields[1:]),
            )
        )
    return reduce(DataFrame.unionByName, frames, spark.createDataFrame([], SEND_LOG_SCHEMA))


def read_topic_records(spark: SparkSession, manifest: Mapping[str, Any], bootstrap: str) -> DataFrame:
    """Every record of every scenario topic, in one batch read of Kafka (``RECORD_SCHEMA``)."""
    pairs = [(s["topic"], s["scenario"]) for s in manifest["scenarios"] if s.get("topic")]
    topics = spark.createDataFrame(pairs, "topic string, scenario string")
    raw = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", ",".join(topic for topic, _ in pairs))
        .option("startingOffsets", "earliest")
        .option("endingOffsets", "latest")
        .load()
    )
    return raw.join(F.broadcast(topics), "topic").select(
        "scenario",
        "partition",
        "offset",
        F.col("key").cast("string").alias("key"),
        parse_value(F.col("value")).alias("parsed"),
    ).select("scenario", "partition", "offset", "key", "parsed.id", "parsed.seq")


def compute_matrix(send_logs: DataFrame, records: DataFrame, scenarios_meta: DataFrame) -> DataFrame:
    """One row per ``scenarios_meta`` scenario with ``MATRIX_COLUMNS`` (counts 0 when none)."""
    parsed = records.where(F.col("id").isNotNull())
    copies = parsed.groupBy("scenario", "id").agg(F.count(F.lit(1)).alias("copies"))
    messages = send_logs.join(copies, ["scenario", "id"], "left").fillna(0, ["copies"])

    state, n = F.col("state"), F.col("copies")
    acked, failed, unknown = (state == name for name in ("acked", "failed", "unknown"))
    absent, once, dup = n == 0, n == 1, n > 1
    latency_ms = F.when(acked, (F.col("ack_ts") - F.col("send_ts")) * 1000)
    by_message = messages.groupBy("scenario").agg(
        F.count(F.lit(1)).alias("sent"),
        F.count_if(acked).alias("acked"),
        F.count_if(failed).alias("failed"),
        F.count_if(unknown).alias("unknown"),
        F.count_if(acked & once).alias("delivered"),
        F.count_if(acked & absent).alias("lost"),
        F.count_if(dup).alias("duplicated"),
        F.sum(F.when(dup, n - 1)).alias("duplicates"),
        F.count_if(acked & dup).alias("acked_duplicated"),
        F.count_if(failed & absent).alias("failed_clean"),
        F.count_if((failed | unknown) & ~absent).alias("indeterminate"),
        F.count_if(unknown & absent).alias("unknown_absent"),
        F.percentile(latency_ms, [0.5, 0.99]).alias("latency_pct"),
        F.max(latency_ms).alias("ack_latency_max_ms"),
        # acked messages per second from the first send to the last ack
        F.try_divide(
            F.count_if(acked), F.max(F.when(acked, F.col("ack_ts"))) - F.min("send_ts")
        ).alias("acked_per_s"),
    )

    by_record = records.groupBy("scenario").agg(F.count(F.lit(1)).alias("records_read"))
    unexpected = (
        records.join(send_logs.select("scenario", "id"), ["scenario", "id"], "left_anti")
        .groupBy("scenario")
        .agg(F.count(F.lit(1)).alias("unexpected"))
    )

    first_copies = parsed.groupBy("scenario", "partition", "key", "id").agg(
        F.min("offset").alias("offset"), F.min_by("seq", "offset").alias("seq")
    )
    earlier = (
        Window.partitionBy("scenario", "partition", "key")
        .orderBy("offset")
        .rowsBetween(Window.unboundedPreceding, -1)
    )
    reordered = (
        first_copies.select("scenario", (F.col("seq") < F.max("seq").over(earlier)).alias("late"))
        .groupBy("scenario")
        .agg(F.count_if("late").alias("reordered"))
    )

    joined = reduce(
        lambda left, right: left.join(right, "scenario", "left"),
        (by_message, by_record, unexpected, reordered),
        scenarios_meta,
    )
    return joined.select(
        *META_SCHEMA.fieldNames(),
        *(F.coalesce(F.col(c), F.lit(0)).cast("long").alias(c) for c in COUNT_COLUMNS),
        F.col("latency_pct")[0].alias("ack_latency_p50_ms"),
        F.col("latency_pct")[1].alias("ack_latency_p99_ms"),
        "ack_latency_max_ms",
        "acked_per_s",
    ).orderBy("scenario")


def check_conservation(rows: Iterable[Mapping[str, Any]]) -> None:
    """Raise ``ConservationError`` naming every scenario and identity of ``IDENTITIES`` that fails."""
    broken = []
    for row in rows:
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
    """Audit a run: write topic_records.parquet (Kafka reads only), matrix.parquet and matrix.json."""
    args = _parse_args(argv)
    manifest_path = Path(args.manifest).resolve()
    manifest = json.loads(manifest_path.read_text())
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    spark = SparkSession.builder.appName("acklab-delivery-matrix").getOrCreate()

    if args.topic_records:
        archive = str(Path(args.topic_records).resolve())
    else:
        archive = str(out / "topic_records.parquet")
        bootstrap = args.bootstrap_servers or manifest["bootstrap_servers"]
        read_topic_records(spark, manifest, bootstrap).write.mode("overwrite").parquet(archive)
    # The matrix is computed from the archive, so Kafka is read once and the evidence is what was audited.
    records = spark.read.parquet(archive).select(
        *(F.col(f.name).cast(f.dataType) for f in RECORD_SCHEMA.fields)
    )

    matrix = compute_matrix(
        read_send_logs(spark, manifest, manifest_path.parent),
        records,
        build_scenarios_meta(spark, manifest),
    )
    rows = matrix.collect()
    check_conservation(row.asDict() for row in rows)

    spark.createDataFrame(rows, matrix.schema).write.mode("overwrite").parquet(str(out / "matrix.parquet"))
    matrix_json = out / "matrix.json"
    matrix_json.write_text(json.dumps([row.asDict() for row in rows], indent=2) + "\n")
    print(f"matrix: {matrix_json}")


if __name__ == "__main__":
    main()
