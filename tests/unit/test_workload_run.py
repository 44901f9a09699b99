"""`run_load` end to end (producer processes, parts, combination, statistics) on librdkafka's
built-in mock cluster (`test.mock.num.brokers`): this checks the bookkeeping and that the
expected partition agrees with librdkafka's own partitioners; the same claims on real Kafka are
in tests/integration/test_workload.py."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from acklab.profiles import Partitioner, ProducerProfile
from acklab.workload.producer import PRODUCERS_DIR, STATS_FILE, LoadSpec, run_load


def mock_profile(partitioner: Partitioner) -> ProducerProfile:
    return ProducerProfile(name="mock", acks="1", partitioner=partitioner, overrides={"test.mock.num.brokers": 3})


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
    send_log = tmp_path / "scenario" / "send_log.parquet"
    result = run_load("", "t", mock_profile(partitioner), spec, send_log, lambda *totals: progress.append(totals))

    rows = pq.read_table(send_log).to_pylist()
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

    stats = pq.read_table(send_log.parent / STATS_FILE)
    assert set(stats.column("producer").to_pylist()) == {f"p{n}" for n in range(spec.producers)}
    assert result.stats["txmsgs"] == result.sent  # a sample after the load has the totals
    leftovers = sorted(p.name for p in (send_log.parent / PRODUCERS_DIR).iterdir())
    assert leftovers == sorted(f"p{n}{suffix}" for n in range(spec.producers) for suffix in (".json", ".log"))
