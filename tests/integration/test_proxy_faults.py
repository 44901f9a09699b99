"""The protocol-aware proxy faults on a real 3-broker cluster (RF=3, min.insync.replicas=2) with
librdkafka producers, audited by the real Spark job and judged by the GX verdict: injected
retriable errors are retried (nothing lost, nothing failed), errors reported after the append
duplicate at-least-once writes but not idempotent ones, held requests are released after their
delay and acknowledged only then, writes stalled part-way (the proxy reading nothing) reach the
broker once the stall ends, a Metadata answer whose topics the proxy failed is read and
retried. Short loads (3 s, faults of 2 s) on one cluster. And on a single broker, errors the proxy
answers a consumer group's and a transaction's offset requests with reach the librdkafka client as
a broker's would."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition

from acklab.base.paths import runs_dir
from acklab.checker.gx_validation import validate_matrix
from acklab.checker.verdict import Verdict
from acklab.cluster.cluster import Cluster
from acklab.cluster.topology import load_topology
from acklab.nemesis.faults import FAULTS
from acklab.plan.planner import make_plan
from acklab.proxy.rules import ProxyRule

from .helpers import assert_nothing_left, run_audited

pytestmark = pytest.mark.integration

HOLD_S = 1.0
PROFILES = ["at-least-once", "idempotent"]
SCHEDULES = [
    {"fault": "error-inject", "options": {"error": "NOT_ENOUGH_REPLICAS"}},
    {"fault": "error-after-append"},
    {"fault": "request-hold", "options": {"delay_s": HOLD_S}},
    {"fault": "stall-write"},
]

METADATA_ERROR = {  # from before the producers start: librdkafka asks for the topic's metadata only then
    "fault": "error-inject", "target": "every-broker", "before_load": True, "at_s": 0, "duration_s": 2,
    "options": {"apis": ["Metadata"], "error": "UNKNOWN_TOPIC_OR_PARTITION"},
}

Audited = tuple[dict[str, dict], dict[str, dict], Verdict]


@pytest.fixture(scope="module")
def audited(tmp_path_factory: pytest.TempPathFactory) -> Audited:
    """Each fault's group on one cluster, one Spark audit, then the GX verdict."""
    quiet = {"profiles": PROFILES, "messages": 6000, "rate": 2000, "negative_control": False}  # the negative controls are test_negative_control's subject
    run = run_audited([
        make_plan({**quiet, "schedule": [{**step, "at_s": 0.5, "duration_s": 2}]}) for step in SCHEDULES
    ] + [make_plan({**quiet, "schedule": [METADATA_ERROR]})])
    verdict = validate_matrix(run, Path(tmp_path_factory.mktemp("expectations")), run.run_id)
    manifest = {s.scenario: s.model_dump() for s in run.read_manifest().scenarios}
    return manifest, {row["scenario"]: row for row in run.read_matrix()}, verdict


def counts(manifest: dict[str, dict], scenario: str) -> dict[str, int]:
    (event,) = manifest[scenario]["fault_timeline"]
    assert event["effective"], event
    return event["counts"]


def test_every_scenario_passes_its_model_expectations(audited: Audited) -> None:
    _, _, verdict = audited
    assert verdict.status == "pass", verdict.summary_lines()
    assert len(verdict.checked) == len(PROFILES) * (len(SCHEDULES) + 1)


def test_a_stalled_write_is_delivered_once_the_stall_ends(audited: Audited) -> None:
    manifest, rows, _ = audited
    for profile in PROFILES:
        scenario = f"{profile}__stall-write"
        assert counts(manifest, scenario)["stalled_writes"] >= 1
        (event,) = manifest[scenario]["fault_timeline"]
        stalls = event["write_stalls"]
        assert stalls and any(stall["queued"] + stall["pending_read"] > 0 for stall in stalls), stalls
        assert all(stall["resumed_at"] - stall["stalled_at"] >= 1.5 for stall in stalls if stall["queued"] + stall["pending_read"] > 0)
        row = rows[scenario]
        assert (row["lost"], row["failed"], row["duplicates"], row["acked"]) == (0, 0, 0, row["sent"]), row
        assert row["ack_latency_max_ms"] > 1500  # waited out the 2 s stall


def test_injected_retriable_errors_are_retried(audited: Audited) -> None:
    manifest, rows, _ = audited
    for profile in PROFILES:
        scenario = f"{profile}__error-inject"
        assert counts(manifest, scenario)["injected_errors"] > 0
        row = rows[scenario]
        assert (row["lost"], row["failed"], row["duplicates"], row["acked"]) == (0, 0, 0, row["sent"]), row
        assert row["ack_latency_max_ms"] > 1000  # written only after the refusals of the 2 s window
        assert manifest[scenario]["delivery_errors"] == {}


def test_metadata_answers_failed_by_the_proxy_are_read_and_retried(audited: Audited) -> None:
    """UNKNOWN_TOPIC_OR_PARTITION on every topic of the brokers' own Metadata answers (v13 from
    librdkafka 2.16): the client keeps its records queued and asks again until the window ends."""
    manifest, rows, _ = audited
    for profile in PROFILES:
        scenario = f"{profile}__error-inject-before-load"
        seen = counts(manifest, scenario)
        assert seen["injected_topic_errors"] >= 1 and seen["requests.3.v13"] >= seen["injected_errors"], seen
        assert "unanswerable.Metadata" not in seen
        row = rows[scenario]
        assert (row["lost"], row["failed"], row["duplicates"], row["acked"]) == (0, 0, 0, row["sent"]), row


def test_errors_after_the_append_duplicate_at_least_once_but_not_idempotent(audited: Audited) -> None:
    manifest, rows, _ = audited
    assert counts(manifest, "at-least-once__error-after-append")["replaced_errors"] > 0
    assert rows["at-least-once__error-after-append"]["duplicates"] > 0
    assert rows["at-least-once__error-after-append"]["lost"] == 0
    idempotent = rows["idempotent__error-after-append"]
    assert (idempotent["duplicates"], idempotent["lost"], idempotent["acked"]) == (0, 0, idempotent["sent"]), idempotent


def test_held_requests_are_released_after_their_delay(audited: Audited) -> None:
    manifest, rows, _ = audited
    for profile in PROFILES:
        scenario = f"{profile}__request-hold"
        held = counts(manifest, scenario)
        assert held["held_requests"] > 0 and held["released_requests"] == held["held_requests"], held
        row = rows[scenario]
        assert row["ack_latency_max_ms"] >= HOLD_S * 1000
        assert (row["lost"], row["failed"], row["acked"]) == (0, 0, row["sent"]), row


def test_produce_version_on_the_wire(audited: Audited) -> None:
    """librdkafka 2.16 negotiates Produce v10 with Kafka 4.3.1 (the codec reads 3-13)."""
    manifest, _, _ = audited
    versions = {key for key in counts(manifest, "at-least-once__error-inject") if key.startswith("requests.0.")}
    assert versions == {"requests.0.v10"}


def _error_inject(**options: object) -> ProxyRule:
    """The proxy rule of an error-inject step with `options`, built as the nemesis builds it."""
    return ProxyRule(action="inject_error", options=FAULTS["error-inject"].options.model_validate(options), expires_in_s=60)


def _produce(cluster: Cluster, count: int) -> None:
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers})
    for n in range(count):
        producer.produce("in", b"%d" % n)
    assert producer.flush(30) == 0


def _offsets_sent_to_a_transaction(cluster: Cluster, offsets: list[TopicPartition], consumer: Consumer) -> KafkaError | None:
    """The error a transactional producer's send_offsets_to_transaction raised (the transaction is then aborted), if any."""
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "transactional.id": "proxy-group-errors"})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce("in", b"out")
    try:
        producer.send_offsets_to_transaction(offsets, consumer.consumer_group_metadata(), 30)
    except KafkaException as exc:
        producer.abort_transaction(30)
        return exc.args[0]
    producer.commit_transaction(30)
    return None


def _first_message(consumer: Consumer, timeout_s: float = 30) -> Message:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            return message
    raise AssertionError("no message consumed")


def _poll_until(consumer: Consumer, done: Callable[[], bool], timeout_s: float = 20) -> None:
    deadline = time.monotonic() + timeout_s
    while not done() and time.monotonic() < deadline:
        consumer.poll(0.2)
    assert done(), "timed out"


def test_injected_group_and_offset_errors_reach_the_client() -> None:
    """On Kafka 4.3.1 with librdkafka: an OffsetCommit answered OFFSET_METADATA_TOO_LARGE fails the
    consumer's commit with it; a Heartbeat answered REBALANCE_IN_PROGRESS makes the member join the
    group again; a TxnOffsetCommit answered UNKNOWN_MEMBER_ID makes send_offsets_to_transaction
    fail with it, an abortable error; a ConsumerGroupHeartbeat (group.protocol=consumer) answered
    FENCED_MEMBER_EPOCH makes the member lose its partitions and join again."""
    root = runs_dir() / "proxy-group-errors" / "cluster"
    cluster = Cluster.provision(load_topology("single-broker"), root, owner_pid=os.getpid())
    consumers: list[Consumer] = []
    try:
        cluster.create_topic("in", 1, 1)
        _produce(cluster, 3)
        proxy = cluster.proxy()

        def counted(key: str) -> int:
            return proxy.stats()[1].get(key, 0)

        rebalances: list[str] = []
        classic = Consumer({
            "bootstrap.servers": cluster.bootstrap_servers, "group.id": "classic", "enable.auto.commit": False,
            "auto.offset.reset": "earliest", "heartbeat.interval.ms": 300,
        })
        consumers.append(classic)
        classic.subscribe(["in"], on_assign=lambda _, __: rebalances.append("assigned"))
        message = _first_message(classic)

        proxy.set_rule(1, _error_inject(apis=["OffsetCommit"], error="OFFSET_METADATA_TOO_LARGE", count=1))
        with pytest.raises(KafkaException) as refused:
            classic.commit(message=message, asynchronous=False)
        assert refused.value.args[0].code() == KafkaError.OFFSET_METADATA_TOO_LARGE
        proxy.clear()
        assert [tp.error for tp in classic.commit(message=message, asynchronous=False)] == [None]  # the broker's own answer

        joins, assigned = counted("requests.11.v5"), len(rebalances)
        proxy.set_rule(1, _error_inject(apis=["Heartbeat"], error="REBALANCE_IN_PROGRESS", count=1))
        _poll_until(classic, lambda: len(rebalances) > assigned)
        proxy.clear()
        assert counted("requests.11.v5") > joins  # JoinGroup again (librdkafka 2.16: v5)

        proxy.set_rule(1, _error_inject(apis=["TxnOffsetCommit"], error="UNKNOWN_MEMBER_ID", count=1))
        error = _offsets_sent_to_a_transaction(cluster, [TopicPartition("in", 0, message.offset() + 1)], classic)
        assert error is not None and (error.code(), error.txn_requires_abort(), error.fatal()) == (KafkaError.UNKNOWN_MEMBER_ID, True, False)
        proxy.clear()

        lost: list[str] = []
        modern = Consumer({
            "bootstrap.servers": cluster.bootstrap_servers, "group.id": "modern", "group.protocol": "consumer",
            "enable.auto.commit": False, "auto.offset.reset": "earliest",
        })
        consumers.append(modern)
        modern.subscribe(["in"], on_assign=lambda _, __: lost.append("assigned"), on_lost=lambda _, __: lost.append("lost"))
        _first_message(modern)
        proxy.set_rule(1, _error_inject(apis=["ConsumerGroupHeartbeat"], error="FENCED_MEMBER_EPOCH", count=1))
        _poll_until(modern, lambda: lost[-2:] == ["lost", "assigned"])
        proxy.clear()

        seen = proxy.stats()[1]
        assert seen["injected_errors"] == 4 and not any(key.startswith("unanswerable.") for key in seen), seen
        assert {key for key in seen if key.startswith(("requests.8.", "requests.12.", "requests.28.", "requests.68."))} == {
            "requests.8.v9", "requests.12.v3", "requests.28.v3", "requests.68.v1",  # the versions librdkafka 2.16 sends Kafka 4.3.1
        }
    finally:
        for consumer in consumers:
            consumer.close()
        cluster.teardown()
    assert_nothing_left(root)
