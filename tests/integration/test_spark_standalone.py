"""The audit on a Spark standalone master and worker (pyspark's own launcher, loopback only): the
smoke DAG with only its `spark_default` connection changed, and the README's re-audit commands as a
user types them, on `local[*]` and on the master; every matrix row must be the same."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from acklab.services import spark_standalone
from acklab.services.spark_standalone import SparkStandalone

from .helpers import assert_nothing_left, dags_test, readme_commands, run_as_user

pytestmark = [pytest.mark.integration, pytest.mark.spark_standalone]

# 6 s of load: the leader kill at 1 s takes effect well before the load ends.
CONF = {"profiles": ["leader-ack", "idempotent"], "faults": ["leader-kill"], "messages": 30000, "rate": 5000, "fault_at_s": 1.0}
README_MASTER = "spark://127.0.0.1:7077"  # what the README's commands name


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory, acklab_env: dict[str, str]) -> Iterator[SparkStandalone]:
    state = spark_standalone.start(tmp_path_factory.mktemp("spark-standalone"), base_env=acklab_env)
    try:
        yield state
    finally:
        state.stop()
    assert [p.name for p in state.processes if p.alive()] == []


def _rows(matrix: Path) -> list[dict]:
    return sorted(json.loads(matrix.read_text()), key=lambda row: row["scenario"])


def test_dag_audit_on_standalone_master_matches_local(
    standalone: SparkStandalone, acklab_env: dict[str, str], isolated_run_store: Path, tmp_path: Path
) -> None:
    assert {address for address, _ in standalone.listening()} == {"127.0.0.1"}
    before = set(isolated_run_store.iterdir())
    env = {**acklab_env, "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": standalone.master_url})}
    result = dags_test(env, CONF)
    assert result.returncode == 0, (result.stdout + result.stderr)[-5000:]
    (run,) = [p for p in set(isolated_run_store.iterdir()) - before if (p / "manifest.json").exists()]
    assert_nothing_left(run / "cluster")
    applications = [app["name"] for app in standalone.status()["completedapps"]]
    assert "acklab-delivery-matrix" in applications, applications  # the DAG's audit ran on the master
    dag_rows = _rows(run / "audit" / "matrix.json")
    assert {row["scenario"] for row in dag_rows if not row["control"]} == {"leader-ack__leader-kill", "idempotent__leader-kill"}

    commands = readme_commands("Re-audit a run after its cluster is gone")
    assert len(commands) == 2 and README_MASTER in commands[1], commands
    outputs = [tmp_path / "local", tmp_path / "standalone"]
    for command, out in zip(commands, outputs, strict=True):
        typed = command.replace("runs/<id>", str(run)).replace("/tmp/reaudit", str(out)).replace(README_MASTER, standalone.master_url)
        done = run_as_user(typed, acklab_env)
        assert done.returncode == 0, f"{typed}\n{(done.stdout + done.stderr)[-4000:]}"
        assert done.stdout.strip().endswith("matrix.json")
    assert applications.count("acklab-delivery-matrix") + 1 == [a["name"] for a in standalone.status()["completedapps"]].count(
        "acklab-delivery-matrix"
    ), "the second re-audit did not run on the master"
    for out in outputs:
        assert _rows(out / "matrix.json") == dag_rows, out
