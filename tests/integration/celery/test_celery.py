"""The DAGs on CeleryExecutor with two workers: the smoke DAG green; a reduced matrix in two shares
green with the verdicts of the same run on one host; the version DAG's two pairs, one per worker,
green side by side; a worker killed mid-share leaves its share's scenarios incomplete (never pass)
and nothing behind."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import psutil
import pytest

from acklab.base.paths import PROJECT_ROOT
from acklab.services.airflow_stack import StackState
from acklab.services.processes import ServiceProcess, session_members

from ..airflow_rest import AirflowRest
from ..helpers import assert_share_left_nothing

pytestmark = [pytest.mark.integration, pytest.mark.celery]

SMOKE = "kafka_delivery_smoke"
SHARES = "kafka_delivery_matrix_shares"
VERSIONS = "kafka_version_regression"
BIN = Path(os.environ.get("VIRTUAL_ENV", PROJECT_ROOT / ".venv")) / "bin"
# The reduced matrix: 2 profiles x 3 faults of one client, in two shares (two clusters on this host).
REDUCED = {
    "profiles": ["leader-ack", "idempotent"], "faults": ["none", "leader-kill", "follower-restart"], "client": "librdkafka",
    "processing": [], "messages": 30000, "rate": 5000, "fault_at_s": 1.0, "negative_control": False,
}
# The reduced version comparison: two Kafka versions (set up by `make setup`) with the locked client,
# 2 profiles x 2 faults each (two fault groups per pair).
PAIRS = {
    "kafka_versions": ["4.3.1", "3.9.2"], "profiles": ["leader-ack", "idempotent"], "faults": ["none", "leader-kill"],
    "processing": [], "messages": 30000, "rate": 5000, "fault_at_s": 1.0, "negative_control": False,
}
RUN_TIMEOUT_S = 900


def _new_run(store: Path, before: set[Path]) -> Path:
    """The one run folder (with a manifest) the store gained since `before`."""
    (folder,) = [p for p in set(store.iterdir()) - before if (p / "manifest.json").exists()]
    return folder


def _workers_running(stack: StackState, task: str) -> set[str]:
    """The workers whose log shows a workload of `task`."""
    return {w.name for w in stack.workers if f"task_id='{task}'" in w.log_tail(2_000_000)}


def _workers_of(stack: StackState, dag_id: str, run_id: str, task: str) -> dict[int, set[str]]:
    """Map index -> the workers whose log shows a workload of that instance of the mapped `task` in
    the DAG run `run_id` (one worker each, unless an instance was retried elsewhere)."""
    workload = re.compile(re.escape(f"log_path='dag_id={dag_id}/run_id={run_id}/task_id={task}/map_index=") + r"(\d+)/")
    found: dict[int, set[str]] = {}
    for worker in stack.workers:
        for index in workload.findall(worker.log_tail(2_000_000)):
            found.setdefault(int(index), set()).add(worker.name)
    return found


def _map_labels(rest: AirflowRest, dag_id: str, run_id: str, task: str) -> dict[int, str]:
    """Map index -> the rendered label (`map_index_template`) of each instance of the mapped `task`."""
    instances = rest.get(f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances")["task_instances"]
    return {ti["map_index"]: ti["rendered_map_index"] for ti in instances if ti["task_id"] == task}


def test_smoke_dag_green_on_celery(celery_stack: StackState, celery_rest: AirflowRest, isolated_run_store: Path) -> None:
    celery_rest.wait_for_dag(SMOKE)
    celery_rest.set_paused(SMOKE, False)
    conf = {k: v for k, v in REDUCED.items() if k != "faults"} | {"faults": ["leader-kill"]}
    before = set(isolated_run_store.iterdir())
    response = celery_rest.trigger(SMOKE, conf)
    assert response.status_code == 200, response.text
    run = celery_rest.wait_for_run(SMOKE, response.json()["dag_run_id"], RUN_TIMEOUT_S)
    assert run["state"] == "success", celery_rest.failure_report(SMOKE, run["dag_run_id"])
    assert _workers_running(celery_stack, "run_group"), "no Celery worker ran the groups"
    result = json.loads((_new_run(isolated_run_store, before) / "result.json").read_text())
    assert result["status"] == "pass" and set(result["scenarios"]) == {"leader-ack__leader-kill", "idempotent__leader-kill"}


def test_two_shares_on_two_workers_match_one_host(
    celery_stack: StackState, celery_rest: AirflowRest, isolated_run_store: Path, acklab_env: dict[str, str], tmp_path: Path
) -> None:
    celery_rest.wait_for_dag(SHARES)
    celery_rest.set_paused(SHARES, False)
    before = set(isolated_run_store.iterdir())
    response = celery_rest.trigger(SHARES, {**REDUCED, "shares": 2})
    assert response.status_code == 200, response.text
    run = celery_rest.wait_for_run(SHARES, response.json()["dag_run_id"], RUN_TIMEOUT_S)
    assert run["state"] == "success", celery_rest.failure_report(SHARES, run["dag_run_id"])
    folder = _new_run(isolated_run_store, before)
    shares = json.loads((folder / "shares.json").read_text())["shares"]
    # 3 fault groups of 2 scenarios: 2 groups in one share, 1 in the other
    assert [(s["gathered"], s["unfinished"]) for s in shares] == [(1, []), (1, [])] and sorted(s["scenarios"] for s in shares) == [2, 4]
    assert _workers_running(celery_stack, "run_share") == {"worker-1", "worker-2"}, "the shares did not spread over both workers"
    # Each share read its own topics into its part of the archive before its cluster went.
    assert sorted(p.name for p in (folder / "audit" / "topic_records.parquet").glob("*.parquet")) == ["part-s001.parquet", "part-s002.parquet"]
    assert not list(Path(acklab_env["ACKLAB_RUNS"]).glob("*.share-*.attempt-*")), "a share's work folder was left behind"
    shared = json.loads((folder / "result.json").read_text())

    # The same params on one host, one cluster (`acklab run`): the same verdicts.
    params = tmp_path / "params.json"
    params.write_text(json.dumps(REDUCED))
    before = set(isolated_run_store.iterdir())
    one_host = subprocess.run([str(BIN / "acklab"), "run", "--params", str(params)], env=acklab_env, capture_output=True, text=True, timeout=900)
    assert one_host.returncode == 0, one_host.stdout[-3000:] + one_host.stderr[-3000:]
    single = json.loads((_new_run(isolated_run_store, before) / "result.json").read_text())
    assert shared["status"] == single["status"] == "pass"
    assert shared["scenarios"] == single["scenarios"] and len(shared["scenarios"]) == 6


def test_version_pairs_on_two_workers_green(celery_stack: StackState, celery_rest: AirflowRest, isolated_run_store: Path) -> None:
    celery_rest.wait_for_dag(VERSIONS)
    celery_rest.set_paused(VERSIONS, False)
    comparisons = isolated_run_store / "comparisons"
    before = set(comparisons.iterdir()) if comparisons.is_dir() else set()
    response = celery_rest.trigger(VERSIONS, PAIRS)
    assert response.status_code == 200, response.text
    run_id = response.json()["dag_run_id"]
    run = celery_rest.wait_for_run(VERSIONS, run_id, RUN_TIMEOUT_S)
    assert run["state"] == "success", celery_rest.failure_report(VERSIONS, run_id)
    assert [r["run_type"] for r in celery_rest.runs(VERSIONS)] == ["manual"], "the scheduler also ran the default matrix"

    # One pair per worker: the pool's two slots let both hold their clusters at once.
    workers = _workers_of(celery_stack, VERSIONS, run_id, "run_pair")
    labels = _map_labels(celery_rest, VERSIONS, run_id, "run_pair")
    assert sorted(workers) == sorted(labels) == [0, 1], (workers, labels)
    ran_on = {labels[index]: names for index, names in workers.items()}
    assert all(len(names) == 1 for names in ran_on.values()) and set.union(*ran_on.values()) == {"worker-1", "worker-2"}, ran_on

    (comparison,) = [p / "comparison.json" for p in set(comparisons.iterdir()) - before]
    summary = json.loads(comparison.read_text())
    assert summary["status"] == "pass" and summary["differing"] == [], summary
    runs = [Path(r) for r in summary["runs"]]
    assert [json.loads((r / "manifest.json").read_text())["topology"]["kafka_version"] for r in runs] == ["3.9.2", "4.3.1"]
    scenarios = {"leader-ack__none", "leader-ack__leader-kill", "idempotent__none", "idempotent__leader-kill"}
    for folder in runs:
        result = json.loads((folder / "result.json").read_text())
        assert result["status"] == "pass" and result["scenarios"] == dict.fromkeys(scenarios, "pass"), (folder.name, result["scenarios"])
        shares = json.loads((folder / "shares.json").read_text())["shares"]
        assert [(s["gathered"], s["unfinished"]) for s in shares] == [(1, [])], shares
        assert_share_left_nothing(folder)
    assert not list(isolated_run_store.glob("*.share-*")), "a pair's work folder was left behind"
    assert _share_processes(isolated_run_store) == [], "a pair's cluster process survived"


def _share_processes(store: Path) -> list[psutil.Process]:
    """Processes whose command line names a share's work folder of the store (its cluster's JVMs, proxy)."""
    found = []
    for process in psutil.process_iter(["cmdline"]):
        if any(".share-" in part and str(store) in part for part in process.info["cmdline"] or []):
            found.append(process)
    return found


def _kill_worker(worker: ServiceProcess) -> None:
    """The worker's host dies: SIGKILL the worker and every process of its session at once."""
    for process in [psutil.Process(worker.pid), *session_members(worker)]:
        try:
            process.send_signal(signal.SIGKILL)
        except psutil.NoSuchProcess:
            continue


def test_killed_worker_leaves_its_share_incomplete_and_nothing_behind(
    celery_stack: StackState, celery_rest: AirflowRest, isolated_run_store: Path
) -> None:
    celery_rest.wait_for_dag(SHARES)
    celery_rest.set_paused(SHARES, False)
    before = set(isolated_run_store.iterdir())
    response = celery_rest.trigger(SHARES, {**REDUCED, "messages": 150000, "shares": 2})
    assert response.status_code == 200, response.text
    run_id = response.json()["dag_run_id"]
    # Kill worker-1 once both shares are loading (each worker holds one).
    deadline = time.monotonic() + 300
    while len(list(isolated_run_store.glob("*.share-*.attempt-1/scenarios/*/producers"))) < 2:
        assert time.monotonic() < deadline, celery_rest.task_states(SHARES, run_id)
        time.sleep(1)
    time.sleep(3)
    _kill_worker(celery_stack.workers[0])
    run = celery_rest.wait_for_run(SHARES, run_id, RUN_TIMEOUT_S)
    assert run["state"] == "failed", "a run with a killed share passed"
    states = celery_rest.task_states(SHARES, run_id)
    assert sorted(v for k, v in states.items() if k.startswith("run_share")) == ["failed", "success"], states
    assert states["validate"] == "success" and states["verdict"] == "failed", states

    folder = _new_run(isolated_run_store, before)
    result = json.loads((folder / "result.json").read_text())
    shares = {s["share"]: s for s in json.loads((folder / "shares.json").read_text())["shares"]}
    (killed,) = [s for s in shares.values() if s["gathered"] is None]
    (kept,) = [s for s in shares.values() if s["gathered"] == 1]
    assert killed["unfinished"] == [1]
    assert result["status"] == "incomplete", result["status"]
    manifest = json.loads((folder / "manifest.json").read_text())
    share_of = {e["scenario"]: e for e in manifest["scenarios"]}
    incomplete = {name for name, status in result["scenarios"].items() if status == "incomplete"}
    assert len(incomplete) == killed["scenarios"] and "pass" not in {result["scenarios"][n] for n in incomplete}
    assert all(f"share {killed['share']} never finished" in share_of[n]["incomplete_reason"] for n in incomplete)
    assert {result["scenarios"][n] for n in result["scenarios"] if n not in incomplete} == {"pass"}
    assert kept["scenarios"] + killed["scenarios"] == len(result["scenarios"]) == 6

    # Nothing behind: the killed share's cluster reaped, its work folder published as an unfinished attempt and removed.
    store = isolated_run_store / "evidence-store" / folder.name / f"share-{killed['share']}"
    assert (store / "attempt-1").is_dir() and not (store / "attempt-1" / "finished.json").exists()
    assert not list(isolated_run_store.glob("*.share-*")), "a share's work folder was left behind"
    assert _share_processes(isolated_run_store) == [], "a share's cluster process survived"
