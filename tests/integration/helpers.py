"""Shared steps of integration tests: plans run and audited on one cluster; nothing we started may
survive a teardown."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import psutil

from acklab.checker.submit import audit_job, submit
from acklab.cluster.cluster import Cluster
from acklab.cluster.state import ClusterState
from acklab.execution import run_scenarios
from acklab.plan import RunPlan
from acklab.store import RunDir


def run_audited(plans: list[RunPlan]) -> RunDir:
    """Run every plan on one cluster (of the first plan's topology) into one run folder, then one
    Spark audit; the cluster is torn down and nothing of it may be left."""
    run = RunDir.create()
    cluster = Cluster.provision(plans[0].topology, run.cluster, owner_pid=os.getpid())
    try:
        for plan in plans:
            run_scenarios(cluster, plan, run)
        submit(audit_job(run))
    finally:
        cluster.teardown()
    assert_nothing_left(run.cluster)
    return run


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
