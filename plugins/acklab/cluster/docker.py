"""The Docker backend's node runner: one container per KRaft node, through the Docker SDK.

Containers use the host network and bind 127.0.0.1 ports exactly like the local JVMs (same ports
plan, same rendered `server.properties`, node folders bind-mounted at the same path), so the fault
proxy, admin clients and the Spark audit reach them the same way and no traffic leaves 127.0.0.0/8.
A user-defined bridge would need port publishing and per-container addresses for nothing the
faults use: client-side network faults are the fault proxy's (partition, latency, ack loss), and
node-to-node links are cut on the host network like the local backend's (`acklab.cluster.links`:
each container's processes are moved into the node's cgroup as it starts, `pids`). Process faults map to container operations: kill = SIGKILL,
stop = SIGTERM then SIGKILL after the timeout, pause/resume = cgroup freezer.

The image must have `java` and `sh` on PATH and the Kafka jars in /opt/kafka/libs, as the official
`apache/kafka:<version>` (the default) has; `ACKLAB_KAFKA_IMAGE` (`{kafka_version}` is substituted)
selects another, e.g. the one `acklab docker image` builds from local files.
Everything created carries the labels `acklab.run`, `acklab.cluster` (its folder) and
`acklab.node`; teardown and the reaper remove containers by label. `acklab.cluster.docker_engine`
starts an engine where none runs, `acklab.cluster.docker_image` builds a Kafka image from host files.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shlex
from collections.abc import Callable
from pathlib import Path

import docker
import psutil
from docker.errors import APIError, DockerException, ImageNotFound, NotFound
from docker.models.containers import Container

from acklab.cluster.errors import ClusterStartError
from acklab.cluster.jvm import KAFKA_MAIN, STORAGE_TOOL, java_command
from acklab.cluster.layout import SERVER_CONFIG
from acklab.cluster.local import STDOUT_LOG
from acklab.cluster.state import STATE_FILE, ClusterState, NodeState
from acklab.cluster.topology import Topology

log = logging.getLogger(__name__)

IMAGE_ENV = "ACKLAB_KAFKA_IMAGE"
DEFAULT_IMAGE = "apache/kafka:{kafka_version}"
KAFKA_LIBS_IN_IMAGE = Path("/opt/kafka/libs")
LABEL_RUN, LABEL_CLUSTER, LABEL_NODE = "acklab.run", "acklab.cluster", "acklab.node"
# Exit codes of our own faults (SIGKILL, SIGTERM); any other exit of a node is a crash.
FAULT_EXIT_CODES = {137, 143}


def default_image(kafka_version: str) -> str:
    """`ACKLAB_KAFKA_IMAGE` if set and not empty, else the official image of that version."""
    return (os.environ.get(IMAGE_ENV) or DEFAULT_IMAGE).format(kafka_version=kafka_version)


def engine() -> docker.DockerClient:
    """A client of the Docker engine from the environment (DOCKER_HOST or the local socket)."""
    try:
        client = docker.from_env()
        client.ping()
    except DockerException as exc:
        raise ClusterStartError(f"no Docker engine answering ({exc}); start one (`make docker-engine`) or use backend=local") from None
    return client


def container_name(root: Path, node_id: int) -> str:
    return re.sub(r"[^a-zA-Z0-9_.-]", "-", f"acklab-{root.parent.name}-node-{node_id}")


def remove_containers(root: Path) -> None:
    """Force-remove every container labelled with the cluster folder `root` (and its anonymous volumes)."""
    try:
        client = docker.from_env()
        containers = client.containers.list(all=True, filters={"label": f"{LABEL_CLUSTER}={root}"})
    except DockerException as exc:
        log.warning("cannot reach the Docker engine to remove the containers of %s: %s", root, exc)
        return
    for container in containers:
        with contextlib.suppress(NotFound):
            container.remove(force=True, v=True)


def reap_containers(client: docker.DockerClient) -> list[Path]:
    """Remove acklab containers whose cluster folder is gone or torn down, in any run store (the
    reaper tears down orphaned clusters, containers included, from their `cluster.json`)."""
    roots = {Path(c.labels[LABEL_CLUSTER]) for c in client.containers.list(all=True, filters={"label": LABEL_CLUSTER})}
    reaped = []
    for root in sorted(roots):
        try:
            state = ClusterState.load(root) if (root / STATE_FILE).exists() else None
        except (ValueError, OSError):
            state = None
        if state is None or state.status != "running":
            remove_containers(root)
            reaped.append(root)
    return reaped


class DockerRunner:
    """Nodes as containers on the host network, one per node, with the local backend's ports plan,
    configs and JVM command line; the node folder is mounted at its host path."""

    name = "docker"

    def __init__(self, state: ClusterState, root: Path) -> None:
        self._state, self._root = state, root
        self._engine: docker.DockerClient | None = None

    @property
    def _client(self) -> docker.DockerClient:
        """The engine, reached on first use (teardown works without one: see `remove`)."""
        if self._engine is None:
            self._engine = engine()
        return self._engine

    @classmethod
    def check_ready(cls, topology: Topology) -> None:
        _ensure_image(engine(), default_image(topology.kafka_version))

    @classmethod
    def reap_strays(cls) -> list[str]:
        return [str(root) for root in reap_containers(engine())]

    def create(self, node: NodeState) -> None:
        """A container that formats the node's storage on first start, then runs the broker; its
        output goes to `<node>/stdout.log`, as with the local backend, and survives teardown."""
        topology = self._state.topology
        data = shlex.quote(str(node.data_dir))
        config = str(node.dir / SERVER_CONFIG)
        jar = KAFKA_LIBS_IN_IMAGE / f"kafka_2.13-{topology.kafka_version}.jar"
        format_ = shlex.join(self._java(node, STORAGE_TOOL, "format", "-t", self._state.cluster_id, "-c", config))
        script = (
            f"[ -e {jar} ] || {{ echo 'image has no Kafka {topology.kafka_version} ({jar})'; exit 3; }}\n"
            f"[ -e {data}/meta.properties ] || {format_} || exit 4\n"
            f"exec {shlex.join(self._java(node, KAFKA_MAIN, config))}"
        )
        log_file = shlex.quote(str(node.dir / STDOUT_LOG))
        self._client.containers.create(
            default_image(topology.kafka_version),
            ["sh", "-c", f"{{\n{script}\n}} >> {log_file} 2>&1"],
            name=container_name(self._root, node.node_id),
            labels={LABEL_RUN: self._root.parent.name, LABEL_CLUSTER: str(self._root), LABEL_NODE: str(node.node_id)},
            network_mode="host",
            user=f"{os.getuid()}:{os.getgid()}",
            volumes={str(node.dir): {"bind": str(node.dir), "mode": "rw"}},
            working_dir="/tmp",
        )

    def _java(self, node: NodeState, main: str, *args: str) -> list[str]:
        return java_command("java", str(KAFKA_LIBS_IN_IMAGE), node, self._state.topology, main, *args)

    def _container(self, node: NodeState) -> Container | None:
        try:
            return self._client.containers.get(container_name(self._root, node.node_id))
        except NotFound:
            return None

    def start(self, node: NodeState) -> None:
        container = self._container(node)
        if container is None:
            raise ClusterStartError(f"no container for node {node.node_id} (cluster torn down?)")
        if not container.attrs["State"]["Running"]:
            container.start()

    def set_restart_priority(self, node: NodeState, raised: bool) -> None:
        """Containers keep their peers' CPU shares."""

    def kill(self, node: NodeState) -> None:
        self._end(node, lambda container: container.kill())

    def stop(self, node: NodeState, timeout_s: float) -> None:
        self._end(node, lambda container: container.stop(timeout=int(timeout_s)))

    def pause(self, node: NodeState) -> None:
        self._quietly(node, Container.pause)

    def resume(self, node: NodeState) -> None:
        self._quietly(node, Container.unpause)

    def alive(self, node: NodeState) -> bool:
        container = self._container(node)
        return container is not None and bool(container.attrs["State"]["Running"])

    def paused(self, node: NodeState) -> bool:
        container = self._container(node)
        return container is not None and bool(container.attrs["State"]["Paused"])

    def pids(self, node: NodeState) -> list[int]:
        """The container's first process (host pid) and its descendants."""
        container = self._container(node)
        pid = container.attrs["State"]["Pid"] if container is not None and container.attrs["State"]["Running"] else 0
        if not pid:
            return []
        try:
            return [pid, *(child.pid for child in psutil.Process(pid).children(recursive=True))]
        except psutil.NoSuchProcess:
            return []

    def crashed(self, node: NodeState) -> str | None:
        container = self._container(node)
        if container is None:
            return f"container of node {node.node_id} is gone"
        state = container.attrs["State"]
        if state["Status"] != "exited" or state["ExitCode"] in FAULT_EXIT_CODES:
            return None
        log_file = node.dir / STDOUT_LOG
        tail = log_file.read_text(errors="replace")[-800:] if log_file.exists() else ""
        return f"node {node.node_id} exited with {state['ExitCode']}: {tail}"

    def remove(self, state: ClusterState) -> None:
        remove_containers(self._root)

    def _end(self, node: NodeState, action: Callable[[Container], object]) -> None:
        container = self._container(node)
        if container is None or not container.attrs["State"]["Running"]:
            return
        if container.attrs["State"]["Paused"]:
            container.unpause()  # a frozen process cannot die
        try:
            action(container)
        except APIError as exc:  # already exited in between
            if exc.status_code != 409:
                raise
        container.wait(timeout=30)

    def _quietly(self, node: NodeState, operation: Callable[[Container], object]) -> None:
        """Pause/unpause; like signalling a process that is gone, a no-op on a node not in that state."""
        container = self._container(node)
        if container is None:
            return
        try:
            operation(container)
        except APIError as exc:
            if exc.status_code != 409:
                raise


def _ensure_image(client: docker.DockerClient, image: str) -> None:
    """The image is present, or pulled; otherwise a clear error saying how to build one locally."""
    try:
        client.images.get(image)
        return
    except ImageNotFound:
        pass
    try:
        client.images.pull(image)
    except DockerException as exc:
        raise ClusterStartError(
            f"image {image} is not present and could not be pulled ({exc}); build one from local files with "
            f"`make docker-image` and set {IMAGE_ENV}"
        ) from None
