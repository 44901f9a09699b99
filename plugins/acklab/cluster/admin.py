"""Cluster metadata and topic operations through `confluent_kafka.admin`."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from confluent_kafka import IsolationLevel, KafkaError, KafkaException, TopicCollection, TopicPartition, Uuid
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

PROBE_TOPIC = "__acklab_probe"
TRANSIENT = frozenset({KafkaError._DESTROY_BROKER, KafkaError._TRANSPORT, KafkaError._TIMED_OUT, KafkaError._ALL_BROKERS_DOWN})
RDKAFKA_LOG = logging.getLogger("acklab.rdkafka")


@dataclass(frozen=True)
class PartitionState:
    """Leader, replicas and in-sync replicas of one partition (-1 leader = none)."""

    topic: str
    partition: int
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]

    @property
    def in_sync(self) -> bool:
        return self.leader >= 0 and set(self.isr) == set(self.replicas)


class ClusterAdmin:
    """Thin, typed wrapper over AdminClient for what provisioning and faults need.

    Close it (`with cluster.admin() as admin:` or `close()`) in the thread that made it. Left to
    the garbage collector, the client may be destroyed by a collection that runs in its own
    librdkafka background thread (which serves admin results), and librdkafka aborts the whole
    process when a client is destroyed from one of its own threads (confluent-kafka-python #2129)."""

    def __init__(self, bootstrap_servers: str, timeout_s: float = 10.0) -> None:
        self._client = AdminClient(
            {"bootstrap.servers": bootstrap_servers, "socket.timeout.ms": 5000}, logger=RDKAFKA_LOG
        )
        self._timeout = timeout_s

    def close(self) -> None:
        """Destroy the client now, in this thread; pending requests end with _DESTROY."""
        self._client.__exit__(None, None, None)

    def __enter__(self) -> ClusterAdmin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def broker_ids(self) -> set[int]:
        """Ids of the brokers registered with the controller and not fenced, from a metadata request
        any live broker answers (DescribeCluster goes to the broker the metadata names controller,
        which may be the dead one: it then times out for seconds)."""
        return set(self._client.list_topics(timeout=self._timeout).brokers)

    def create_topic(self, topic: str, partitions: int, replication_factor: int, config: dict[str, str] | None = None) -> None:
        self._create([NewTopic(topic, partitions, replication_factor, config=config or {})])

    def create_topics(self, topics: list[str], assignment: list[list[int]], config: dict[str, str] | None = None) -> None:
        """Create `topics` with the same replica assignment (partition -> replicas, leader first)."""
        self._create([NewTopic(topic, len(assignment), replica_assignment=assignment, config=config or {}) for topic in topics])

    def _create(self, new_topics: list[NewTopic], attempts: int = 3) -> None:
        """Create topics; a request lost to a transient client error (e.g. the bootstrap connection
        replaced while it was in flight) is sent again, and then "already exists" means created."""
        pending = {t.topic: t for t in new_topics}
        for attempt in range(attempts):
            futures = self._client.create_topics(list(pending.values()), request_timeout=self._timeout)
            for topic, future in futures.items():
                try:
                    future.result(timeout=self._timeout)
                    pending.pop(topic)
                except KafkaException as exc:
                    code = exc.args[0].code()
                    if attempt > 0 and code == KafkaError.TOPIC_ALREADY_EXISTS:
                        pending.pop(topic)
                    elif code not in TRANSIENT or attempt == attempts - 1:
                        raise
            if not pending:
                return
            time.sleep(0.5)

    def under_replicated(self) -> list[PartitionState]:
        """Partitions of every topic without a leader or with an ISR smaller than their replicas."""
        topics = self._client.list_topics(timeout=self._timeout).topics
        return [
            PartitionState(name, p.id, p.leader, tuple(p.replicas), tuple(p.isrs))
            for name, metadata in sorted(topics.items())
            for p in metadata.partitions.values()
            if p.leader < 0 or set(p.isrs) != set(p.replicas)
        ]

    def leaders(self, topics: list[str]) -> dict[tuple[str, int], tuple[int, frozenset[int]]]:
        """(topic, partition) -> (leader id, -1: none; in-sync replicas) of every partition of
        `topics`, in one request."""
        metadata = self._client.list_topics(timeout=self._timeout).topics
        return {
            (topic, p.id): (p.leader, frozenset(p.isrs)) for topic in topics if topic in metadata for p in metadata[topic].partitions.values()
        }

    def topics(self) -> list[str]:
        return sorted(self._client.list_topics(timeout=self._timeout).topics)

    def partitions(self, topic: str) -> list[PartitionState]:
        """Leader and ISR of every partition of `topic` (from the cluster metadata).

        Each broker learns a new topic from the KRaft metadata log on its own, so a broker may still
        answer "unknown topic" for a topic another broker already reports in sync: that answer is
        asked again, 0.1 s apart, within the client's timeout, before it is raised."""
        deadline = time.monotonic() + self._timeout
        while True:
            metadata = self._client.list_topics(topic, timeout=max(0.1, deadline - time.monotonic())).topics[topic]
            if metadata.error is None:
                break
            if metadata.error.code() != KafkaError.UNKNOWN_TOPIC_OR_PART or time.monotonic() >= deadline:
                raise KafkaException(metadata.error)
            time.sleep(0.1)
        return [
            PartitionState(topic, p.id, p.leader, tuple(p.replicas), tuple(p.isrs))
            for p in sorted(metadata.partitions.values(), key=lambda p: p.id)
        ]

    def partition(self, topic: str, partition: int) -> PartitionState:
        return next(p for p in self.partitions(topic) if p.partition == partition)

    def topic_ids(self, topics: list[str]) -> dict[str, str]:
        """Each topic's id as hex (how produce v13 names a topic)."""
        futures = self._client.describe_topics(TopicCollection(topics), request_timeout=self._timeout)
        return {name: _uuid_hex(future.result(timeout=self._timeout).topic_id) for name, future in futures.items()}

    def unstable(self, topic: str, partitions: int) -> dict[int, tuple[int, int]]:
        """The partitions of `topic` whose last stable offset is below the high watermark, each with
        (LSO, HWM): a transaction is open there (read_committed readers stop at the LSO)."""

        def ends(level: IsolationLevel) -> dict[int, int]:
            specs = {TopicPartition(topic, p): OffsetSpec.latest() for p in range(partitions)}
            futures = self._client.list_offsets(specs, isolation_level=level, request_timeout=self._timeout)
            return {tp.partition: future.result(timeout=self._timeout).offset for tp, future in futures.items()}

        stable, high = ends(IsolationLevel.READ_COMMITTED), ends(IsolationLevel.READ_UNCOMMITTED)
        return {p: (stable[p], high[p]) for p in sorted(high) if stable[p] < high[p]}

    def wait_in_sync(self, topic: str, timeout_s: float) -> list[PartitionState]:
        """Wait until every partition of `topic` has a leader and a full ISR."""
        deadline = time.monotonic() + timeout_s
        last: list[PartitionState] | str = "no metadata"
        while time.monotonic() < deadline:
            try:
                last = self.partitions(topic)
                if last and all(p.in_sync for p in last):
                    return last
            except KafkaException as exc:
                last = str(exc)
            time.sleep(0.2)
        raise TimeoutError(f"topic {topic} not in sync after {timeout_s:.0f}s: {last}")


def _uuid_hex(uuid: Uuid) -> str:
    """A Kafka Uuid as the 32 hex digits of its 16 bytes."""
    mask = (1 << 64) - 1
    return ((uuid.get_most_significant_bits() & mask) << 64 | (uuid.get_least_significant_bits() & mask)).to_bytes(16, "big").hex()
