"""The Java producer (kafka-clients, acklab's driver) on real brokers: it meets the librdkafka
producer's evidence contract (the send log's schema and one final state per planned message, the
statistics, the counts), its transactions are recorded and aborted records stay invisible to
read_committed readers, a load stopped by SIGTERM still writes its evidence and leaves nothing producing
in the host JVM, a killed producer process takes its producer with it, and the
smoke scenarios pass under a leader SIGKILL side by side with librdkafka's, in one fault group, through
the Spark audit and the GX verdict with every row naming its client. KAFKA-13598 (the `versions` family) is red on 3.1.0 and green on 3.2.3."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pyarrow.parquet as pq
import pytest

from acklab.base.paths import expectations_dir, runs_dir
from acklab.checker.gx_validation import validate_matrix
from acklab.cluster.cluster import Cluster
from acklab.cluster.topology import load_topology
from acklab.nemesis.faults import PLANTING
from acklab.plan.planner import make_plan
from acklab.store.runs import ScenarioDir
from acklab.store.schemas import PRODUCER_STATS, SEND_LOG
from acklab.workload import java_client
from acklab.workload.producer import run_load
from acklab.workload.profiles import ProducerProfile, get_profile
from acklab.workload.spec import LoadSpec

from .helpers import assert_nothing_left, json_pair_rows, run_audited
from .test_workload import read_topic, topic

pytestmark = pytest.mark.integration
JAVA = java_client.client(None)
DRIVER = java_client.MAIN_CLASS


def _drivers() -> list[int]:
    return [p.pid for p in psutil.process_iter(["cmdline"]) if DRIVER in (p.info["cmdline"] or [])]


def _producing() -> int:
    """KafkaProducers alive in this process's host JVM: its threads named like a producer's network
    thread ("kafka-producer-network-thread | ...", 15 characters as Linux keeps them)."""
    host = java_client.host(JAVA.version)
    names = [path.read_text().strip() for path in Path(f"/proc/{host.pid}/task").glob("*/comm")]
    return sum(name.startswith("kafka-producer-") for name in names)


def _nothing_producing_soon(timeout_s: float = 15) -> None:
    deadline = time.monotonic() + timeout_s
    while _producing() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _producing() == 0


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    root = runs_dir() / "java-producer" / "cluster"
    cluster = Cluster.provision(load_topology("three-brokers"), root, owner_pid=os.getpid())
    try:
        yield cluster
    finally:
        cluster.teardown()
    assert_nothing_left(root)


def test_the_java_evidence_meets_the_contract_and_transactions_stay_invisible_when_aborted(cluster: Cluster, tmp_path: Path) -> None:
    base = java_client.resolve(get_profile("transactional"), JAVA)
    profile = ProducerProfile.model_validate({**base.model_dump(), "transaction": {"records_per_txn": 250, "abort_ratio": 0.25}})
    name = topic(cluster, "java-transactions")
    result = run_load(cluster.bootstrap_servers, name, profile, LoadSpec(messages=6000, producers=2, keys=8), ScenarioDir(tmp_path), client=JAVA)
    assert (result.acked, result.sent, result.aborted, result.failed, result.unknown) == (6000, 6000, 1500, 0, 0)
    assert (result.client_version, result.librdkafka_version) == (JAVA.version, "")
    table = pq.read_table(ScenarioDir(tmp_path).send_log)
    assert table.schema.remove_metadata() == SEND_LOG.remove_metadata()
    assert table.schema.metadata[b"acklab.client_version"].decode() == JAVA.version
    log = table.to_pylist()
    assert sorted(row["id"] for row in log) == list(range(6000)) and {row["state"] for row in log} == {"acked"}
    assert all(row["partition"] == row["expected_partition"] and row["offset"] >= 0 for row in log)  # murmur2, as Java keys them
    # the driver's file read back column by column: one log position per record, acknowledged after it was sent
    assert len({(row["partition"], row["offset"]) for row in log}) == 6000
    assert all(0 < row["send_ts"] <= row["ack_ts"] and not row["refused"] and not row["fatal"] and row["error"] is None for row in log)
    for producer in ("p0", "p1"):  # 12 transactions of 250 each; every fourth one aborted
        own = [row for row in log if row["producer"] == producer]
        assert [row["txn"] for row in own] == [i // 250 for i in range(3000)]
        assert {row["txn"] for row in own if row["aborted"]} == {3, 7, 11}
        assert [row["seq"] for row in own if row["key"] == f"{producer}-k3"] == list(range(375))
    committed = sorted(row["id"] for row in log if not row["aborted"])
    assert sorted(r[0] for r in read_topic(cluster, name, "read_committed")) == committed
    stats = pq.read_table(ScenarioDir(tmp_path).stats)
    assert stats.schema == PRODUCER_STATS and stats.num_rows >= 2
    last = {row["producer"]: row for row in sorted(stats.to_pylist(), key=lambda row: row["ts"])}
    assert set(last) == {"p0", "p1"} and {row["msg_cnt"] for row in last.values()} == {0}  # the last sample follows the last report
    totals = result.stats
    # every record sent once, plus once more for each retry (txmsgs counts retransmissions); none failed
    assert 6000 <= totals["txmsgs"] <= 6000 + totals["txretries"] and totals["txerrs"] == 0
    assert totals["max_request_latency_avg_ms"] <= totals["max_request_latency_max_ms"] and 0 < totals["max_request_latency_max_ms"] <= profile.request_timeout_ms


def test_a_java_load_stopped_by_sigterm_writes_its_evidence_and_leaves_nothing_producing(cluster: Cluster, tmp_path: Path) -> None:
    name = topic(cluster, "java-stopped")
    profile = java_client.resolve(get_profile("idempotent"), JAVA)
    before = set(_drivers())
    stopper = threading.Timer(3.0, lambda: [os.kill(pid, signal.SIGTERM) for pid in _workers(tmp_path)])
    stopper.start()
    result = run_load(cluster.bootstrap_servers, name, profile, LoadSpec(messages=40000, rate=2000, keys=4), ScenarioDir(tmp_path), client=JAVA)
    stopper.join()
    assert result.stop_reasons == {"p0": "stopped by SIGTERM"}
    assert 0 < result.sent < 40000 and result.unsent == 40000 - result.sent and result.acked == result.sent
    states = pq.read_table(ScenarioDir(tmp_path).send_log, columns=["state"]).column("state").to_pylist()
    assert len(states) == 40000 and states.count("unsent") == result.unsent
    _nothing_producing_soon()
    assert set(_drivers()) - before <= {java_client.host(JAVA.version).pid}  # the process's one JVM, no other


def _workers(scenario: Path) -> list[int]:
    """The Java producer processes (the worker forked by the fork server, not its JVM) of a scenario
    folder: found by their log."""
    log = str(ScenarioDir(scenario).producer_file("p0", ".log"))
    return [
        p.pid for p in psutil.process_iter(["cmdline", "open_files"])
        if "acklab.workload.forkserver" in (p.info["cmdline"] or []) and any(f.path == log for f in p.info["open_files"] or [])
    ]


def test_a_killed_java_worker_takes_its_producer_with_it(cluster: Cluster, tmp_path: Path) -> None:
    """A producer process killed with SIGKILL ends its connection: its run in the host stops producing."""
    name = topic(cluster, "java-killed")
    profile = java_client.resolve(get_profile("leader-ack"), JAVA)
    killer = threading.Timer(3.0, lambda: [os.kill(pid, signal.SIGKILL) for pid in _workers(tmp_path)])
    killer.start()
    with pytest.raises(Exception, match="exited with -9"):
        run_load(cluster.bootstrap_servers, name, profile, LoadSpec(messages=40000, rate=2000), ScenarioDir(tmp_path), client=JAVA)
    killer.join()
    _nothing_producing_soon()


def test_the_java_smoke_passes_side_by_side_with_librdkafka_under_a_leader_kill_and_names_its_client() -> None:
    plan = make_plan({"clients": ["librdkafka", f"java:{JAVA.version}"], "profiles": ["leader-ack", "idempotent"],
                      "faults": ["leader-kill"], "messages": 30000, "rate": 3000, "fault_at_s": 1.0})
    # the negative controls, then both families in one fault group
    assert [len(group) for group in plan.groups()] == [*(1 for _ in PLANTING), 4]
    run = run_audited([plan])
    verdict = validate_matrix(run, expectations_dir(), run.run_id)
    assert {s.status for s in verdict.checked} == {"pass"}, verdict.summary_lines()
    rows = {row["scenario"]: row for row in run.read_matrix() if not row["control"]}
    assert set(rows) == {"leader-ack__leader-kill", "idempotent__leader-kill", "leader-ack.java__leader-kill", "idempotent.java__leader-kill"}
    for name, row in rows.items():
        java = ".java__" in name
        assert row["client_family"] == ("java" if java else "librdkafka"), row
        assert (row["client_version"] == JAVA.version and row["librdkafka_version"] == "") if java else row["librdkafka_version"], row
        assert row["sent"] == row["planned"] == 30000 and row["fault_effective"]
        assert row["partitioner"] == ("murmur2_random" if java else "consistent_random")
    entries = {entry.scenario: entry for entry in run.read_manifest().scenarios}
    assert entries["idempotent.java__leader-kill"].producer_config["enable.idempotence"] == "true"
    assert "enable.idempotence" in entries["idempotent__leader-kill"].producer_config


@pytest.mark.versions
def test_kafka_13598_is_red_on_3_1_0_and_green_on_3_2_3(tmp_path: Path) -> None:
    """`acklab run --preset kafka-13598 --client java:3.1.0 --client java:3.2.3 --json`: exit 1, the
    default producer of 3.1.0 duplicates the records whose acks were lost, 3.2.3's does not."""
    for version in ("3.1.0", "3.2.3"):
        java_client.fetch_client(version)
    done = subprocess.run(
        [str(Path(sys.executable).parent / "acklab"), "run", "--preset", "kafka-13598", "--client", "java:3.1.0", "--client", "java:3.2.3", "--json"],
        capture_output=True, text=True, timeout=900, env={**os.environ, "ACKLAB_RUNS": str(tmp_path / "runs")},
    )
    assert done.returncode == 1, done.stderr[-3000:]
    rows = json_pair_rows(done.stdout)  # stdout is one JSON document and nothing else
    by_version = {row["client_version"]: row for runs in rows.values() for row in runs}
    assert by_version["3.1.0"]["duplicates"] > 0 and by_version["3.2.3"]["duplicates"] == 0, by_version
    assert "DIFFERS java-defaults__ack-loss: 4.3.1-java-3.1.0 fail, 4.3.1-java-3.2.3 pass" in done.stderr


def test_a_groups_java_producers_are_given_the_partition_count(cluster: Cluster) -> None:
    """The group creates its topics: its producers are ready once built (the job names the topology's
    partition count), without reading the topic's metadata first (0.65 s per Java group of seven)."""
    from acklab.orchestration.execution import run_group
    from acklab.store.runs import RunDir

    plan = make_plan({"profiles": ["idempotent"], "faults": ["none"], "client": "java", "messages": 2000, "rate": 2000})
    run = RunDir.create()
    (entry,) = run_group(cluster, plan, len(PLANTING), run)  # after the negative controls
    assert entry.evidence_complete and entry.planned == 2000 and entry.partitions == plan.topology.partitions, entry
    job = (run.scenario(entry.scenario).producers / "p0.java.job").read_text()
    assert f"partitions={plan.topology.partitions}\n" in job, job
