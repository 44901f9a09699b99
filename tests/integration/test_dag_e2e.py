"""The whole loop through Airflow (the smoke DAG): real cluster, load under leader kill, Spark audit, GX verdict."""

from __future__ import annotations

import json
import time
from pathlib import Path
from urllib.parse import quote

import pytest
import sqlalchemy as sa

from acklab.plan.planner import make_plan
from acklab.store.history import RUNS, RunRecord, engine, record_run, runs_of

from .helpers import assert_nothing_left, assert_share_left_nothing, dags_test

pytestmark = pytest.mark.integration
COUNTS = ("sent", "acked", "failed", "unknown", "lost", "duplicates", "reordered", "records_read", "delivered")


def test_dag_run_matrix_and_verdicts_under_leader_kill(acklab_env: dict[str, str], isolated_run_store: Path, mailbox, webhook, tmp_path: Path) -> None:
    """Also: the history is where the connection `acklab_history` says, and a verdict changed from the
    last run of the same settings (planted there: idempotent failed) is mailed to a real SMTP server
    and posted to a Slack incoming webhook (a local receiver), and the run folder holds its results
    for CI (results.json, junit.xml)."""
    before = set(isolated_run_store.iterdir())
    conf = {"profiles": ["leader-ack", "idempotent"], "faults": ["leader-kill"], "messages": 60000, "rate": 5000}  # 12 s: the load outlasts the fault window
    history = tmp_path / "history.sqlite"
    plan = make_plan(conf)
    earlier = {"leader-ack__leader-kill": "pass", "idempotent__leader-kill": "fail"}
    record_run(
        RunRecord("earlier-run", time.time(), "fail", plan.topology.name, plan.topology.kafka_version, plan.scenarios[-1].client.version),
        [{"scenario": s, "profile": s.split("__")[0], "fault": "leader-kill", "guarantee": ""} for s in earlier], earlier, history,
    )
    env = {**acklab_env, "AIRFLOW_CONN_ACKLAB_SMTP": mailbox.connection, "AIRFLOW_CONN_ACKLAB_SLACK": webhook.connection,
           "AIRFLOW_CONN_ACKLAB_HISTORY": json.dumps({"conn_type": "sqlite", "host": str(history)})}
    result = dags_test(env, conf)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-5000:]

    (run_dir,) = {p for p in set(isolated_run_store.iterdir()) - before if p.is_dir()}
    summary = json.loads((run_dir / "result.json").read_text())
    rows = {row["scenario"]: row for row in json.loads(Path(summary["matrix"]).read_text()) if not row["control"]}
    assert set(rows) == {"leader-ack__leader-kill", "idempotent__leader-kill"}
    for row in rows.values():
        assert all(isinstance(row[c], int) and row[c] >= 0 for c in COUNTS), row
        assert row["sent"] == 60000
        assert row["sent"] == row["acked"] + row["failed"] + row["unknown"]
        assert row["fault_effective"] is True and row["evidence_complete"] is True
    idempotent = rows["idempotent__leader-kill"]
    assert idempotent["guarantee"] == "exactly-once"
    assert (idempotent["lost"], idempotent["duplicates"], idempotent["reordered"]) == (0, 0, 0)
    assert summary["scenarios"]["idempotent__leader-kill"] == "pass"
    assert rows["leader-ack__leader-kill"]["guarantee"] == "leader-durable"
    assert Path(summary["report"]).is_file() and run_dir.name in Path(summary["report"]).read_text()  # Data Docs list this run's results
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert all("moved" in s["fault_effect"] for s in manifest["scenarios"] if not s["control"])
    assert "PASS idempotent__leader-kill [exactly-once]" in output
    assert_nothing_left(run_dir / "cluster")

    (recorded,) = _dag_runs(history)
    assert (recorded.run_id, recorded.status) == (run_dir.name, "pass")
    assert runs_of("kafka_delivery_smoke", recorded.dag_run_id, history) == [recorded]
    (message,) = mailbox.messages
    assert message["Subject"] == f"acklab kafka_delivery_smoke: 1 verdict changed (Kafka {plan.topology.kafka_version}, client {recorded.client_version})"
    html = mailbox.html()
    for said in ("idempotent__leader-kill", "<td>fail</td>", "<b>pass</b>", "earlier-run", (run_dir / "report" / "index.html").as_uri(),
                 f"/dags/kafka_delivery_smoke/runs/{quote(recorded.dag_run_id)}"):
        assert said in html, said
    assert "leader-ack__leader-kill" not in html  # it passed before and now
    (posted,) = webhook.bodies
    assert posted["text"].startswith(f"*{message['Subject']}*") and "`idempotent__leader-kill`: fail → *pass* (was in run earlier-run)" in posted["text"]
    assert "leader-ack__leader-kill" not in posted["text"]
    results = json.loads((run_dir / "results.json").read_text())
    assert results["status"] == "pass" and results["failing"] == [] and {s["scenario"] for s in results["scenarios"]} == set(rows)
    assert (run_dir / "junit.xml").is_file()


def _dag_runs(history: Path) -> list[RunRecord]:
    with engine(history).connect() as connection:
        return [RunRecord(**row._mapping) for row in connection.execute(sa.select(RUNS).where(RUNS.c.dag_id.is_not(None)))]


def test_invalid_param_fails_before_any_cluster_starts(acklab_env: dict[str, str], isolated_run_store: Path) -> None:
    before = set(isolated_run_store.iterdir())
    result = dags_test(acklab_env, {"faults": ["meteor"]})
    assert result.returncode != 0
    assert "meteor" in result.stdout + result.stderr
    assert not any((run / "cluster").exists() for run in set(isolated_run_store.iterdir()) - before)


@pytest.mark.versions  # 205 s: two Kafka versions through the version DAG
def test_version_regression_dag_compares_two_versions(acklab_env: dict[str, str], isolated_run_store: Path) -> None:
    conf = {
        "kafka_versions": ["4.3.1", "3.9.2"], "profiles": ["idempotent"], "faults": ["leader-kill"], "processing": [], "messages": 48000, "rate": 4000,
    }
    result = dags_test(acklab_env, conf, "kafka_version_regression")
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-5000:]
    (comparison,) = (isolated_run_store / "comparisons").glob("*/comparison.json")
    summary = json.loads(comparison.read_text())
    assert summary["status"] == "pass" and summary["differing"] == []
    versions = [json.loads((Path(run) / "manifest.json").read_text())["topology"]["kafka_version"] for run in summary["runs"]]
    assert versions == ["3.9.2", "4.3.1"]
    for run in map(Path, summary["runs"]):
        assert json.loads((run / "result.json").read_text())["scenarios"] == {"idempotent__leader-kill": "pass"}
        assert_share_left_nothing(run)
    html = (comparison.parent / "index.html").read_text()
    client = json.loads((Path(summary["runs"][0]) / "manifest.json").read_text())["scenarios"][0]["client_version"]
    assert f"heatmap-3.9.2-librdkafka-{client}.png" in html and f"heatmap-4.3.1-librdkafka-{client}.png" in html
    assert f"Kafka 3.9.2 / librdkafka {client}: pass" in output and f"Kafka 4.3.1 / librdkafka {client}: pass" in output
