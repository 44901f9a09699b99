"""How a cluster is bound to its run: owner process, heartbeat, lease."""

from __future__ import annotations

import time
from pathlib import Path

from acklab.cluster.state import ClusterState, ProcessState, beat


def test_the_heartbeat_keeps_a_live_run_and_its_absence_reaps_it(tmp_path: Path) -> None:
    """Pure bookkeeping of the binding: fresh heartbeat -> not orphaned; stale -> orphaned."""
    root = tmp_path / "cluster"
    root.mkdir()
    state = ClusterState(
        topology={"name": "t", "brokers": 1, "replication_factor": 1}, cluster_id="x", nodes=[],
        proxy=ProcessState(control_port=1), lease_deadline=time.time() + 3600, heartbeat_s=5.0,
    )
    beat(root)
    assert not state.is_orphaned(root)
    assert state.is_orphaned(root, now=time.time() + 6)
