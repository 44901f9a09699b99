"""docker-compose.yaml: the services of the stack, wired as docs/reference.md says (no images are built or
pulled here; `docker compose config` / `docker-compose config` also validates it where installed)."""

from __future__ import annotations

import shutil
import subprocess

import pytest
import yaml

from acklab.base.paths import PROJECT_ROOT

COMPOSE = PROJECT_ROOT / "docker-compose.yaml"
AIRFLOW = {"airflow-init", "airflow-api-server", "airflow-scheduler", "airflow-dag-processor"}
SPARK = {"spark-master", "spark-worker"}


@pytest.fixture(scope="module")
def services() -> dict[str, dict]:
    return yaml.safe_load(COMPOSE.read_text())["services"]


def test_stack_services_share_the_local_image_and_the_host_loopback(services: dict[str, dict]) -> None:
    assert set(services) == AIRFLOW | SPARK | {"postgres"}
    for name in AIRFLOW | SPARK:
        service = services[name]
        assert (PROJECT_ROOT / service["build"]["context"] / service["build"]["dockerfile"]).is_file(), name
        assert "${PWD}:${PWD}" in service["volumes"], f"{name}: project not mounted at its host path"
        assert service["environment"]["PYTHONPATH"] == "${PWD}/plugins"
    for name, service in services.items():
        assert service["network_mode"] == "host", name
        assert "0.0.0.0" not in yaml.safe_dump(service), name


def test_airflow_runs_local_executor_on_postgres_with_the_docker_socket(services: dict[str, dict]) -> None:
    env = services["airflow-scheduler"]["environment"]
    assert env["AIRFLOW__CORE__EXECUTOR"] == "LocalExecutor"
    assert env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"].startswith("postgresql+psycopg2://")
    assert "spark://127.0.0.1:" in env["AIRFLOW_CONN_SPARK_DEFAULT"]
    assert "/var/run/docker.sock:/var/run/docker.sock" in services["airflow-scheduler"]["volumes"]
    assert [services[name]["command"][:2] for name in ("airflow-api-server", "airflow-scheduler", "airflow-dag-processor")] == [
        ["airflow", "api-server"], ["airflow", "scheduler"], ["airflow", "dag-processor"],
    ]
    for name in AIRFLOW - {"airflow-init"}:
        assert services[name]["depends_on"]["airflow-init"]["condition"] == "service_completed_successfully"
    assert services["airflow-init"]["depends_on"]["postgres"]["condition"] == "service_healthy"


@pytest.mark.compose  # needs Debian's docker-compose (`make compose-deps`): runs in `make test-compose`
def test_compose_cli_accepts_the_file() -> None:
    if shutil.which("docker-compose"):
        command = ["docker-compose", "-f", str(COMPOSE), "config", "-q"]
    elif shutil.which("docker") and subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0:
        command = ["docker", "compose", "-f", str(COMPOSE), "config", "-q"]
    else:
        pytest.skip("no docker compose CLI here (the YAML checks above still ran)")
    result = subprocess.run(command, capture_output=True, text=True, cwd=PROJECT_ROOT, timeout=60)
    assert result.returncode == 0, result.stderr


def test_celery_variant_adds_a_loopback_broker_and_two_one_slot_workers() -> None:
    """docker-compose.celery.yaml: Redis on 127.0.0.1, CeleryExecutor for every Airflow service, two
    workers of one task slot with the project and the Docker socket, results in the metadata DB."""
    services = yaml.safe_load((PROJECT_ROOT / "docker-compose.celery.yaml").read_text())["services"]
    assert set(services) == {"redis", "airflow-worker-1", "airflow-worker-2"} | AIRFLOW
    assert services["redis"]["command"][:3] == ["redis-server", "--bind", "127.0.0.1"]
    for name in AIRFLOW:
        assert services[name]["environment"]["AIRFLOW__CORE__EXECUTOR"] == "CeleryExecutor", name
    for name in ("airflow-worker-1", "airflow-worker-2"):
        worker = services[name]
        assert worker["network_mode"] == "host" and "${PWD}:${PWD}" in worker["volumes"]
        assert "/var/run/docker.sock:/var/run/docker.sock" in worker["volumes"]
        assert worker["command"][:5] == ["airflow", "celery", "worker", "--concurrency", "1"] and "--skip-serve-logs" in worker["command"]
        assert worker["environment"]["AIRFLOW__CELERY__BROKER_URL"].startswith("redis://127.0.0.1:")
        assert worker["environment"]["AIRFLOW__CELERY__RESULT_BACKEND"].startswith("db+postgresql+psycopg2://")
    assert services["airflow-worker-2"]["pid"] == "service:airflow-worker-1", "one host's workers must see the cluster processes each other started"
    workers = [name for name in services if name.startswith("airflow-worker-")]
    assert services["airflow-init"]["environment"]["ACKLAB_SHARE_SLOTS"] == str(len(workers)), "the shares pool: one cluster per worker"
    assert "0.0.0.0" not in yaml.safe_dump(services)
