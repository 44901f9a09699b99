"""Watches partition leadership during a load whose fault schedule moves no leader.

A leader change nobody planned (a broker fenced because its heartbeats timed out on a saturated
machine, say) can lose or duplicate writes exactly as a planned fault would. In a baseline or a
client-side fault it would be reported against the wrong cause, so such a scenario's evidence is
incomplete, never a pass or a fail."""

from __future__ import annotations

import threading
import time

from confluent_kafka import KafkaException

from acklab.cluster.admin import ClusterAdmin
from acklab.cluster.cluster import Cluster

POLL_S = 0.5


class LeaderWatch:
    """`start()` snapshots the leader of every partition of `topics`; until `stop()`, any other
    leader (or none) is recorded; `stop()` returns the first such change, or None."""

    def __init__(self, cluster: Cluster, topics: list[str]) -> None:
        self._cluster = cluster
        self._admin: ClusterAdmin | None = None  # from start() to stop()
        self._topics = topics
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="leader-watch", daemon=True)
        self._started = 0.0
        self._baseline: dict[tuple[str, int], int] = {}
        self.change: str | None = None

    def start(self, attempts: int = 3) -> None:
        self._admin = self._cluster.admin(timeout_s=5)
        for attempt in range(attempts):
            try:
                self._baseline = self._admin.leaders(self._topics)
                break
            except KafkaException:
                if attempt == attempts - 1:
                    raise
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

    def _run(self) -> None:
        while not self._stop.wait(POLL_S) and self.change is None:
            self._check()

    def _check(self) -> None:
        if self.change is not None:
            return
        assert self._admin is not None
        try:
            leaders = self._admin.leaders(self._topics)
        except KafkaException:  # no answer is not a leader change; the next poll asks again
            return
        for (topic, partition), leader in sorted(self._baseline.items()):
            now = leaders.get((topic, partition), -1)
            if now != leader:
                elapsed = time.monotonic() - self._started
                self.change = f"{topic}[{partition}] leader {leader} -> {now} about {elapsed:.1f}s after the load started"
                return
