"""The services' pure parts: what the Airflow stack's processes are given, stand-in image tags."""

from __future__ import annotations

from pathlib import Path

from acklab.services.airflow_stack import COMPONENTS, stack_env
from acklab.testing import standin_images


def test_stack_env_is_loopback_local_executor_and_never_binds_clusters_to_task_processes(tmp_path: Path) -> None:
    base = {"PATH": "/usr/bin", "ACKLAB_BIND_CLUSTER_TO_PID": "1", "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": "sqlite:////elsewhere.db"}
    env = stack_env(tmp_path, 8123, None, base)
    assert "ACKLAB_BIND_CLUSTER_TO_PID" not in env and "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN" not in env
    assert env["AIRFLOW__CORE__EXECUTOR"] == "LocalExecutor"
    assert env["AIRFLOW__API__HOST"] == "127.0.0.1" and env["SPARK_LOCAL_IP"] == "127.0.0.1"
    assert env["AIRFLOW__CORE__EXECUTION_API_SERVER_URL"] == "http://127.0.0.1:8123/execution/"
    assert env["AIRFLOW_HOME"] == str(tmp_path) and env["PATH"].endswith("/usr/bin")
    with_db = stack_env(tmp_path, 8123, "postgresql+psycopg2://u:p@127.0.0.1:5/airflow", base)
    assert with_db["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"].startswith("postgresql+psycopg2://")
    assert with_db["AIRFLOW_CONN_ACKLAB_HISTORY"] == "postgresql://u:p@127.0.0.1:5/airflow"  # the run history beside it
    assert "--skip-serve-logs" in COMPONENTS["scheduler"]  # its log server would listen on every interface


def test_standin_tags_name_their_recipe() -> None:
    tags = {standin_images.standin_tag(s) for s in (standin_images.PYTHON, standin_images.POSTGRES)}
    assert len(tags) == 2
    assert standin_images.standin_tag(standin_images.PYTHON) == standin_images.standin_tag(standin_images.PYTHON)
    assert all(tag.startswith("acklab/standin-") for tag in tags)
