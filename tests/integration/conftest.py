"""Fixtures that run acklab the way users do: `airflow dags test` and the `acklab` CLI, as subprocesses."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from acklab.base.paths import PROJECT_ROOT
from acklab.cluster import docker_engine as engine
from acklab.services import airflow_pool

from .helpers import BIN


@pytest.fixture(scope="session")
def acklab_env(tmp_path_factory: pytest.TempPathFactory, isolated_run_store: Path) -> dict[str, str]:
    """Environment with a private Airflow home (migrated SQLite DB) and a private copy of the GX project."""
    home = tmp_path_factory.mktemp("airflow_home")
    expectations = tmp_path_factory.mktemp("expectations")
    shutil.copytree(PROJECT_ROOT / "expectations" / "gx", expectations / "gx", ignore=shutil.ignore_patterns("uncommitted"))
    env = {
        **os.environ,
        "PATH": f"{BIN}:{os.environ['PATH']}",
        "ACKLAB_RUNS": str(isolated_run_store),
        "ACKLAB_EXPECTATIONS": str(expectations),
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(PROJECT_ROOT / "dags"),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(home / "plugins"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW_CONN_SPARK_DEFAULT": '{"conn_type":"spark","host":"local[*]"}',
        "ACKLAB_BIND_CLUSTER_TO_PID": "1",
        "SPARK_LOCAL_IP": "127.0.0.1",  # the Spark driver's (and executors') sockets on loopback
    }
    subprocess.run([str(BIN / "airflow"), "db", "migrate"], env=env, check=True, capture_output=True)
    for command in airflow_pool.set_commands():
        subprocess.run([str(BIN / "airflow"), *command], env=env, check=True, capture_output=True)
    return env


@pytest.fixture(scope="session")
def artifacts_dir() -> Path:
    """Where tests keep what a person may want to look at afterwards (screenshots)."""
    folder = Path(os.environ.get("ACKLAB_TEST_ARTIFACTS", PROJECT_ROOT / "test-artifacts"))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture(scope="session")
def docker_engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """An answering engine: the running one, or a `dockerd` started (and stopped) by this fixture."""
    try:
        started = engine.start(tmp_path_factory.mktemp("dockerd") / "dockerd.log")
    except engine.EngineUnavailable as exc:
        pytest.skip(f"Docker not tested: {exc}")
    yield
    if started is not None:
        engine.stop(started)
