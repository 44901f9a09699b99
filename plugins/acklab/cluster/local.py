"""The embedded default backend: KRaft nodes as local JVM processes on 127.0.0.1."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import psutil

from acklab.base.maven import SetupError, kafka_libs
from acklab.cluster.errors import ClusterStartError
from acklab.cluster.jvm import KAFKA_MAIN, STORAGE_TOOL, java_command, sharing_options
from acklab.cluster.layout import SERVER_CONFIG
from acklab.cluster.state import ClusterState, NodeState, kill_and_wait, process_create_time, process_matches, signal_node, wait_exited
from acklab.cluster.topology import Topology

STDOUT_LOG = "stdout.log"  # each node's console output, in its folder (kept at teardown)
# A node in its own session is its own scheduling group where the kernel groups sessions (autogroup):
# the group's niceness weighs it against the other nodes' (-5: about three times a peer's share).
RESTART_NICENESS = -5


class LocalRunner:
    """Nodes as JVM processes of this host, each in its own session, tracked by pid and start time."""

    name = "local"

    def __init__(self, state: ClusterState, root: Path, dump_classes_to: Path | None = None) -> None:
        """`dump_classes_to`: nodes started by this runner write their class archive there as they
        exit (`acklab.cluster.class_archive.dump`); otherwise every JVM starts from the version's archive
        (`acklab.cluster.jvm.class_archive`)."""
        self._state = state
        self._libs = str(kafka_libs(state.topology.kafka_version))
        self._sharing = sharing_options(state.topology.kafka_version)
        self._node_options = [f"-XX:ArchiveClassesAtExit={dump_classes_to}"] if dump_classes_to else self._sharing

    @classmethod
    def check_ready(cls, topology: Topology) -> None:
        try:
            kafka_libs(topology.kafka_version)
        except SetupError as exc:
            raise ClusterStartError(str(exc)) from None

    @classmethod
    def reap_strays(cls) -> list[str]:
        return []  # every local process is in some cluster.json: the reaper finds it there

    def _java(self, node: NodeState, options: list[str], main: str, *args: str) -> list[str]:
        return java_command(os.environ.get("ACKLAB_JAVA", "java"), self._libs, node, self._state.topology, main, *args, jvm_options=options)

    def create(self, node: NodeState) -> None:
        command = self._java(node, self._sharing, STORAGE_TOOL, "format", "-t", self._state.cluster_id, "-c", str(node.dir / SERVER_CONFIG))
        result = subprocess.run(command, capture_output=True, text=True, timeout=120)
        if result.returncode != 0:
            raise ClusterStartError(f"formatting node {node.node_id} failed: {(result.stdout + result.stderr)[-800:]}")

    def start(self, node: NodeState) -> None:
        if self.alive(node):
            return
        with open(node.dir / STDOUT_LOG, "ab") as log:
            process = subprocess.Popen(
                self._java(node, self._node_options, KAFKA_MAIN, str(node.dir / SERVER_CONFIG)),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        node.pid, node.create_time = process.pid, process_create_time(process.pid)

    def set_restart_priority(self, node: NodeState, raised: bool) -> None:
        """The niceness of the node's session group (`/proc/<pid>/autogroup`): RESTART_NICENESS or 0.
        Without the privilege to raise it (root's CAP_SYS_NICE), the node keeps its peers' priority."""
        if node.pid is None or not self.alive(node):
            return
        try:
            Path(f"/proc/{node.pid}/autogroup").write_text(str(RESTART_NICENESS if raised else 0))
        except OSError:
            pass

    def kill(self, node: NodeState) -> None:
        self._signal_and_wait(node, signal.SIGKILL, timeout_s=10)

    def stop(self, node: NodeState, timeout_s: float) -> None:
        self._signal_and_wait(node, signal.SIGTERM, timeout_s=timeout_s)

    def pause(self, node: NodeState) -> None:
        signal_node(node, signal.SIGSTOP)

    def resume(self, node: NodeState) -> None:
        signal_node(node, signal.SIGCONT)

    def alive(self, node: NodeState) -> bool:
        return process_matches(node.pid, node.create_time)

    def paused(self, node: NodeState) -> bool:
        try:
            return self.alive(node) and psutil.Process(node.pid).status() == psutil.STATUS_STOPPED  # type: ignore[arg-type]
        except psutil.NoSuchProcess:
            return False

    def pids(self, node: NodeState) -> list[int]:
        return [node.pid] if node.pid is not None and self.alive(node) else []

    def crashed(self, node: NodeState) -> str | None:
        if node.pid is None or process_matches(node.pid, node.create_time):
            return None
        log = node.dir / STDOUT_LOG
        return f"node {node.node_id} exited: {log.read_text(errors='replace')[-800:] if log.exists() else '(no output)'}"

    def remove(self, state: ClusterState) -> None:
        for node in state.nodes:
            kill_and_wait(node)

    def _signal_and_wait(self, node: NodeState, sig: signal.Signals, timeout_s: float) -> None:
        if signal_node(node, sig) and not wait_exited(node, timeout_s):
            kill_and_wait(node)
        node.pid = node.create_time = None
