"""The Docker backend: one container per KRaft node, through the Docker SDK.

Containers use the host network and bind 127.0.0.1 ports exactly like the local JVMs (same ports
plan, same rendered `server.properties`, node folders bind-mounted at the same path), so the fault
proxy, admin clients and the Spark audit reach them the same way and no traffic leaves 127.0.0.0/8.
A user-defined bridge would need port publishing and per-container addresses for nothing the
faults use: network faults are the fault proxy's (partition, latency, ack loss), so there is no
container network to disconnect. Process faults map to container operations: kill = SIGKILL,
stop = SIGTERM then SIGKILL after the timeout, pause/resume = cgroup freezer.

The image must have `java` and `sh` on PATH and the Kafka jars in /opt/kafka/libs, as the official
`apache/kafka:<version>` (the default) has; `ACKLAB_KAFKA_IMAGE` (`{kafka_version}` is substituted)
selects another, e.g. the one `docker/kafka/build_image.py` builds from local files.
Everything created carries the labels `acklab.run`, `acklab.cluster` (its folder) and
`acklab.node`; teardown and the reaper remove containers by label.
"""

from __future__ import annotations

import logging
import os
import re
import shlex
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import docker
from docker.errors import APIError, DockerException, ImageNotFound, NotFound
from docker.models.containers import Container

from acklab.cluster.local import (
    KAFKA_MAIN,
    STORAGE_TOOL,
    ClusterStartError,
    LocalCluster,
    _free_ports,
    _new_cluster_id,
    _plan_nodes,
)
from acklab.cluster.state import (
    STATE_FILE,
    ClusterState,
    NodeState,
    ProcessState,
    kill_and_remove,
    process_create_time,
    process_matches,
    reap_orphans,
)
from acklab.paths import runs_dir
from acklab.topology import Topology

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
        try:
            container.remove(force=True, v=True)
        except NotFound:
            pass


def reap_containers(client: docker.DockerClient) -> list[Path]:
    """Remove acklab containers whose cluster is gone, torn down or orphaned, in any run store."""
    roots = {Path(c.labels[LABEL_CLUSTER]) for c in client.containers.list(all=True, filters={"label": LABEL_CLUSTER})}
    reaped = []
    for root in sorted(roots):
        try:
            state = ClusterState.load(root) if (root / STATE_FILE).exists() else None
        except (ValueError, OSError):
            state = None
        if state is None or state.status != "running":
            remove_containers(root)
        elif state.is_orphaned():
            kill_and_remove(state, root)
        else:
            continue
        reaped.append(root)
    return reaped


class DockerCluster(LocalCluster):
    """The local backend's cluster (ports, configs, proxy, health, teardown) with containers for nodes."""

    def __init__(self, state: ClusterState, root: Path, client: docker.DockerClient | None = None) -> None:
        super().__init__(state, root, KAFKA_LIBS_IN_IMAGE)
        self._client = client or engine()

    @classmethod
    def provision(
        cls,
        topology: Topology,
        root: Path,
        *,
        owner_pid: int | None = None,
        lease_s: float = 3600.0,
        timeout_s: float = 120.0,
        image: str | None = None,
    ) -> DockerCluster:
        """Reap orphans, create one container per node from `image` and wait until the cluster is healthy."""
        client = engine()
        reap_orphans(runs_dir())
        reap_containers(client)
        image = image or default_image(topology.kafka_version)
        _ensure_image(client, image)
        root.mkdir(parents=True, exist_ok=True)
        state = ClusterState(
            backend="docker",
            topology=topology,
            cluster_id=_new_cluster_id(),
            nodes=_plan_nodes(topology, root),
            proxy=ProcessState(control_port=_free_ports(1)[0]),
            owner_pid=owner_pid,
            owner_create_time=process_create_time(owner_pid) if owner_pid else None,
            lease_deadline=time.time() + lease_s,
        )
        cluster = cls(state, root, client)
        try:
            cluster._write_configs()
            cluster._start_proxy()
            with ThreadPoolExecutor(max_workers=len(state.nodes)) as pool:
                list(pool.map(lambda node: cluster._create(node, image).start(), state.nodes))
            cluster.wait_healthy(timeout_s)
        except BaseException:
            cluster.teardown()
            raise
        return cluster

    # ---- containers ------------------------------------------------------------------------

    def _create(self, node: NodeState, image: str) -> Container:
        """A container that formats the node's storage on first start, then runs the broker.

        The node folder is mounted at its host path, so the rendered configs apply unchanged; the
        broker's output goes to `<node>/stdout.log` as with the local backend and survives teardown."""
        data = shlex.quote(str(node.data_dir))
        config = str(node.dir / "server.properties")
        jar = KAFKA_LIBS_IN_IMAGE / f"kafka_2.13-{self.topology.kafka_version}.jar"
        format_ = shlex.join(self._in_image(node, STORAGE_TOOL, "format", "-t", self.state.cluster_id, "-c", config))
        script = (
            f"[ -e {jar} ] || {{ echo 'image has no Kafka {self.topology.kafka_version} ({jar})'; exit 3; }}\n"
            f"[ -e {data}/meta.properties ] || {format_} || exit 4\n"
            f"exec {shlex.join(self._in_image(node, KAFKA_MAIN, config))}"
        )
        log_file = shlex.quote(str(node.dir / "stdout.log"))
        return self._client.containers.create(
            image,
            ["sh", "-c", f"{{\n{script}\n}} >> {log_file} 2>&1"],
            name=container_name(self.root, node.node_id),
            labels={LABEL_RUN: self.root.parent.name, LABEL_CLUSTER: str(self.root), LABEL_NODE: str(node.node_id)},
            network_mode="host",
            user=f"{os.getuid()}:{os.getgid()}",
            volumes={str(node.dir): {"bind": str(node.dir), "mode": "rw"}},
            working_dir="/tmp",
        )

    def _in_image(self, node: NodeState, main: str, *args: str) -> list[str]:
        """The local backend's JVM command line (same heap, GC, logging), with the image's `java`."""
        return ["java", *self._java(node, main, *args)[1:]]

    def _container(self, node_id: int) -> Container | None:
        self.state.node(node_id)  # KeyError for an unknown node, as the local backend
        try:
            return self._client.containers.get(container_name(self.root, node_id))
        except NotFound:
            return None

    # ---- process control (faults) ----------------------------------------------------------

    def is_running(self, node_id: int) -> bool:
        """Running or paused (like a SIGSTOPped local process)."""
        container = self._container(node_id)
        return container is not None and bool(container.attrs["State"]["Running"])

    def pid(self, node_id: int) -> int | None:
        container = self._container(node_id)
        return (container.attrs["State"]["Pid"] or None) if container is not None else None

    def start(self, node_id: int) -> None:
        container = self._container(node_id)
        if container is None:
            raise ClusterStartError(f"no container for node {node_id} (cluster torn down?)")
        if not container.attrs["State"]["Running"]:
            container.start()

    def kill(self, node_id: int) -> None:
        """SIGKILL the container's broker and wait for the container to exit."""
        self._end(node_id, lambda container: container.kill())

    def stop(self, node_id: int, timeout_s: float = 60.0) -> None:
        """SIGTERM (controlled shutdown); SIGKILL after `timeout_s`."""
        self._end(node_id, lambda container: container.stop(timeout=int(timeout_s)))

    def pause(self, node_id: int) -> None:
        self._quietly(node_id, Container.pause)

    def resume(self, node_id: int) -> None:
        self._quietly(node_id, Container.unpause)

    def _end(self, node_id: int, action: Callable[[Container], object]) -> None:
        container = self._container(node_id)
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

    def _quietly(self, node_id: int, operation: Callable[[Container], object]) -> None:
        """Pause/unpause; like signalling a process that is gone, a no-op on a node not in that state."""
        container = self._container(node_id)
        if container is None:
            return
        try:
            operation(container)
        except APIError as exc:
            if exc.status_code != 409:
                raise

    # ---- health and metadata ---------------------------------------------------------------

    def _check_alive(self) -> None:
        """Fail fast when the proxy or a node exited on its own (not by one of our faults)."""
        if not process_matches(self.state.proxy.pid, self.state.proxy.create_time):
            raise ClusterStartError(f"fault proxy exited: {(self.root / 'proxy.log').read_text(errors='replace')[-800:]}")
        for node in self.state.nodes:
            container = self._container(node.node_id)
            if container is None:
                raise ClusterStartError(f"container of node {node.node_id} is gone")
            state = container.attrs["State"]
            if state["Status"] == "exited" and state["ExitCode"] not in FAULT_EXIT_CODES:
                log_file = node.dir / "stdout.log"
                tail = log_file.read_text(errors="replace")[-800:] if log_file.exists() else ""
                raise ClusterStartError(f"node {node.node_id} exited with {state['ExitCode']}: {tail}")


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
