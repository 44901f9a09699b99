"""Killed runs: a task process SIGKILLed at a random moment of a scenario group while its fault is in
effect (the proxy has blackholed traffic, and the fault's duration has not run out since it started).

Under a scheduler a cluster is bound to the heartbeat its run's tasks keep: once none is alive for
ACKLAB_HEARTBEAT_S, `acklab reap` (or the next provisioning) removes it: no JVM, proxy, open port or
data folder is left, and the killed run never reports a verdict. One task kill and one scheduler kill
run in `make test`; the `killed_runs` family kills tasks 10 times at random moments."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

from acklab.cluster.state import ClusterState
from acklab.nemesis.faults import PLANTING
from acklab.proxy.control import ProxyControl, ProxyControlError
from acklab.services import airflow_stack as stack
from acklab.services.processes import session_members

from .airflow_rest import AirflowRest
from .helpers import assert_nothing_left

pytestmark = pytest.mark.integration
HEARTBEAT_S = 6.0
# One process plays the DAG's tasks, as a scheduler runs them: plan, provision, then a scenario group
# under a fault. It prints the run folder once the group started.
TASKS = """
import json, sys
from acklab.orchestration import tasks
run = tasks.plan_run(json.loads(sys.argv[1]))
run = tasks.provision_cluster(run, lease_s=3600)
print(run["run_dir"], flush=True)
group = next(g for g in tasks.scenario_groups(run) if "negative control" not in g["fault"])  # after the negative controls
tasks.run_group(run, group)
print("group done", flush=True)
"""
PARAMS = {"profiles": ["leader-ack", "idempotent"], "faults": ["client-partition"], "messages": 40000, "rate": 2000,
          "fault_at_s": 1.0, "fault_duration_s": 15.0}


def _processes_on(folder: Path) -> list[int]:
    return [p.pid for p in psutil.process_iter(["cmdline"]) if any(str(folder) in part for part in (p.info["cmdline"] or []))]


def _blackholed(cluster: Path) -> int:
    """What the cluster's proxy has blackholed so far, over every broker (0 while it cannot be reached)."""
    try:
        stats = ProxyControl(ClusterState.load(cluster).proxy.control_port, timeout_s=2.0).stats()
    except (OSError, ValueError, ProxyControlError):  # no state (yet), or no proxy answering
        return 0
    return sum(s.get("blackholed_requests", 0) + s.get("blackholed_responses", 0) for s in stats.values())


def _fault_started(cluster: Path, alive: Callable[[], bool], within_s: float) -> float:
    """Poll the cluster's proxy until client-partition blackholes traffic; return the time of the
    last poll before that (monotonic): the fault started after it, so it is in effect for
    PARAMS["fault_duration_s"] from then."""
    deadline = time.monotonic() + within_s
    before = time.monotonic()
    while _blackholed(cluster) == 0:
        assert alive() and time.monotonic() < deadline, "the run ended or its fault never blackholed anything"
        before = time.monotonic()
        time.sleep(0.2)
    return before


def _killed_under_the_fault(started: float, kill: Callable[[], None]) -> None:
    """Kill now, asserting the fault that started after `started` has not run its course."""
    assert time.monotonic() - started < PARAMS["fault_duration_s"] - 1.0, "the fault may have ended before the kill"
    kill()


def _reaped(cluster: Path, env: dict[str, str], within_s: float) -> None:
    """Run `acklab reap` until the cluster is gone, as a cron job or the next provisioning would."""
    reap = [str(Path(sys.executable).parent / "acklab"), "reap"]
    deadline = time.monotonic() + within_s
    while ClusterState.load(cluster).status == "running" and time.monotonic() < deadline:
        subprocess.run(reap, env=env, check=True, capture_output=True, timeout=120)
        time.sleep(1.0)
    assert_nothing_left(cluster)


def _kill_a_task_mid_fault(seed: int) -> None:
    env = {**os.environ, "ACKLAB_HEARTBEAT_S": str(HEARTBEAT_S)}
    env.pop("ACKLAB_BIND_CLUSTER_TO_PID", None)
    task = subprocess.Popen([sys.executable, "-c", TASKS, json.dumps(PARAMS)], env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert task.stdout is not None
        run_dir = Path(task.stdout.readline().strip())
        assert run_dir.is_dir(), "the task did not provision its cluster"
        cluster = run_dir / "cluster"
        started = _fault_started(cluster, lambda: task.poll() is None, 120)
        time.sleep(random.Random(seed).uniform(0.0, 9.0))  # the fault lasts 15 s
        assert task.poll() is None, "the group ended before the kill"
        _killed_under_the_fault(started, lambda: task.send_signal(signal.SIGKILL))
        task.wait(10)
    finally:
        task.kill()
    state = ClusterState.load(cluster)
    assert state.status == "running" and state.heartbeat_s == HEARTBEAT_S
    _reaped(cluster, env, HEARTBEAT_S + 60)
    assert _processes_on(run_dir) == [], "a producer or proxy of the killed run survived"
    assert not (run_dir / "result.json").exists(), "a killed run reported a verdict"


def test_a_killed_task_leaves_nothing_behind() -> None:
    started = time.monotonic()
    _kill_a_task_mid_fault(seed=1)
    assert time.monotonic() - started < 180


@pytest.mark.killed_runs
@pytest.mark.parametrize("seed", range(10))
def test_ten_killed_tasks_leave_nothing_behind(seed: int) -> None:
    _kill_a_task_mid_fault(seed)



@pytest.mark.killed_runs
def test_a_killed_scheduler_leaves_nothing_behind(acklab_env: dict[str, str], isolated_run_store: Path) -> None:
    """The Airflow stack's scheduler SIGKILLed (alone, as the OOM killer would) while a DAG run's group
    is under its fault. The executor worker it orphans may finish the group; after that, no task of
    the run keeps the heartbeat, so `acklab reap` removes the cluster within a minute; the run never
    reports a verdict, and stopping the stack also stops the orphans."""
    home = Path(tempfile.mkdtemp(prefix="acklab-stack-"))
    env = {**acklab_env, "ACKLAB_HEARTBEAT_S": str(HEARTBEAT_S)}
    state = stack.start(home, base_env=env)
    scheduler = next(p for p in state.processes if p.name == "scheduler")
    try:
        rest = AirflowRest(state.url, state.user, state.password)
        rest.wait_for_dag("kafka_delivery_smoke")
        rest.set_paused("kafka_delivery_smoke", False)
        before = set(isolated_run_store.iterdir())
        response = rest.trigger("kafka_delivery_smoke", PARAMS)
        assert response.status_code == 200, response.text
        run_id = response.json()["dag_run_id"]
        deadline = time.monotonic() + 300
        group = f"run_group[{len(PLANTING)}]"  # after the negative controls
        while rest.task_states("kafka_delivery_smoke", run_id).get(group) != "running":
            assert time.monotonic() < deadline, rest.failure_report("kafka_delivery_smoke", run_id)
            time.sleep(1.0)
        (run_dir,) = set(isolated_run_store.iterdir()) - before
        time.sleep(random.Random(0).uniform(5.0, 12.0))  # topics, then the fault from ~1 s to ~16 s of the load
        assert rest.task_states("kafka_delivery_smoke", run_id)[group] == "running", "the group ended before the kill"
        os.kill(scheduler.pid, signal.SIGKILL)
        orphans = session_members(scheduler)
        _reaped(run_dir / "cluster", env, 30 + HEARTBEAT_S + 60)  # the orphaned group's load ends within ~30 s
        assert _processes_on(run_dir) == [], "a producer or proxy of the killed run survived"
        assert not (run_dir / "result.json").exists(), "a run whose scheduler was killed reported a verdict"
        assert rest.get(f"/dags/kafka_delivery_smoke/dagRuns/{run_id}")["state"] != "success"
    finally:
        stack.stop_stack(home)
        survivors = [f"{p.name} ({p.pid})" for p in state.all_processes if p.alive()]
        survivors += [f"orphan {p.pid}" for p in session_members(scheduler)]
        shutil.rmtree(home, ignore_errors=True)
    assert survivors == [], f"stack processes still running: {survivors}"
    assert orphans == [] or not any(p.is_running() for p in orphans)


def test_a_cli_run_stopped_by_sigterm_mid_fault_cleans_up_at_once(isolated_run_store: Path) -> None:
    """SIGTERM (a service manager, `timeout`, a CI job cancelled) stops `acklab run` like Ctrl-C: the
    fault is undone, the producers and the cluster are stopped before it exits, with no reaper."""
    before = set(isolated_run_store.iterdir())
    cli = subprocess.Popen(
        [str(Path(sys.executable).parent / "acklab"), "run", "--profile", "idempotent", "--fault", "client-partition",
         "--messages", "60000", "--rate", "2000"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120
        while not (new := set(isolated_run_store.iterdir()) - before):
            assert cli.poll() is None and time.monotonic() < deadline, "the run ended or never created its folder"
            time.sleep(0.5)
        (run_dir,) = new
        started = _fault_started(run_dir / "cluster", lambda: cli.poll() is None, 120)
        time.sleep(2.0)  # the fault runs for 10 s
        assert time.monotonic() - started < 10.0 - 1.0, "the fault may have ended before SIGTERM"
        cli.send_signal(signal.SIGTERM)
        assert cli.wait(60) == 128 + signal.SIGTERM
    finally:
        cli.kill()
    assert ClusterState.load(run_dir / "cluster").status != "running"
    assert_nothing_left(run_dir / "cluster")
    assert _processes_on(run_dir) == [], "a producer or proxy of the stopped run survived"
