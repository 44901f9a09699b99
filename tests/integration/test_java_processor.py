"""The Java client family's pipeline processor (the driver's `process JOB`, `dev.acklab.Processor`) on
real brokers, as `acklab.workload.processing` states the contract: two eos instances turn every input
record into exactly one committed output record and log their start, assignments, batches, commits
and stop; an armed instance logs its point and stops itself, and after it is killed the survivor takes
its partitions over from the committed offsets: still every id exactly once."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, IsolationLevel, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from acklab.base.maven import SetupError
from acklab.base.paths import runs_dir
from acklab.cluster.cluster import Cluster
from acklab.cluster.topology import load_topology
from acklab.workload import java_client
from acklab.workload.client import Client
from acklab.workload.processing import ProcessorJob, parse_output, read_log

pytestmark = pytest.mark.integration

PARTITIONS = 3
RECORDS = 2000
OLDEST_SET_UP = "3.9.1"  # the Makefile's 3.x kafka-clients


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    root = runs_dir() / "java-processor-test" / "cluster"
    cluster = Cluster.provision(load_topology("three-brokers"), root, owner_pid=os.getpid())
    try:
        yield cluster
    finally:
        cluster.teardown()


def _java(version: str | None) -> Client:
    try:
        return java_client.client(version)
    except SetupError as exc:
        pytest.skip(str(exc))


def _topics(cluster: Cluster, name: str) -> tuple[str, str]:
    topic_in, topic_out = f"jp-in-{name}", f"jp-out-{name}"
    cluster.create_topic(topic_in, PARTITIONS, 3)
    cluster.create_topic(topic_out, PARTITIONS, 3)
    return topic_in, topic_out


def _write(bootstrap: str, topic: str, ids: range) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    failed: list[Any] = []
    for n in ids:
        producer.produce(topic, b"%06d:%06d:" % (n, 0) + b"x" * 24, b"p0-k%d" % (n % 16), on_delivery=lambda err, _msg: err and failed.append(err))
        producer.poll(0)
    assert producer.flush(60) == 0 and not failed, failed


def _ends(bootstrap: str, topic: str) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "jp-ends"})
    try:
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), 10)[1] for p in range(PARTITIONS)}
    finally:
        consumer.close()


def _committed(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        return {tp.partition: tp.offset for tp in consumer.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], 10)}
    finally:
        consumer.close()


def _drain(instances: Instances, group: str, topic: str, ends: dict[int, int], timeout_s: float) -> None:
    """Until the group committed the input's end offsets (a processor exiting fails it at once)."""
    seen: list[Any] = []

    def drained() -> bool:
        try:
            seen[:] = [_committed(instances.job["bootstrap_servers"], group, topic)]
        except KafkaException as exc:  # e.g. the offsets topic still loading on a fresh cluster
            seen[:] = [exc]
            return False
        return seen[0] == ends

    instances.wait_for(lambda: f"commit of the input's ends {ends} by group {group} (last seen: {seen})", drained, timeout_s)


def _outputs(bootstrap: str, topic: str, timeout_s: float = 40) -> list[tuple[int, ...]]:
    """The output topic as read_committed reads it, once no transaction is open on it (last stable
    offset == high watermark: a killed instance's transaction is aborted by its timeout)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    partitions = [TopicPartition(topic, p) for p in range(PARTITIONS)]

    def latest(isolation: IsolationLevel) -> dict[int, int]:
        futures = admin.list_offsets({tp: OffsetSpec.latest() for tp in partitions}, isolation_level=isolation, request_timeout=10)
        return {tp.partition: future.result().offset for tp, future in futures.items()}

    deadline = time.monotonic() + timeout_s
    while (stable := latest(IsolationLevel.READ_COMMITTED)) != (high := latest(IsolationLevel.READ_UNCOMMITTED)):
        assert time.monotonic() < deadline, f"{topic}: transactions still open (last stable {stable}, high watermark {high})"
        time.sleep(0.5)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "jp-audit", "isolation.level": "read_committed", "enable.partition.eof": True})
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    ended: set[int] = set()
    found: list[tuple[int, ...]] = []
    deadline = time.monotonic() + 30
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


class Instances:
    """Java processor instances of one group, their job files, logs and stderr in `folder`."""

    def __init__(self, client: Client, folder: Path, **job: Any) -> None:
        self.client, self.folder, self.job = client, folder, job
        self.processes: dict[int, subprocess.Popen[bytes]] = {}
        folder.mkdir(parents=True, exist_ok=True)

    def start(self, number: int) -> None:
        job = ProcessorJob(
            **self.job, instance=number, transactional_id=f"{self.job['group_id']}-p{number}", log=str(self.folder / f"processor-{number}.jsonl"),
            parent_pid=os.getpid(),
        )
        path = self.folder / f"processor-{number}.json"
        path.write_text(job.model_dump_json(indent=1))
        with (self.folder / f"processor-{number}.stderr").open("wb") as stderr:
            self.processes[number] = subprocess.Popen(
                java_client.Java().processor_command(self.client, path), env=self.client.env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr,
            )

    def events(self, number: int) -> list[dict[str, Any]]:
        path = self.folder / f"processor-{number}.jsonl"
        return list(read_log(path)) if path.exists() else []

    def stderr(self, number: int) -> str:
        return (self.folder / f"processor-{number}.stderr").read_text(errors="replace")[-2000:]

    def wait_for(self, what: str | Callable[[], str], check: Callable[[], Any], timeout_s: float) -> Any:
        deadline = time.monotonic() + timeout_s
        while not (found := check()):
            for number, process in self.processes.items():
                assert process.poll() is None or process.returncode == -signal.SIGKILL, f"processor {number} exited {process.returncode}: {self.stderr(number)}"
            assert time.monotonic() < deadline, f"no {what() if callable(what) else what} within {timeout_s:.0f}s"
            time.sleep(0.1)
        return found

    def assigned(self, numbers: list[int]) -> set[int]:
        """The partitions instances `numbers` hold after their `assigned` and `revoked` events (each
        event's partitions are the callback's: the whole assignment under an eager protocol, the
        change under an incremental one)."""
        covered: set[int] = set()
        for number in numbers:
            held: set[int] = set()
            for event in self.events(number):
                if event["ev"] == "assigned":
                    held |= set(event["partitions"])
                elif event["ev"] == "revoked":
                    held -= set(event["partitions"])
            covered |= held
        return covered

    def stop(self, number: int, timeout_s: float = 30) -> int:
        self.processes[number].send_signal(signal.SIGTERM)
        return self.processes[number].wait(timeout_s)

    def close(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                process.send_signal(signal.SIGCONT)
                process.kill()
                process.wait(10)


def _check_log(events: list[dict[str, Any]], number: int, client: Client, pid: int, stopped: bool = True) -> None:
    start = events[0]
    assert start["ev"] == "start", events[:3]
    assert (start["instance"], start["incarnation"], start["pid"]) == (number, 0, pid)
    assert (start["client_family"], start["client_version"]) == ("java", client.version)
    assert start["transactional_id"].endswith(f"-p{number}")
    assert all(isinstance(e["t"], float) for e in events)
    if stopped:
        assert (events[-1]["ev"], events[-1].get("reason")) == ("stop", "SIGTERM")
    for event in events:
        if event["ev"] in ("assigned", "revoked"):
            assert event["member"] and event["generation"] >= 1 and event["partitions"] == sorted(event["partitions"]), event


def _check_outputs(outputs: list[tuple[int, ...]], logs: dict[int, list[dict[str, Any]]]) -> None:
    """Each output record came from a committed batch of its instance, under that batch's generation,
    from an input offset within the batch."""
    batches = {(n, e["txn"]): e for n, events in logs.items() for e in events if e["ev"] == "batch"}
    committed = {(n, e["txn"]): e for n, events in logs.items() for e in events if e["ev"] == "committed"}
    for _id, seq, instance, incarnation, generation, partition, offset, txn in outputs:
        assert seq == 0 and incarnation == 0
        batch = batches[(instance, txn)]
        assert (instance, txn) in committed, f"output of instance {instance}'s txn {txn}, never committed"
        assert generation == batch["generation"]
        first, last = batch["inputs"][str(partition)]
        assert first <= offset <= last
    for (instance, txn), event in committed.items():  # a committed batch: its offsets are the next ones
        assert event["offsets"] == {p: span[1] + 1 for p, span in batches[(instance, txn)]["inputs"].items()}


@pytest.mark.parametrize("version", [None, OLDEST_SET_UP], ids=["locked", OLDEST_SET_UP])
def test_two_eos_instances_write_every_input_exactly_once(cluster: Cluster, tmp_path: Path, version: str | None) -> None:
    client = _java(version)
    name = f"clean-{client.version}"
    topic_in, topic_out = _topics(cluster, name)
    bootstrap, group = cluster.bootstrap_servers, f"jp-{name}"
    _write(bootstrap, topic_in, range(RECORDS))
    ends = _ends(bootstrap, topic_in)
    assert sum(ends.values()) == RECORDS and all(ends.values())
    instances = Instances(client, tmp_path / name, bootstrap_servers=bootstrap, input_topic=topic_in, output_topic=topic_out, group_id=group, style="eos")
    try:
        instances.start(0)
        instances.start(1)
        _drain(instances, group, topic_in, ends, 60)
        pids = {n: p.pid for n, p in instances.processes.items()}
        assert instances.stop(0) == 0 and instances.stop(1) == 0
    finally:
        instances.close()
    logs = {n: instances.events(n) for n in (0, 1)}
    for number, events in logs.items():
        _check_log(events, number, client, pids[number])
        assert not [e for e in events if e["ev"] in ("error", "aborted", "rewound", "point")], instances.stderr(number)
    kinds = Counter(e["ev"] for events in logs.values() for e in events)
    assert kinds["start"] == kinds["stop"] == 2 and kinds["assigned"] >= 2 and kinds["batch"] == kinds["committed"] >= 2
    outputs = _outputs(bootstrap, topic_out)
    copies = Counter(o[0] for o in outputs)
    assert set(copies) == set(range(RECORDS)) and set(copies.values()) == {1}
    _check_outputs(outputs, logs)


def test_armed_instance_stops_at_its_point_and_the_survivor_takes_over(cluster: Cluster, tmp_path: Path) -> None:
    client = _java(None)
    topic_in, topic_out = _topics(cluster, "kill")
    bootstrap, group = cluster.bootstrap_servers, "jp-kill"
    instances = Instances(
        client, tmp_path / "kill", bootstrap_servers=bootstrap, input_topic=topic_in, output_topic=topic_out, group_id=group, style="eos",
        max_batch=50, session_timeout_ms=6000, transaction_timeout_ms=5000,
    )
    try:
        instances.start(0)
        instances.start(1)
        instances.wait_for(
            "assignment of every partition to both", lambda: instances.assigned([0, 1]) == set(range(PARTITIONS)) and all(map(instances.assigned, ([0], [1]))), 45,
        )
        held = instances.assigned([0])
        assert held, "instance 0 holds no partition"
        _write(bootstrap, topic_in, range(RECORDS // 2))
        instances.wait_for("commit by instance 0", lambda: any(e["ev"] == "committed" for e in instances.events(0)), 30)
        victim = instances.processes[0]
        victim.send_signal(signal.SIGUSR1)
        armed_at = time.time()
        _write(bootstrap, topic_in, range(RECORDS // 2, RECORDS))  # instance 0's next batch passes the point

        def point() -> dict[str, Any] | None:
            event = next((e for e in instances.events(0) if e["ev"] == "point"), None)
            return event if event is not None and psutil.Process(victim.pid).status() == psutil.STATUS_STOPPED else None

        event = instances.wait_for("point (and stopped process)", point, 30)
        assert event["t"] >= armed_at
        events = instances.events(0)
        batch = next(e for e in events if e["ev"] == "batch" and e["txn"] == event["txn"])
        assert events[-1]["ev"] == "point" and not [e for e in events if e["ev"] == "committed" and e["txn"] >= event["txn"]]
        victim.kill()
        assert victim.wait(10) == -signal.SIGKILL

        def taken_over() -> bool:
            return any(e["ev"] == "assigned" and e["t"] > event["t"] and held <= set(e["partitions"]) and e["generation"] > batch["generation"]
                       for e in instances.events(1))

        instances.wait_for("take-over by instance 1", taken_over, 30)
        _drain(instances, group, topic_in, _ends(bootstrap, topic_in), 40)
        survivor = instances.processes[1].pid
        assert instances.stop(1) == 0
    finally:
        instances.close()
    logs = {n: instances.events(n) for n in (0, 1)}
    _check_log(logs[0], 0, client, victim.pid, stopped=False)
    _check_log(logs[1], 1, client, survivor)
    outputs = _outputs(bootstrap, topic_out)
    copies = Counter(o[0] for o in outputs)
    assert set(copies) == set(range(RECORDS)) and set(copies.values()) == {1}
    assert not [o for o in outputs if o[2] == 0 and o[7] >= event["txn"]], "the killed instance's open transaction is visible"
    _check_outputs(outputs, logs)
