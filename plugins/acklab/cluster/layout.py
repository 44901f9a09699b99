"""A cluster's layout before it runs: free ports, the node plan, the KRaft cluster id and the
rendered broker configs (`clusters/templates/`). Shared by every backend."""

from __future__ import annotations

import base64
import socket
import uuid
from contextlib import ExitStack
from pathlib import Path

from jinja2 import Environment, FileSystemLoader, StrictUndefined

from acklab.base.paths import clusters_dir
from acklab.cluster.state import ClusterState, NodeState
from acklab.cluster.topology import Topology

LOG_CONFIG = "log4j.properties"  # each node's logging config, in its folder
GC_LOG = "gc-%p.log"  # each node JVM's GC pauses and safepoints (%p: its pid), in the node's folder: a stalled broker misses its heartbeats
SERVER_CONFIG = "server.properties"


def free_ports(count: int) -> list[int]:
    """Ports the kernel reports free on 127.0.0.1 (held open together so they differ)."""
    with ExitStack() as stack:
        sockets = [stack.enter_context(socket.socket()) for _ in range(count)]
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]


def new_cluster_id() -> str:
    """A random KRaft cluster id; like Kafka's Uuid.randomUuid, never starting with '-' (the
    storage tool would read it as an option)."""
    while (cluster_id := base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")).startswith("-"):
        pass
    return cluster_id


def plan_nodes(topology: Topology, root: Path) -> list[NodeState]:
    """One node per broker and controller id, with fresh ports and a folder under `root`."""
    ports = iter(free_ports(4 * topology.brokers + len(topology.controller_ids)))
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
    return nodes


def uses_log4j1(kafka_version: str) -> bool:
    """Kafka 3.x logs through log4j 1 (reload4j); 4.x through log4j 2."""
    return kafka_version.startswith("3.")


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
    rendered = _templates().get_template("server.properties.j2").render(node=node, topology=topology, voters="")
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
        rendered = templates.get_template("server.properties.j2").render(node=node, topology=topology, voters=voters)
        (node.dir / SERVER_CONFIG).write_text(rendered + "\n")
        (node.dir / LOG_CONFIG).write_text(templates.get_template(log_template).render(log_dir=node.dir) + "\n")
