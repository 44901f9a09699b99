"""A testing helper: synthetic run evidence at scale, a send log and a topic-records archive with
planted anomalies.

Generated column-wise with numpy in chunks and written with pyarrow, so tens of millions of
messages take seconds. The planted counts are returned, so an audit of the evidence can be checked
for exactness at any scale (`make bench-audit`, the audit's unit tests).

A run folder (`acklab.store.runs.RunDir`) with a one-scenario manifest and its send log, plus the
archive of topic records the audit reads with `--topic-records`, in the run folder's audit layout.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from acklab.store.runs import FaultRecord, Manifest, RunDir, ScenarioEntry
from acklab.store.schemas import SEND_LOG, TOPIC_RECORDS
from acklab.workload.spec import scenario_topics

SCENARIO = "synthetic__leader-kill"
TOPIC = "acklab-synthetic"  # the scenario's own topic; its load spreads over `scenario_topics(TOPIC, topics)`
# Per-message probabilities of the planted classes (the rest is delivered once).
RATES = {"lost": 2e-4, "acked_duplicated": 2e-4, "failed_clean": 1e-4, "indeterminate": 1e-4,
         "unknown_absent": 1e-4, "misrouted": 1e-4, "offset_mismatch": 1e-4, "reordered": 1e-4, "misdirected": 1e-4}
UNEXPECTED_PER_CHUNK = 3  # records of ids never sent
UNPARSEABLE_PER_CHUNK = 2  # records without an id
FAULT_START_FRACTION, FAULT_S = 0.3, 5.0  # no acks while the fault lasts


@dataclass(frozen=True)
class SyntheticRun:
    manifest: Path
    topic_records: Path
    expected: dict[str, float]  # matrix values the audit must report (counts and the ack gap)

    def mismatches(self, row: Mapping[str, Any]) -> dict[str, tuple[Any, float]]:
        """(reported, planted) of each `expected` value a matrix row gets wrong (the gap to 1e-6)."""
        return {
            name: (row[name], want)
            for name, want in self.expected.items()
            if (row[name] != want if isinstance(want, int) else abs(row[name] - want) > 1e-6)
        }


def generate(
    run_dir: Path,
    messages: int,
    *,
    partitions: int = 3,
    producers: int = 4,
    keys: int = 16,
    rate: float = 100_000.0,
    chunk: int = 1_000_000,
    seed: int = 0,
    rates: Mapping[str, float] = RATES,
    topics: int = 2,
) -> SyntheticRun:
    """Write evidence of one scenario of `messages` messages sent at `rate` msg/s from `t0 = 1.7e9`
    over `topics` topics (key k of each producer to topic k mod topics, as `LoadSpec.topics`), with
    anomalies planted at `rates` (keys of `RATES`; a misdirected record is stored in the next topic,
    which needs `topics` >= 2)."""
    if rates.get("misdirected") and topics < 2:
        raise ValueError("a misdirected record needs another topic: topics >= 2")
    topic_names = scenario_topics(TOPIC, topics)
    t0 = 1.7e9
    fault = (t0 + FAULT_START_FRACTION * messages / rate, t0 + FAULT_START_FRACTION * messages / rate + FAULT_S)
    key_names = [f"p{p}-k{k}" for p in range(producers) for k in range(keys)]
    run = RunDir(run_dir)
    send_log_path = run.scenario(SCENARIO).send_log
    records_path = run.audit.topic_records
    send_log_path.parent.mkdir(parents=True, exist_ok=True)
    records_path.parent.mkdir(parents=True, exist_ok=True)
    expected: Counter[str] = Counter()
    next_offset = np.zeros(topics * partitions, dtype=np.int64)  # per topic and partition
    around_fault = [-np.inf, np.inf]  # last ack before the fault, first ack after its start
    with pq.ParquetWriter(send_log_path, SEND_LOG) as send_log, pq.ParquetWriter(records_path, TOPIC_RECORDS) as records:
        for index, start in enumerate(range(0, messages, chunk)):
            ids = np.arange(start, min(start + chunk, messages), dtype=np.int64)
            rng = np.random.default_rng([seed, index])
            sent, topic = _chunk(ids, messages, partitions, producers, keys, topics, rate, t0, fault, next_offset, rng, rates, expected)
            acks = sent["ack_ts"][sent["state"] == 0]
            around_fault[0] = max(around_fault[0], acks[acks < fault[0]].max(initial=-np.inf))
            around_fault[1] = min(around_fault[1], acks[acks >= fault[0]].min(initial=np.inf))
            send_log.write_table(_send_log_table(sent, key_names, topic_names))
            records.write_table(_records_table(topic, key_names, topic_names, messages, index, expected))
    _write_manifest(run, messages, partitions, producers, fault, topic_names)
    expected["sent"] = expected["planned"] = messages
    expected["records_read"] += int(sum(next_offset))
    # At this rate normal ack gaps are milliseconds, so the longest one spans the fault.
    gap = {"longest_ack_gap_s": around_fault[1] - around_fault[0],
           "ack_gap_fault_overlap_s": min(around_fault[1], fault[1]) - max(around_fault[0], fault[0])}
    return SyntheticRun(run.manifest, records_path, {**expected, **gap})


def _chunk(
    ids: np.ndarray,
    messages: int,
    partitions: int,
    producers: int,
    keys: int,
    topics: int,
    rate: float,
    t0: float,
    fault: tuple[float, float],
    next_offset: np.ndarray,
    rng: np.random.Generator,
    rates: Mapping[str, float],
    expected: Counter[str],
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Send-log columns of `ids` and their topic records; updates `next_offset` and `expected`."""
    n = len(ids)
    producer = ids * producers // messages
    first_of_producer = -(-producer * messages // producers)  # ceil: producer p owns [ceil(p*N/P), ...)
    local = ids - first_of_producer
    key = (producer * keys + local % keys).astype(np.int32)
    seq = local // keys
    expected_partition = (key % partitions).astype(np.int32)
    sent_topic = (local % keys % topics).astype(np.int32)  # key_topic of the producer's key

    draw = rng.random(n)
    edges = np.cumsum([rates[c] for c in ("lost", "acked_duplicated", "failed_clean", "indeterminate", "unknown_absent")])
    cls = np.searchsorted(edges, draw, side="right")  # 0..4 planted, 5 delivered
    lost, dup, failed_clean, indeterminate, unknown = (cls == c for c in range(5))
    plain = cls == 5
    misrouted = plain & (rng.random(n) < rates["misrouted"])
    plain &= ~misrouted
    misdirected = plain & (rng.random(n) < rates.get("misdirected", 0.0))
    plain &= ~misdirected
    stored_topic = np.where(misdirected, (sent_topic + 1) % topics, sent_topic).astype(np.int32)
    # Reordered: m's record moves right after that of the next message of its key (m + keys, same
    # producer, same chunk); neither may take part in another move, so each move makes m late once.
    partner_ok = np.zeros(n, dtype=bool)
    partner_ok[:-keys] = plain[keys:] & (producer[keys:] == producer[:-keys])
    chosen = plain & partner_ok & (rng.random(n) < rates["reordered"])
    neighbour = np.zeros(n, dtype=bool)
    neighbour[keys:] |= chosen[:-keys]
    neighbour[:-keys] |= chosen[keys:]
    reordered = chosen & ~neighbour

    acked = plain | misrouted | misdirected | lost | dup
    failed = failed_clean | indeterminate
    copies = np.where(dup, 2, np.where(lost | failed_clean | unknown, 0, 1))
    partition = np.where(misrouted, (expected_partition + 1) % partitions, expected_partition).astype(np.int32)

    send_ts = t0 + ids / rate
    ack_ts = send_ts + 0.001 + rng.exponential(0.004, n)
    in_fault = (ack_ts >= fault[0]) & (ack_ts < fault[1])
    ack_ts[in_fault] = fault[1] + (ack_ts[in_fault] - fault[0]) * 1e-3
    ack_ts[failed] = send_ts[failed] + 30.0  # the error report, not an ack
    ack_ts[unknown] = np.nan

    # Records in send order per partition; a duplicate follows its first copy, a moved record
    # follows its partner's.
    order_key = ids + np.where(reordered, keys + 0.5, 0.0)
    rec_message = np.repeat(np.arange(n), copies)
    rec_first = np.ones(len(rec_message), dtype=bool)
    rec_first[1:] = rec_message[1:] != rec_message[:-1]
    rec_key = order_key[rec_message] + np.where(rec_first, 0.0, 0.25)
    rec_partition = partition[rec_message]
    rec_place = stored_topic[rec_message] * partitions + rec_partition  # its (topic, partition)
    rec_offset = np.empty(len(rec_message), dtype=np.int64)
    offset = np.full(n, -1, dtype=np.int64)
    for place in range(len(next_offset)):
        in_p = np.flatnonzero(rec_place == place)
        in_p = in_p[np.argsort(rec_key[in_p], kind="stable")]
        rec_offset[in_p] = next_offset[place] + np.arange(len(in_p))
        next_offset[place] += len(in_p)
    offset[rec_message[rec_first]] = rec_offset[rec_first]
    # Absent acked messages were acked at an offset that no longer holds them (e.g. truncated).
    offset[lost] = next_offset[sent_topic[lost] * partitions + partition[lost]]
    mismatched = plain & (rng.random(n) < rates["offset_mismatch"])
    offset[mismatched] += 1_000_000_000

    for name, mask in (("delivered", plain | misrouted | misdirected), ("misdirected", misdirected), ("lost", lost), ("acked_duplicated", dup),
                       ("duplicated", dup), ("duplicates", dup), ("failed_clean", failed_clean),
                       ("indeterminate", indeterminate), ("unknown_absent", unknown), ("misrouted", misrouted),
                       ("offset_mismatch", mismatched), ("reordered", reordered), ("acked", acked),
                       ("failed", failed), ("unknown", unknown)):
        expected[name] += int(mask.sum())

    state = np.where(acked, 0, np.where(failed, 1, 2)).astype(np.int8)
    sent = dict(id=ids, key=key, seq=seq, producer=producer.astype(np.int32), expected_partition=expected_partition,
                send_ts=send_ts, ack_ts=ack_ts, partition=np.where(acked, partition, -1),
                offset=np.where(acked, offset, -1), state=state, topic=sent_topic)
    topic = dict(partition=rec_partition, offset=rec_offset, key=key[rec_message], id=ids[rec_message],
                 seq=seq[rec_message], topic=stored_topic[rec_message])
    return sent, topic


def _dictionary(indices: np.ndarray, values: list[str], mask: np.ndarray | None = None) -> pa.Array:
    return pa.DictionaryArray.from_arrays(pa.array(indices, pa.int32(), mask=mask), pa.array(values)).cast(pa.string())


def _send_log_table(c: dict[str, np.ndarray], key_names: list[str], topic_names: list[str]) -> pa.Table:
    n = len(c["id"])
    failed = c["state"] == 1
    producers = sorted({name.split("-")[0] for name in key_names}, key=lambda p: int(p[1:]))
    return pa.table(
        {
            "id": c["id"],
            "key": _dictionary(c["key"], key_names),
            "seq": c["seq"],
            "producer": _dictionary(c["producer"], producers),
            "expected_partition": c["expected_partition"],
            "txn": pa.nulls(n, pa.int64()),
            "aborted": np.zeros(n, dtype=bool),
            "retriable": pa.array(np.ones(n, dtype=bool), mask=~failed),
            "send_ts": c["send_ts"],
            "ack_ts": pa.array(c["ack_ts"], mask=np.isnan(c["ack_ts"])),
            "partition": pa.array(c["partition"], pa.int32(), mask=c["partition"] < 0),
            "offset": pa.array(c["offset"], mask=c["offset"] < 0),
            "error": _dictionary(np.zeros(n, dtype=np.int32), ["_MSG_TIMED_OUT"], mask=~failed),
            "state": _dictionary(c["state"], ["acked", "failed", "unknown"]),
            "refused": np.zeros(n, dtype=bool),
            "fatal": np.zeros(n, dtype=bool),
            "topic": _dictionary(c["topic"], topic_names),
        },
        schema=SEND_LOG,
    )


def _records_table(
    c: dict[str, np.ndarray], key_names: list[str], topic_names: list[str], messages: int, index: int, expected: Counter[str]
) -> pa.Table:
    """The chunk's records plus planted unexpected and unparseable ones, all of key 0 in partition 0
    of the first topic past every real offset, with increasing seqs above every real one (so none is
    reordered)."""
    extra = UNEXPECTED_PER_CHUNK + UNPARSEABLE_PER_CHUNK
    serial = index * extra + np.arange(extra)
    parsed = np.arange(extra) < UNEXPECTED_PER_CHUNK
    expected["unexpected"] += extra
    expected["records_read"] += extra
    n = len(c["id"]) + extra
    return pa.table(
        {
            "scenario": _dictionary(np.zeros(n, dtype=np.int32), [SCENARIO]),
            "partition": np.concatenate([c["partition"], np.zeros(extra, np.int32)]),
            "offset": np.concatenate([c["offset"], 10**15 + serial]),
            "key": _dictionary(np.concatenate([c["key"], np.zeros(extra, np.int32)]), key_names),
            "id": pa.array(np.concatenate([c["id"], messages + serial]), mask=np.concatenate([np.zeros(len(c["id"]), bool), ~parsed])),
            "seq": pa.array(np.concatenate([c["seq"], 10**12 + serial]), mask=np.concatenate([np.zeros(len(c["id"]), bool), ~parsed])),
            "topic": _dictionary(np.concatenate([c["topic"], np.zeros(extra, np.int32)]), topic_names),
        },
        schema=TOPIC_RECORDS,
    )


def _write_manifest(run: RunDir, messages: int, partitions: int, producers: int, fault: tuple[float, float], topic_names: list[str]) -> None:
    scenario = ScenarioEntry(
        scenario=SCENARIO,
        profile="synthetic",
        fault="leader-kill",
        guarantee="leader-durable",
        partitioner="consistent_random",
        producers=producers,
        partitions=partitions,
        topic=topic_names[0],
        topics=topic_names if len(topic_names) > 1 else [],
        send_log=run.relative(run.scenario(SCENARIO).send_log),
        fault_timeline=[FaultRecord(fault="leader-kill", started=fault[0], ended=fault[1])],
        fault_effective=True,
        planned=messages,
    )
    run.write_manifest(Manifest(run_id=run.run_id, scenarios=[scenario]))
