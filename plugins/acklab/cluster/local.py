"""The embedded default backend: real KRaft nodes as local JVM processes on 127.0.0.1."""

from __future__ import annotations

import base64
import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Collection
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path

import psutil
from jinja2 import Environment, FileSystemLoader, StrictUndefined

from acklab.cluster.admin import PROBE_TOPIC, ClusterAdmin
from acklab.cluster.state import (
    ClusterState,
    NodeState,
    ProcessState,
    kill_and_remove,
    process_create_time,
    process_matches,
    reap_orphans,
    signal_node,
)
from acklab.maven import kafka_libs
from acklab.paths import clusters_dir, runs_dir
from acklab.proxy.control import ProxyControl
from acklab.proxy.server import ProxySpec, Route
from acklab.topology import Topology

KAFKA_MAIN = "kafka.Kafka"
STORAGE_TOOL = "kafka.tools.StorageTool"
METADATA_PARTITION = "__cluster_metadata-0"


class ClusterStartError(RuntimeError):
    """A node failed to start or the cluster did not become healthy."""


def _free_ports(count: int) -> list[int]:
    """Ports the kernel reports free on 127.0.0.1 (held open together so they differ)."""
    with ExitStack() as stack:
        sockets = [stack.enter_context(socket.socket()) for _ in range(count)]
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]


def _new_cluster_id() -> str:
    """A random KRaft cluster id; like Kafka's Uuid.randomUuid, never starting with '-' (the
    storage tool would read it as an option)."""
    while (cluster_id := base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")).startswith("-"):
        pass
    return cluster_id


def _plan_nodes(topology: Topology, root: Path) -> list[NodeState]:
    ports = iter(_free_ports(4 * topology.brokers + len(topology.controller_ids)))
    nodes = []
    for node_id in sorted(set(topology.broker_ids) | set(topology.controller_ids)):
        roles = [r for r, ids in (("broker", topology.broker_ids), ("controller", topology.controller_ids)) if node_id in ids]
        broker = "broker" in roles
        nodes.append(
            NodeState(
                node_id=node_id,
                roles=roles,
                client_port=next(ports) if broker else None,
                proxy_port=next(ports) if broker else None,
                direct_port=next(ports) if broker else None,
                internal_port=next(ports) if broker else None,
                controller_port=next(ports) if "controller" in roles else None,
                dir=root / f"node-{node_id}",
            )
        )
    return nodes


class LocalCluster:
    """A cluster of local JVM processes; every method works from any process via `attach`."""

    def __init__(self, state: ClusterState, root: Path, libs: Path | None = None) -> None:
        """`libs`: the Kafka jars the nodes run from (default: the local Maven cache's)."""
        self.state = state
        self.root = root
        self.topology = state.topology
        self._libs = libs or kafka_libs(self.topology.kafka_version)

    # ---- lifecycle -------------------------------------------------------------------------

    @classmethod
    def provision(
        cls,
        topology: Topology,
        root: Path,
        *,
        owner_pid: int | None = None,
        lease_s: float = 3600.0,
        timeout_s: float = 90.0,
    ) -> LocalCluster:
        """Reap orphans, format storage, start every node and wait until the cluster is healthy.

        `owner_pid`: the cluster is reaped at the next provisioning once this process is gone;
        without it only the lease (`lease_s`) bounds its life."""
        reap_orphans(runs_dir())
        kafka_libs(topology.kafka_version)
        root.mkdir(parents=True, exist_ok=True)
        state = ClusterState(
            topology=topology,
            cluster_id=_new_cluster_id(),
            nodes=_plan_nodes(topology, root),
            proxy=ProcessState(control_port=_free_ports(1)[0]),
            owner_pid=owner_pid,
            owner_create_time=process_create_time(owner_pid) if owner_pid else None,
            lease_deadline=time.time() + lease_s,
        )
        cluster = cls(state, root)
        try:
            cluster._write_configs()
            cluster._start_proxy()
            with ThreadPoolExecutor(max_workers=len(state.nodes)) as pool:
                list(pool.map(cluster._format, state.nodes))
            for node in state.nodes:
                cluster.start(node.node_id)
            cluster.wait_healthy(timeout_s)
        except BaseException:
            cluster.teardown()
            raise
        return cluster

    @classmethod
    def attach(cls, root: Path) -> LocalCluster:
        """Reconnect to a cluster provisioned by another process (e.g. an earlier Airflow task)."""
        return cls(ClusterState.load(root), root)

    def teardown(self) -> None:
        """Kill every node we started and delete data dirs (logs stay as evidence)."""
        if self.state.status != "torn-down":
            kill_and_remove(self.state, self.root)

    # ---- addresses and metadata ------------------------------------------------------------

    @property
    def bootstrap_servers(self) -> str:
        """For the workload: every connection passes through the fault proxy."""
        return ",".join(f"127.0.0.1:{n.proxy_port}" for n in self.state.nodes if n.is_broker)

    @property
    def direct_bootstrap_servers(self) -> str:
        """For tooling (admin, the Spark audit): the DIRECT listeners, never faulted."""
        return self._direct()

    def admin(self, timeout_s: float = 10.0, exclude: Collection[int] = ()) -> ClusterAdmin:
        return ClusterAdmin(self._direct(exclude), timeout_s)

    def proxy(self) -> ProxyControl:
        return ProxyControl(self.state.proxy.control_port)

    def _direct(self, exclude: Collection[int] = ()) -> str:
        return ",".join(f"127.0.0.1:{n.direct_port}" for n in self.state.nodes if n.is_broker and n.node_id not in exclude)

    def wait_healthy(self, timeout_s: float = 60.0) -> None:
        """The health gate: every broker registered, an active KRaft controller, a probe topic
        (RF = topology RF) fully in sync and no under-replicated partition in any topic."""
        deadline = time.monotonic() + timeout_s
        admin = self.admin()
        expected = set(self.topology.broker_ids)
        registered: set[int] = set()
        while time.monotonic() < deadline:
            self._check_alive()
            try:
                registered = admin.broker_ids()
                if registered == expected:
                    break
            except Exception:  # noqa: BLE001 - brokers still starting; retried until the deadline
                pass
            time.sleep(0.3)
        else:
            raise ClusterStartError(f"brokers registered {sorted(registered)}, expected {sorted(expected)} after {timeout_s:.0f}s")
        if PROBE_TOPIC not in admin.topics():
            admin.create_topic(PROBE_TOPIC, self.topology.brokers, self.topology.replication_factor)
        admin.wait_in_sync(PROBE_TOPIC, max(1.0, deadline - time.monotonic()))
        while ((lagging := admin.under_replicated()) or self.active_controller() < 0) and time.monotonic() < deadline:
            time.sleep(0.3)
        if lagging:
            raise ClusterStartError(f"{len(lagging)} under-replicated partition(s) after {timeout_s:.0f}s, e.g. {lagging[0]}")
        if self.active_controller() < 0:
            raise ClusterStartError(f"no active KRaft controller (no running quorum leader) after {timeout_s:.0f}s")

    def active_controller(self) -> int:
        """The KRaft quorum leader, or -1: the leader of the highest epoch in the voters' persisted
        election state (`__cluster_metadata-0/quorum-state`, rewritten by each voter at every
        election), if that voter is running. A file read, so it is instant even on a loaded machine
        (the metadata API's controller id is a random broker in KRaft mode)."""
        elected = []
        for node in self.state.nodes:
            if "controller" not in node.roles:
                continue
            try:
                state = json.loads((node.data_dir / METADATA_PARTITION / "quorum-state").read_text())
            except (OSError, ValueError):  # not written yet, or a node being formatted
                continue
            if state.get("leaderId", -1) >= 0:
                elected.append((state["leaderEpoch"], state["leaderId"]))
        if not elected:
            return -1
        _, leader = max(elected)
        return leader if self.is_running(leader) else -1

    def _check_alive(self) -> None:
        if not process_matches(self.state.proxy.pid, self.state.proxy.create_time):
            raise ClusterStartError(f"fault proxy exited: {(self.root / 'proxy.log').read_text(errors='replace')[-800:]}")
        for node in self.state.nodes:
            if node.pid is not None and not process_matches(node.pid, node.create_time):
                tail = (node.dir / "stdout.log").read_text(errors="replace")[-800:] if (node.dir / "stdout.log").exists() else ""
                raise ClusterStartError(f"node {node.node_id} exited during start-up: {tail}")

    # ---- process control (faults) ----------------------------------------------------------

    def is_running(self, node_id: int) -> bool:
        node = self.state.node(node_id)
        return process_matches(node.pid, node.create_time)

    def pid(self, node_id: int) -> int | None:
        return self.state.node(node_id).pid

    def start(self, node_id: int) -> None:
        node = self.state.node(node_id)
        if self.is_running(node_id):
            return
        log = open(node.dir / "stdout.log", "ab")  # noqa: SIM115 - handed to the child process
        with log:
            process = subprocess.Popen(
                self._java(node, KAFKA_MAIN, str(node.dir / "server.properties")),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        node.pid, node.create_time = process.pid, process_create_time(process.pid)
        self.state.save(self.root)

    def kill(self, node_id: int) -> None:
        self._signal_and_wait(node_id, signal.SIGKILL, timeout_s=10)

    def stop(self, node_id: int, timeout_s: float = 60.0) -> None:
        self._signal_and_wait(node_id, signal.SIGTERM, timeout_s=timeout_s)

    def pause(self, node_id: int) -> None:
        signal_node(self.state.node(node_id), signal.SIGSTOP)

    def resume(self, node_id: int) -> None:
        signal_node(self.state.node(node_id), signal.SIGCONT)

    def restart(self, node_id: int) -> None:
        self.stop(node_id)
        self.start(node_id)

    def _signal_and_wait(self, node_id: int, sig: signal.Signals, timeout_s: float) -> None:
        node = self.state.node(node_id)
        if signal_node(node, sig):
            try:
                psutil.Process(node.pid).wait(timeout=timeout_s)  # type: ignore[arg-type]
            except psutil.TimeoutExpired:
                signal_node(node, signal.SIGKILL)
                psutil.Process(node.pid).wait(timeout=10)  # type: ignore[arg-type]
            except psutil.NoSuchProcess:
                pass
        node.pid = node.create_time = None
        self.state.save(self.root)

    # ---- configuration ---------------------------------------------------------------------

    def _write_configs(self) -> None:
        templates = Environment(loader=FileSystemLoader(clusters_dir() / "templates"), undefined=StrictUndefined)
        voters = ",".join(f"{n.node_id}@127.0.0.1:{n.controller_port}" for n in self.state.nodes if n.controller_port)
        log_template = "log4j.properties.j2" if self.topology.kafka_version.startswith("3.") else "log4j2.properties.j2"
        for node in self.state.nodes:
            node.data_dir.mkdir(parents=True, exist_ok=True)
            rendered = templates.get_template("server.properties.j2").render(node=node, topology=self.topology, voters=voters)
            (node.dir / "server.properties").write_text(rendered + "\n")
            (node.dir / "log4j.properties").write_text(templates.get_template(log_template).render(log_dir=node.dir) + "\n")
        self.state.save(self.root)

    def _start_proxy(self) -> None:
        spec = ProxySpec(
            control_port=self.state.proxy.control_port,
            routes=[Route(broker=n.node_id, listen_port=n.proxy_port, upstream_port=n.client_port) for n in self.state.nodes if n.is_broker],
        )
        (self.root / "proxy.json").write_text(spec.model_dump_json(indent=2))
        with open(self.root / "proxy.log", "ab") as log:
            process = subprocess.Popen(
                [sys.executable, "-m", "acklab.proxy.server", str(self.root / "proxy.json")],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
            )
        self.state.proxy.pid, self.state.proxy.create_time = process.pid, process_create_time(process.pid)
        self.state.save(self.root)
        self.proxy().wait_ready()

    def _format(self, node: NodeState) -> None:
        command = self._java(node, STORAGE_TOOL, "format", "-t", self.state.cluster_id, "-c", str(node.dir / "server.properties"))
        result = subprocess.run(command, capture_output=True, text=True, timeout=120)
        if result.returncode != 0:
            raise ClusterStartError(f"formatting node {node.node_id} failed: {(result.stdout + result.stderr)[-800:]}")

    def _java(self, node: NodeState, main: str, *args: str) -> list[str]:
        log_config = node.dir / "log4j.properties"
        logging = (
            [f"-Dlog4j.configuration=file:{log_config}"]
            if self.topology.kafka_version.startswith("3.")
            else [f"-Dlog4j2.configurationFile={log_config}"]
        )
        heap = f"{self.topology.heap_mb}m"
        return [
            os.environ.get("ACKLAB_JAVA", "java"),
            f"-Xmx{heap}",
            "-Xms128m",
            "-XX:+UseG1GC",
            "-XX:MaxGCPauseMillis=20",
            "-Djava.awt.headless=true",
            f"-Dkafka.logs.dir={node.dir}",
            *logging,
            "-cp",
            f"{self._libs}/*",
            main,
            *args,
        ]
