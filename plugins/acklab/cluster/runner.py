"""What a backend must do to run a cluster's nodes (`acklab.cluster.local`, `acklab.cluster.docker`)."""

from __future__ import annotations

from typing import Protocol

from acklab.cluster.state import ClusterState, NodeState
from acklab.cluster.topology import Topology


class NodeRunner(Protocol):
    """Runs the node processes of one cluster. Node state (e.g. pids) is kept in the node; the
    cluster saves it. Every method works from any process that loaded the cluster's state."""

    name: str

    @classmethod
    def check_ready(cls, topology: Topology) -> None:
        """Raise ClusterStartError unless nodes of `topology` can run here (jars, engine, image)."""

    @classmethod
    def reap_strays(cls) -> list[str]:
        """Remove this backend's resources whose cluster is gone or torn down; describe what was removed."""

    def create(self, node: NodeState) -> None:
        """Make a node startable: format its storage, or create its container (which formats on first start)."""

    def start(self, node: NodeState) -> None:
        """Start a created, stopped or killed node on its existing data."""

    def set_restart_priority(self, node: NodeState, raised: bool) -> None:
        """Raise the running node's CPU priority above its peers' (`raised`), or put it back level
        with them; a no-op where the backend or host cannot."""

    def kill(self, node: NodeState) -> None:
        """SIGKILL, and wait for the process to go."""

    def stop(self, node: NodeState, timeout_s: float) -> None:
        """SIGTERM (controlled shutdown), SIGKILL after `timeout_s`; wait for the process to go."""

    def pause(self, node: NodeState) -> None:
        """SIGSTOP (or the cgroup freezer): frozen, its sockets open."""

    def resume(self, node: NodeState) -> None:
        """Undo `pause`."""

    def paused(self, node: NodeState) -> bool:
        """Frozen by `pause`."""

    def alive(self, node: NodeState) -> bool:
        """Running or paused."""

    def pids(self, node: NodeState) -> list[int]:
        """Host pids of the node's running processes (none when it is not running)."""

    def crashed(self, node: NodeState) -> str | None:
        """Why the node exited on its own (not by one of our faults), with its log's tail; else None."""

    def remove(self, state: ClusterState) -> None:
        """Kill every node process and remove what the backend created for them; idempotent."""
