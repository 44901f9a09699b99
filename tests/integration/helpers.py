"""Shared checks for integration tests: nothing we started may survive a teardown."""

from __future__ import annotations

import socket
import subprocess
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


BUILTIN_CHAINS = ("INPUT", "FORWARD", "OUTPUT", "PREROUTING", "POSTROUTING")


def host_network_state() -> dict[str, list[str]]:
    """Every iptables rule, user chain and non-default policy (counters and timestamps dropped; a
    table whose built-in chains accept everything equals no table), `ip netns`, and cgroups named
    like link control's: what must be the same before a run and after its teardown."""
    from acklab.cluster.links import CGROUP_PREFIX, cgroup2_root

    rules = []
    for line in subprocess.run(["iptables-save"], capture_output=True, text=True, check=True).stdout.splitlines():
        if line.startswith(("#", "*")) or line == "COMMIT" or not line:
            continue
        if line.startswith(":"):
            name, policy = line[1:].split()[:2]
            if name in BUILTIN_CHAINS and policy == "ACCEPT":
                continue
            line = f":{name} {policy}"
        rules.append(line)
    cgroups = cgroup2_root()
    return {
        "iptables": rules,
        "netns": subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout.split("\n"),
        "cgroups": sorted(p.name for p in cgroups.glob(f"{CGROUP_PREFIX}*")) if cgroups else [],
    }
