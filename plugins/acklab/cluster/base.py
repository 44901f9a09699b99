"""The interface every cluster backend (local JVMs, Docker) offers to workload and nemesis."""

from __future__ import annotations

from collections.abc import Collection
from typing import Protocol

from acklab.cluster.admin import ClusterAdmin
from acklab.proxy.control import ProxyControl
from acklab.topology import Topology


class Cluster(Protocol):
    """A running Kafka cluster whose nodes can be faulted by node id."""

    topology: Topology

    @property
    def bootstrap_servers(self) -> str:
        """Where the workload connects: through the fault proxy."""

    @property
    def direct_bootstrap_servers(self) -> str:
        """Where tooling connects (admin, Spark audit): never faulted."""

    def proxy(self) -> ProxyControl:
        """Control of the Kafka-aware fault proxy in front of every broker."""

    def admin(self, timeout_s: float = 10.0, exclude: Collection[int] = ()) -> ClusterAdmin:
        """An admin client bootstrapped from the brokers not in `exclude` (e.g. a killed one)."""

    def kill(self, node_id: int) -> None:
        """SIGKILL: the process dies without flushing or leaving the ISR cleanly."""

    def stop(self, node_id: int) -> None:
        """SIGTERM: controlled shutdown, waits for the process to exit."""

    def start(self, node_id: int) -> None:
        """(Re)start a stopped or killed node on its existing data."""

    def pause(self, node_id: int) -> None:
        """SIGSTOP: the process is frozen, its sockets stay open."""

    def resume(self, node_id: int) -> None:
        """SIGCONT."""

    def is_running(self, node_id: int) -> bool: ...

    def active_controller(self) -> int:
        """Node id of the active KRaft controller."""

    def wait_healthy(self, timeout_s: float = 60.0) -> None:
        """All brokers registered and every partition of every topic fully in sync."""

    def teardown(self) -> None:
        """Stop every node and remove data; idempotent."""
