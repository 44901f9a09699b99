"""Shared checks for integration tests: nothing we started may survive a teardown."""

from __future__ import annotations

import socket
from pathlib import Path

import psutil

from acklab.cluster.state import ClusterState


def assert_nothing_left(cluster_root: Path) -> None:
    """No node process alive, no port still accepting connections, no data dir left."""
    state = ClusterState.load(cluster_root)
    assert state.status == "torn-down"
    for node in state.nodes:
        assert node.pid is None
        assert not node.data_dir.exists(), f"data dir left: {node.data_dir}"
        for port in (node.client_port, node.controller_port):
            if port:
                with socket.socket() as sock:
                    assert sock.connect_ex(("127.0.0.1", port)) != 0, f"port {port} still open"
    java_on_root = [
        p.pid for p in psutil.process_iter(["cmdline"]) if any(str(cluster_root) in part for part in (p.info["cmdline"] or []))
    ]
    assert java_on_root == [], f"processes still running on {cluster_root}: {java_on_root}"
