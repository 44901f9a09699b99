"""Old brokers and old clients on real clusters: the smoke scenarios (leader-ack and idempotent under a
leader SIGKILL) pass, audited by Spark and judged by GX, and every layer records the versions.

One old broker with the oldest client runs in `make test`; the marked `versions` family covers each
Kafka version (3.5.2, 3.6.2, 3.9.2, 4.3.1) with the locked client and each client (2.0.2, 2.3.0, the
locked one) on the default Kafka."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from acklab.base.maven import DEFAULT_KAFKA_VERSION
from acklab.base.paths import expectations_dir
from acklab.checker.gx_validation import validate_matrix
from acklab.checker.submit import audit_job, submit
from acklab.cluster.cluster import Cluster
from acklab.nemesis.faults import PLANTING
from acklab.orchestration.execution import run_scenarios
from acklab.plan.params import standard_matrix
from acklab.plan.planner import make_plan
from acklab.store.runs import RunDir
from acklab.workload import families
from acklab.workload import librdkafka as clients

from .helpers import assert_nothing_left, assert_share_left_nothing, dags_test

pytestmark = pytest.mark.integration
SMOKE = {"profiles": ["leader-ack", "idempotent"], "faults": ["leader-kill"], "messages": 30000, "rate": 3000, "fault_at_s": 1.0}


def _smoke(kafka_version: str, client_versions: list[str | None]) -> None:
    """One cluster of `kafka_version`; the smoke scenarios once per client version, each in its own run."""
    plans = [make_plan({**SMOKE, "kafka_version": kafka_version, "client_version": client}) for client in client_versions]
    cluster_run = RunDir.create()
    cluster = Cluster.provision(plans[0].topology, cluster_run.cluster, owner_pid=os.getpid())
    runs = []
    try:
        for plan in plans:
            run = RunDir.create()
            run_scenarios(cluster, plan, run)
            submit(audit_job(run))
            runs.append((plan, run))
    finally:
        cluster.teardown()
    assert_nothing_left(cluster_run.cluster)
    for plan, run in runs:
        verdict = validate_matrix(run, expectations_dir(), run.run_id)
        assert {s.status for s in verdict.checked} == {"pass"}, verdict.summary_lines()
        for row in (row for row in run.read_matrix() if not row["control"]):
            assert (row["client_version"], row["librdkafka_version"]) == (plan.client.version, plan.client.librdkafka), row
            assert row["sent"] == row["planned"] == SMOKE["messages"]
        entry = next(s for s in run.read_manifest().scenarios if not s.control)
        assert (entry.client_version, run.read_manifest().topology["kafka_version"]) == (plan.client.version, kafka_version)
        metadata = pq.read_schema(run.root / entry.send_log).metadata
        assert metadata[b"acklab.client_version"].decode() == plan.client.version
        assert metadata[b"acklab.librdkafka_version"].decode() == plan.client.librdkafka


def test_an_old_broker_and_the_oldest_client_pass_the_smoke_scenarios() -> None:
    _smoke("3.5.2", ["2.0.2"])


@pytest.mark.versions
@pytest.mark.parametrize("kafka_version", ["3.5.2", "3.6.2", "3.9.2", DEFAULT_KAFKA_VERSION])
def test_each_kafka_version_passes_the_smoke_scenarios(kafka_version: str) -> None:
    _smoke(kafka_version, [None])


@pytest.mark.versions
def test_each_client_version_passes_the_smoke_scenarios() -> None:
    _smoke(DEFAULT_KAFKA_VERSION, ["2.0.2", "2.3.0", clients.LOCKED])


@pytest.mark.versions
@pytest.mark.parametrize(
    ("preset", "conf", "verdicts"),
    [
        # reproduced: red (a fatal error) before the fix, green from it on
        ("librdkafka-4438", {"kafka_versions": [DEFAULT_KAFKA_VERSION], "client_versions": ["2.2.0", "2.3.0"]}, {"client 2.2.0": "fail", "client 2.3.0": "pass"}),
        ("kafka-14402", {"kafka_versions": ["3.5.2", "3.6.2"]}, {"kafka 3.5.2": "fail", "kafka 3.6.2": "pass"}),
    ],
)
def test_a_bug_preset_runs_on_both_sides_of_its_fix_in_the_version_dag(
    preset: str, conf: dict, verdicts: dict[str, str] | None, acklab_env: dict[str, str], isolated_run_store: Path
) -> None:
    """The version-regression DAG runs the preset on every pair and checks its claim per version: the
    comparison names each pair's verdict, each run its claim with what was measured; a reproduced bug
    turns the run of the version before its fix red and leaves the fixed one green."""
    before = set(isolated_run_store.glob("comparisons/*/comparison.json"))
    result = dags_test(acklab_env, {"preset": preset, **conf}, "kafka_version_regression")
    output = result.stdout + result.stderr
    (comparison,) = set(isolated_run_store.glob("comparisons/*/comparison.json")) - before
    summary = json.loads(comparison.read_text())
    assert len(summary["runs"]) == 2, output[-5000:]
    seen_verdicts = {}
    for run in map(Path, summary["runs"]):
        result_json = json.loads((run / "result.json").read_text())
        (seen,) = result_json["observations"]
        assert seen["preset"] == preset and seen["status"] in {"reproduced", "not reproduced"} and seen["measured"], seen
        seen_verdicts[seen["measured"].partition(":")[0]] = (result_json["status"], seen["status"])
        assert_share_left_nothing(run)
    if verdicts is not None:
        assert seen_verdicts == {version: (status, "reproduced") for version, status in verdicts.items()}, seen_verdicts
    assert result.returncode == (0 if summary["status"] == "pass" else 1), output[-5000:]


@pytest.mark.versions
def test_the_weekly_dag_compares_the_standard_pipelines_across_kafka_versions(acklab_env: dict[str, str], isolated_run_store: Path) -> None:
    """The weekly version DAG with its defaults (the standard matrix on Kafka 4.3.1 and 3.9.2, with the
    locked confluent-kafka), its producer scenarios left out: every standard pipeline (each processing
    style x each pipeline fault) passes on both versions, both kinds of negative control are caught,
    and the comparison names each pair's run."""
    before = set(isolated_run_store.glob("comparisons/*/comparison.json"))
    result = dags_test(acklab_env, {"profiles": []}, "kafka_version_regression", timeout_s=3600)
    output = result.stdout + result.stderr
    (comparison,) = set(isolated_run_store.glob("comparisons/*/comparison.json")) - before
    summary = json.loads(comparison.read_text())
    assert result.returncode == 0 and summary["status"] == "pass", output[-5000:]
    params = standard_matrix()
    expected = {f"pipeline-{style}__{fault}" for style in params.processing for fault in params.processing_faults or []}
    kafka_versions = set()
    for run in map(Path, summary["runs"]):
        run_dir = RunDir(run)
        kafka_versions.add(run_dir.read_manifest().topology["kafka_version"])
        rows = {row["scenario"]: row for row in run_dir.read_matrix()}
        assert {name for name, row in rows.items() if not row["control"]} == expected
        assert {row["client_family"] for row in rows.values()} == {families.DEFAULT}
        result_json = json.loads((run / "result.json").read_text())
        assert set(result_json["scenarios"].values()) == {"pass"} and len(result_json["control"]) == len(PLANTING) + 1, result_json  # and the pipelines' own
        for name in (name for name in expected if name.startswith("pipeline-eos__")):
            counters = ("processed_lost", "processed_duplicated", "aborted_visible", "zombie_writes", "unprocessed")
            assert [rows[name][c] for c in counters] == [0] * len(counters), (name, rows[name])
        assert_share_left_nothing(run)
    assert kafka_versions == {DEFAULT_KAFKA_VERSION, "3.9.2"}
