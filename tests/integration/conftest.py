"""Fixtures that run acklab the way users do: `airflow dags test` and the `acklab` CLI, as subprocesses."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from acklab.paths import PROJECT_ROOT

POOL = "acklab_cluster"  # acklab.dag_factory.POOL (importing it would import Airflow here)

BIN = Path(sys.executable).parent


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
    }
    subprocess.run([str(BIN / "airflow"), "db", "migrate"], env=env, check=True, capture_output=True)
    subprocess.run([str(BIN / "airflow"), "pools", "set", POOL, "1", "acklab tests"], env=env, check=True, capture_output=True)
    return env
