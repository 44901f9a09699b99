"""Topology, profile and run-parameter validation: bad input fails early, naming the field."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from acklab.base.spec import SpecError, parse_model
from acklab.cluster.topology import load_topology
from acklab.model.classes import Guarantee
from acklab.nemesis.faults import FAULT_NAMES
from acklab.nemesis.schedule import schedule_for
from acklab.plan.planner import make_plan
from acklab.workload import librdkafka
from acklab.workload.profiles import ProducerProfile, catalog, get_profile


def write_topology(tmp_path: Path, **fields: object) -> Path:
    spec = {"name": "t", "brokers": 3, "replication_factor": 3, "min_insync_replicas": 2, **fields}
    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"replication_factor": 4}, "replication_factor (4) > brokers (3)"),
        ({"min_insync_replicas": 4}, "min_insync_replicas (4) > replication_factor (3)"),
        ({"controllers": {"mode": "combined", "count": 2}}, "controllers.count (2) must be odd"),
        ({"brokers": 0}, "brokers: Input should be greater than or equal to 1"),
        ({"partitions": "many"}, "partitions: Input should be a valid integer"),
        ({"replicas": 3}, "replicas: Extra inputs are not permitted"),
    ],
)
def test_bad_topology_is_one_line_naming_the_field(tmp_path: Path, fields: dict, message: str) -> None:
    with pytest.raises(SpecError) as error:
        load_topology(str(write_topology(tmp_path, **fields)))
    assert message in str(error.value)
    assert "\n" not in str(error.value)


def test_shipped_topologies_are_valid() -> None:
    topology = load_topology("three-brokers")
    assert (topology.brokers, topology.replication_factor, topology.min_insync_replicas) == (3, 3, 2)
    assert topology.controller_ids == [1, 2, 3]
    assert load_topology("dedicated-controllers").controller_ids == [101, 102, 103]


def test_unknown_topology_lists_known_ones() -> None:
    with pytest.raises(SpecError, match="known: .*three-brokers"):
        load_topology("nope")


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"acks": "1", "enable_idempotence": True}, "enable_idempotence requires acks=all"),
        ({"acks": "all", "enable_idempotence": True, "max_in_flight": 6}, "max_in_flight <= 5"),
        ({"acks": "2"}, "acks: Input should be '0', '1' or 'all'"),
    ],
)
def test_contradictory_profiles_are_rejected(fields: dict, message: str) -> None:
    with pytest.raises(SpecError, match=message):
        parse_model(ProducerProfile, {"name": "p", **fields}, "profile p")


def test_catalog_profiles_map_to_librdkafka_names() -> None:
    config = librdkafka.config(get_profile("idempotent"))
    assert config["enable.idempotence"] is True and config["acks"] == "all"
    assert config["max.in.flight.requests.per.connection"] == 5
    assert set(catalog()) >= {"at-most-once", "leader-ack", "at-least-once", "at-least-once-ordered", "idempotent"}


def test_plan_names_scenarios_and_guarantees() -> None:
    plan = make_plan({"profiles": ["leader-ack", "idempotent"], "faults": ["leader-kill"]})
    assert [(s.name, s.expected.guarantee) for s in plan.checked] == [
        ("leader-ack__leader-kill", Guarantee.LEADER_DURABLE),
        ("idempotent__leader-kill", Guarantee.EXACTLY_ONCE),
    ]
    assert [[step.fault for step in s.schedule] for s in plan.checked] == [["leader-kill"], ["leader-kill"]]


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"faults": ["meteor"]}, "unknown fault 'meteor'; valid: none, leader-kill, leader-restart"),
        ({"schedule": [{"fault": "leader-kill", "target": "leader:x"}]}, "params: schedule.0: target 'leader:x'"),
        ({"schedule": [{"fault": "ack-loss", "options": {"probability": 2}}]}, "params: schedule.0.probability: Input should be less than or equal to 1"),
        ({"schedule": [{"fault": "error-inject", "options": {"error": "NOPE"}}]}, "params: schedule.0: error 'NOPE' is not one a broker answers Produce with; valid: CORRUPT_MESSAGE (2, retriable)"),
        (
            {"schedule": [{"fault": "error-inject", "options": {"apis": ["EndTxn"], "error": "NOT_ENOUGH_REPLICAS"}}]},
            "error 'NOT_ENOUGH_REPLICAS' is not one a broker answers EndTxn with; valid: COORDINATOR_LOAD_IN_PROGRESS (14, retriable)",
        ),
        ({"schedule": [{"fault": "error-inject", "options": {"apis": ["Fetch"]}}]}, "unknown request type 'Fetch'; valid: Produce, Metadata"),
        (
            {"schedule": [{"fault": "error-inject", "options": {"apis": ["Metadata"], "error": "NOT_COORDINATOR"}}]},
            "error 'NOT_COORDINATOR' is not one a broker answers Metadata with; valid: UNKNOWN_TOPIC_OR_PARTITION (3, retriable)",
        ),
        ({"schedule": [{"fault": "error-inject", "options": {"apis": ["ApiVersions"]}}]}, "the proxy cannot answer ApiVersions requests with an error"),
        ({"schedule": [{"fault": "error-after-append", "options": {"apis": [1]}}]}, "params: schedule.0.apis: Extra inputs are not permitted"),
        ({"schedule": [{"fault": "withhold-replay", "options": {"replay_after": "Commit"}}]}, "unknown request type 'Commit'; valid: Produce"),
        (
            {"schedule": [{"fault": "withhold-replay", "options": {"apis": ["EndTxn"], "partition": 0}}]},
            "partition, producer_id, transactional_id and transactional_only choose among Produce requests: apis must be \\[Produce\\]",
        ),
        ({"schedule": [{"fault": "ack-loss", "before_load": True}]}, "ack-loss cannot run before the load; these can: leader-kill, leader-restart"),
        ({"schedule": [{"fault": "leader-kill", "before_load": True, "at_s": 2}]}, "a step before the load starts at at_s 0, not 2"),
        (
            {"profiles": ["transactional"], "schedule": [{"fault": "leader-kill", "before_load": True}]},
            "transactional is transactional and its producers initialise transactions before the load, which leader-kill",
        ),
        ({"faults": ["none", "none"]}, "faults must be distinct"),
        ({"profiles": ["leader-ack", "nope"]}, "unknown profile 'nope'"),
        ({"profiles": []}, "profiles or processing: name at least one producer profile or processing style"),
        ({"profiles": ["idempotent", "idempotent"]}, "profiles must be distinct"),
        ({"messages": 0}, "params: messages: Input should be greater than or equal to 1"),
        ({"messages": 1000, "rate": 1000, "fault_at_s": 2}, "params.fault_at_s: leader-kill at 2.0s would start after the load ends"),
        ({"kafka_version": "2.8.0"}, "params: kafka_version: String should match pattern"),
        ({"colour": "blue"}, "params: colour: Extra inputs are not permitted"),
        # what the cluster's own settings would refuse (acklab.plan.feasibility)
        (
            {"broker_config": {"message.max.bytes": 150}},
            "params.message_bytes: a record of 100 bytes with its key and batch header (about 188 bytes) is above the brokers' "
            "message.max.bytes (150): every write would be refused (MESSAGE_TOO_LARGE); at most 62 bytes fit",
        ),
        (
            {"broker_config": {"message.max.bytes": 5000}},
            "params.broker_config: message.max.bytes 5000 is below the batches librdkafka builds for profile leader-ack (up to 1000000 bytes",
        ),
        ({"broker_config": {"min.insync.replicas": 1}}, "params.broker_config: min.insync.replicas 1 differs from the topology's min_insync_replicas (2)"),
        (
            {"topology": "two-brokers-rf2", "faults": ["replicas-down"]},
            "params.faults: replicas-down stops followers until the ISR is below min.insync.replicas, and with min.insync.replicas 1",
        ),
        (
            {"profiles": ["transactional"], "topology": "single-broker", "broker_config": {"transaction.state.log.replication.factor": 3}},
            "params.profiles: transactional is transactional, and the transaction state topic cannot be created and written with "
            "transaction.state.log.replication.factor 3 and transaction.state.log.min.isr 1 on 1 broker(s)",
        ),
    ],
)
def test_bad_params_fail_before_anything_starts(params: dict, message: str) -> None:
    with pytest.raises(SpecError, match=message.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
        make_plan(params)


def test_settings_the_brokers_accept_pass_the_feasibility_checks() -> None:
    plan = make_plan({"broker_config": {"message.max.bytes": 2_000_000}, "profiles": ["transactional", "leader-ack"], "faults": ["replicas-down"]})
    assert len(plan.checked) == 2
    java = make_plan({"client": "java", "broker_config": {"message.max.bytes": 5000}, "faults": ["none"]})  # the Java client splits a refused batch
    assert len(java.checked) == 2


def test_fault_catalog() -> None:
    assert schedule_for("none") == []
    assert "leader-kill" in FAULT_NAMES


def test_a_step_before_the_load_starts_at_0_and_names_its_scenario() -> None:
    plan = make_plan({"profiles": ["leader-ack"], "schedule": [{"fault": "leader-restart", "before_load": True}]})
    (scenario,) = plan.checked
    assert scenario.name == "leader-ack__leader-restart-before-load"
    assert [(step.at_s, step.before_load) for step in scenario.schedule] == [(0.0, True)]


def test_cluster_ids_never_look_like_options() -> None:
    from acklab.cluster.layout import new_cluster_id

    ids = [new_cluster_id() for _ in range(2000)]
    assert all(len(i) == 22 and not i.startswith("-") for i in ids)
