"""The fork server that starts producer processes: exit codes, signals and clean-up when its client
dies (the loads themselves are in test_workload_run.py)."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from acklab.workload.forkserver import ForkServer
from acklab.workload.worker import PRODUCER_NICENESS, WorkerJob


def _unreachable_job(directory: Path) -> WorkerJob:
    with socket.socket() as probe:  # a port nobody listens on: the producer waits for metadata
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return WorkerJob(
        producer=0, producers=1, bootstrap_servers=f"127.0.0.1:{port}", topic="t", config={},
        partitioner="consistent_random", first_id=0, count=1, max_id=0, message_bytes=100, keys=1,
        rate=None, duration_s=None, flush_timeout_s=1.0, scenario_dir=directory,
    )


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_a_bad_job_exits_with_its_traceback_in_the_log(tmp_path: Path) -> None:
    child = ForkServer.shared().spawn(tmp_path / "p0.log")
    child.stdin.write("not a job\n")
    child.stdin.close()
    assert child.wait(30) == 1
    assert "ValidationError" in (tmp_path / "p0.log").read_text()
    assert child.stdout.readline() == ""  # never said ready


def test_signals_reach_a_running_child_and_its_exit_is_reported(tmp_path: Path) -> None:
    server = ForkServer.shared()
    child = server.spawn(tmp_path / "p0.log")
    child.stdin.write(_unreachable_job(tmp_path).model_dump_json() + "\n")
    child.stdin.flush()
    with pytest.raises(subprocess.TimeoutExpired):
        child.wait(1)  # still waiting for the topic's metadata
    assert child.poll() is None and psutil.Process(child.pid).ppid() == server._process.pid
    child.terminate()
    assert child.wait(10) == -signal.SIGTERM
    child.kill()  # exited and reaped: not signalled again (its pid may belong to someone else now)
    assert ForkServer.shared() is server


NICENESS_AFTER_YIELD = """
import os, sys
os.nice(int(sys.argv[1]))
from acklab.workload.worker import yield_cpu_to_brokers
yield_cpu_to_brokers()
print(os.nice(0))
"""


@pytest.mark.parametrize("start", [0, PRODUCER_NICENESS - 2, PRODUCER_NICENESS, PRODUCER_NICENESS + 3])
def test_producers_yield_the_cpu_once_never_more_never_less(start: int) -> None:
    done = subprocess.run([sys.executable, "-c", NICENESS_AFTER_YIELD, str(start)], capture_output=True, text=True, check=True)
    assert int(done.stdout) == max(start, PRODUCER_NICENESS)


def test_a_producer_process_runs_at_the_producer_niceness(tmp_path: Path) -> None:
    child = ForkServer.shared().spawn(tmp_path / "p0.log")
    try:
        assert psutil.Process(child.pid).nice() == max(psutil.Process().nice(), PRODUCER_NICENESS)
    finally:
        child.stdin.close()  # no job: exits
        child.wait(30)


def test_close_ends_the_server_at_once(tmp_path: Path) -> None:
    server = ForkServer()
    child = server.spawn(tmp_path / "p0.log")
    child.stdin.close()  # no job: exits
    child.wait(30)
    server.close()  # the reader thread is blocked in recv: the server must still see the end
    assert server._process.returncode == 0, "the server had to be killed"


CLIENT = """
import sys, time
from pathlib import Path
from acklab.workload.forkserver import ForkServer
server = ForkServer.shared()
child = server.spawn(Path(sys.argv[1]))  # waits for its job on stdin
print(server._process.pid, child.pid, flush=True)
time.sleep(600)
"""


def test_server_and_children_exit_when_the_client_is_killed(tmp_path: Path) -> None:
    client = subprocess.Popen([sys.executable, "-c", CLIENT, str(tmp_path / "p0.log")], stdout=subprocess.PIPE, text=True)
    try:
        server_pid, child_pid = map(int, client.stdout.readline().split())  # type: ignore[union-attr]
        assert not _gone(server_pid) and not _gone(child_pid)
        client.kill()
        client.wait()
        deadline = time.monotonic() + 15
        while not (_gone(server_pid) and _gone(child_pid)) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _gone(server_pid) and _gone(child_pid)
    finally:
        client.kill()
        client.wait()
