"""Persistent cluster state (`cluster.json`: nodes, ports, pids, owner) and process identity.

Every provisioned cluster writes `cluster.json` next to its nodes. A cluster is orphaned when the
process that owns it is gone (CLI runs, `airflow dags test`), when its heartbeat stopped (scheduler
deployments, where the run's tasks are separate processes and each keeps the heartbeat file fresh
while it runs, `keep_alive`), or when its lease has expired; `acklab.cluster.backends` reaps
orphans. A pid is signalled only while it still belongs to the process we started (same create time).
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Literal

import psutil
from pydantic import BaseModel

from acklab.cluster.topology import Topology

STATE_FILE = "cluster.json"
HEARTBEAT_FILE = "heartbeat"  # in the cluster folder: its mtime is the run's last sign of life
HEARTBEAT_EVERY_S = 5.0


class NodeState(BaseModel):
    """One Kafka process: its roles, ports, folder and (while running) pid."""

    node_id: int
    roles: list[Literal["broker", "controller"]]
    client_port: int | None = None  # CLIENT listener; clients reach it only through the proxy
    proxy_port: int | None = None  # advertised for CLIENT: the proxy's listener for this broker
    direct_port: int | None = None  # DIRECT listener for tooling (admin, Spark audit), never faulted
    internal_port: int | None = None  # INTERNAL listener for replication
    controller_port: int | None = None
    dir: Path
    pid: int | None = None
    create_time: float | None = None

    @property
    def data_dir(self) -> Path:
        return self.dir / "data"

    @property
    def is_broker(self) -> bool:
        return "broker" in self.roles


class ProcessState(BaseModel):
    """A helper process of the cluster (the fault proxy)."""

    pid: int | None = None
    create_time: float | None = None
    control_port: int


class LinkState(BaseModel):
    """The host resources of node-to-node link control (`acklab.cluster.links`), recorded before
    they are created so teardown and the reaper remove exactly these: an iptables chain (its fault
    chains are named after it), one cgroup per node under `cgroup`, and each node's connection mark."""

    chain: str
    cgroup: Path
    marks: dict[int, int]


class ClusterState(BaseModel):
    """What is needed to find, control and clean up a cluster from any process."""

    backend: Literal["local", "docker"] = "local"
    topology: Topology
    cluster_id: str
    nodes: list[NodeState]
    proxy: ProcessState
    links: LinkState | None = None  # node-to-node link control, when the run's faults cut links
    owner_pid: int | None = None
    owner_create_time: float | None = None
    lease_deadline: float
    heartbeat_s: float | None = None  # orphaned once the heartbeat file is older than this
    status: Literal["running", "torn-down"] = "running"

    def save(self, root: Path) -> None:
        tmp = root / f".{STATE_FILE}.{threading.get_ident()}.tmp"  # faults stop nodes from several threads
        tmp.write_text(self.model_dump_json(indent=2))
        tmp.replace(root / STATE_FILE)

    @classmethod
    def load(cls, root: Path) -> ClusterState:
        return cls.model_validate(json.loads((root / STATE_FILE).read_text()))

    def node(self, node_id: int) -> NodeState:
        for node in self.nodes:
            if node.node_id == node_id:
                return node
        raise KeyError(f"no node {node_id} in cluster (nodes: {[n.node_id for n in self.nodes]})")

    def is_orphaned(self, root: Path, now: float | None = None) -> bool:
        """Running, but its owner is gone, its heartbeat stopped, or its lease ran out."""
        if self.status != "running":
            return False
        now = now or time.time()
        if self.owner_pid is not None and not process_matches(self.owner_pid, self.owner_create_time):
            return True
        if self.heartbeat_s is not None and now - last_heartbeat(root) > self.heartbeat_s:
            return True
        return now > self.lease_deadline


def beat(root: Path) -> None:
    """The run is alive: refresh the cluster's heartbeat."""
    (root / HEARTBEAT_FILE).touch()


def last_heartbeat(root: Path) -> float:
    """When the run last showed life (0 if never)."""
    try:
        return (root / HEARTBEAT_FILE).stat().st_mtime
    except FileNotFoundError:
        return 0.0


@contextmanager
def keep_alive(root: Path) -> Iterator[None]:
    """Refresh the cluster's heartbeat every few seconds while the block runs (a task of the run);
    when the process dies, the heartbeat stops and the reaper can tell."""
    stop = threading.Event()

    def run() -> None:
        while True:
            try:
                beat(root)
            except OSError:  # not created yet, or removed: nothing to refresh this time
                pass
            if stop.wait(HEARTBEAT_EVERY_S):
                return

    thread = threading.Thread(target=run, name="cluster-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def process_create_time(pid: int) -> float:
    """When process `pid` started, in seconds since boot: what tells it from a later process given
    the same pid. Since boot, not since the epoch: the epoch form is the boot time plus this, and the
    boot time moves whenever the wall clock is set (an NTP step), so a process compared by it stops
    being itself (seen exited, and never stopped: a leaked process)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        raise psutil.NoSuchProcess(pid) from None
    return int(stat.rsplit(")", 1)[1].split()[19]) / CLOCK_TICKS  # field 22, starttime: clock ticks since boot (proc(5))


def _started(pid: int | None, create_time: float | None) -> psutil.Process | None:
    """The process `pid` if it is the one started at `create_time` (a zombie included), else None."""
    if pid is None:
        return None
    try:
        process = psutil.Process(pid)
        return process if create_time is None or abs(process_create_time(pid) - create_time) < 0.01 else None
    except psutil.NoSuchProcess:
        return None


def process_matches(pid: int | None, create_time: float | None) -> bool:
    """True if `pid` is alive (not a zombie) and is the process started at `create_time`."""
    process = _started(pid, create_time)
    try:
        return process is not None and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def signal_node(node: NodeState | ProcessState, sig: signal.Signals) -> bool:
    """Send `sig` to the process if it is still the one we started."""
    if not process_matches(node.pid, node.create_time):
        return False
    try:
        os.kill(node.pid, sig)  # type: ignore[arg-type]
    except ProcessLookupError:
        return False
    return True


def wait_exited(process: NodeState | ProcessState, timeout_s: float) -> bool:
    """Wait until the process we started has exited, reaping it if it is our child; False if it
    still runs after `timeout_s`.

    A zombie whose threads are all gone has exited (its memory, sockets and ports are released):
    it is not waited for until its parent reaps it. A node started by an earlier task is reaped by
    PID 1, which may take a second or more after the SIGKILL of a JVM. A zombie leader whose other threads still exit may hold its ports."""
    deadline = time.monotonic() + timeout_s
    while not _exited(process.pid, process.create_time):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)
    if process.pid is not None:
        try:
            os.waitpid(process.pid, os.WNOHANG)
        except ChildProcessError:  # not our child: its parent reaps it
            pass
    return True


def _exited(pid: int | None, create_time: float | None) -> bool:
    """The process started at `create_time` is gone (its pid free or reused), or a zombie with no
    thread left but its leader."""
    process = _started(pid, create_time)
    if process is None:
        return True
    try:
        return process.status() == psutil.STATUS_ZOMBIE and process.num_threads() <= 1
    except psutil.ZombieProcess:
        return False  # a zombie whose threads could not be counted: wait until it is reaped
    except psutil.NoSuchProcess:
        return True


def kill_and_wait(process: NodeState | ProcessState) -> None:
    """SIGCONT (a paused process cannot die otherwise) then SIGKILL, and wait; forget the pid."""
    signal_node(process, signal.SIGCONT)
    if signal_node(process, signal.SIGKILL):
        wait_exited(process, 10)
    process.pid = process.create_time = None
