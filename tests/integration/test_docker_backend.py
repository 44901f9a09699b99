"""The Docker backend on a real engine, with a Kafka image built here from local files.

The engine is started for the session when none answers and `dockerd` is installed (as root); the
tests skip, saying why, when there is no engine. The key check runs one scenario (leader-ack and
idempotent under a leader SIGKILL) through both backends, each audited by Spark and judged by GX,
and requires the same verdicts, all passing.
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import docker
import pytest

from acklab.cluster.docker import IMAGE_ENV, LABEL_CLUSTER, LABEL_RUN, DockerCluster, reap_containers
from acklab.cluster.state import ClusterState, process_matches
from acklab.paths import PROJECT_ROOT
from acklab.pipeline import attach, matrix_rows, run_pipeline
from acklab.scenario import new_run_dir
from acklab.topology import load_topology

pytestmark = pytest.mark.integration

DOCKER_DIR = PROJECT_ROOT / "docker"
SCENARIO = {"profiles": ["leader-ack", "idempotent"], "faults": ["leader-kill"], "messages": 15000, "rate": 5000, "fault_at_s": 1.0}


def _load_script(path: Path) -> ModuleType:
    """Import a script of docker/ by path (the folder is no package, and `docker` is the SDK's name)."""
    spec = importlib.util.spec_from_file_location(f"acklab_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _containers(root: Path) -> list[docker.models.containers.Container]:
    return docker.from_env().containers.list(all=True, filters={"label": f"{LABEL_CLUSTER}={root}"})


@pytest.fixture(scope="session")
def docker_engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """An answering engine: the running one, or a `dockerd` started (and stopped) by this fixture."""
    engine = _load_script(DOCKER_DIR / "engine.py")
    try:
        started = engine.start(tmp_path_factory.mktemp("dockerd") / "dockerd.log")
    except engine.EngineUnavailable as exc:
        pytest.skip(f"Docker backend not tested: {exc}")
    yield
    if started is not None:
        engine.stop(started)


@pytest.fixture(scope="module")
def docker_env(docker_engine: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The local Kafka image (built unless cached) selected for the backend, and a private GX project."""
    builder = _load_script(DOCKER_DIR / "kafka" / "build_image.py")
    image = builder.build(load_topology("three-brokers").kafka_version)
    expectations = tmp_path_factory.mktemp("expectations")
    shutil.copytree(PROJECT_ROOT / "expectations" / "gx", expectations / "gx", ignore=shutil.ignore_patterns("uncommitted"))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(IMAGE_ENV, image)
        patch.setenv("ACKLAB_EXPECTATIONS", str(expectations))
        yield image


def test_same_verdicts_as_local_backend(docker_env: str) -> None:
    runs = {backend: run_pipeline({**SCENARIO, "backend": backend}) for backend in ("docker", "local")}
    verdicts = {backend: {s.scenario: s.status for s in run.verdict.scenarios} for backend, run in runs.items()}
    summaries = {backend: run.verdict.summary_lines() for backend, run in runs.items()}
    assert verdicts["docker"] == verdicts["local"], summaries
    assert set(verdicts["docker"].values()) == {"pass"}, summaries
    assert len(verdicts["docker"]) == 2

    docker_root = runs["docker"].run_dir / "cluster"
    assert ClusterState.load(docker_root).backend == "docker"
    assert _containers(docker_root) == [], "teardown left containers"
    for node in ClusterState.load(docker_root).nodes:  # formatted and started in their containers
        assert "Formatting metadata directory" in (node.dir / "stdout.log").read_text(errors="replace")
        assert "Kafka Server started" in (node.dir / "server.log").read_text(errors="replace")
    rows = {backend: {row["scenario"]: row for row in matrix_rows(run.matrix_json)} for backend, run in runs.items()}
    for scenario, row in rows["docker"].items():
        assert row["guarantee"] == rows["local"][scenario]["guarantee"]
        assert row["sent"] == SCENARIO["messages"]
    assert (rows["docker"]["idempotent__leader-kill"]["lost"], rows["docker"]["idempotent__leader-kill"]["duplicates"]) == (0, 0)


def test_container_faults_attach_and_reaper(docker_env: str) -> None:
    """Faults map to container states; any process can attach; an orphan is reaped by its labels."""
    owner = subprocess.Popen(["sleep", "600"])
    run_dir = new_run_dir()
    root = run_dir / "cluster"
    try:
        DockerCluster.provision(load_topology("single-broker"), root, owner_pid=owner.pid)
        cluster = attach(run_dir)
        assert isinstance(cluster, DockerCluster)
        (node,) = cluster.state.nodes
        (container,) = _containers(root)
        assert container.labels[LABEL_RUN] == run_dir.name
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
    assert root in reap_containers(docker.from_env())
    assert _containers(root) == []
    assert ClusterState.load(root).status == "torn-down"
    assert not node.data_dir.exists()
    assert not process_matches(proxy.pid, proxy.create_time)
