"""A running Kafka cluster on any backend: provisioning, the fault proxy, node control by id,
the health gate and teardown. Backends differ only in their `NodeRunner`."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import threading
import time
from collections.abc import Collection
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from acklab.base.maven import kafka_libs
from acklab.base.paths import runs_dir
from acklab.cluster import backends, links, transactions
from acklab.cluster.admin import PROBE_TOPIC, ClusterAdmin, PartitionState
from acklab.cluster.errors import ClusterStartError, PortTakenError
from acklab.cluster.layout import SERVER_LOG, new_cluster_id, plan_nodes, write_configs
from acklab.cluster.links import Links
from acklab.cluster.local import STDOUT_LOG
from acklab.cluster.runner import NodeRunner
from acklab.cluster.state import ClusterState, NodeState, ProcessState, beat, process_create_time, process_matches
from acklab.cluster.topology import Topology
from acklab.cluster.transactions import OpenTransaction
from acklab.proxy.control import ProxyControl, ProxyControlError
from acklab.proxy.server import ProxySpec, Route

log = logging.getLogger(__name__)
METADATA_PARTITION = "__cluster_metadata-0"
PROXY_SPEC, PROXY_LOG = "proxy.json", "proxy.log"  # in the cluster folder
PORT_TAKEN = "address already in use"  # in a node's or the proxy's output (any case) when its port was taken
RESTART_PRIORITY_S = 120.0  # a restarted broker's raised priority lasts at most this long (`Cluster.start`)


def _start_error(message: str, *logs: Path) -> ClusterStartError:
    """A PortTakenError quoting the line of `logs` (the failed process's output) that says a port
    was taken; else a ClusterStartError."""
    for log in logs:
        lines = log.read_text(errors="replace").splitlines() if log.exists() else []
        if taken := next((line.strip() for line in lines if PORT_TAKEN in line.lower()), None):
            return PortTakenError(f"{message} ({taken})")
    return ClusterStartError(message)


class Cluster:
    """A cluster whose nodes can be faulted by node id; every method works from any process via `attach`."""

    def __init__(self, state: ClusterState, root: Path, runner: NodeRunner) -> None:
        self.state, self.root, self.runner = state, root, runner
        self.topology = state.topology

    # ---- lifecycle -------------------------------------------------------------------------

    @classmethod
    def provision(
        cls,
        topology: Topology,
        root: Path,
        backend: backends.Backend = "local",
        *,
        owner_pid: int | None = None,
        heartbeat_s: float | None = None,
        lease_s: float = 3600.0,
        timeout_s: float = 120.0,
        cut_links: bool = False,
    ) -> Cluster:
        """Reap orphans, lay out and start every node and the fault proxy, and wait until healthy.

        The cluster is reaped (at the next provisioning, or by `acklab reap`) once `owner_pid` is
        gone, or once its heartbeat is older than `heartbeat_s` (tasks of the run refresh it with
        `acklab.cluster.state.keep_alive`), and in any case after `lease_s`. `cut_links`: set up
        node-to-node link control (`acklab.cluster.links`) before the nodes start, for faults that
        cut links. A node or the proxy that finds a planned port taken (the kernel handed it to
        another process between planning and binding) makes the cluster start once more on fresh
        ports."""
        try:
            return cls._provision(topology, root, backend, owner_pid, heartbeat_s, lease_s, timeout_s, cut_links)
        except PortTakenError:
            pass
        return cls._provision(topology, root, backend, owner_pid, heartbeat_s, lease_s, timeout_s, cut_links)

    @classmethod
    def _provision(
        cls,
        topology: Topology,
        root: Path,
        backend: backends.Backend,
        owner_pid: int | None,
        heartbeat_s: float | None,
        lease_s: float,
        timeout_s: float,
        cut_links: bool,
    ) -> Cluster:
        runner_class = backends.runner_class(backend)
        backends.reap_orphans(runs_dir())
        runner_class.reap_strays()
        links.reap_strays()
        runner_class.check_ready(topology)
        if cut_links and (problem := links.unavailable()):
            raise ClusterStartError(f"node-to-node link faults are unavailable here: {problem}")
        root.mkdir(parents=True, exist_ok=True)
        nodes, control_port = plan_nodes(topology, root)
        state = ClusterState(
            backend=backend,
            topology=topology,
            cluster_id=new_cluster_id(),
            nodes=nodes,
            proxy=ProcessState(control_port=control_port),
            owner_pid=owner_pid,
            owner_create_time=process_create_time(owner_pid) if owner_pid else None,
            lease_deadline=time.time() + lease_s,
            heartbeat_s=heartbeat_s,
        )
        if cut_links:
            state.links = links.plan(root, state.cluster_id, [node.node_id for node in state.nodes])
        beat(root)
        state.save(root)  # before anything is created: the reaper finds it all from here
        cluster = cls(state, root, backends.runner_for(state, root))
        try:
            write_configs(state)
            if cut_links:
                cluster.links().install()
            cluster._start_proxy()
            with ThreadPoolExecutor(max_workers=len(state.nodes)) as pool:
                list(pool.map(cluster.runner.create, state.nodes))
            for node in state.nodes:
                cluster._launch(node.node_id)
            cluster.wait_healthy(timeout_s)
        except BaseException:
            cluster.teardown()
            raise
        return cluster

    @classmethod
    def attach(cls, root: Path) -> Cluster:
        """Reconnect to a cluster provisioned by another process (e.g. an earlier Airflow task)."""
        state = ClusterState.load(root)
        return cls(state, root, backends.runner_for(state, root))

    def teardown(self) -> None:
        """Stop every node and the proxy and delete data dirs (logs stay as evidence); idempotent."""
        backends.teardown(self.state, self.root)

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
        """An admin client bootstrapped from the brokers not in `exclude` (e.g. a killed one)."""
        return ClusterAdmin(self._direct(exclude), timeout_s)

    def open_transactions(self, topic: str, partition: int) -> list[OpenTransaction]:
        """The transactions the partition's leader holds open (`acklab.cluster.transactions`)."""
        return transactions.open_transactions(kafka_libs(self.topology.kafka_version), self._direct(), topic, partition)

    def create_topic(self, topic: str, partitions: int, replication_factor: int, in_sync_timeout_s: float = 60.0) -> None:
        """Create `topic` and wait until every partition is fully in sync."""
        with self.admin() as admin:
            admin.create_topic(topic, partitions, replication_factor)
            admin.wait_in_sync(topic, in_sync_timeout_s)

    def partition(self, topic: str, partition: int, timeout_s: float = 5.0) -> PartitionState:
        """One partition's leader, replicas and ISR, through a client closed before returning."""
        with self.admin(timeout_s) as admin:
            return admin.partition(topic, partition)

    def links(self) -> Links:
        """Control of the links between nodes (provisioned with `cut_links`)."""
        if self.state.links is None:
            raise RuntimeError(f"cluster {self.root} was provisioned without node-to-node link control (cut_links)")
        return Links(self.state.links, self.state.nodes, self.root)

    def proxy(self) -> ProxyControl:
        """Control of the Kafka-aware fault proxy in front of every broker's client listener."""
        return ProxyControl(self.state.proxy.control_port)

    def _direct(self, exclude: Collection[int] = ()) -> str:
        return ",".join(f"127.0.0.1:{n.direct_port}" for n in self.state.nodes if n.is_broker and n.node_id not in exclude)

    def wait_healthy(self, timeout_s: float = 60.0) -> None:
        """The health gate: every broker registered, an active KRaft controller, a probe topic
        (RF = topology RF) fully in sync and no under-replicated partition in any topic."""
        deadline = time.monotonic() + timeout_s
        with self.admin() as admin:
            expected = set(self.topology.broker_ids)
            registered: set[int] = set()
            while time.monotonic() < deadline:
                self._check_alive()
                try:
                    registered = admin.broker_ids()
                    if registered == expected:
                        break
                except Exception:
                    pass
                time.sleep(0.3)
            else:
                raise ClusterStartError(f"brokers registered {sorted(registered)}, expected {sorted(expected)} after {timeout_s:.0f}s")
            for node in self.state.nodes:  # a restart's raised priority ends here at the latest (`start`)
                self.runner.set_restart_priority(node, raised=False)
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
        """Fail fast when the proxy or a node exited on its own."""
        if not process_matches(self.state.proxy.pid, self.state.proxy.create_time):
            raise self._proxy_failure("fault proxy exited")
        for node in self.state.nodes:
            if crash := self.runner.crashed(node):
                raise _start_error(crash, node.dir / STDOUT_LOG, node.dir / SERVER_LOG)

    # ---- node control (faults) -------------------------------------------------------------

    def is_running(self, node_id: int) -> bool:
        """Running or paused."""
        return self.runner.alive(self.state.node(node_id))

    def is_paused(self, node_id: int) -> bool:
        """Frozen by `pause`."""
        return self.runner.paused(self.state.node(node_id))

    def start(self, node_id: int) -> None:
        """Restart a stopped or killed node on its existing data (in its cgroup, with link control).

        On a host its peers share, a broker restarted under load gets a fraction of the CPU it would
        have on a host of its own, and takes several times as long to load its logs and rejoin. So
        until it is registered and unfenced again (at most `RESTART_PRIORITY_S`), it runs at a raised
        priority (`NodeRunner.set_restart_priority`); the health gate puts every node back level."""
        node = self._launch(node_id)
        if node.is_broker:
            self.runner.set_restart_priority(node, raised=True)
            threading.Thread(target=self._level_when_back, args=(node, node.pid), name=f"restart-priority-{node_id}", daemon=True).start()

    def _launch(self, node_id: int) -> NodeState:
        node = self.state.node(node_id)
        self.runner.start(node)
        self.state.save(self.root)
        if self.state.links is not None:
            self.links().place(node_id, self.runner.pids(node))
        return node

    def _level_when_back(self, node: NodeState, pid: int | None) -> None:
        """Put the restarted `node` (process `pid`) back at its peers' priority once it is registered
        and unfenced, gone, or `RESTART_PRIORITY_S` after its start."""
        started = time.monotonic()
        back = False
        try:
            with self.admin(timeout_s=2.0) as admin:
                while not back and time.monotonic() < started + RESTART_PRIORITY_S and node.pid == pid and self.runner.alive(node):
                    try:
                        back = node.node_id in admin.broker_ids()
                    except Exception:  # the cluster is busy or changing: asked again
                        pass
                    if not back:
                        time.sleep(0.5)
        finally:
            if node.pid == pid:
                self.runner.set_restart_priority(node, raised=False)
                log.info("broker %d: raised priority for %.1fs (%s)", node.node_id, time.monotonic() - started, "back" if back else "not back")

    def kill(self, node_id: int) -> None:
        """SIGKILL: the process dies without flushing or leaving the ISR cleanly."""
        self.runner.kill(self.state.node(node_id))
        self.state.save(self.root)

    def stop(self, node_id: int, timeout_s: float = 60.0) -> None:
        """SIGTERM: controlled shutdown; waits for the process to exit."""
        self.runner.stop(self.state.node(node_id), timeout_s)
        self.state.save(self.root)

    def pause(self, node_id: int) -> None:
        """SIGSTOP: the process is frozen, its sockets stay open."""
        self.runner.pause(self.state.node(node_id))

    def resume(self, node_id: int) -> None:
        self.runner.resume(self.state.node(node_id))

    # ---- the fault proxy -------------------------------------------------------------------

    def _proxy_failure(self, message: str) -> ClusterStartError:
        """`message` with the tail of the proxy's log (`_start_error`)."""
        log = self.root / PROXY_LOG
        return _start_error(f"{message}: {log.read_text(errors='replace')[-800:]}", log)

    def _start_proxy(self) -> None:
        spec = ProxySpec(
            control_port=self.state.proxy.control_port,
            routes=[Route(broker=n.node_id, listen_port=n.proxy_port, upstream_port=n.client_port) for n in self.state.nodes if n.is_broker],
        )
        (self.root / PROXY_SPEC).write_text(spec.model_dump_json(indent=2))
        with open(self.root / PROXY_LOG, "ab") as log:
            process = subprocess.Popen(
                [sys.executable, "-m", "acklab.proxy.server", str(self.root / PROXY_SPEC)],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
            )
        self.state.proxy.pid, self.state.proxy.create_time = process.pid, process_create_time(process.pid)
        self.state.save(self.root)
        try:
            self.proxy().wait_ready(alive=lambda: process.poll() is None)
        except ProxyControlError as exc:
            raise self._proxy_failure(str(exc)) from None
