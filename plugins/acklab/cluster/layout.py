"""A cluster's layout before it runs: free ports, the node plan, the KRaft cluster id and the
rendered broker configs (`clusters/templates/`). Shared by every backend."""

from __future__ import annotations

import base64
import random
import socket
import uuid
from contextlib import ExitStack
from pathlib import Path

from jinja2 import Environment, FileSystemLoader, StrictUndefined

from acklab.base.paths import clusters_dir
from acklab.cluster.state import ClusterState, NodeState
from acklab.cluster.topology import Topology

LOG_CONFIG = "log4j.properties"  # each node's logging config, in its folder
SERVER_LOG = "server.log"  # each node's log, in its folder (kept at teardown)
GC_LOG = "gc-%p.log"  # each node JVM's GC pauses and safepoints (%p: its pid), in the node's folder: a stalled broker misses its heartbeats
SERVER_CONFIG = "server.properties"
GROUP_SESSION_TIMEOUT_MS, GROUP_HEARTBEAT_INTERVAL_MS = 6000, 1000
"""How long a consumer-group member lives without a heartbeat, and how often it beats: what
acklab's processors ask of a classic group, and what the brokers give KIP-848 groups
(`group.protocol=consumer`, where both are the broker's; Kafka's defaults, 45 s and 5 s, would keep
a killed member's partitions unconsumed 45 s and hand a late member its share 5 s late)."""
PORT_FLOOR = 10000  # ports acklab picks for its servers are at least this (above the common services')
EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")  # Linux: the local ports outgoing connections get


def free_ports(count: int) -> list[int]:
    """Distinct ports free on 127.0.0.1, below the kernel's ephemeral range where it can: outgoing
    connections draw their local port from that range, so a port chosen below it is not taken by
    one before its server binds it, nor while its server is down (a killed broker)."""
    first_ephemeral = _first_ephemeral_port()
    candidates = list(range(PORT_FLOOR, first_ephemeral))
    random.shuffle(candidates)
    with ExitStack() as stack:
        ports: list[int] = []
        for port in candidates:
            if len(ports) == count:
                return ports
            sock = stack.enter_context(socket.socket())
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            ports.append(port)
        while len(ports) < count:  # no room below the ephemeral range: any port the kernel gives
            sock = stack.enter_context(socket.socket())
            sock.bind(("127.0.0.1", 0))
            ports.append(sock.getsockname()[1])
        return ports


def _first_ephemeral_port() -> int:
    try:
        return int(EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return PORT_FLOOR


def new_cluster_id() -> str:
    """A random KRaft cluster id; like Kafka's Uuid.randomUuid, never starting with '-' (the
    storage tool would read it as an option)."""
    while (cluster_id := base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")).startswith("-"):
        pass
    return cluster_id


def plan_nodes(topology: Topology, root: Path) -> tuple[list[NodeState], int]:
    """One node per broker and controller id, each with a folder under `root`, and the fault proxy's
    control port: every port fresh and distinct from the others."""
    ports = iter(free_ports(4 * topology.brokers + len(topology.controller_ids) + 1))
    nodes = []
    for node_id in topology.node_ids:
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
    return nodes, next(ports)


def uses_log4j1(kafka_version: str) -> bool:
    """Kafka 3.x logs through log4j 1 (reload4j); 4.x through log4j 2."""
    return kafka_version.startswith("3.")


_GROUPS = {"session_ms": GROUP_SESSION_TIMEOUT_MS, "heartbeat_ms": GROUP_HEARTBEAT_INTERVAL_MS}


def _templates() -> Environment:
    return Environment(loader=FileSystemLoader(clusters_dir() / "templates"), undefined=StrictUndefined)


def broker_settings(topology: Topology) -> dict[str, str]:
    """The settings a broker of `topology` runs with, as its rendered `server.properties` states them
    (the topology's overrides last); a setting it does not state has Kafka's default."""
    first = topology.broker_ids[0]
    controller = first in topology.controller_ids
    node = NodeState(
        node_id=first, roles=["broker", "controller"] if controller else ["broker"], client_port=0, proxy_port=0, direct_port=0,
        internal_port=0, controller_port=0 if controller else None, dir=Path("node"),
    )
    rendered = _templates().get_template("server.properties.j2").render(node=node, topology=topology, voters="", groups=_GROUPS)
    settings = {}
    for line in rendered.splitlines():
        if line.strip() and not line.lstrip().startswith("#") and "=" in line:
            key, value = line.split("=", 1)
            settings[key.strip()] = value.strip()
    return settings


def write_configs(state: ClusterState) -> None:
    """Render each node's `server.properties` and logging config into its folder."""
    templates = _templates()
    voters = ",".join(f"{n.node_id}@127.0.0.1:{n.controller_port}" for n in state.nodes if n.controller_port)
    topology = state.topology
    log_template = "log4j.properties.j2" if uses_log4j1(topology.kafka_version) else "log4j2.properties.j2"
    for node in state.nodes:
        node.data_dir.mkdir(parents=True, exist_ok=True)
        rendered = templates.get_template("server.properties.j2").render(node=node, topology=topology, voters=voters, groups=_GROUPS)
        (node.dir / SERVER_CONFIG).write_text(rendered + "\n")
        (node.dir / LOG_CONFIG).write_text(templates.get_template(log_template).render(log_file=node.dir / SERVER_LOG) + "\n")
