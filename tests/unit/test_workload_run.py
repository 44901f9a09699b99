"""`run_load` end to end (producer processes, parts, combination, statistics) on librdkafka's
built-in mock cluster (`test.mock.num.brokers`): this checks the bookkeeping and that the
expected partition agrees with librdkafka's own partitioners; the same claims on real Kafka are
in tests/integration/test_workload.py."""

from __future__ import annotations

import signal
import threading
from pathlib import Path

import psutil
import pyarrow.parquet as pq
import pytest

from acklab.store.runs import ScenarioDir
from acklab.workload.forkserver import ForkServer
from acklab.workload.producer import run_load
from acklab.workload.profiles import Partitioner, ProducerProfile
from acklab.workload.spec import LoadSpec


def mock_profile(partitioner: Partitioner) -> ProducerProfile:
    # librdkafka's mock cluster is refused from users (`acklab.base.property_policy`); only tests set it, unvalidated
    return ProducerProfile(name="mock", acks="1", partitioner=partitioner).model_copy(update={"overrides": {"test.mock.num.brokers": 3}})


@pytest.mark.parametrize(
    ("partitioner", "spec"),
    [
        ("consistent_random", LoadSpec(messages=20000, producers=2, keys=5)),
        ("murmur2_random", LoadSpec(messages=100_000, duration_s=1.5, rate=2000, keys=3)),
    ],
)
def test_every_message_is_logged_once_with_its_producer_key_and_partition(
    tmp_path: Path, partitioner: Partitioner, spec: LoadSpec
) -> None:
    progress: list[tuple[int, int, int]] = []
    files = ScenarioDir(tmp_path / "scenario")
    result = run_load("", "t", mock_profile(partitioner), spec, files, lambda *totals: progress.append(totals))

    rows = pq.read_table(files.send_log).to_pylist()
    assert len(rows) == result.sent == result.acked + result.failed + result.unknown
    assert progress[0] == (0, 0, 0) and progress[-1] == (result.sent, result.acked, result.failed)
    if spec.duration_s:  # stopped by the clock at about rate x duration, long before the cap
        assert 1000 < result.sent < 6000, result
    else:
        assert result.sent == spec.messages
    assert result.acked == result.sent and {r["state"] for r in rows} == {"acked"}
    for n, (first_id, count) in enumerate(spec.ranges()):
        own = [r for r in rows if r["producer"] == f"p{n}"]
        assert [r["id"] for r in own] == list(range(first_id, first_id + len(own))) and len(own) <= count
        assert [r["key"] for r in own] == [f"p{n}-k{i % spec.keys}" for i in range(len(own))]
        assert [r["seq"] for r in own] == [i // spec.keys for i in range(len(own))]
    assert all(r["partition"] == r["expected_partition"] for r in rows)
    assert len({r["partition"] for r in rows}) > 1
    assert all(r["send_ts"] <= r["ack_ts"] and r["offset"] >= 0 for r in rows)

    stats = pq.read_table(files.stats)
    assert set(stats.column("producer").to_pylist()) == {f"p{n}" for n in range(spec.producers)}
    assert result.stats["txmsgs"] == result.sent  # a sample after the load has the totals
    leftovers = sorted(p.name for p in files.producers.iterdir())
    assert leftovers == sorted(f"p{n}{suffix}" for n in range(spec.producers) for suffix in (".json", ".log"))


def test_messages_produce_refuses_are_failed_writes_and_the_load_goes_on(tmp_path: Path) -> None:
    """librdkafka refuses values above message.max.bytes at produce(): each is a failed, refused row."""
    profile = ProducerProfile(name="mock", acks="1").model_copy(update={"overrides": {"test.mock.num.brokers": 3, "message.max.bytes": 1000}})
    files = ScenarioDir(tmp_path)
    result = run_load("", "t", profile, LoadSpec(messages=300, message_bytes=2000), files)

    assert (result.planned, result.sent, result.failed, result.refused, result.acked, result.unsent) == (300, 300, 300, 300, 0, 0)
    assert result.errors == {"MSG_SIZE_TOO_LARGE": 300}
    rows = pq.read_table(files.send_log).to_pylist()
    assert {(r["state"], r["refused"], r["error"], r["ack_ts"]) for r in rows} == {("failed", True, "MSG_SIZE_TOO_LARGE", None)}


def test_a_load_stopped_early_logs_its_unsent_messages_and_why(tmp_path: Path) -> None:
    """SIGTERM to the producer processes mid-load: every planned message still has a row."""

    def terminate_producers() -> None:
        for child in psutil.Process(ForkServer.shared().pid).children():
            child.send_signal(signal.SIGTERM)

    files = ScenarioDir(tmp_path)
    spec = LoadSpec(messages=20_000, rate=2000, producers=2)
    result = run_load("", "t", mock_profile("consistent_random"), spec, files, None, lambda: threading.Timer(1.0, terminate_producers).start())

    rows = pq.read_table(files.send_log).to_pylist()
    assert len(rows) == result.planned == 20_000
    assert 0 < result.sent < 10_000 and result.unsent == 20_000 - result.sent
    assert result.stop_reasons == {"p0": "stopped by SIGTERM", "p1": "stopped by SIGTERM"}
    assert sum(r["state"] == "unsent" for r in rows) == result.unsent
    assert {r["send_ts"] for r in rows if r["state"] == "unsent"} == {None}


def test_a_load_given_the_partition_count_starts_without_any_broker(tmp_path: Path) -> None:
    """A load that starts while no broker answers (a fault before the load): the producer is ready
    without metadata, nothing is transmitted, every record expires in the client."""
    import socket

    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    profile = ProducerProfile(name="down", acks="1", request_timeout_ms=500, delivery_timeout_ms=1000)
    result = run_load(f"127.0.0.1:{port}", "t", profile, LoadSpec(messages=20, keys=4), ScenarioDir(tmp_path / "s"), partitions=3)
    assert (result.sent, result.failed, result.acked, result.unknown) == (20, 20, 0, 0)
    assert result.errors == {"_MSG_TIMED_OUT": 20}
    assert (result.stats["txmsgs"], result.stats["txretries"]) == (0, 0)
