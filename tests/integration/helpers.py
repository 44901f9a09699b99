"""Shared steps and checks of integration tests: plans run and audited on one cluster, running a DAG
with `airflow dags test`, the README's commands as a user types them, and that nothing we started
survives a teardown."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import psutil

from acklab.base.paths import PROJECT_ROOT
from acklab.checker.submit import audit_job, submit
from acklab.cluster.cluster import Cluster
from acklab.cluster.state import ClusterState
from acklab.orchestration.execution import run_scenarios
from acklab.plan.planner import RunPlan
from acklab.store.runs import RunDir

BIN = Path(sys.executable).parent


def stop_stack_and_check(home: Path, state: Any, logs_to: Path) -> None:
    """Stop the Airflow stack started in `home` (`acklab.services.airflow_stack`), keep its logs in
    `logs_to`, remove `home`; then nothing it started may run and its port must not answer."""
    from acklab.services import airflow_stack

    airflow_stack.stop_stack(home)
    shutil.rmtree(logs_to, ignore_errors=True)
    shutil.copytree(home / "logs", logs_to, dirs_exist_ok=True)
    survivors = [f"{p.name} ({p.pid})" for p in state.all_processes if p.alive()]
    shutil.rmtree(home, ignore_errors=True)
    assert survivors == [], f"stack processes still running: {survivors}"
    with socket.socket() as sock:
        assert sock.connect_ex(("127.0.0.1", int(state.url.rsplit(":", 1)[1]))) != 0, f"{state.url} still answers"


def json_rows(stdout: str) -> list[dict]:
    """The matrix rows of `acklab run --json`'s one run (its negative controls left out)."""
    return [scenario["row"] for scenario in json.loads(stdout)["scenarios"]]


def json_pair_rows(stdout: str) -> dict[str, list[dict]]:
    """Pair label -> its matrix rows (negative controls left out), of a comparison's `acklab run --json`."""
    return {pair["label"]: [s["row"] for s in pair["results"]["scenarios"]] for pair in json.loads(stdout)["pairs"]}


def dags_test(env: dict[str, str], conf: dict, dag_id: str = "kafka_delivery_smoke", timeout_s: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "airflow"), "dags", "test", dag_id, "-c", json.dumps(conf)],
        env=env, capture_output=True, text=True, timeout=timeout_s,
    )


def readme_commands(after: str) -> list[str]:
    """The commands of the first bash block after the text `after` in README.md or the reference it
    points to, docs/reference.md (continuation lines joined, comments dropped)."""
    readme = "\n".join((PROJECT_ROOT / name).read_text() for name in ("README.md", "docs/reference.md"))
    block = re.search(r"```bash\n(.*?)```", readme[readme.index(after):], re.S)
    assert block, f"no bash block after {after!r} in README.md or docs/reference.md"
    joined = re.sub(r"\\\n\s*", " ", block[1])
    return [line.split("  #")[0].strip() for line in joined.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def run_as_user(command: str, env: dict[str, str], timeout_s: float = 600) -> subprocess.CompletedProcess[str]:
    """`command` through bash from the project root, as in a user's shell: the virtualenv is not on PATH."""
    path = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if Path(p) != BIN)
    return subprocess.run(
        ["bash", "-c", command], cwd=PROJECT_ROOT, env={**env, "PATH": path}, capture_output=True, text=True, timeout=timeout_s,
    )


def run_audited(plans: list[RunPlan]) -> RunDir:
    """Run every plan on one cluster (of the first plan's topology, with link control if a plan cuts
    links) into one run folder, then one Spark audit; the cluster is torn down and nothing of it may be
    left. The folder holds one negative control: the first plan's."""
    run = RunDir.create()
    cluster = Cluster.provision(plans[0].topology, run.cluster, owner_pid=os.getpid(), cut_links=any(p.cuts_links for p in plans))
    try:
        for n, plan in enumerate(plans):
            run_scenarios(cluster, plan if n == 0 else plan.model_copy(update={"scenarios": plan.checked}), run)
        submit(audit_job(run))
    finally:
        cluster.teardown()
    assert_nothing_left(run.cluster)
    return run


def assert_share_left_nothing(run: Path, share: int = 1) -> None:
    """A run made of shares (a version pair is one): its gathered share's cluster torn down (no node,
    port or data dir, `assert_nothing_left`), no work folder of the run left in the run store's
    parent of work (`ACKLAB_WORK` defaults to the run store), no process naming one."""
    assert_nothing_left(run / "shares" / f"share-{share}" / "cluster")
    assert not list(run.parent.glob(f"{run.name}.share-*")), "a share's work folder was left behind"
    named = [p.pid for p in psutil.process_iter(["cmdline"]) if any(f"{run.name}.share-" in part for part in p.info["cmdline"] or [])]
    assert named == [], f"processes of the run's shares still running: {named}"


def assert_nothing_left(cluster_root: Path) -> None:
    """No node process alive, no port still accepting connections, no data dir left."""
    state = ClusterState.load(cluster_root)
    assert state.status == "torn-down"
    for node in state.nodes:
        assert node.pid is None
        assert not node.data_dir.exists(), f"data dir left: {node.data_dir}"
        for port in (node.client_port, node.controller_port):
            if port:
                with socket.socket() as sock:
                    assert sock.connect_ex(("127.0.0.1", port)) != 0, f"port {port} still open"
    java_on_root = [
        p.pid for p in psutil.process_iter(["cmdline"]) if any(str(cluster_root) in part for part in (p.info["cmdline"] or []))
    ]
    assert java_on_root == [], f"processes still running on {cluster_root}: {java_on_root}"


BUILTIN_CHAINS = ("INPUT", "FORWARD", "OUTPUT", "PREROUTING", "POSTROUTING")


def host_network_state() -> dict[str, list[str]]:
    """Every iptables rule, user chain and non-default policy (counters and timestamps dropped; a
    table whose built-in chains accept everything equals no table), `ip netns`, and cgroups named
    like link control's: what must be the same before a run and after its teardown."""
    from acklab.cluster.links import CGROUP_PREFIX, cgroup2_root

    rules = []
    for line in subprocess.run(["iptables-save"], capture_output=True, text=True, check=True).stdout.splitlines():
        if line.startswith(("#", "*")) or line == "COMMIT" or not line:
            continue
        if line.startswith(":"):
            name, policy = line[1:].split()[:2]
            if name in BUILTIN_CHAINS and policy == "ACCEPT":
                continue
            line = f":{name} {policy}"
        rules.append(line)
    cgroups = cgroup2_root()
    return {
        "iptables": rules,
        "netns": subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout.split("\n"),
        "cgroups": sorted(p.name for p in cgroups.glob(f"{CGROUP_PREFIX}*")) if cgroups else [],
    }
