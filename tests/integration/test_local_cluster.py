"""Real KRaft clusters as local JVMs: provisioning, leader failover, teardown, reaping."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from confluent_kafka import Consumer, Producer

from acklab.base.maven import kafka_libs
from acklab.base.paths import runs_dir
from acklab.cluster import jvm, layout
from acklab.cluster.backends import reap_orphans
from acklab.cluster.cluster import Cluster
from acklab.cluster.local import RESTART_NICENESS
from acklab.cluster.state import ClusterState, NodeState
from acklab.cluster.topology import Topology, load_topology

from .helpers import assert_nothing_left

pytestmark = pytest.mark.integration


def test_leader_kill_elects_new_leader_and_teardown_leaves_nothing() -> None:
    root = runs_dir() / "cluster-test" / "cluster"
    cluster = Cluster.provision(load_topology("three-brokers"), root, owner_pid=os.getpid())
    try:
        with cluster.admin() as admin:
            assert admin.broker_ids() == {1, 2, 3}
            admin.create_topic("failover", 3, 3)
            before = admin.wait_in_sync("failover", 30)[0]
            assert len(before.isr) == 3
            killed_pid = cluster.state.node(before.leader).pid
            cluster.kill(before.leader)
            assert not psutil.pid_exists(killed_pid) or psutil.Process(killed_pid).status() == psutil.STATUS_ZOMBIE
            deadline, after = time.monotonic() + 30, before
            while time.monotonic() < deadline and after.leader in (-1, before.leader):
                time.sleep(0.2)
                try:
                    after = cluster.partition("failover", 0, timeout_s=2)
                except Exception:
                    continue
            assert after.leader not in (-1, before.leader), f"no new leader after killing {before.leader}: {after}"
            assert before.leader not in after.isr
            cluster.start(before.leader)
            restarted = cluster.state.node(before.leader)
            if raising_allowed():  # until it is back, the restarted broker outweighs its peers
                assert autogroup_niceness(restarted.pid) == RESTART_NICENESS
            assert all(p.in_sync for p in admin.wait_in_sync("failover", 60))
            deadline = time.monotonic() + 10
            while autogroup_niceness(restarted.pid) != 0 and time.monotonic() < deadline:
                time.sleep(0.2)
            assert autogroup_niceness(restarted.pid) == 0  # level with its peers once registered again

            controller = cluster.active_controller()
            assert controller == kafka_quorum_leader(cluster) and controller in {1, 2, 3}
            cluster.kill(controller)
            deadline = time.monotonic() + 30
            while cluster.active_controller() in (-1, controller) and time.monotonic() < deadline:
                time.sleep(0.2)
            assert cluster.active_controller() not in (-1, controller)
            assert cluster.active_controller() == kafka_quorum_leader(cluster)
            cluster.start(controller)
            cluster.wait_healthy(60)
    finally:
        cluster.teardown()
    assert_nothing_left(root)


def raising_allowed() -> bool:
    """This host groups sessions for the scheduler (autogroup) and this process may raise a priority."""
    enabled = Path("/proc/sys/kernel/sched_autogroup_enabled")
    return os.geteuid() == 0 and enabled.exists() and enabled.read_text().strip() == "1"


def autogroup_niceness(pid: int | None) -> int:
    """The niceness of the scheduling group of `pid`'s session ("/autogroup-N nice K")."""
    return int(Path(f"/proc/{pid}/autogroup").read_text().split()[-1])


def kafka_quorum_leader(cluster: Cluster) -> int:
    """The quorum leader according to Kafka's own MetadataQuorumCommand (checks active_controller)."""
    command = [
        "java", "-cp", f"{kafka_libs(cluster.topology.kafka_version)}/*", "org.apache.kafka.tools.MetadataQuorumCommand",
        "--bootstrap-server", cluster.direct_bootstrap_servers, "describe", "--status",
    ]
    output = subprocess.run(command, capture_output=True, text=True, timeout=120, check=True).stdout
    return int(next(line.split()[-1] for line in output.splitlines() if line.startswith("LeaderId:")))


def test_kafka_39_single_broker_round_trip() -> None:
    root = runs_dir() / "kafka39" / "cluster"
    topology = load_topology("single-broker").model_copy(update={"kafka_version": "3.9.2"})
    cluster = Cluster.provision(topology, root, owner_pid=os.getpid())
    try:
        cluster.create_topic("rt", 1, 1)
        producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
        producer.produce("rt", b"hello", b"k")
        assert producer.flush(30) == 0
        consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "t", "auto.offset.reset": "earliest"})
        consumer.subscribe(["rt"])
        message = None
        deadline = time.monotonic() + 30
        while message is None and time.monotonic() < deadline:
            message = consumer.poll(1.0)
        consumer.close()
        assert message is not None and message.error() is None and message.value() == b"hello"
        assert "3.9.2" in (root / "node-1" / "server.log").read_text()
    finally:
        cluster.teardown()
    assert_nothing_left(root)


@pytest.mark.parametrize("taken", ["proxy control", "broker direct listener"])
def test_a_planned_port_taken_before_its_server_binds_it_starts_the_cluster_again(monkeypatch: pytest.MonkeyPatch, taken: str) -> None:
    """Another process binds a planned port first: the proxy or broker that needed it exits saying
    so, and the cluster starts once more on fresh ports."""
    root = runs_dir() / "port-taken" / "cluster"
    held = socket.create_server(("127.0.0.1", 0))
    plans = []

    def plan_onto_the_held_port(topology: Topology, folder: Path) -> tuple[list[NodeState], int]:
        nodes, control_port = layout.plan_nodes(topology, folder)
        if not plans:
            port = held.getsockname()[1]
            if taken == "proxy control":
                control_port = port
            else:
                nodes[0].direct_port = port
        plans.append((nodes, control_port))
        return nodes, control_port

    monkeypatch.setattr("acklab.cluster.cluster.plan_nodes", plan_onto_the_held_port)
    try:
        cluster = Cluster.provision(load_topology("single-broker"), root, owner_pid=os.getpid())
        try:
            assert len(plans) == 2
            assert held.getsockname()[1] not in {cluster.state.proxy.control_port, cluster.state.nodes[0].direct_port}
            cluster.create_topic("after-retry", 1, 1)
        finally:
            cluster.teardown()
    finally:
        held.close()
    log = root / ("proxy.log" if taken == "proxy control" else f"node-1/{layout.SERVER_LOG}")
    assert "address already in use" in log.read_text(errors="replace").lower()
    assert_nothing_left(root)


OWNER = """
import os, sys, time
from pathlib import Path
from acklab.cluster.cluster import Cluster
from acklab.cluster.topology import load_topology
Cluster.provision(load_topology("single-broker"), Path(sys.argv[1]), owner_pid=os.getpid())
print("up", flush=True)
time.sleep(600)
"""


def test_cluster_of_a_killed_owner_is_reaped_at_next_start(tmp_path: Path) -> None:
    root = runs_dir() / "orphan" / "cluster"
    owner = subprocess.Popen([sys.executable, "-c", OWNER, str(root)], stdout=subprocess.PIPE, text=True)
    try:
        assert owner.stdout is not None and owner.stdout.readline().strip() == "up"
        jvm = ClusterState.load(root).nodes[0].pid
        assert jvm is not None and psutil.pid_exists(jvm)
        assert reap_orphans(runs_dir()) == [], "a cluster whose owner is alive must not be reaped"
        owner.send_signal(signal.SIGKILL)  # the orchestrating process dies mid-run
        owner.wait(10)
        assert psutil.pid_exists(jvm), "the JVM outlives its owner until reaped"
        assert reap_orphans(runs_dir()) == [root]
    finally:
        owner.kill()
    assert_nothing_left(root)


def test_nodes_start_from_the_kafka_class_archive() -> None:
    """Setup dumped the default Kafka's class archive; the JVM can map it for the nodes' classpath
    (`-Xshare:on` refuses to start otherwise), and the local backend starts every node from it."""
    topology = load_topology("single-broker")
    options = jvm.sharing_options(topology.kafka_version)
    assert options == [f"-XX:SharedArchiveFile={jvm.class_archive(topology.kafka_version)}"]
    libs = kafka_libs(topology.kafka_version)
    mapped = subprocess.run(
        ["java", "-Xshare:on", *options, "-cp", f"{libs}/*", "kafka.tools.StorageTool", "random-uuid"], capture_output=True, text=True, timeout=60
    )
    assert mapped.returncode == 0, mapped.stdout + mapped.stderr
    cluster = Cluster.provision(topology, runs_dir() / "class-archive-test" / "cluster", owner_pid=os.getpid())
    try:
        for node in cluster.state.nodes:
            assert options[0] in psutil.Process(node.pid).cmdline()
    finally:
        cluster.teardown()
    assert_nothing_left(cluster.root)
