"""Two validated runs, the second with a planted failing row: the regression shows in result.json,
in the HTML report and in `acklab report --require-pass`'s exit code (real GX, real history)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from acklab.base.paths import PROJECT_ROOT
from acklab.cluster.topology import load_topology
from acklab.model.guarantees import expect
from acklab.nemesis.faults import PLANTING
from acklab.nemesis.schedule import schedule_for
from acklab.orchestration.pipeline import verdict, write_result
from acklab.store.runs import Manifest, RunDir, ScenarioEntry
from acklab.workload.profiles import get_profile

SCENARIOS = {"idempotent__leader-kill": "idempotent", "leader-ack__leader-kill": "leader-ack"}
COUNTS = dict.fromkeys(
    ("unsent", "refused", "fatal", "failed", "unknown", "duplicated", "duplicates", "acked_duplicated", "failed_clean",
     "indeterminate", "unknown_absent", "unexpected", "reordered", "misrouted", "offset_mismatch", "misdirected", "aborted", "aborted_acked",
     "aborted_clean", "aborted_visible"),
    0,
)


def _run(lost: int) -> RunDir:
    """A run of the two scenarios, everything delivered but `lost` of the idempotent one."""
    run = RunDir.create()
    topology = load_topology("three-brokers")
    entries, rows = [], []
    for name, profile_name in SCENARIOS.items():
        expected = expect(get_profile(profile_name), topology, schedule_for("leader-kill"))
        missing = lost if profile_name == "idempotent" else 0
        entries.append(ScenarioEntry(
            scenario=name, profile=profile_name, fault="leader-kill", guarantee=str(expected.guarantee),
            guarantee_reason=expected.reason, expectations=[e.as_dict() for e in expected.expectations],
            fault_effect="leader of partition 0 moved 1 -> 2 in 3.0s", planned=1000,
        ))
        rows.append({
            "scenario": name, "profile": profile_name, "fault": "leader-kill", "guarantee": str(expected.guarantee),
            "guarantee_reason": expected.reason, "client_version": "2.16.1", "client_family": "librdkafka", "librdkafka_version": "2.16.0",
            "partitioner": "consistent_random", "producers": 1, "transactional": False, "fault_effective": True,
            "evidence_complete": True, "incomplete_reason": None, "fatal_error": None, "hanging_partitions": None, "hanging_detail": None, **{plants.column: None for plants in PLANTING.values()}, "control": False,
            "planned": 1000, "sent": 1000, "acked": 1000, "records_read": 1000 - missing, "delivered": 1000 - missing,
            "lost": missing, **COUNTS, "ack_latency_p50_ms": 2.0, "ack_latency_p95_ms": 5.0, "ack_latency_p99_ms": 9.0,
            "ack_latency_max_ms": 900.0, "acked_per_s": 2000.0, "longest_ack_gap_s": 3.0, "ack_gap_fault_overlap_s": 3.0,
        })
    run.write_manifest(Manifest(run_id=run.run_id, topology=topology.model_dump(), scenarios=entries))
    run.audit.root.mkdir(parents=True)
    run.matrix_json.write_text(json.dumps(rows))
    return run


def test_a_planted_failure_after_a_green_run_is_a_regression_everywhere(tmp_path: Path, monkeypatch) -> None:
    expectations = tmp_path / "expectations"
    shutil.copytree(PROJECT_ROOT / "expectations" / "gx", expectations / "gx", ignore=shutil.ignore_patterns("uncommitted"))
    monkeypatch.setenv("ACKLAB_EXPECTATIONS", str(expectations))

    green = _run(lost=0)
    assert write_result(green, verdict(green))["status"] == "pass"
    time.sleep(0.01)  # the history orders runs by their finish time
    red = _run(lost=3)
    summary = write_result(red, verdict(red))

    assert summary["status"] == "fail"
    assert summary["regressions"] == [{"scenario": "idempotent__leader-kill", "status": "fail", "last_green_run": green.run_id}]
    assert red.read_result()["regressions"] == summary["regressions"]
    html = Path(summary["html"]).read_text()
    assert "<h2>Regressions</h2>" in html and "idempotent__leader-kill" in html.split("<h2>Regressions</h2>")[1].split("</ul>")[0]
    report = subprocess.run(
        [str(Path(sys.executable).parent / "acklab"), "report", "--require-pass"], capture_output=True, text=True,
        env={**os.environ}, timeout=120,
    )
    assert report.returncode == 1
    assert f"REGRESSION idempotent__leader-kill: fail now, passed in green run {green.run_id}" in report.stdout
    assert "status: fail" in report.stdout


def test_a_preset_in_the_version_dag_runs_on_its_own_client_unless_the_trigger_names_clients() -> None:
    """kafka-14402 is a Java preset: left to the DAG's defaults, each pair runs it on the Java client
    (the DAG used to put the locked confluent-kafka in its place, and refused the Java profile)."""
    from acklab.orchestration import tasks

    own = tasks.plan_versions({"preset": "kafka-14402", "kafka_versions": ["3.5.2", "3.6.2"], "clients": [], "client_versions": []}, create=False)
    assert [(p["params"]["kafka_version"], p["params"]["client"]) for p in own] == [("3.5.2", "java"), ("3.6.2", "java")]
    named = tasks.plan_versions({"preset": "kafka-14402", "kafka_versions": ["3.6.2"], "clients": ["java:3.9.1", "java"], "client_versions": []}, create=False)
    assert [p["params"]["client"] for p in named] == ["java:3.9.1", "java"]
