"""Reading a run's scenario topics back (the audit's first step): every committed record, as rows of
the topic-records archive (``acklab.store.schemas.TOPIC_RECORDS``).

A batch of topic partitions is read by one ``read_committed`` consumer (confluent-kafka, the
project's locked version) from the earliest offset until librdkafka reports the partition's end (the
last stable offset: records of aborted transactions and past an open one are not read). The
per-message work is C (``acklab.workload.records.read_back``).
"""

from __future__ import annotations

import time
from collections.abc import Collection, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

from acklab.store.schemas import TOPIC_RECORDS
from acklab.workload.records import read_back

# A partition that yields nothing for this long (no record, no end) fails the read.
STALL_TIMEOUT_S = 120.0
# Messages per consume() call (larger batches read slower: docs/benchmarks.md, "What was tried and rejected").
_BATCH = 10_000


class TopicReadError(RuntimeError):
    """A partition could not be read to its end."""


def consumer_config(bootstrap: str) -> dict[str, object]:
    """The audit consumer's settings: committed records only, an end event per partition, no group."""
    return {
        "bootstrap.servers": bootstrap,
        "group.id": "acklab-audit",  # required by the client; partitions are assigned, never subscribed
        "enable.auto.commit": False,
        "isolation.level": "read_committed",
        "enable.partition.eof": True,
        # A fetch at a partition's end answers at once instead of waiting for records that will not come.
        "fetch.wait.max.ms": 20,
        "max.partition.fetch.bytes": 8 << 20,
        "queued.max.messages.kbytes": 256 << 10,
    }


def read_partitions(bootstrap: str, partitions: Sequence[tuple[str, int]], scenario_of: Mapping[str, str]) -> pa.Table:
    """Every committed record of ``partitions`` ((topic, partition) pairs) as a ``TOPIC_RECORDS`` table;
    ``scenario_of`` maps each topic to its scenario. Raises ``TopicReadError`` when a partition
    yields neither a record nor its end for ``STALL_TIMEOUT_S``."""
    topics = sorted({topic for topic, _ in partitions})
    topic_index = {topic: index for index, topic in enumerate(topics)}
    keys: dict[bytes, int] = {}
    chunks: list[dict[str, np.ndarray]] = [read_back([], topic_index, keys, [])]
    pending = set(partitions)
    consumer = Consumer(consumer_config(bootstrap))
    try:
        # The leaders are learnt before assign, so the start offsets are asked at once, not after the
        # client's metadata retry timer.
        consumer.list_topics(timeout=30)
        consumer.assign([TopicPartition(topic, partition, OFFSET_BEGINNING) for topic, partition in partitions])
        progress = time.monotonic()
        while pending:
            ends: list[tuple[str, int]] = []
            columns = read_back(consumer.consume(_BATCH, 1.0), topic_index, keys, ends)
            if len(columns["offset"]) or ends:
                progress = time.monotonic()
            pending.difference_update(ends)
            chunks.append(columns)
            if time.monotonic() - progress > STALL_TIMEOUT_S:
                raise TopicReadError(f"no record and no end for {STALL_TIMEOUT_S:.0f}s from {sorted(pending)[:5]} ({len(pending)} partitions)")
    finally:
        consumer.close()
    return _table(chunks, topics, [scenario_of[topic] for topic in topics], [key.decode("utf-8", "replace") for key in keys])


def _table(chunks: Sequence[Mapping[str, np.ndarray]], topics: Sequence[str], scenarios: Sequence[str], keys: Sequence[str]) -> pa.Table:
    """``TOPIC_RECORDS`` rows from ``read_back``'s columns (indexes into ``topics``, whose scenarios are
    ``scenarios``, and into ``keys``)."""
    column = {name: np.concatenate([chunk[name] for chunk in chunks]) for name in ("topic", "partition", "offset", "key", "id", "seq")}
    no_prefix = column["id"] < 0
    key = pa.DictionaryArray.from_arrays(pa.array(column["key"], mask=column["key"] < 0), pa.array(keys, pa.string()))
    arrays = {
        "scenario": pa.DictionaryArray.from_arrays(column["topic"], pa.array(scenarios, pa.string())).cast(pa.string()),
        "partition": pa.array(column["partition"]),
        "offset": pa.array(column["offset"]),
        "key": key.cast(pa.string()),
        "id": pa.array(column["id"], mask=no_prefix),
        "seq": pa.array(column["seq"], mask=no_prefix),
        "topic": pa.DictionaryArray.from_arrays(column["topic"], pa.array(topics, pa.string())).cast(pa.string()),
    }
    return pa.Table.from_arrays([arrays[field.name] for field in TOPIC_RECORDS], schema=TOPIC_RECORDS)



def read_outputs(bootstrap: str, outputs: Sequence[tuple[str, int, str]]) -> dict[str, pa.Table]:
    """Every record of the pipelines' output topics `outputs` ((topic, partitions, scenario) each) as
    ``PIPELINE_OUTPUT_RECORDS`` rows, by scenario, read twice: as read_uncommitted (every record in
    the log, aborted ones included) and as read_committed, whose records are marked ``committed``. A
    value that is not a processor's output has null fields (`output_rows`). All topics are read by one
    consumer per isolation level: a consumer costs about a second before its first record. Raises
    ``TopicReadError`` as `read_partitions`."""
    pairs = [(topic, partition) for topic, partitions, _ in outputs for partition in range(partitions)]
    every = _read_values(bootstrap, pairs, "read_uncommitted")
    committed = _read_values(bootstrap, pairs, "read_committed", values=False)
    return {
        scenario: output_rows(scenario, every.get(topic, []), {(p, o) for p, o, _ in committed.get(topic, [])})
        for topic, _, scenario in outputs
    }


def output_rows(scenario: str, records: Sequence[tuple[int, int, bytes | None]], committed: Collection[tuple[int, int]]) -> pa.Table:
    """``PIPELINE_OUTPUT_RECORDS`` rows of an output topic's `records` ((partition, offset, value),
    every one in the log), those at a (partition, offset) of `committed` marked committed. A value is
    parsed as `acklab.workload.processing.parse_output` does, in Arrow's kernels; one that is not a
    processor's output gets null fields."""
    from acklab.store.schemas import PIPELINE_OUTPUT_RECORDS
    from acklab.workload.processing import OUTPUT_FIELDS, OUTPUT_PATTERN

    partition = pa.array([r[0] for r in records], pa.int32())
    offset = pa.array([r[1] for r in records], pa.int64())
    fields = pc.extract_regex(pa.array([r[2] for r in records], pa.binary()), f"^{OUTPUT_PATTERN}$")  # RE2: $ is the value's end
    parsed = {name: pc.cast(pc.cast(pc.struct_field(fields, name), pa.string()), pa.int64()) for name in OUTPUT_FIELDS}
    inside = pa.array([(r[0], r[1]) in committed for r in records], pa.bool_())
    columns = {"scenario": pa.array([scenario] * len(records), pa.string()), "partition": partition, "offset": offset, **parsed, "committed": inside}
    return pa.table(columns).select(PIPELINE_OUTPUT_RECORDS.names).cast(PIPELINE_OUTPUT_RECORDS)


def _read_values(
    bootstrap: str, pairs: Sequence[tuple[str, int]], isolation: str, values: bool = True
) -> dict[str, list[tuple[int, int, bytes | None]]]:
    """(partition, offset, value) of every record an `isolation` reader sees in the (topic,
    partition) `pairs`, by topic (the value None unless `values`)."""
    found: dict[str, list[tuple[int, int, bytes | None]]] = {topic: [] for topic, _ in pairs}
    pending = set(pairs)
    if not pending:
        return found
    consumer = Consumer({**consumer_config(bootstrap), "isolation.level": isolation})
    try:
        consumer.list_topics(timeout=30)
        consumer.assign([TopicPartition(topic, partition, OFFSET_BEGINNING) for topic, partition in pairs])
        progress = time.monotonic()
        while pending:
            for message in consumer.consume(_BATCH, 1.0):
                progress = time.monotonic()
                if (error := message.error()) is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        pending.discard((message.topic(), message.partition()))
                    continue
                found[message.topic()].append((message.partition(), message.offset(), message.value() if values else None))
            if time.monotonic() - progress > STALL_TIMEOUT_S:
                raise TopicReadError(f"no record and no end for {STALL_TIMEOUT_S:.0f}s from {sorted(pending)[:5]} ({len(pending)} partitions)")
    finally:
        consumer.close()
    return found
