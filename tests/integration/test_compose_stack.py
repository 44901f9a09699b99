"""docker-compose.yaml started for real, alone and with its Celery variant (docker-compose.celery.yaml:
a Redis broker and two Celery workers): its images replaced by stand-ins built here (nothing can be
pulled), the smoke DAG triggered through the api-server's REST API with the Docker backend, the
run passing (on the Celery workers, in the variant); every service on loopback, and nothing left
after `docker-compose down -v`.

Only what cannot be the same here differs from a user's `docker compose up`: the images
(ACKLAB_STACK_IMAGE, ACKLAB_POSTGRES_IMAGE, ACKLAB_KAFKA_IMAGE), free ports, and an override file
that mounts this session's run store, GX project and jar cache at their host paths."""

from __future__ import annotations

import json
import secrets
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import docker
import httpx
import pytest
import yaml

from acklab.base.paths import PROJECT_ROOT, cache_dir
from acklab.cluster import docker_image
from acklab.cluster.docker import LABEL_RUN
from acklab.cluster.layout import free_ports
from acklab.cluster.topology import load_topology
from acklab.services.processes import listening_pids, wait_until
from acklab.testing import standin_images

from .airflow_rest import AirflowRest

pytestmark = [pytest.mark.integration, pytest.mark.compose]

COMPOSE_FILE = PROJECT_ROOT / "docker-compose.yaml"
CELERY_FILE = PROJECT_ROOT / "docker-compose.celery.yaml"
ACKLAB_SERVICES = ("airflow-init", "airflow-api-server", "airflow-scheduler", "airflow-dag-processor", "spark-master", "spark-worker")
CELERY_WORKERS = ("airflow-worker-1", "airflow-worker-2")
COMPOSE_HTTP_TIMEOUT_S = 300
SMOKE = "kafka_delivery_smoke"
CONF = {"backend": "docker", "profiles": ["leader-ack", "idempotent"], "faults": ["leader-kill"], "messages": 30000, "rate": 5000,
        "fault_at_s": 1.0}


def _compose_cli() -> list[str]:
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    if shutil.which("docker") and subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0:
        return ["docker", "compose"]
    pytest.fail("no docker compose CLI (make compose-deps)")


@pytest.fixture(scope="module")
def images(docker_engine: None) -> dict[str, str]:
    """The stand-ins and the stack image built on them (cached by content tags), and the Kafka image."""
    client = docker.from_env()
    python = standin_images.build_standin(standin_images.PYTHON, client)
    return {
        "ACKLAB_STACK_IMAGE": standin_images.build_stack(python, client),
        "ACKLAB_POSTGRES_IMAGE": standin_images.build_standin(standin_images.POSTGRES, client),
        "ACKLAB_REDIS_IMAGE": standin_images.build_standin(standin_images.REDIS, client),
        "ACKLAB_KAFKA_IMAGE": docker_image.build(load_topology("three-brokers").kafka_version, client),
    }


@pytest.fixture(scope="module", params=["local", "celery"])
def stack(images: dict[str, str], acklab_env: dict[str, str], artifacts_dir: Path, request: pytest.FixtureRequest) -> Iterator[dict]:
    """`docker-compose up -d` of the production file (and, for "celery", its Celery variant) with the
    override; `down -v` afterwards (the services' logs kept in the artifacts folder)."""
    celery = request.param == "celery"
    services = (*ACKLAB_SERVICES, *(CELERY_WORKERS if celery else ()))
    folder = artifacts_dir / f"compose-{request.param}"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir()
    shared = [acklab_env["ACKLAB_RUNS"], acklab_env["ACKLAB_EXPECTATIONS"], str(cache_dir())]
    paths = {"ACKLAB_RUNS": shared[0], "ACKLAB_EXPECTATIONS": shared[1], "ACKLAB_CACHE": shared[2]}
    mounts = [f"{path}:{path}" for path in shared]
    override = {"services": {name: {"environment": paths, "volumes": mounts} for name in services}}
    for runs_tasks in ("airflow-scheduler", *(CELERY_WORKERS if celery else ())):
        override["services"][runs_tasks]["volumes"] = [*mounts, "/var/run/docker.sock:/var/run/docker.sock"]
    (folder / "override.yaml").write_text(yaml.safe_dump(override))
    airflow, spark, spark_ui, worker_ui, pg, redis = free_ports(6)
    project = f"acklab-test-{secrets.token_hex(3)}"
    env = {
        **acklab_env, **images, "PWD": str(PROJECT_ROOT), "COMPOSE_PROJECT_NAME": project,
        "ACKLAB_AIRFLOW_PORT": str(airflow), "ACKLAB_SPARK_PORT": str(spark), "ACKLAB_SPARK_UI_PORT": str(spark_ui),
        "ACKLAB_SPARK_WORKER_UI_PORT": str(worker_ui), "ACKLAB_PG_PORT": str(pg), "ACKLAB_JWT_SECRET": secrets.token_urlsafe(48),
        "ACKLAB_REDIS_PORT": str(redis),
        # docker-compose waits 60 s per engine call by default; removing ten containers at once on the
        # vfs storage driver (every container a full copy of its image) takes longer on two busy cores.
        "COMPOSE_HTTP_TIMEOUT": str(COMPOSE_HTTP_TIMEOUT_S),
    }
    files = [COMPOSE_FILE, *([CELERY_FILE] if celery else []), folder / "override.yaml"]
    compose = [*_compose_cli(), *(arg for path in files for arg in ("-f", str(path))), "-p", project]

    def run(*args: str, timeout_s: float = 1200) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*compose, *args], cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=timeout_s)

    try:
        up = run("up", "-d", "--no-build")
        assert up.returncode == 0, up.stdout + up.stderr
        url = f"http://127.0.0.1:{airflow}"
        yield {"url": url, "project": project, "run": run, "spark_ui": f"http://127.0.0.1:{spark_ui}", "celery": celery}
    finally:
        logs = run("logs", "--no-color", timeout_s=120)
        (folder / "compose.log").write_text(logs.stdout + logs.stderr)
        _keep_task_logs(project, folder / "task-logs.tar")
        down = run("down", "-v", "--remove-orphans", timeout_s=600)
    assert down.returncode == 0, down.stdout + down.stderr
    left = docker.from_env().containers.list(all=True, filters={"label": f"com.docker.compose.project={project}"})
    assert left == [], f"containers left: {[c.name for c in left]}"


def _keep_task_logs(project: str, tar: Path) -> None:
    """The task logs of the stack's log volume (read through its api-server), before `down -v` drops it."""
    servers = docker.from_env().containers.list(filters={"label": [f"com.docker.compose.project={project}", "com.docker.compose.service=airflow-api-server"]})
    if servers:
        chunks, _ = servers[0].get_archive("/opt/airflow/logs")
        with tar.open("wb") as out:
            for chunk in chunks:
                out.write(chunk)


def _service_sockets(project: str) -> dict[str, set[tuple[str, int]]]:
    """Listening TCP sockets of each running service's processes (host network: seen from the host)."""
    return {
        container.labels["com.docker.compose.service"]: listening_pids({int(row[1]) for row in container.top()["Processes"]})
        for container in docker.from_env().containers.list(filters={"label": f"com.docker.compose.project={project}"})
    }


def test_compose_stack_runs_the_smoke_dag_on_the_docker_backend(stack: dict, isolated_run_store: Path) -> None:
    def healthy() -> bool:
        try:
            health = AirflowRest(stack["url"]).get("/monitor/health")
        except Exception:
            return False
        return all((health.get(part) or {}).get("status") == "healthy" for part in ("metadatabase", "scheduler", "dag_processor"))

    wait_until(healthy, f"the compose stack's Airflow at {stack['url']}", [], 600)
    sockets = _service_sockets(stack["project"])
    assert set(sockets) >= {"postgres", "airflow-api-server", "airflow-scheduler", "airflow-dag-processor", "spark-master", "spark-worker",
                            *(("redis", *CELERY_WORKERS) if stack["celery"] else ())}
    assert {address for found in sockets.values() for address, _ in found} == {"127.0.0.1"}, sockets

    rest = AirflowRest(stack["url"])  # every user is admin in the compose stack
    rest.wait_for_dag(SMOKE, timeout_s=300)
    rest.set_paused(SMOKE, False)
    before = set(isolated_run_store.iterdir())
    response = rest.trigger(SMOKE, CONF)
    assert response.status_code == 200, response.text
    run_id = response.json()["dag_run_id"]
    finished = rest.wait_for_run(SMOKE, run_id, 1200)
    assert finished["state"] == "success", rest.failure_report(SMOKE, run_id)

    (run,) = [p for p in set(isolated_run_store.iterdir()) - before if (p / "manifest.json").exists()]
    result = json.loads((run / "result.json").read_text())
    assert result["scenarios"] == {"leader-ack__leader-kill": "pass", "idempotent__leader-kill": "pass"}
    assert json.loads((run / "cluster" / "cluster.json").read_text())["backend"] == "docker"
    applications = [app["name"] for app in httpx.get(f"{stack['spark_ui']}/json/", timeout=10).json()["completedapps"]]
    assert "acklab-delivery-matrix" in applications  # the audit ran on the stack's Spark master
    left = docker.from_env().containers.list(all=True, filters={"label": f"{LABEL_RUN}={run.name}"})
    assert left == [], f"Kafka containers left: {[c.name for c in left]}"
    if stack["celery"]:  # the tasks ran on the Celery workers
        logs = stack["run"]("logs", "--no-color", *CELERY_WORKERS, timeout_s=120).stdout
        assert "task_id='run_group'" in logs and "Workload finished" in logs, logs[-3000:]
