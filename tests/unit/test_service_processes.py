"""Stopping service processes exactly: a service's whole session, also the orphans a killed one left."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import psutil

from acklab.services.processes import session_members, spawn, stop

# A service that starts a worker child, as the scheduler starts LocalExecutor workers; the worker
# ignores SIGTERM, as a busy task may.
SERVICE = ["bash", "-c", "bash -c 'trap \"\" TERM; while :; do sleep 0.1; done' & echo $! > {pidfile}; wait"]


def _start(tmp_path: Path):
    pidfile = tmp_path / "worker.pid"
    service = spawn("svc", [part.replace("{pidfile}", str(pidfile)) for part in SERVICE], tmp_path / "svc.log", os.environ)
    deadline = time.monotonic() + 10
    while not (pidfile.exists() and pidfile.read_text().strip()) and time.monotonic() < deadline:
        time.sleep(0.05)
    return service, psutil.Process(int(pidfile.read_text()))


def test_stop_takes_the_service_and_its_session(tmp_path: Path) -> None:
    service, worker = _start(tmp_path)
    assert worker in session_members(service)
    stop([service], timeout_s=1.0)
    assert not service.alive() and not worker.is_running()


def test_stop_takes_the_orphans_of_a_service_that_was_killed(tmp_path: Path) -> None:
    service, worker = _start(tmp_path)
    os.kill(service.pid, signal.SIGKILL)
    psutil.wait_procs([psutil.Process(service.pid)], timeout=5)
    assert not service.alive() and worker.is_running()  # orphaned: no longer anyone's child we know of
    assert worker in session_members(service)
    stop([service], timeout_s=1.0)
    assert not worker.is_running()


def test_session_members_are_only_that_session(tmp_path: Path) -> None:
    service, worker = _start(tmp_path)
    try:
        members = session_members(service)
        assert worker in members and psutil.Process() not in members
        assert all(p.pid == worker.pid or p.ppid() == worker.pid for p in members), members  # the worker's `sleep`s
    finally:
        stop([service], timeout_s=1.0)
