"""The brokers' stalls read from their own logs (`acklab.cluster.stalls`): the controller's slow
events and the GC pauses, set side by side."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest

from acklab.cluster import stalls


def _local(epoch: float) -> str:
    """server.log's timestamp: the broker's local time, with milliseconds."""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(epoch)) + f",{int(epoch * 1000) % 1000:03d}"


def _gc(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{int(epoch * 1000) % 1000:03d}+0000"


T = 1_795_700_000.0


@pytest.fixture
def cluster(tmp_path):
    for node in (1, 2):
        (tmp_path / f"node-{node}").mkdir()
    (tmp_path / "node-2" / "server.log").write_text(
        f"[{_local(T)}] INFO [QuorumController id=2] Fencing broker 1 at epoch 12 because its session has timed out. (x)\n"
        f"[{_local(T + 10)}] ERROR [QuorumController id=2] Exceptionally slow controller event writeNoOpRecord(2090732247) took 2000 ms. (org.apache.kafka.controller.EventPerformanceMonitor)\n"
        f"[{_local(T + 20)}] ERROR [QuorumController id=2] Exceptionally slow controller event processBrokerHeartbeat(1) took 1500 ms. (x)\n"
    )
    # Node 2's JVM paused 500 ms inside its first slow event and 300 ms across the start of the second;
    # node 1 paused 900 ms inside the first, which is not node 2's.
    (tmp_path / "node-2" / "gc-100.log").write_text(
        f"[{_gc(T + 9.0)}][4.113s][info][gc          ] GC(2) Pause Young (Normal) (G1 Evacuation Pause) 10M->5M(130M) 500.000ms\n"
        f"[{_gc(T + 18.6)}][4.2s][info][gc          ] GC(3) Pause Remark 160M->160M(292M) 300.000ms\n"
        f"[{_gc(T + 30)}][9.0s][info][safepoint   ] Safepoint \"G1PauseRemark\", Total: 999272392 ns\n"
    )
    (tmp_path / "node-1" / "gc-200.log").write_text(
        f"[{_gc(T + 9.5)}][1.0s][info][gc          ] GC(7) Pause Full (G1 Compaction Pause) 100M->50M(130M) 900.000ms\n"
    )
    return tmp_path


def test_slow_controller_events_and_gc_pauses_are_read_with_their_times(cluster) -> None:
    slow = stalls.controller_stalls(cluster)
    assert [(s.node, s.name, s.ms) for s in slow] == [(2, "writeNoOpRecord", 2000.0), (2, "processBrokerHeartbeat", 1500.0)]
    assert slow[0].end == pytest.approx(T + 10, abs=1e-3)
    pauses = stalls.gc_pauses(cluster)
    assert [(p.node, p.name, p.ms) for p in pauses] == [(2, "Pause Young", 500.0), (1, "Pause Full", 900.0), (2, "Pause Remark", 300.0)]


def test_only_the_stalled_nodes_own_pauses_inside_the_stall_count(cluster) -> None:
    slow, pauses = stalls.controller_stalls(cluster), stalls.gc_pauses(cluster)
    assert stalls.paused_during(slow[0], pauses) == pytest.approx(500.0, abs=1)  # node 1's 900 ms are not node 2's
    assert stalls.paused_during(slow[1], pauses) == pytest.approx(100.0, abs=1)  # 18.3-18.6 overlaps 18.5-20.0 by 0.1 s
    assert stalls.summary(cluster) == (
        "controller slow events: 2, 3.5 s in all, longest 2000 ms; GC pauses: 3, 2 of 500 ms or more, "
        "longest 900 ms (Pause Full on node 1); of the slow events' time, 0.6 s was their node's GC"
    )


def test_a_cluster_without_logs_says_so(tmp_path) -> None:
    assert stalls.summary(tmp_path) == (
        "controller slow events: 0, 0.0 s in all, longest 0 ms; GC pauses: 0, 0 of 500 ms or more, none logged; "
        "of the slow events' time, 0.0 s was their node's GC"
    )
