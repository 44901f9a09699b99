"""The Spark audit against real topics: one spark-submit reads the scenario topics of a real 3-broker
cluster with read_committed (aborted transactions and their markers included), loads spread over
several topics by both client families included, and the records archive re-audits to the same
matrix after the cluster is gone."""

from __future__ import annotations

import dataclasses
import json
import os

import pyarrow.parquet as pq
import pytest

from acklab.base.paths import runs_dir
from acklab.checker.submit import DRIVER_OPTIONS, audit_job, class_archive, submit, with_driver_options
from acklab.cluster.cluster import Cluster
from acklab.cluster.topology import load_topology
from acklab.store.runs import AuditDir, Manifest, RunDir, ScenarioEntry
from acklab.workload import families, java_client
from acklab.workload.producer import run_load
from acklab.workload.profiles import ProducerProfile, get_profile
from acklab.workload.spec import LoadSpec, key_topic, scenario_topics

from .helpers import assert_nothing_left

pytestmark = pytest.mark.integration

SCENARIOS = {  # name: (profile, messages, topics, client); 16 transactions of 250 records per producer, every fourth aborted
    "transactional__none": ("transactional", 8000, 2, None),
    "leader-ack__none": ("leader-ack", 6000, 1, None),
    "java-leader-ack__none": ("leader-ack", 3000, 3, java_client.client(None)),
}


def _profile(name: str) -> ProducerProfile:
    profile = get_profile(name)
    if profile.transaction is None:
        return profile
    return ProducerProfile.model_validate(
        {**profile.model_dump(), "transaction": {"records_per_txn": 250, "abort_ratio": 0.25}}
    )


def test_audit_reads_committed_records_and_reaudits_from_the_archive() -> None:
    run = RunDir(runs_dir() / "audit-kafka")
    cluster = Cluster.provision(load_topology("three-brokers"), run.cluster, owner_pid=os.getpid())
    try:
        scenarios = []
        for index, (name, (profile_name, messages, topics, client)) in enumerate(SCENARIOS.items()):
            topic = f"audit-{index}"
            for each in scenario_topics(topic, topics):
                cluster.create_topic(each, 3, 3)
            profile = _profile(profile_name)
            if client is not None:
                profile = families.of(client).resolve(profile, client)  # its family's partitioner (Java: murmur2)
            spec = LoadSpec(messages=messages, producers=2, topics=topics)
            result = run_load(cluster.bootstrap_servers, topic, profile, spec, run.scenario(name), client=client, partitions=3)
            scenarios.append(
                ScenarioEntry(
                    scenario=name, profile=profile_name, fault="none", guarantee="exactly-once", partitioner=profile.partitioner,
                    producers=2, transactional=profile.transaction is not None, topic=topic,
                    topics=scenario_topics(topic, topics) if topics > 1 else [], partitions=3,
                    send_log=run.relative(run.scenario(name).send_log), fault_effective=True, planned=result.planned,
                )
            )
        run.write_manifest(Manifest(run_id=run.run_id, bootstrap_servers=cluster.direct_bootstrap_servers, scenarios=scenarios))
        rows = {row["scenario"]: row for row in json.loads(submit(audit_job(run)).read_text())}
    finally:
        cluster.teardown()
    assert_nothing_left(run.cluster)

    clean = dict(lost=0, duplicates=0, failed=0, unknown=0, indeterminate=0, unexpected=0, reordered=0,
                 misrouted=0, offset_mismatch=0, misdirected=0, aborted_visible=0)
    txn = rows["transactional__none"]
    assert {name: txn[name] for name in clean} == clean
    assert (txn["sent"], txn["acked"], txn["aborted"], txn["aborted_acked"], txn["aborted_clean"]) == (8000, 8000, 2000, 2000, 2000)
    assert (txn["delivered"], txn["records_read"]) == (6000, 6000)  # the aborted records are invisible
    plain = rows["leader-ack__none"]
    assert {name: plain[name] for name in clean} == clean
    assert (plain["sent"], plain["delivered"], plain["records_read"], plain["aborted"]) == (6000, 6000, 6000, 0)
    java = rows["java-leader-ack__none"]
    assert {name: java[name] for name in clean} == clean
    assert (java["sent"], java["delivered"], java["records_read"]) == (3000, 3000, 3000)
    outcomes = run.audit.outcomes
    assert sorted(set(pq.read_table(outcomes, columns=["scenario"])["scenario"].to_pylist())) == sorted(SCENARIOS)
    # Each key's records are in its own topic, and the send log says which.
    records = pq.read_table(run.audit.topic_records).to_pylist()
    for name, (_, _, topics, _) in SCENARIOS.items():
        names = scenario_topics(f"audit-{list(SCENARIOS).index(name)}", topics)
        found = {(r["key"], r["topic"]) for r in records if r["scenario"] == name}
        assert found == {(f"p{p}-k{k}", names[key_topic(k, topics)]) for p in range(2) for k in range(16)}, name
        sent = pq.read_table(run.scenario(name).send_log, columns=["key", "topic"]).to_pylist()
        assert {(r["key"], r["topic"]) for r in sent} == found, name

    # The archive alone gives the same matrix. Its driver starts from setup's class archive: with
    # -Xshare:on a JVM that cannot map it refuses to start.
    reaudit = audit_job(run, out=AuditDir(run.root / "reaudit"), topic_records=run.audit.topic_records)
    assert f"-XX:SharedArchiveFile={class_archive()}" in reaudit.conf[DRIVER_OPTIONS].split()
    reaudit = dataclasses.replace(reaudit, conf=with_driver_options(reaudit.conf, "-Xshare:on"))
    assert json.loads(submit(reaudit).read_text()) == run.read_matrix()
