"""Watches the cluster during a load whose fault schedule moves no leader.

A leader change nobody planned (a broker fenced because its heartbeats timed out on a saturated
machine, say) can lose or duplicate writes exactly as a planned fault would. In a baseline or a
client-side fault it would be reported against the wrong cause, so such a scenario's evidence is
incomplete, never a pass or a fail. ISR shrinks and controller moves nobody planned do not break a
guarantee by themselves; they are recorded (`disturbances`) and shown beside the verdict."""

from __future__ import annotations

import threading
import time

from confluent_kafka import KafkaException

from acklab.cluster.admin import ClusterAdmin
from acklab.cluster.cluster import Cluster

POLL_S = 0.5


class LeaderWatch:
    """`start()` snapshots the leader and in-sync replicas of every partition of `topics` and the
    active controller; until `stop()`, each partition's first other leader (or none), first ISR
    smaller than at the start, and each controller move are recorded in `disturbances`, each as
    `<topic>[<partition>] ...` or `controller ...`; `stop()` returns the first leader change, or None."""

    def __init__(self, cluster: Cluster, topics: list[str]) -> None:
        self._cluster = cluster
        self._admin: ClusterAdmin | None = None  # from start() to stop()
        self._topics = topics
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="leader-watch", daemon=True)
        self._started = 0.0
        self._baseline: dict[tuple[str, int], tuple[int, frozenset[int]]] = {}
        self._controller = -1
        self._seen: set[tuple[str, int, str]] = set()  # (topic, partition, "leader" | "isr") already recorded
        self.change: str | None = None
        self.disturbances: list[str] = []

    def start(self, attempts: int = 3) -> None:
        self._admin = self._cluster.admin(timeout_s=5)
        for attempt in range(attempts):
            try:
                self._baseline = self._admin.leaders(self._topics)
                break
            except KafkaException:
                if attempt == attempts - 1:
                    raise
        self._controller = self._cluster.active_controller()
        self._started = time.monotonic()
        self._thread.start()

    def stop(self) -> str | None:
        """Stop watching (and close the admin client); the first leader change seen, or None."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
            self._check()  # a last look: the load is over
        if self._admin is not None:
            self._admin.close()
        return self.change

    def of_topic(self, topic: str) -> list[str]:
        """The disturbances of `topic`'s partitions, and the controller's."""
        return [d for d in self.disturbances if d.startswith((f"{topic}[", "controller "))]

    def _run(self) -> None:
        while not self._stop.wait(POLL_S):
            self._check()

    def _record(self, text: str) -> None:
        self.disturbances.append(f"{text} about {time.monotonic() - self._started:.1f}s after the load started")

    def _check(self) -> None:
        assert self._admin is not None
        controller = self._cluster.active_controller()
        if controller not in (-1, self._controller):
            self._record(f"controller {self._controller} -> {controller}")
            self._controller = controller
        try:
            states = self._admin.leaders(self._topics)
        except KafkaException:  # no answer is not a leader change; the next poll asks again
            return
        for (topic, partition), (leader, isr) in sorted(self._baseline.items()):
            now, now_isr = states.get((topic, partition), (-1, frozenset()))
            if now != leader and (topic, partition, "leader") not in self._seen:
                self._seen.add((topic, partition, "leader"))
                self._record(f"{topic}[{partition}] leader {leader} -> {now}")
                self.change = self.change or self.disturbances[-1]
            if len(now_isr) < len(isr) and (topic, partition, "isr") not in self._seen:
                self._seen.add((topic, partition, "isr"))
                self._record(f"{topic}[{partition}] ISR {_ids(isr)} -> {_ids(now_isr)}")


def _ids(replicas: frozenset[int]) -> str:
    return "{" + ",".join(map(str, sorted(replicas))) + "}"
