"""Pipeline processors on a real cluster: each style under a processor kill and a zombie, counted
from the committed output (read_committed) against the acked input."""

from __future__ import annotations

import os
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from acklab.base.paths import runs_dir
from acklab.cluster.cluster import Cluster
from acklab.cluster.topology import load_topology
from acklab.workload import families
from acklab.workload.processing import ProcessorJob, parse_output
from acklab.workload.processors import ProcessorGroup

pytestmark = pytest.mark.integration

PARTITIONS = 3


@pytest.fixture(scope="module")
def cluster() -> Cluster:
    root = runs_dir() / "processors-test" / "cluster"
    cluster = Cluster.provision(load_topology("three-brokers"), root, owner_pid=os.getpid())
    try:
        yield cluster
    finally:
        cluster.teardown()


def _write(bootstrap: str, topic: str, messages: int, rate: float) -> list[tuple[int, int, int]]:
    """Idempotent writes of ids 0..messages-1 at `rate`/s; the acked (id, partition, offset)."""
    acked: list[tuple[int, int, int]] = []
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})

    def report(err, msg) -> None:  # noqa: ANN001
        if err is None:
            acked.append((int(msg.value()[:6]), msg.partition(), msg.offset()))

    started = time.monotonic()
    for n in range(messages):
        producer.produce(topic, b"%06d:%06d:xxxxxxxxxxxx" % (n, 0), b"p0-k%d" % (n % 16), on_delivery=report)
        producer.poll(0)
        if (ahead := n / rate - (time.monotonic() - started)) > 0:
            time.sleep(ahead)
    producer.flush(60)
    return acked


def _outputs(bootstrap: str, topic: str) -> list[tuple[int, ...]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "audit", "isolation.level": "read_committed", "enable.partition.eof": True})
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    ended: set[int] = set()
    found: list[tuple[int, ...]] = []
    deadline = time.monotonic() + 60
    while len(ended) < PARTITIONS and time.monotonic() < deadline:
        for message in consumer.consume(1000, 1.0):
            if message.error():
                ended.add(message.partition())
            else:
                parsed = parse_output(message.value())
                assert parsed is not None, message.value()
                found.append(parsed)
    consumer.close()
    assert len(ended) == PARTITIONS, "output topic not read to its end"
    return found


def _run(cluster: Cluster, tmp_path: Path, style: str, fault: str, family: str = "librdkafka") -> dict:
    """Write 4,000 records at 800/s through two processor instances of `style`; `fault` (none,
    processor-kill, zombie) hits instance 0 at 1.5 s. Returns the counts."""
    name = f"{style}-{fault}-{family}"
    topic_in, topic_out = f"in-{name}", f"out-{name}"
    with cluster.admin() as admin:
        admin.create_topic(topic_in, PARTITIONS, 3)
        admin.create_topic(topic_out, PARTITIONS, 3)
        admin.wait_in_sync(topic_in, 30)
        admin.wait_in_sync(topic_out, 30)
    bootstrap = cluster.bootstrap_servers
    client_family = families.named(family)
    template = ProcessorJob(
        bootstrap_servers=bootstrap, input_topic=topic_in, output_topic=topic_out, group_id=f"g-{name}", instance=0, style=style, log="-",
    )
    group = ProcessorGroup(client_family, client_family.client(None), tmp_path / name, template, 2)
    intervention: dict = {}
    try:
        group.start()
        group.wait_assigned(PARTITIONS, 60)
        acked: list = []
        writer = threading.Thread(target=lambda: acked.extend(_write(bootstrap, topic_in, 4000, 800.0)))
        writer.start()
        time.sleep(1.5)
        if fault != "none":
            point = group.arm(0, 30)
            intervention = {"kind": fault, **point}
            if fault == "processor-kill":
                assert group.kill(0) == -9
                time.sleep(1.0)
                group.restart(0)
            else:
                deadline = time.monotonic() + 40
                while (moved := group.moved_on(0, point["t"], point["generation"])) is None and time.monotonic() < deadline:
                    time.sleep(0.2)
                assert moved is not None, "the group did not move on while instance 0 was paused"
                intervention["moved_on"] = moved
                group.resume(0)
        writer.join()
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "ends"})
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic_in, p), 10)[1] for p in range(PARTITIONS)}
        consumer.close()
        committed = group.drain(bootstrap, ends, 90)
        statuses = group.stop()
        events = group.events()
    finally:
        group.close()
    outputs = _outputs(bootstrap, topic_out)
    copies = Counter(o[0] for o in outputs)
    ids = {a[0] for a in acked}
    return {
        "acked": len(ids), "committed": committed, "ends": ends, "statuses": statuses, "events": events, "intervention": intervention,
        "lost": sum(1 for i in ids if copies[i] == 0), "duplicated": sum(1 for i in ids if copies[i] > 1),
        "duplicates": sum(c - 1 for c in copies.values() if c > 1), "outputs": outputs,
    }


def _batch_count(result: dict) -> int:
    point = result["intervention"]
    events = result["events"][(0, point["incarnation"])]
    return next(e["count"] for e in events if e["ev"] == "batch" and e["txn"] == point["txn"])


@pytest.mark.parametrize("family", ["librdkafka", "java"])
def test_eos_under_processor_kill_neither_loses_nor_duplicates(cluster: Cluster, tmp_path: Path, family: str) -> None:
    result = _run(cluster, tmp_path, "eos", "processor-kill", family)
    assert result["committed"] == result["ends"]
    assert result["acked"] == 4000
    assert (result["lost"], result["duplicated"]) == (0, 0)
    assert (1, 0) in result["events"] and any(e["ev"] == "committed" for e in result["events"][(1, 0)])


@pytest.mark.parametrize("family", ["librdkafka", "java"])
def test_eos_zombie_is_fenced(cluster: Cluster, tmp_path: Path, family: str) -> None:
    result = _run(cluster, tmp_path, "eos", "zombie", family)
    point = result["intervention"]
    assert result["intervention"]["moved_on"]["generation"] > point["generation"]
    zombie = [o for o in result["outputs"] if (o[2], o[3], o[4]) == (0, point["incarnation"], point["generation"]) and o[7] >= point["txn"]]
    assert zombie == []
    assert (result["lost"], result["duplicated"]) == (0, 0)


def test_at_least_once_under_processor_kill_duplicates_the_killed_batch(cluster: Cluster, tmp_path: Path) -> None:
    result = _run(cluster, tmp_path, "at-least-once", "processor-kill")
    assert result["lost"] == 0
    assert result["duplicates"] == _batch_count(result) > 0


def test_eos_naive_under_processor_kill_duplicates_exactly_the_reprocessed_batch(cluster: Cluster, tmp_path: Path) -> None:
    result = _run(cluster, tmp_path, "eos-naive", "processor-kill")
    assert result["lost"] == 0
    assert result["duplicates"] == _batch_count(result) > 0


def test_at_most_once_under_processor_kill_loses_the_killed_batch(cluster: Cluster, tmp_path: Path) -> None:
    result = _run(cluster, tmp_path, "at-most-once", "processor-kill")
    assert result["duplicated"] == 0
    assert result["lost"] == _batch_count(result) > 0
