"""The full-speed workload on a real 3-broker cluster: keyed messages land in the partition the
profile's partitioner assigns; aborted transactions are recorded and invisible to read_committed
readers; under a leader SIGKILL every message sent still has exactly one row with a final state; a
leader change during a baseline group makes its evidence incomplete, and the group runs it again."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from confluent_kafka import Consumer, TopicPartition

from acklab.base.paths import runs_dir
from acklab.cluster.cluster import Cluster
from acklab.cluster.topology import load_topology
from acklab.nemesis.faults import PLANTING
from acklab.orchestration.execution import run_group
from acklab.plan.planner import make_plan
from acklab.store.runs import RunDir, ScenarioDir
from acklab.workload.partitioners import partition_for
from acklab.workload.producer import run_load
from acklab.workload.profiles import ProducerProfile, get_profile
from acklab.workload.spec import LoadSpec

from .helpers import assert_nothing_left

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    root = runs_dir() / "workload" / "cluster"
    cluster = Cluster.provision(load_topology("three-brokers"), root, owner_pid=os.getpid())
    try:
        yield cluster
    finally:
        cluster.teardown()
    assert_nothing_left(root)


def topic(cluster: Cluster, name: str) -> str:
    cluster.create_topic(name, 3, 3)
    return name


def read_topic(cluster: Cluster, name: str, isolation: str, acked: list[dict] | None = None) -> list[tuple[int, int, str]]:
    """(id, partition, key) of every record, read from the beginning to the end of each partition.

    With `acked` (send-log rows), each partition is read once its high watermark has passed the
    highest offset acked there: acks=1 acks a record before the followers copy it, and consumers see
    it only from then on."""
    consumer = Consumer(
        {"bootstrap.servers": cluster.bootstrap_servers, "group.id": f"check-{isolation}", "isolation.level": isolation,
         "enable.partition.eof": True, "auto.offset.reset": "earliest", "enable.auto.commit": False}
    )
    ends: dict[int, int] = {}
    for row in acked or []:
        if row["state"] == "acked":
            ends[row["partition"]] = max(ends.get(row["partition"], 0), row["offset"] + 1)
    deadline = time.monotonic() + 30
    while any(consumer.get_watermark_offsets(TopicPartition(name, p), 5.0)[1] < end for p, end in ends.items()):
        assert time.monotonic() < deadline, f"high watermarks of {name} below the acked offsets {ends}"
        time.sleep(0.1)
    consumer.assign([TopicPartition(name, p, 0) for p in range(3)])
    records, at_end, deadline = [], set(), time.monotonic() + 60
    while len(at_end) < 3 and time.monotonic() < deadline:
        for message in consumer.consume(10000, 1.0):
            if message.error():
                at_end.add(message.partition())
            else:
                records.append((int(message.value().split(b":", 1)[0]), message.partition(), message.key().decode()))
    consumer.close()
    assert len(at_end) == 3, "topic not read to its end"
    return records


@pytest.mark.parametrize("partitioner", ["consistent_random", "murmur2_random"])
def test_acked_partition_is_the_partition_of_the_key(cluster: Cluster, tmp_path: Path, partitioner: str) -> None:
    profile = get_profile("leader-ack").model_copy(update={"partitioner": partitioner})
    name = topic(cluster, f"partitioner-{partitioner}")
    result = run_load(cluster.bootstrap_servers, name, profile, LoadSpec(messages=20000, producers=2, keys=8), ScenarioDir(tmp_path))
    log = pq.read_table(ScenarioDir(tmp_path).send_log).to_pylist()
    assert result.acked == result.sent == len(log) == 20000
    assert all(row["partition"] == row["expected_partition"] for row in log)
    records = read_topic(cluster, name, "read_committed", log)
    assert sorted(record[0] for record in records) == list(range(20000))
    assert all(p == partition_for(key.encode(), 3, partitioner) for _, p, key in records)  # type: ignore[arg-type]
    assert {row["producer"] for row in log} == {"p0", "p1"}


def test_aborted_transactions_are_recorded_and_invisible_to_read_committed(cluster: Cluster, tmp_path: Path) -> None:
    base = get_profile("transactional")
    profile = ProducerProfile.model_validate({**base.model_dump(), "transaction": {"records_per_txn": 250, "abort_ratio": 0.25}})
    name = topic(cluster, "transactions")
    result = run_load(cluster.bootstrap_servers, name, profile, LoadSpec(messages=8000, producers=2), ScenarioDir(tmp_path))
    log = pq.read_table(ScenarioDir(tmp_path).send_log).to_pylist()
    assert result.acked == result.sent == 8000 and result.aborted == 2000
    for producer in ("p0", "p1"):  # 16 transactions of 250 each; every fourth one aborted
        own = [row for row in log if row["producer"] == producer]
        assert [row["txn"] for row in own] == [i // 250 for i in range(4000)]
        assert {row["txn"] for row in own if row["aborted"]} == {3, 7, 11, 15}
    committed = sorted(row["id"] for row in log if not row["aborted"])
    aborted = {row["id"] for row in log if row["aborted"]}
    assert sorted(r[0] for r in read_topic(cluster, name, "read_committed")) == committed
    assert aborted <= {r[0] for r in read_topic(cluster, name, "read_uncommitted")}  # written, then aborted


def test_every_message_has_one_final_state_under_a_leader_kill(cluster: Cluster, tmp_path: Path) -> None:
    base = get_profile("leader-ack")
    profile = base.model_copy(update={"request_timeout_ms": 1000, "delivery_timeout_ms": 2500, "linger_ms": 5})
    name = topic(cluster, "leader-kill")
    leader = cluster.partition(name, 0).leader

    def kill_then_restart() -> None:
        time.sleep(1.0)
        cluster.kill(leader)
        time.sleep(6)
        cluster.start(leader)

    nemesis = threading.Thread(target=kill_then_restart)
    result = run_load(
        cluster.bootstrap_servers, name, profile, LoadSpec(messages=200_000, rate=20000, producers=2), ScenarioDir(tmp_path),
        on_start=nemesis.start,
    )
    nemesis.join()
    cluster.wait_healthy(120)
    log = pq.read_table(ScenarioDir(tmp_path).send_log).to_pandas()
    assert sorted(log["id"]) == list(range(result.sent)) and result.sent == 200_000
    assert set(log["state"]) <= {"acked", "failed", "unknown"}
    assert result.failed > 0, "the kill should fail deliveries to the dead leader (delivery timeout 2.5 s)"
    acked, failed = log[log.state == "acked"], log[log.state == "failed"]
    assert acked["offset"].notna().all() and acked["partition"].notna().all() and acked["ack_ts"].notna().all()
    assert failed["error"].notna().all() and failed["retriable"].notna().all() and failed["offset"].isna().all()
    assert (failed["error"] == "_MSG_TIMED_OUT").any() and failed.loc[failed.error == "_MSG_TIMED_OUT", "retriable"].all()
    assert (result.acked, result.failed, result.unknown) == tuple(int((log.state == s).sum()) for s in ("acked", "failed", "unknown"))
    stats = pq.read_table(ScenarioDir(tmp_path).stats)
    assert stats.num_rows >= 4 and result.stats["req_timeouts"] + result.stats["txretries"] + result.stats["disconnects"] > 0


def test_a_leader_change_in_a_baseline_group_makes_its_evidence_incomplete_and_the_group_runs_again(cluster: Cluster) -> None:
    """A leader that moves while a group whose schedule moves none runs its loads (killed here by the
    test, as a broker fenced on a saturated machine loses its leaderships) is reported as unplanned,
    not blamed on the baseline; the same group undisturbed is complete. Run again (the default), the
    undisturbed second run is the entry, the first kept beside it."""
    plan = make_plan({"profiles": ["leader-ack"], "faults": ["none"], "messages": 10_000, "rate": 2000})
    calm = run_group(cluster, plan, len(PLANTING), RunDir.create())  # the negative controls come first
    assert calm[0].evidence_complete and calm[0].incomplete_reason is None

    run_dir = RunDir.create()
    name = f"acklab-{run_dir.run_id}-{plan.checked[0].name}"
    killed: list[int] = []

    def kill_a_leader_mid_load() -> None:
        deadline = time.monotonic() + 60
        with cluster.admin() as admin:
            while name not in admin.topics() and time.monotonic() < deadline:
                time.sleep(0.1)
        time.sleep(2.5)  # producers started (~1 s), then part of the load
        killed.append(cluster.partition(name, 0).leader)
        cluster.kill(killed[0])
        time.sleep(3)
        cluster.start(killed[0])

    outsider = threading.Thread(target=kill_a_leader_mid_load)
    outsider.start()
    try:
        entry = run_group(cluster, plan, len(PLANTING), run_dir)[0]
    finally:
        outsider.join()
    assert entry.evidence_complete and entry.topic == f"{name}-attempt-2", entry
    (first,) = entry.earlier_attempts
    assert first.topic == name and first.evidence == f"scenarios/{plan.checked[0].name}.attempt-1"
    assert first.incomplete_reason.startswith(f"unplanned leader change during the load ({name}[")
    assert f"leader {killed[0]} -> " in first.incomplete_reason
    assert (run_dir.root / first.evidence / "send_log.parquet").exists() and run_dir.read_entry(entry.scenario) == entry


def test_a_full_queue_holds_the_load_back_without_losing_a_row(cluster: Cluster, tmp_path: Path) -> None:
    """A producer queue of 16 messages is full again and again at full speed: every message is still
    sent once, acked, and recorded once, with a send time no later than its ack."""
    profile = get_profile("leader-ack").model_copy(update={"overrides": {"queue.buffering.max.messages": 16}})
    name = topic(cluster, "full-queue")
    result = run_load(cluster.bootstrap_servers, name, profile, LoadSpec(messages=5000, keys=4), ScenarioDir(tmp_path))
    log = pq.read_table(ScenarioDir(tmp_path).send_log).to_pylist()
    assert result.acked == result.sent == len(log) == 5000
    assert [row["id"] for row in log] == list(range(5000))
    assert all(row["send_ts"] <= row["ack_ts"] for row in log)
    assert sorted(record[0] for record in read_topic(cluster, name, "read_uncommitted", log)) == list(range(5000))
