"""Node-to-node link faults on real 3-broker clusters (RF=3), audited by the real Spark job: a
leader cut off from its followers and the controller quorum keeps acknowledging acks=1 writes that
are truncated when it rejoins; the idempotent and acks=all (min.insync.replicas=2) producers lose
nothing. Rules and cgroups are gone after teardown and after the reaper, also when the run's owner
was SIGKILLed with a cut in place.

`make test` runs one quick loss check and one killed run; the `slow` family (`make test-slow`)
repeats the full-speed loss experiment five times, adds unclean election with min.insync=1, and
kills five runs."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from acklab.base.paths import runs_dir
from acklab.checker.submit import audit_job, submit
from acklab.cluster import links
from acklab.cluster.backends import reap_orphans
from acklab.cluster.cluster import Cluster
from acklab.cluster.state import ClusterState, NodeState
from acklab.orchestration.execution import run_scenarios
from acklab.plan.planner import RunPlan, make_plan
from acklab.store.runs import RunDir

from .helpers import assert_nothing_left, host_network_state, run_audited

pytestmark = [pytest.mark.integration, pytest.mark.skipif(bool(links.unavailable()), reason=f"link faults: {links.unavailable()}")]

LOSS_RUNS = 5


PROBE = """
import socket, sys
sys.stdin.readline()  # placed in its node's cgroup by now: its socket is the node's
try:
    with socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=2) as sock:
        sock.sendall(b"x")
        print(sock.recv(1).decode())
except OSError as exc:
    print(type(exc).__name__)
"""


@pytest.fixture
def echo_ports() -> Iterator[list[int]]:
    """Two listeners owned by this process (in no node cgroup) that answer every connection."""
    servers = [socket.create_server(("127.0.0.1", 0)) for _ in range(2)]

    def serve(server: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while True:
                conn, _ = server.accept()
                with conn:
                    conn.sendall(conn.recv(1))

    for server in servers:
        threading.Thread(target=serve, args=(server,), daemon=True).start()
    yield [server.getsockname()[1] for server in servers]
    for server in servers:
        server.close()


def test_a_cut_drops_packets_between_node_processes_only(tmp_path: Path, echo_ports: list[int]) -> None:
    """Mechanism without Kafka: a process in node 1's cgroup cannot reach node 2's port while the
    cut lasts, this process (a client, in no node cgroup) still can, and afterwards it is all gone;
    a cluster whose folder has no state is a stray that the next provisioning removes."""
    before = host_network_state()
    nodes = [NodeState(node_id=n, roles=["broker"], internal_port=port, dir=tmp_path / f"node-{n}") for n, port in zip((1, 2), echo_ports, strict=True)]
    state = links.plan(tmp_path, "test", [1, 2])
    control = links.Links(state, nodes, tmp_path)

    def probe(node: int, port: int) -> str:
        process = subprocess.Popen([sys.executable, "-c", PROBE, str(port)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        control.place(node, [process.pid])
        return process.communicate("go\n", timeout=10)[0].strip()

    try:
        control.install()
        assert probe(1, echo_ports[1]) == "x"
        fault = control.cut([(1, 2), (2, 1)])
        assert probe(1, echo_ports[1]) == "TimeoutError"  # node 1 -> node 2: cut
        assert probe(1, echo_ports[0]) == "x"  # node 1 -> itself: not a link
        with socket.create_connection(("127.0.0.1", echo_ports[1]), timeout=2) as client:  # a client -> node 2
            client.sendall(b"y")
            assert client.recv(1) == b"y"
        assert control.dropped(fault) > 0
        control.heal(fault)
        assert probe(1, echo_ports[1]) == "x"
        control.cut([(1, 2)])
        assert links.reap_strays() == [f"{state.chain} ({tmp_path})"]  # no cluster.json in its folder
        assert host_network_state() == before
    finally:
        links.remove(state, tmp_path)
    assert host_network_state() == before


def audited_runs(plans: list[RunPlan]) -> list[tuple[dict[str, dict], dict[str, dict]]]:
    """Run each plan into its own run folder on one cluster with link control, one Spark audit
    each; check the host is back to its state before; return (manifest entries, matrix rows) per run."""
    before = host_network_state()
    runs = [RunDir.create() for _ in plans]
    cluster = Cluster.provision(plans[0].topology, runs[0].cluster, owner_pid=os.getpid(), cut_links=True)
    try:
        for plan, run in zip(plans, runs, strict=True):
            run_scenarios(cluster, plan, run)
            submit(audit_job(run))
    finally:
        cluster.teardown()
    assert_nothing_left(runs[0].cluster)
    assert host_network_state() == before
    return [
        ({s.scenario: s.model_dump() for s in run.read_manifest().scenarios if not s.control}, {row["scenario"]: row for row in run.read_matrix()})
        for run in runs
    ]


def isolate_leader(profiles: list[str], **params: object) -> RunPlan:
    return make_plan({
        "profiles": profiles, "faults": ["leader-isolate"], "fault_at_s": 2, "fault_duration_s": 8,
        "negative_control": False,  # the negative controls are test_negative_control's subject
        **params,
    })


def assert_leader_moved(entry: dict) -> None:
    (event,) = entry["fault_timeline"]
    assert event["effective"] and "moved" in event["effect"] and event["counts"]["dropped_packets"] > 0, event


def test_an_isolated_leader_loses_acks_1_writes_but_not_idempotent_ones() -> None:
    ((manifest, rows),) = audited_runs([isolate_leader(["leader-ack", "idempotent"], messages=70_000, rate=5000)])
    for entry in manifest.values():
        assert_leader_moved(entry)
    assert rows["leader-ack__leader-isolate"]["lost"] > 0, rows["leader-ack__leader-isolate"]
    idempotent = rows["idempotent__leader-isolate"]
    assert (idempotent["lost"], idempotent["duplicates"], idempotent["acked"]) == (0, 0, idempotent["sent"]), idempotent


@pytest.mark.slow
def test_at_full_speed_acks_1_loses_in_most_runs_acks_all_never(capsys: pytest.CaptureFixture[str]) -> None:
    profiles = ["leader-ack", "idempotent", "at-least-once"]
    results = audited_runs([isolate_leader(profiles, rate=None, duration_s=15, messages=10_000_000) for _ in range(LOSS_RUNS)])
    lost = {name: [rows[f"{name}__leader-isolate"]["lost"] for _, rows in results] for name in profiles}
    acked = {name: [rows[f"{name}__leader-isolate"]["acked"] for _, rows in results] for name in profiles}
    with capsys.disabled():
        print(f"\nleader-isolate at full speed, {LOSS_RUNS} runs: lost {lost}; acked {acked}")
    for manifest, _ in results:
        for entry in manifest.values():
            assert_leader_moved(entry)
    assert sum(1 for n in lost["leader-ack"] if n > 0) > LOSS_RUNS // 2, lost
    assert lost["idempotent"] == lost["at-least-once"] == [0] * LOSS_RUNS, lost


@pytest.mark.slow
def test_unclean_election_with_min_insync_1(tmp_path: Path) -> None:
    """With min.insync.replicas=1 and unclean election acks=all is only leader-durable: the leader
    moves while the old one is cut off, so acknowledged writes may be lost; whatever is lost is
    counted exactly (the acked messages no topic record carries), and the verdict is the model's for
    leader-durable under leader-isolate: nothing misrouted, evidence complete, loss allowed."""
    spec = tmp_path / "unclean.yaml"
    spec.write_text(textwrap.dedent("""\
        name: three-brokers-unclean
        brokers: 3
        controllers: {mode: combined, count: 3}
        partitions: 3
        replication_factor: 3
        min_insync_replicas: 1
        unclean_leader_election: true
        broker_overrides: {replica.lag.time.max.ms: 10000}
    """))
    profiles = ["leader-ack", "at-least-once", "idempotent"]
    plan = isolate_leader(profiles, topology=str(spec), rate=None, duration_s=15, messages=10_000_000)
    assert {s.expected.guarantee for s in plan.checked} == {"leader-durable"}
    before = host_network_state()
    run = run_audited([plan])
    assert host_network_state() == before
    manifest = {s.scenario: s.model_dump() for s in run.read_manifest().scenarios if not s.control}
    rows = {row["scenario"]: row for row in run.read_matrix()}
    outcomes = pq.read_table(run.audit.outcomes, columns=["scenario", "state", "copies"]).to_pylist()
    for name in profiles:
        scenario = f"{name}__leader-isolate"
        assert_leader_moved(manifest[scenario])
        row = rows[scenario]
        acked = [o["copies"] for o in outcomes if o["scenario"] == scenario and o["state"] == "acked"]
        assert len(acked) == row["acked"] > 0, row  # the send log's acked messages, each with the copies the audit read
        assert row["lost"] == acked.count(0), row  # loss is allowed and counted exactly: acked, never read
        assert (row["guarantee"], row["fault_effective"], row["evidence_complete"], row["misrouted"]) == ("leader-durable", True, True, 0), row


OWNER = """
import os, sys, time
from pathlib import Path
from acklab.cluster.cluster import Cluster
from acklab.cluster.topology import load_topology
cluster = Cluster.provision(load_topology("three-brokers"), Path(sys.argv[1]), owner_pid=os.getpid(), cut_links=True)
admin = cluster.admin()
admin.create_topic("t", 3, 3)
leader = admin.wait_in_sync("t", 60)[0].leader
others = [n for n in cluster.topology.node_ids if n != leader]
cluster.links().cut([(leader, n) for n in others] + [(n, leader) for n in others])
print("cut", flush=True)
time.sleep(600)
"""


@pytest.mark.parametrize("attempt", [pytest.param(n, marks=[pytest.mark.slow] if n else []) for n in range(5)])
def test_a_killed_run_with_a_cut_in_place_leaves_nothing_after_the_reaper(attempt: int) -> None:
    root = runs_dir() / f"killed-cut-{attempt}" / "cluster"
    before = host_network_state()
    owner = subprocess.Popen([sys.executable, "-c", OWNER, str(root)], stdout=subprocess.PIPE, text=True)
    try:
        assert owner.stdout is not None and owner.stdout.readline().strip() == "cut"
        state = ClusterState.load(root)
        assert state.links is not None
        during = host_network_state()
        assert sum(state.links.chain in rule for rule in during["iptables"]) > len(state.nodes), during
        assert during["cgroups"] == sorted([*before["cgroups"], state.links.cgroup.name])
        owner.send_signal(signal.SIGKILL)
        owner.wait(10)
        assert reap_orphans(runs_dir()) == [root]
    finally:
        owner.kill()
        owner.wait(10)
    assert_nothing_left(root)
    assert host_network_state() == before
