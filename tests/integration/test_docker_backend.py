"""The Docker backend on a real engine, with a Kafka image built here from local files.

The engine is started for the session when none answers and `dockerd` is installed (as root); the
tests skip, saying why, when there is no engine. The key check runs one scenario (leader-ack and
idempotent under a leader SIGKILL) through both backends, each audited by Spark and judged by GX,
and requires the same verdicts, all passing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

from acklab.base.paths import PROJECT_ROOT, runs_dir
from acklab.cluster import docker_image, links
from acklab.cluster.backends import reap_orphans
from acklab.cluster.cluster import Cluster
from acklab.cluster.docker import IMAGE_ENV, LABEL_CLUSTER, LABEL_RUN, DockerRunner, reap_containers
from acklab.cluster.state import STATE_FILE, ClusterState, process_matches
from acklab.cluster.topology import load_topology
from acklab.orchestration.pipeline import run_pipeline
from acklab.store.runs import RunDir

from .helpers import host_network_state

pytestmark = pytest.mark.integration

SCENARIO = {"profiles": ["leader-ack", "idempotent"], "faults": ["leader-kill"], "messages": 15000, "rate": 5000, "fault_at_s": 1.0}


def _containers(root: Path) -> list[docker.models.containers.Container]:
    return docker.from_env().containers.list(all=True, filters={"label": f"{LABEL_CLUSTER}={root}"})


@pytest.fixture(scope="module")
def docker_env(docker_engine: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The local Kafka image (built unless cached) selected for the backend, and a private GX project."""
    image = docker_image.build(load_topology("three-brokers").kafka_version)
    expectations = tmp_path_factory.mktemp("expectations")
    shutil.copytree(PROJECT_ROOT / "expectations" / "gx", expectations / "gx", ignore=shutil.ignore_patterns("uncommitted"))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(IMAGE_ENV, image)
        patch.setenv("ACKLAB_EXPECTATIONS", str(expectations))
        yield image


@pytest.mark.slow  # 166 s; the Docker backend's own faults and reaper stay in `make test`
def test_same_verdicts_as_local_backend(docker_env: str) -> None:
    runs = {backend: run_pipeline({**SCENARIO, "backend": backend}) for backend in ("docker", "local")}
    verdicts = {backend: {s.scenario: s.status for s in run.verdict.checked} for backend, run in runs.items()}
    summaries = {backend: run.verdict.summary_lines() for backend, run in runs.items()}
    assert verdicts["docker"] == verdicts["local"], summaries
    assert set(verdicts["docker"].values()) == {"pass"}, summaries
    assert len(verdicts["docker"]) == 2

    docker_root = runs["docker"].run.cluster
    assert ClusterState.load(docker_root).backend == "docker"
    assert _containers(docker_root) == [], "teardown left containers"
    for node in ClusterState.load(docker_root).nodes:  # formatted and started in their containers
        assert "Formatting metadata directory" in (node.dir / "stdout.log").read_text(errors="replace")
        assert "Kafka Server started" in (node.dir / "server.log").read_text(errors="replace")
    rows = {backend: {row["scenario"]: row for row in run.run.read_matrix() if not row["control"]} for backend, run in runs.items()}
    for scenario, row in rows["docker"].items():
        assert row["guarantee"] == rows["local"][scenario]["guarantee"]
        assert row["sent"] == SCENARIO["messages"]
    assert (rows["docker"]["idempotent__leader-kill"]["lost"], rows["docker"]["idempotent__leader-kill"]["duplicates"]) == (0, 0)


def test_container_faults_attach_and_reaper(docker_env: str) -> None:
    """Faults map to container states; any process can attach; an orphan is reaped with its containers,
    and containers whose cluster folder is gone are removed by their labels."""
    owner = subprocess.Popen(["sleep", "600"])
    run_dir = RunDir.create()
    root = run_dir.cluster
    try:
        Cluster.provision(load_topology("single-broker"), root, "docker", owner_pid=owner.pid)
        cluster = Cluster.attach(root)
        assert isinstance(cluster.runner, DockerRunner)
        (node,) = cluster.state.nodes
        (container,) = _containers(root)
        assert container.labels[LABEL_RUN] == run_dir.run_id
        assert container.attrs["HostConfig"]["NetworkMode"] == "host"
        assert container.attrs["Config"]["Image"] == docker_env

        cluster.pause(node.node_id)
        container.reload()
        assert (container.status, cluster.is_running(node.node_id)) == ("paused", True)
        cluster.resume(node.node_id)
        cluster.kill(node.node_id)
        container.reload()
        assert (container.status, container.attrs["State"]["ExitCode"], cluster.is_running(node.node_id)) == ("exited", 137, False)
        cluster.start(node.node_id)
        cluster.wait_healthy(90)
        assert cluster.active_controller() == node.node_id
        cluster.stop(node.node_id)
        container.reload()
        assert (container.status, container.attrs["State"]["ExitCode"]) == ("exited", 143)
        cluster.start(node.node_id)
        assert cluster.is_running(node.node_id)
    finally:
        owner.kill()
        owner.wait()
    proxy = cluster.state.proxy
    assert process_matches(proxy.pid, proxy.create_time)
    assert root in reap_orphans(runs_dir())
    assert _containers(root) == []
    assert ClusterState.load(root).status == "torn-down"
    assert not node.data_dir.exists()
    assert not process_matches(proxy.pid, proxy.create_time)

    # A container whose cluster folder lost its state file is a stray: removed by its labels.
    stray = Cluster.provision(load_topology("single-broker"), RunDir.create().cluster, "docker", owner_pid=os.getpid())
    try:
        (stray.root / STATE_FILE).unlink()
        assert stray.root in reap_containers(docker.from_env()) and _containers(stray.root) == []
    finally:
        stray.teardown()


@pytest.mark.skipif(bool(links.unavailable()), reason=f"link faults: {links.unavailable()}")
def test_an_isolated_leader_in_containers(docker_env: str) -> None:
    """Link faults on the Docker backend: each container's processes are placed in its node's
    cgroup, so the host's rules cut the links between containers; an isolated leader acknowledges
    acks=1 writes that are lost, the idempotent producer loses none; no rule or cgroup is left."""
    before = host_network_state()
    run = run_pipeline(
        {"profiles": ["leader-ack", "idempotent"], "faults": ["leader-isolate"], "messages": 70000, "rate": 5000,
         "fault_at_s": 2, "fault_duration_s": 8, "backend": "docker"}
    )
    assert {s.status for s in run.verdict.checked} == {"pass"}, run.verdict.summary_lines()
    (event,) = next(s for s in run.run.read_manifest().scenarios if not s.control).fault_timeline
    assert event.effective and "moved" in event.effect, event
    rows = {row["scenario"]: row for row in run.run.read_matrix()}
    assert rows["leader-ack__leader-isolate"]["lost"] > 0
    assert (rows["idempotent__leader-isolate"]["lost"], rows["idempotent__leader-isolate"]["duplicates"]) == (0, 0)
    assert _containers(run.run.cluster) == []
    assert host_network_state() == before
