"""Every Parquet file of a run's evidence, as an Arrow schema with a description per column.

The single definition: the workload writes the send log and statistics with these schemas, the
Spark audit's tasks and driver write the archive, the outcome table and the matrix with them, and
docs/evidence.md is generated from them (`acklab.report.evidence_doc`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pyarrow as pa

from acklab.store.contract import (
    COUNT_COLUMNS,
    COUNT_DOCS,
    METRIC_COLUMNS,
    METRIC_DOCS,
    OUTCOMES,
    PIPELINE_COUNT_COLUMNS,
    PIPELINE_COUNT_DOCS,
    STATE_DOCS,
)

DOC = b"doc"


def column(name: str, type_: pa.DataType, doc: str, nullable: bool = True) -> pa.Field:
    """A field whose metadata carries its description."""
    return pa.field(name, type_, nullable=nullable, metadata={DOC: doc.encode()})


def describe(field: pa.Field) -> str:
    return (field.metadata or {}).get(DOC, b"").decode()


SCENARIO = column("scenario", pa.string(), "the scenario, `<profile>__<fault>`", nullable=False)

SEND_LOG = pa.schema(
    [
        column("id", pa.int64(), "unique message id within the scenario; producer `n` of `P` owns a contiguous range of `0..messages-1`"),
        column("key", pa.string(), "record key (utf-8), `p<n>-k<k>`: keys are per producer, so per-key order is well defined"),
        column("seq", pa.int64(), "per-key sequence number, 0, 1, 2... in send order"),
        column("producer", pa.string(), "producer process within the scenario (`p0`, `p1`...)"),
        column("expected_partition", pa.int32(), "partition the key maps to under the profile's partitioner (CRC32 for `consistent_random`, murmur2 for `murmur2_random`)"),
        column("txn", pa.int64(), "transaction index within the producer (transactional profiles only, else null)"),
        column("aborted", pa.bool_(), "the producer aborted the message's transaction"),
        column("retriable", pa.bool_(), "the delivery error is retriable (Kafka's RetriableException classes and the client's transient local errors); null without an error"),
        column("send_ts", pa.float64(), "epoch seconds when `produce()` took the message (stamped per run of at most 64 calls); null if never handed to it"),
        column("ack_ts", pa.float64(), "epoch seconds of the delivery report (when the poll that served it returned); null = none"),
        column("partition", pa.int32(), "partition from the delivery report"),
        column("offset", pa.int64(), "offset from the delivery report (null when it had an error or no offset, e.g. acks=0)"),
        column("error", pa.string(), "the client family's error name (librdkafka: its error name) of the delivery report, the refusal or the fatal error; null when acked"),
        column("state", pa.string(), "; ".join(f"`{name}`: {doc}" for name, doc in STATE_DOCS.items())),
        column(
            "refused", pa.bool_(),
            "`produce()` (Java: `send()`) itself rejected the message with a non-retriable error (e.g. MSG_SIZE_TOO_LARGE): a failed "
            "write that never reached the wire; a Java `send()` that waited max.block.ms and then failed is a failure, not a refusal",
        ),
        column("fatal", pa.bool_(), "failed by the producer's fatal error: not acknowledged before it, whether sent or not"),
        column("topic", pa.string(), "the topic the message was sent to (one of the scenario's topics, `acklab.workload.spec.scenario_topics`); null: the scenario's own topic"),
    ]
)
# Columns later workloads added; a send log without one reads as this default.
SEND_LOG_DEFAULTS: Mapping[str, Any] = {
    "producer": "p0",
    "expected_partition": None,
    "txn": None,
    "aborted": False,
    "retriable": None,
    "refused": False,
    "fatal": False,
    "topic": None,
}

# Each statistic: librdkafka's statistic it is (summed over broker connections), then the Java
# client's producer metric (null where that client has none).
STATS_DOCS: Mapping[str, tuple[str, str]] = {
    "txmsgs": ("`txmsgs`", "`record-send-total`"),
    "txretries": ("`txretries`", "`record-retry-total`"),
    "txerrs": ("`txerrs`", "`record-error-total`"),
    "req_timeouts": ("`req_timeouts`", "NetworkClient's request-timeout disconnects, counted from its log"),
    "disconnects": ("`disconnects`", "`connection-close-total`"),
    "msg_cnt": ("`msg_cnt`", "records handed to send() and not yet reported"),
    "outbuf_cnt": ("`outbuf_cnt`", "none"),
    "outbuf_msg_cnt": ("`outbuf_msg_cnt`", "none"),
    "waitresp_cnt": ("`waitresp_cnt`", "`requests-in-flight`"),
    "waitresp_msg_cnt": ("`waitresp_msg_cnt`", "none"),
    "request_latency_avg_ms": ("the largest `rtt.avg` of a broker connection, in ms", "`request-latency-avg`"),
    "request_latency_max_ms": ("the largest `rtt.max` of a broker connection, in ms", "`request-latency-max`"),
}
STATS_COUNTERS = ("txmsgs", "txretries", "txerrs", "req_timeouts", "disconnects")  # cumulative
STATS_GAUGES = ("msg_cnt", "outbuf_cnt", "outbuf_msg_cnt", "waitresp_cnt", "waitresp_msg_cnt", "request_latency_avg_ms", "request_latency_max_ms")  # at the sample
PRODUCER_STATS = pa.schema(
    [
        column("ts", pa.float64(), "epoch seconds of the sample"),
        column("producer", pa.string(), "producer process (`p0`, ...)"),
        *(
            column(name, pa.int64(), f"{'cumulative' if name in STATS_COUNTERS else 'at the sample'}: librdkafka {STATS_DOCS[name][0]}; Java {STATS_DOCS[name][1]}")
            for name in (*STATS_COUNTERS, *STATS_GAUGES)
        ),
    ]
)

TOPIC_RECORDS = pa.schema(
    [
        SCENARIO,
        column("partition", pa.int32(), "topic partition"),
        column("offset", pa.int64(), "offset in the partition"),
        column("key", pa.string(), "record key (utf-8)"),
        column("id", pa.int64(), "message id from the value's `<id>:<seq>:` prefix; null if it has none"),
        column("seq", pa.int64(), "per-key sequence number from the same prefix"),
        column("topic", pa.string(), "the topic it was read from (one of the scenario's topics); null in an archive written before topics were recorded: the scenario's own topic"),
    ]
)
# Columns later audits added; an archive without one reads it as null.
TOPIC_RECORDS_ADDED = ("topic",)

PIPELINE_OUTPUT_RECORDS = pa.schema(
    [
        SCENARIO,
        column("partition", pa.int32(), "output topic partition"),
        column("offset", pa.int64(), "offset in the output partition"),
        column("id", pa.int64(), "the input message's id (from the output value's `<id>:<seq>:` prefix); null: not a processor's output"),
        column("seq", pa.int64(), "the input message's per-key sequence number"),
        column("instance", pa.int64(), "the processor instance that produced it"),
        column("incarnation", pa.int64(), "its incarnation (0, then +1 per restart)"),
        column("generation", pa.int64(), "the group generation (member epoch under KIP-848) it was produced under"),
        column("in_partition", pa.int64(), "the input record's partition"),
        column("in_offset", pa.int64(), "the input record's offset"),
        column("txn", pa.int64(), "the batch (transaction) of its incarnation"),
        column("committed", pa.bool_(), "a read_committed reader sees it (false: output of an aborted transaction, in the log)"),
    ]
)

OUTCOME_TABLE = pa.schema(
    [
        SCENARIO,
        column("id", pa.int64(), "message id"),
        column("state", pa.string(), "send-log state (null for ids never sent)"),
        column("aborted", pa.bool_(), "from the send log"),
        column("partition", pa.int32(), "acked partition, from the send log"),
        column("offset", pa.int64(), "acked offset, from the send log"),
        column("expected_partition", pa.int32(), "from the send log"),
        column("copies", pa.int64(), "topic records carrying the id", nullable=False),
        column("outcome", pa.string(), f"exactly one of {', '.join(OUTCOMES)}", nullable=False),
        column("misrouted", pa.bool_(), "acked, and the acked partition or a partition holding a copy != expected_partition (known)", nullable=False),
        column("offset_mismatch", pa.bool_(), "acked with a partition and an offset >= 0, present, not misrouted or misdirected, but no copy at the acked (topic, partition, offset)", nullable=False),
        column("reordered", pa.bool_(), "its first copy has a lower seq than an earlier first copy of the same key in that partition", nullable=False),
        column("misdirected", pa.bool_(), "sent, and a copy of it was read from another of the scenario's topics than the one it was sent to", nullable=False),
    ]
)

# The matrix: what the manifest says of each scenario, then the counts and metrics of the contract.
MATRIX_DESCRIPTIVE = pa.schema(
    [
        SCENARIO,
        column("profile", pa.string(), "producer profile"),
        column("fault", pa.string(), "fault (label of the schedule)"),
        column("guarantee", pa.string(), "the guarantee class the model expects"),
        column("guarantee_reason", pa.string(), "why: the class rule that matched and the settings that decided it"),
        column("client_family", pa.string(), "the producer client family: `librdkafka` (confluent-kafka) or `java` (kafka-clients)"),
        column("client_version", pa.string(), "the producer client's version (librdkafka family: confluent-kafka's; java: kafka-clients')"),
        column("librdkafka_version", pa.string(), "the librdkafka it bundles (null for a client without one)"),
        column("partitioner", pa.string(), "the profile's partitioner"),
        column("producers", pa.int64(), "producer processes"),
        column("transactional", pa.bool_(), "transactional profile"),
        column("fault_effective", pa.bool_(), "every fault took effect while the load ran"),
        column("evidence_complete", pa.bool_(), "the manifest holds the scenario's full evidence"),
        column("incomplete_reason", pa.string(), "why the evidence is incomplete"),
        column("fatal_error", pa.string(), "the producers' fatal errors (`p<n>: NAME: message`), if any"),
        column(
            "hanging_partitions", pa.int64(),
            "transactional: partitions whose last stable offset stayed below the high watermark after every transaction timed out "
            "(a hanging transaction stalls read_committed readers); null when not transactional",
        ),
        column("hanging_detail", pa.string(), "each such partition: its last stable offset, high watermark and the open transaction's producer id and epoch"),
        column(
            "planted_lost", pa.int64(),
            "planted-loss: records the proxy acked in the broker's name and never forwarded, from the fault timeline (a transactional "
            "producer's only in committed transactions; the checker must count exactly these lost); null without that fault, or when "
            "the send log does not match an entry",
        ),
        column(
            "planted_duplicates", pa.int64(),
            "planted-duplicate: records the proxy sent to the broker a second time and the broker appended again, from the fault "
            "timeline (the checker must count exactly these as duplicates); null without that fault, or when an answer never came",
        ),
        column(
            "planted_offset_mismatch", pa.int64(),
            "planted-offset: records whose acked offset the proxy shifted, from the fault timeline (the checker must count exactly "
            "these as offset mismatches); null without that fault, or when an answer never came",
        ),
        column(
            "planted_reordered", pa.int64(),
            "planted-reorder: records the proxy had the broker store after a later record of their key, from the fault timeline (the "
            "checker must count exactly these reordered); null without that fault, or when an answer never came",
        ),
        column(
            "planted_misrouted", pa.int64(),
            "planted-misroute: records the proxy had the broker append to another partition than the client sent them to, from the "
            "fault timeline (the checker must count exactly these misrouted); null without that fault, or when an answer never came",
        ),
        column("control", pa.bool_(), "a negative control of the run (a planted anomaly the checker must count exactly)"),
    ]
)
# A pipeline scenario's columns (null in a producer scenario's row).
MATRIX_PIPELINE = pa.schema(
    [
        column("processing", pa.string(), "a pipeline's processing style (eos, at-least-once, at-most-once, eos-naive); null: a producer scenario"),
        column("processors", pa.int64(), "its processor instances"),
        column("drain_s", pa.float64(), "seconds from the load's end until its group had committed every input (null: never)"),
        *(column(name, pa.int64(), PIPELINE_COUNT_DOCS[name]) for name in PIPELINE_COUNT_COLUMNS),
        column("pipeline_timeline", pa.string(), "JSON: per processor `<instance>.<incarnation>`, its rebalances, generations, batches, commits (eos-naive: transaction commits apart), aborts, points, errors and stop"),
    ]
)
MATRIX = pa.schema(
    [
        *MATRIX_DESCRIPTIVE,
        *(column(name, pa.int64(), COUNT_DOCS[name]) for name in COUNT_COLUMNS),
        *(column(name, pa.float64(), METRIC_DOCS[name]) for name in METRIC_COLUMNS),
        *MATRIX_PIPELINE,
    ]
)
