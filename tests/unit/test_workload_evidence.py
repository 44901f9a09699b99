"""Workload evidence as pure logic: partitioners, record format, send-log states, statistics, progress."""

from __future__ import annotations

import ctypes
import json
import subprocess
import time
import zlib
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from confluent_kafka import KafkaError, Message

from acklab.store.runs import ScenarioDir
from acklab.store.schemas import PRODUCER_STATS, SEND_LOG
from acklab.workload import java_client, stats
from acklab.workload.partitioners import murmur2, partition_for
from acklab.workload.producer import ProgressMeter
from acklab.workload.records import ReportSink, Sender, ValueFormat
from acklab.workload.sendlog import REPORT_COLUMNS, UNREPORTED, EvidenceError, ProducerLog, combine, read_reports
from acklab.workload.spec import LoadSpec
from acklab.workload.worker import PROGRESS_FILE, Worker, WorkerJob


@pytest.mark.parametrize(
    ("key", "java"),
    [  # org.apache.kafka.common.utils.UtilsTest.testMurmur2
        (b"21", -973932308),
        (b"foobar", -790332482),
        (b"a-little-bit-long-string", -985981536),
        (b"a-little-bit-longer-string", -1486304829),
        (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
        (b"abc", 479470107),
    ],
)
def test_murmur2_matches_the_java_client(key: bytes, java: int) -> None:
    assert ctypes.c_int32(murmur2(key)).value == java


def test_partition_for_each_partitioner() -> None:
    assert partition_for(b"p0-k0", 3, "murmur2_random") == 2  # Utils.toPositive(Utils.murmur2(..)) % 3 in Java
    assert partition_for(b"p3-k15", 3, "murmur2_random") == 1
    assert partition_for(b"p0-k0", 7, "consistent_random") == zlib.crc32(b"p0-k0") % 7


def test_values_carry_zero_padded_id_and_seq_and_reports_carry_the_id_back() -> None:
    fmt = ValueFormat.for_ids(999_999, 24)
    values = fmt.values(base_id=500, lo=7, hi=12, keys=3)
    assert values == [b"%06d:%06d:xxxxxxxxxx" % (500 + i, i // 3) for i in range(7, 12)]
    assert ValueFormat.for_ids(9, 4).values(0, 0, 3, 2) == [b"0:0:", b"1:0:", b"2:1:"]
    assert ValueFormat.for_ids(99_999_999, 100).values(99_999_990, 9, 10, 16) == [b"99999999:00000000:" + b"x" * 82]
    with pytest.raises(ValueError, match=r"message_bytes \(13\) must be >= 14"):
        ValueFormat.for_ids(999_999, 13)
    sink = ReportSink(8, fmt)
    for offset, value in enumerate(values):
        sink.on_delivery(None, Message(topic="t", partition=2, offset=40 + offset, value=value))
    assert sink.count == 5 and sink.ids[:5].tolist() == [507, 508, 509, 510, 511]
    assert sink.partitions[:5].tolist() == [2] * 5 and sink.offsets[:5].tolist() == [40, 41, 42, 43, 44]
    assert (sink.failures, sink.overflow) == ([], 0)


def test_a_sender_hands_records_over_in_order_and_names_the_one_that_raised() -> None:
    handed: list[tuple[str, bytes, bytes]] = []
    full = [b"v3"]  # the queue is full once, when v3 is handed over

    def produce(topic: str, value: bytes, key: bytes) -> None:
        if value in full:
            full.remove(value)
            raise BufferError("queue full")
        handed.append((topic, value, key))

    sender = Sender(produce)
    values, keys = [b"v%d" % i for i in range(6)], [b"k%d" % (i % 2) for i in range(6)]
    topics = ["t" if i % 2 else "u" for i in range(6)]
    assert sender.send(values, keys, topics, 1, 3) == 3 and handed == [("t", b"v1", b"k1"), ("u", b"v2", b"k0")]
    with pytest.raises(BufferError):
        sender.send(values, keys, topics, 3, 6)
    assert sender.position == 3 and len(handed) == 2
    assert sender.send(values, keys, topics, 3, 6) == 6 and [value for _, value, _ in handed] == [b"v1", b"v2", b"v3", b"v4", b"v5"]
    with pytest.raises(IndexError):
        sender.send(values, keys[:4], topics, 3, 5)
    with pytest.raises(IndexError):
        sender.send(values, keys, topics[:4], 3, 5)


def test_a_report_sink_keeps_failures_unknowns_and_counts_what_it_cannot_keep(tmp_path: Path) -> None:
    """A failed report keeps its position and error, a partition or offset reported as None is -1, a
    value that carries no id is id -1 (the send log rejects it), and reports beyond the capacity are
    counted, not kept."""
    sink = ReportSink(3, ValueFormat.for_ids(999, 10))
    error = KafkaError(KafkaError._MSG_TIMED_OUT)
    sink.on_delivery(None, Message(topic="t", partition=0, offset=7, value=b"012:000:xx"))
    sink.on_delivery(error, Message(topic="t", value=b"013:001:xx"))
    sink.on_delivery(None, Message(topic="t", partition=1, offset=8, value=b"0x4:000:xx"))
    sink.on_delivery(None, Message(topic="t", partition=1, offset=9, value=b"015:000:xx"))
    assert (sink.count, sink.overflow) == (3, 1)
    assert sink.ids.tolist() == [12, 13, -1] and sink.partitions.tolist() == [0, -1, 1] and sink.offsets.tolist() == [7, -1, 8]
    assert sink.failures == [(1, error)]
    with pytest.raises(EvidenceError, match="never sent"):
        make_log(tmp_path, sent=6).record_deliveries(sink.ids[2:], np.full(1, 2000.0), sink.partitions[2:], sink.offsets[2:], [])
    sink.on_delivery(None, Message(topic="t", value=None))
    sink.on_delivery(None, Message(topic="t", value=b"01"))
    assert sink.overflow == 3
    sink.clear()
    sink.on_delivery(None, Message(topic="t", value=None))
    sink.on_delivery(None, Message(topic="t", value=b"01"))
    assert (sink.count, sink.ids[:2].tolist(), sink.failures) == (2, [-1, -1], [])


def test_load_spec_splits_ids_into_contiguous_ranges() -> None:
    assert LoadSpec(messages=10, producers=3).ranges() == [(0, 3), (3, 3), (6, 4)]
    assert LoadSpec(messages=1).ranges() == [(0, 1)]


def make_log(tmp_path: Path, sent: int, *, transactional: bool = False) -> ProducerLog:
    log = ProducerLog(tmp_path / "p1.parquet", 1, 100, 10, 2, [0, 2], transactional=transactional)
    log.sent = sent
    log.send_ts[:sent] = 1000.0 + np.arange(sent)
    return log


def report(log: ProducerLog, ids: list[int], errors: dict[int, KafkaError] | None = None, at: float = 2000.0) -> None:
    """Delivery reports for `ids` through a `ReportSink` (partition 1, offset = id; neither for the
    ones failed by `errors`), served at `at`."""
    errors = errors or {}
    fmt = ValueFormat.for_ids(999, 8)
    sink = ReportSink(len(ids), fmt)
    for i in ids:
        value = fmt.values(i, 0, 1, 1)[0]
        sink.on_delivery(errors.get(i), Message(topic="t", value=value, **({} if i in errors else {"partition": 1, "offset": i})))
    n = sink.count
    log.record_deliveries(sink.ids[:n], np.full(n, at), sink.partitions[:n], sink.offsets[:n], sink.failures)


def test_every_sent_message_has_exactly_one_row_with_a_final_state(tmp_path: Path) -> None:
    log = make_log(tmp_path, sent=6)
    report(log, [100, 101, 103], {101: KafkaError(KafkaError.NOT_ENOUGH_REPLICAS)})
    report(log, [104], {104: KafkaError(KafkaError._PURGE_QUEUE)})
    log.write(6)
    rows = pq.read_table(log.path).to_pylist()
    assert pq.read_schema(log.path) == SEND_LOG
    assert [r["id"] for r in rows] == [100, 101, 102, 103, 104, 105]
    assert [r["state"] for r in rows] == ["acked", "failed", "unknown", "acked", "failed", "unknown"]
    assert [r["key"] for r in rows] == ["p1-k0", "p1-k1"] * 3
    assert [r["seq"] for r in rows] == [0, 0, 1, 1, 2, 2]
    assert {r["producer"] for r in rows} == {"p1"}
    assert [r["expected_partition"] for r in rows] == [0, 2] * 3
    assert [r["error"] for r in rows] == [None, "NOT_ENOUGH_REPLICAS", None, None, "_PURGE_QUEUE", None]
    assert [r["retriable"] for r in rows] == [None, True, None, None, False, None]
    assert [r["offset"] for r in rows] == [100, None, None, 103, None, None]
    assert [r["partition"] for r in rows] == [1, None, None, 1, None, None]
    assert [r["ack_ts"] for r in rows] == [2000.0, 2000.0, None, 2000.0, 2000.0, None]
    assert [r["send_ts"] for r in rows] == [1000.0 + i for i in range(6)]
    assert {(r["txn"], r["aborted"], r["refused"], r["fatal"]) for r in rows} == {(None, False, False, False)}
    assert log.summary(6) == {
        "planned": 6, "sent": 6, "acked": 2, "failed": 2, "unknown": 2, "unsent": 0, "aborted": 0, "refused": 0,
        "fatal": 0, "errors": {"NOT_ENOUGH_REPLICAS": 1, "_PURGE_QUEUE": 1},
    }


def test_planned_messages_never_sent_or_refused_have_rows_too(tmp_path: Path) -> None:
    """A load that stopped early still writes a row for every planned message: the ones never handed
    to produce() are `unsent`; one produce() refused is a failed write of its own."""
    log = make_log(tmp_path, sent=3)
    log.refuse(1, KafkaError(KafkaError.MSG_SIZE_TOO_LARGE), 1001.5)
    report(log, [100, 102])
    log.write(10)
    rows = pq.read_table(log.path).to_pylist()
    assert [r["id"] for r in rows] == list(range(100, 110))
    assert [r["state"] for r in rows] == ["acked", "failed", "acked"] + ["unsent"] * 7
    assert [r["refused"] for r in rows] == [False, True] + [False] * 8
    assert rows[1]["error"] == "MSG_SIZE_TOO_LARGE" and rows[1]["send_ts"] == 1001.5 and rows[1]["ack_ts"] is None
    assert {(r["send_ts"], r["error"]) for r in rows[3:]} == {(None, None)}
    assert log.summary(10) == {
        "planned": 10, "sent": 3, "acked": 2, "failed": 1, "unknown": 0, "unsent": 7, "aborted": 0, "refused": 1,
        "fatal": 0, "errors": {"MSG_SIZE_TOO_LARGE": 1},
    }
    with pytest.raises(EvidenceError, match="a report for a refused message"):
        report(log, [101])
    with pytest.raises(EvidenceError, match="2 planned messages, but 3 sent"):
        log.write(2)


def test_a_fatal_error_fails_every_message_it_left_undelivered(tmp_path: Path) -> None:
    """Acked before the fatal error: acked. Failed before it: its own error. Failed after it, never
    reported, or never sent: failed by the fatal error."""
    log = make_log(tmp_path, sent=5)
    report(log, [100])  # acked at 2000.0
    report(log, [101], {101: KafkaError(KafkaError.NOT_ENOUGH_REPLICAS)}, at=1500.0)
    log.fail_fatally(KafkaError(KafkaError.OUT_OF_ORDER_SEQUENCE_NUMBER), 1900.0)
    report(log, [102], {102: KafkaError(KafkaError._PURGE_QUEUE)}, at=1950.0)
    log.write(8)  # 103, 104 never reported; 105-107 never sent
    rows = pq.read_table(log.path).to_pylist()
    assert [r["state"] for r in rows] == ["acked"] + ["failed"] * 7
    assert [r["fatal"] for r in rows] == [False, False] + [True] * 6
    assert [r["error"] for r in rows] == [None, "NOT_ENOUGH_REPLICAS", "_PURGE_QUEUE"] + ["OUT_OF_ORDER_SEQUENCE_NUMBER"] * 5
    summary = log.summary(8)
    assert (summary["sent"], summary["unsent"], summary["failed"], summary["fatal"]) == (8, 0, 7, 6)


@pytest.mark.parametrize(
    ("first", "second", "message"),
    [([100], [100], "more than one delivery report"), ([100, 100], [], "more than one delivery report"), ([106], [], "never sent")],
)
def test_contradictory_delivery_reports_are_an_error(tmp_path: Path, first: list[int], second: list[int], message: str) -> None:
    log = make_log(tmp_path, sent=6)
    with pytest.raises(EvidenceError, match=message):
        report(log, first)
        report(log, second)


def test_transactions_record_index_abort_and_unknown_outcome(tmp_path: Path) -> None:
    log = make_log(tmp_path, sent=0, transactional=True)
    for outcome, size in (("committed", 2), ("aborted", 2), ("unknown", 1), (None, 1)):
        log.begin_transaction()
        log.sent += size
        if outcome:
            log.end_transaction(outcome)
    report(log, [100, 101, 102, 104, 105])
    report(log, [103], {103: KafkaError(KafkaError._PURGE_INFLIGHT)})
    log.write(6)
    rows = pq.read_table(log.path).to_pylist()
    assert [r["txn"] for r in rows] == [0, 0, 1, 1, 2, 3]
    assert [r["aborted"] for r in rows] == [False, False, True, True, False, False]
    # acked in a transaction whose outcome is unknown (or never ended): the write may or may not count
    assert [r["state"] for r in rows] == ["acked", "acked", "acked", "failed", "unknown", "unknown"]
    assert log.summary(6)["aborted"] == 2


def test_combine_joins_parts_in_order_atomically(tmp_path: Path) -> None:
    parts = []
    for producer, first_id in ((0, 0), (1, 3)):
        log = ProducerLog(tmp_path / f"p{producer}.parquet", producer, first_id, 3, 1, [0])
        log.sent = 3
        log.write(3)
        parts.append(log.path)
    assert combine(parts, tmp_path / "send_log.parquet") == 6
    table = pq.read_table(tmp_path / "send_log.parquet")
    assert table.column("id").to_pylist() == list(range(6))
    assert table.column("producer").to_pylist() == ["p0"] * 3 + ["p1"] * 3
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p0.parquet", "p1.parquet", "send_log.parquet"]


def test_statistics_rows_and_summary() -> None:
    def sample(txmsgs: int, retries: int, waitresp: int) -> str:
        broker = {"txretries": retries, "txerrs": 0, "req_timeouts": 1, "disconnects": 0, "outbuf_cnt": 0,
                  "outbuf_msg_cnt": 5, "waitresp_cnt": 2, "waitresp_msg_cnt": waitresp, "rtt": {"avg": 2_500, "max": 9_000}}
        slow = {**broker, "txretries": 0, "rtt": {"avg": 40_000, "max": 31_000_000}}
        return json.dumps({"txmsgs": txmsgs, "msg_cnt": 7, "brokers": {"a": broker, "b": slow}})

    rows = [stats.stats_row("p0", sample(10, 1, 300)), stats.stats_row("p0", sample(20, 4, 100)), stats.stats_row("p1", sample(5, 2, 50))]
    assert (rows[1]["txretries"], rows[1]["req_timeouts"], rows[1]["waitresp_msg_cnt"]) == (4, 2, 200)
    summary = stats.summarize(pa.Table.from_pylist(rows, schema=PRODUCER_STATS))
    assert summary["samples"] == 3 and summary["txmsgs"] == 25 and summary["txretries"] == 6
    assert summary["max_waitresp_msg_cnt"] == 600 and summary["max_outbuf_msg_cnt"] == 10
    assert (summary["max_request_latency_avg_ms"], summary["max_request_latency_max_ms"]) == (40, 31_000)  # the slowest broker, in ms
    assert stats.summarize(PRODUCER_STATS.empty_table()) == {"samples": 0}


def test_progress_meter_reports_rates() -> None:
    lines: list[str] = []
    meter = ProgressMeter(lines.append)
    meter(1000, 900, 0)
    meter(3000, 2900, 1)
    assert lines[1].startswith("sent 3000 (") and "acked 2900 (" in lines[1] and lines[1].endswith("failed 1")


def test_more_delivery_reports_than_messages_sent_is_an_evidence_error(tmp_path: Path) -> None:
    """A producer's report sink holds one report per planned message; one more is not dropped silently."""
    job = WorkerJob(
        producer=0, producers=1, bootstrap_servers="127.0.0.1:9", topic="t", config={}, partitioner="consistent_random",
        first_id=0, count=1, max_id=0, message_bytes=100, keys=1, rate=None, duration_s=None, flush_timeout_s=1.0,
        scenario_dir=tmp_path, partitions=1,
    )
    progress = ScenarioDir(tmp_path).producer_file("", PROGRESS_FILE)
    progress.parent.mkdir(parents=True, exist_ok=True)
    progress.write_bytes(bytes(3 * 8))
    worker = Worker(job)
    worker.log.sent = 1
    report = Message(topic="t", partition=0, offset=0, value=worker.format.values(0, 0, 1, 1)[0])
    worker.reports.on_delivery(None, report)
    worker.reports.on_delivery(None, report)
    with pytest.raises(EvidenceError, match="p0: 1 delivery reports more than messages sent"):
        worker._fold()


# Writes a SendLog of four messages (acked, refused, failed without a partition, never reported) with the
# Java driver's own writer, after printing its declared layout, one "name dtype" line per column.
LAYOUT_PROBE = """package dev.acklab;

public final class LayoutProbe {
    public static void main(String[] args) throws Exception {
        for (SendLog.Column column : SendLog.Column.values()) {
            System.out.println(column.field + " " + column.dtype);
        }
        SendLog log = new SendLog(7, 1000L, 4);
        log.sendTs[0] = 1.5;
        log.sendTs[1] = 2.5;
        log.sendTs[2] = 3.5;
        log.report(0, 2, (1L << 40) + 3, SendLog.NO_ERROR, false);
        log.report(1, 1, -1L, 3, true);
        log.report(2, -1, -1L, 5, false);
        log.write(java.nio.file.Paths.get(args[0]));
    }
}
"""


def test_the_java_drivers_send_log_file_is_read_as_it_is_written(tmp_path: Path) -> None:
    """One layout on both sides: the driver's SendLog (compiled alone, it needs only java.*) declares
    REPORT_COLUMNS, and a file its writer wrote reads back through `read_reports` value for value."""
    probe = tmp_path / "LayoutProbe.java"
    probe.write_text(LAYOUT_PROBE)
    sources = [java_client.SOURCE_DIR / "SendLog.java", java_client.SOURCE_DIR / "Clock.java", probe]
    subprocess.run(["javac", "-nowarn", "-d", str(tmp_path / "classes"), *map(str, sources)], check=True, capture_output=True)
    before = time.time()
    out = tmp_path / "p7.java.bin"
    done = subprocess.run(["java", "-cp", str(tmp_path / "classes"), "dev.acklab.LayoutProbe", str(out)], check=True, capture_output=True, text=True)
    assert tuple(tuple(line.split()) for line in done.stdout.splitlines()) == REPORT_COLUMNS
    reports = read_reports(out, 4)
    assert [name for name, _ in REPORT_COLUMNS] == list(reports)
    np.testing.assert_array_equal(reports["send_ts"], [1.5, 2.5, 3.5, np.nan])
    assert (before - 5 < reports["ack_ts"][:3]).all() and (reports["ack_ts"][:3] < time.time()).all() and np.isnan(reports["ack_ts"][3])
    assert reports["partition"].tolist() == [2, 1, -1, -1]
    assert reports["offset"].tolist() == [(1 << 40) + 3, -1, -1, -1]
    assert reports["error"].tolist() == [0, 3, 5, UNREPORTED]
    assert reports["refused"].tolist() == [0, 1, 0, 0]
    log = ProducerLog(tmp_path / "p7.parquet", 7, 1000, 4, 2, [0, 1])
    log.adopt(3, reports, {3: "RecordTooLargeException", 5: "NotLeaderOrFollowerException"})
    summary = log.summary(4)
    assert (summary["acked"], summary["failed"], summary["unknown"], summary["unsent"], summary["refused"]) == (1, 2, 0, 1, 1)
    with pytest.raises(EvidenceError, match="the reports of 5 messages take"):
        read_reports(out, 5)
