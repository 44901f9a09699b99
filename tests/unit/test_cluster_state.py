"""How a cluster is bound to its run: owner process, heartbeat, lease."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from acklab.cluster.state import ClusterState, ProcessState, beat, kill_and_wait, process_create_time, process_matches, wait_exited


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


def _started(command: list[str]) -> ProcessState:
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    return ProcessState(pid=process.pid, create_time=process_create_time(process.pid), control_port=1)


def test_a_killed_child_is_waited_for_and_reaped() -> None:
    child = _started(["sleep", "60"])
    assert not wait_exited(child, 0.2)  # still running: the wait times out
    kill_and_wait(child)
    assert child.pid is None
    assert not process_matches(child.pid, child.create_time)


def test_a_killed_process_of_another_parent_is_waited_for_until_it_has_exited() -> None:
    """Its parent (here: a shell that already exited, so PID 1) reaps it when it will; the wait ends
    once it has exited, a zombie or gone."""
    shell = subprocess.run(["sh", "-c", "sleep 60 > /dev/null 2>&1 & echo $!"], capture_output=True, text=True, check=True)
    pid = int(shell.stdout)
    orphan = ProcessState(pid=pid, create_time=process_create_time(pid), control_port=1)
    assert not wait_exited(orphan, 0.2)
    os.kill(pid, signal.SIGKILL)
    assert wait_exited(orphan, 10)
    assert not process_matches(pid, orphan.create_time)


def test_a_process_stays_itself_when_the_wall_clock_is_set(monkeypatch) -> None:
    """The boot time psutil adds to a start time moves with the wall clock (an NTP step): a process
    recorded before the step must still match after it, and be stopped by its owner, not leaked."""
    import psutil
    from psutil import _pslinux

    child = _started(["sleep", "60"])
    try:
        stepped = psutil.boot_time() + 3.0
        monkeypatch.setattr(_pslinux, "boot_time", lambda: stepped)
        assert abs(psutil.Process(child.pid).create_time() - (child.create_time + stepped)) < 0.01  # the epoch form moved
        assert process_matches(child.pid, child.create_time)
        kill_and_wait(child)
        assert child.pid is None
    finally:
        if child.pid is not None:
            os.kill(child.pid, signal.SIGKILL)
