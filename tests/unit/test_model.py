"""Known answers of the guarantee model: every class, every rule, the field notes' seed facts."""

from __future__ import annotations

from typing import Any

import pytest

from acklab.base.spec import parse_model
from acklab.cluster.topology import Topology, load_topology
from acklab.model.claims import CLAIMS, Expectation, Kind
from acklab.model.classes import CLASS_RULES, Guarantee, classify
from acklab.model.guarantees import Expected, expect, suite_expectations
from acklab.model.setting import Setting
from acklab.model.tables import DOC, default_tables, to_markdown
from acklab.nemesis.faults import FAULT_NAMES
from acklab.nemesis.schedule import FaultStep, schedule_for
from acklab.workload import librdkafka
from acklab.workload.profiles import ProducerProfile, catalog, get_profile

THREE = load_topology("three-brokers")  # RF=3, min.insync.replicas=2, clean election


def profile(**fields: Any) -> ProducerProfile:
    return parse_model(ProducerProfile, {"name": "p", **fields}, "profile p")


def topology(**fields: Any) -> Topology:
    return THREE.model_copy(update=fields)


def expected(
    p: ProducerProfile | str, fault: str = "leader-kill", duration_s: float = 10.0, topo: Topology = THREE, **options: Any
) -> Expected:
    p = get_profile(p) if isinstance(p, str) else p
    step = {"fault": fault, "at_s": 2.0, "duration_s": duration_s, "options": options}
    return expect(p, topo, [parse_model(FaultStep, step, "step")] if options else schedule_for(fault, 2.0, duration_s))


def texts(result: Expected, kind: Kind) -> set[str]:
    return {e.text() for e in result.expectations if e.kind == kind}


TRANSACTIONAL = {"acks": "all", "enable_idempotence": True, "transaction": {"abort_ratio": 0.1}}
ALL_ACKED = {"failed_clean == 0", "indeterminate == 0"}  # every write (outside aborted transactions) acked
REFUSED = {"failed_clean >= 1"}


@pytest.mark.parametrize(
    ("fields", "topo", "guarantee"),
    [
        ({"acks": "0", "retries": 0}, THREE, Guarantee.AT_MOST_ONCE),
        ({"acks": "1"}, THREE, Guarantee.LEADER_DURABLE),
        ({"acks": "all"}, topology(min_insync_replicas=1), Guarantee.LEADER_DURABLE),
        ({"acks": "all"}, topology(unclean_leader_election=True), Guarantee.LEADER_DURABLE),
        ({"acks": "all"}, topology(broker_overrides={"min.insync.replicas": 1}), Guarantee.LEADER_DURABLE),
        ({"acks": "all"}, topology(broker_overrides={"unclean.leader.election.enable": "true"}), Guarantee.LEADER_DURABLE),
        ({"acks": "all", "max_in_flight": 5}, THREE, Guarantee.AT_LEAST_ONCE),
        ({"acks": "all", "max_in_flight": 1}, THREE, Guarantee.AT_LEAST_ONCE_ORDERED),
        ({"acks": "all", "enable_idempotence": True, "max_in_flight": 5}, THREE, Guarantee.EXACTLY_ONCE),
        ({"acks": "all", "enable_idempotence": True, "max_in_flight": 1}, THREE, Guarantee.EXACTLY_ONCE),
        ({"acks": "all", "enable_idempotence": True}, topology(min_insync_replicas=1), Guarantee.LEADER_DURABLE),
        (TRANSACTIONAL, THREE, Guarantee.TRANSACTIONAL),
        (TRANSACTIONAL, topology(unclean_leader_election=True), Guarantee.LEADER_DURABLE),
    ],
)
def test_class_of_each_setting(fields: dict, topo: Topology, guarantee: Guarantee) -> None:
    assert expected(profile(**fields), topo=topo).guarantee is guarantee


def test_catalog_profiles_on_the_standard_topology() -> None:
    classes = {name: expected(name).guarantee for name in catalog()}
    assert classes == {
        **classes,
        "at-most-once": Guarantee.AT_MOST_ONCE,
        "leader-ack": Guarantee.LEADER_DURABLE,
        "at-least-once": Guarantee.AT_LEAST_ONCE,
        "at-least-once-ordered": Guarantee.AT_LEAST_ONCE_ORDERED,
        "idempotent": Guarantee.EXACTLY_ONCE,
        "transactional": Guarantee.TRANSACTIONAL,
    }


def test_every_class_rule_is_reachable_and_the_last_catches_all() -> None:
    reached = {
        classify(Setting.of(profile(**fields), topo, []))
        for fields, topo in [
            ({"acks": "0"}, THREE),
            ({"acks": "1"}, THREE),
            ({"acks": "all"}, THREE),
            ({"acks": "all", "max_in_flight": 1}, THREE),
            ({"acks": "all", "enable_idempotence": True}, THREE),
            (TRANSACTIONAL, THREE),
        ]
    }
    assert reached == set(Guarantee)
    assert CLASS_RULES[-1].test(Setting.of(profile(acks="all"), THREE, []))


def test_exact_rows() -> None:
    """Full known answers for rows the default `make run` and the field notes exercise."""

    def exact(result: Expected) -> list[tuple[str, str, str]]:
        return [(e.suite, e.kind, e.text()) for e in result.expectations]

    as_planned = [
        ("evidence_load-as-planned", "evidence", "unsent == 0"),
        ("evidence_load-as-planned", "evidence", "refused == 0"),
        ("evidence_load-as-planned", "evidence", "unknown == 0"),
    ]
    assert exact(expected("idempotent", "leader-kill")) == [
        ("guarantee_exactly-once", "guarantee", "lost == 0"),
        ("guarantee_exactly-once", "guarantee", "duplicates == 0"),
        ("guarantee_exactly-once", "guarantee", "reordered == 0"),
        ("guarantee_exactly-once", "guarantee", "offset_mismatch == 0"),
        ("guarantee_exactly-once", "guarantee", "misrouted == 0"),
        ("guarantee_exactly-once", "guarantee", "misdirected == 0"),
        *as_planned,
        ("availability_idempotence-recovers", "availability", "fatal == 0"),
        ("availability_outage-outlasted", "availability", "failed_clean == 0"),
        ("availability_outage-outlasted", "availability", "indeterminate == 0"),
    ]
    assert exact(expected("leader-ack", "leader-kill")) == [
        ("guarantee_leader-durable", "guarantee", "misrouted == 0"),
        ("guarantee_leader-durable", "guarantee", "misdirected == 0"),
        *as_planned,
        ("availability_outage-outlasted", "availability", "failed_clean == 0"),
        ("availability_outage-outlasted", "availability", "indeterminate == 0"),
    ]
    assert exact(expected("at-least-once", "ack-loss")) == [
        ("guarantee_at-least-once", "guarantee", "lost == 0"),
        ("guarantee_at-least-once", "guarantee", "offset_mismatch == 0"),
        ("guarantee_at-least-once", "guarantee", "misrouted == 0"),
        ("guarantee_at-least-once", "guarantee", "misdirected == 0"),
        *as_planned,
        ("availability_outage-outlasted", "availability", "failed_clean == 0"),
        ("availability_outage-outlasted", "availability", "indeterminate == 0"),
        ("efficacy_ack-loss-duplicates", "efficacy", "duplicates >= 1"),
    ]
    assert expected("idempotent", "leader-kill").suites == (
        "guarantee_exactly-once", "evidence_load-as-planned", "availability_idempotence-recovers", "availability_outage-outlasted"
    )


@pytest.mark.parametrize("name", sorted(catalog()) + ["transactional-aborts", "ordered-idempotent"])
def test_no_fault_means_nothing_lost_or_duplicated(name: str) -> None:
    p = {
        "transactional-aborts": profile(**TRANSACTIONAL),
        "ordered-idempotent": profile(acks="all", enable_idempotence=True, max_in_flight=1),
    }.get(name) or get_profile(name)
    result = expected(p, "none")
    assert {"lost == 0", "duplicates == 0", "offset_mismatch == 0"} <= texts(result, Kind.GUARANTEE)
    assert texts(result, Kind.AVAILABILITY) == ALL_ACKED | {"fatal == 0"}
    assert texts(result, Kind.EVIDENCE) == {"unsent == 0", "refused == 0", "unknown == 0"}
    assert texts(result, Kind.EFFICACY) == ({"aborted >= 1"} if p.transaction else set())


def test_field_note_3_not_enough_replicas() -> None:
    """RF=3, min.insync=2, acks=all, retries=5, two replicas stopped: the records end failed, none is lost."""
    field = get_profile("at-least-once-bounded")
    assert field.retries == 5
    result = expected(field, "replicas-down")
    assert result.guarantee is Guarantee.AT_LEAST_ONCE
    assert "lost == 0" in texts(result, Kind.GUARANTEE)
    # Refused at once, 6 attempts and 5 backoffs of at most 1 s: failed within 8 s of a 10 s outage.
    assert Setting.of(field, THREE, []).refused_s == 8
    assert texts(result, Kind.EFFICACY) == REFUSED
    assert texts(result, Kind.AVAILABILITY) == set()  # 5 retries do not outlast the outage
    assert texts(expected(field, "replicas-down", duration_s=8), Kind.EFFICACY) == set()
    # Unbounded retries within a 60 s delivery timeout wait out a 10 s outage, not a 70 s one.
    assert texts(expected("at-least-once", "replicas-down", 10), Kind.AVAILABILITY) == ALL_ACKED
    assert texts(expected("at-least-once", "replicas-down", 10), Kind.EFFICACY) == set()
    assert texts(expected("at-least-once", "replicas-down", 70), Kind.EFFICACY) == REFUSED
    # The leader alone acknowledges acks=1 writes: the outage does not refuse them.
    assert texts(expected("leader-ack", "replicas-down", 10), Kind.AVAILABILITY) == ALL_ACKED
    assert texts(expected("leader-ack", "replicas-down", 70), Kind.AVAILABILITY) == set()
    assert texts(expected("leader-ack", "replicas-down", 70), Kind.EFFICACY) == set()


def test_field_note_4_acks_0_and_1_may_lose_under_leader_failure() -> None:
    for name in ("at-most-once", "leader-ack"):
        assert "lost == 0" not in texts(expected(name, "leader-kill"), Kind.GUARANTEE)
    assert "duplicates == 0" in texts(expected("at-most-once", "leader-kill"), Kind.GUARANTEE)
    assert "duplicates == 0" not in texts(expected("leader-ack", "leader-kill"), Kind.GUARANTEE)
    assert "lost == 0" in texts(expected("at-least-once", "leader-kill"), Kind.GUARANTEE)


def test_field_note_5_lost_acks() -> None:
    """A dropped ack makes at-least-once store duplicates; the idempotent producer must not."""
    alo = expected("at-least-once", "ack-loss")
    assert texts(alo, Kind.EFFICACY) == {"duplicates >= 1"}
    assert "duplicates == 0" not in texts(alo, Kind.GUARANTEE)
    idem = expected("idempotent", "ack-loss")
    assert {"duplicates == 0", "lost == 0"} <= texts(idem, Kind.GUARANTEE)
    assert texts(idem, Kind.EFFICACY) == set()
    no_retries = expected(profile(acks="all", retries=0), "ack-loss")
    assert texts(no_retries, Kind.EFFICACY) == {"indeterminate >= 1"}
    assert texts(expected("at-most-once", "ack-loss"), Kind.EFFICACY) == set()  # acks=0 gets no acks to lose


@pytest.mark.parametrize("fault", FAULT_NAMES)
def test_field_note_6_retries_keep_the_partition(fault: str) -> None:
    for p in [*catalog().values(), profile(**TRANSACTIONAL)]:
        assert "misrouted == 0" in texts(expected(p, fault), Kind.GUARANTEE), (p.name, fault)


def test_settings_list() -> None:
    """Without idempotence retries may reorder, with one request in flight too; transactions hide aborts."""
    assert "reordered == 0" not in texts(expected("at-least-once"), Kind.GUARANTEE)
    # librdkafka documents that retries may reorder without idempotence: a belief, not a promise.
    assert "reordered == 0" not in texts(expected("at-least-once-ordered"), Kind.GUARANTEE)
    assert "reordered == 0" in texts(expected("idempotent"), Kind.GUARANTEE)
    transactional = texts(expected(profile(**TRANSACTIONAL)), Kind.GUARANTEE)
    assert transactional == texts(expected("idempotent"), Kind.GUARANTEE) | {"aborted_visible == 0", "hanging_partitions == 0"}
    # Without an aborted transaction, aborted_visible == 0 would prove nothing.
    assert texts(expected(profile(**TRANSACTIONAL)), Kind.EFFICACY) == {"aborted >= 1"}
    never_aborts = profile(**{**TRANSACTIONAL, "transaction": {"abort_ratio": 0}})
    assert texts(expected(never_aborts), Kind.EFFICACY) == set()


def test_unbounded_faults_set_no_availability_expectation() -> None:
    for fault in ("latency", "rolling-restart"):
        assert texts(expected("at-least-once", fault), Kind.AVAILABILITY) == set()


@pytest.mark.parametrize("fault", ["request-loss", "client-partition", "request-hold"])
def test_silent_faults_add_the_request_timeout_to_the_outage(fault: str) -> None:
    """A request lost in flight is retried only after request.timeout.ms (librdkafka: socket.timeout.ms)."""
    assert texts(expected("at-least-once", fault), Kind.AVAILABILITY) == ALL_ACKED  # 60 >= 10 + 10 + 30
    slow = profile(acks="all", request_timeout_ms=30000)
    assert texts(expected(slow, fault), Kind.AVAILABILITY) == set()  # 60 < 10 + 30 + 30
    assert texts(expected(slow, "leader-kill"), Kind.AVAILABILITY) == ALL_ACKED
    assert librdkafka.config(slow)["socket.timeout.ms"] == 30000


def test_injected_errors() -> None:
    """Retriable errors are retried within the budget; non-retriable ones fail writes (never appended)."""
    assert texts(expected("at-least-once", "error-inject"), Kind.AVAILABILITY) == ALL_ACKED  # NOT_ENOUGH_REPLICAS
    assert texts(expected("at-least-once", "error-inject"), Kind.EFFICACY) == set()
    assert texts(expected("at-least-once-bounded", "error-inject"), Kind.EFFICACY) == REFUSED  # 5 retries: failed in 8 s of 10
    assert texts(expected("at-least-once-bounded", "error-inject", 8), Kind.EFFICACY) == set()
    for name in ("at-least-once", "leader-ack", "idempotent"):
        permanent = expected(name, "error-inject", error="INVALID_RECORD")
        assert texts(permanent, Kind.AVAILABILITY) & ALL_ACKED == set(), name
        assert texts(permanent, Kind.EFFICACY) == REFUSED, name
    idempotent = expected("idempotent", "error-inject", error="TOPIC_AUTHORIZATION_FAILED")
    assert {"lost == 0", "duplicates == 0"} <= texts(idempotent, Kind.GUARANTEE)
    assert texts(idempotent, Kind.AVAILABILITY) == {"fatal == 0"}  # measured: librdkafka fails the writes, raises no fatal error
    assert texts(expected(profile(**TRANSACTIONAL), "error-inject", error="INVALID_RECORD"), Kind.EFFICACY) == {"aborted >= 1"}
    assert texts(expected("at-most-once", "error-inject", error="INVALID_RECORD"), Kind.EFFICACY) == set()  # acks=0: never answered


def test_errors_after_append() -> None:
    """Appended but reported failed: a retrying non-idempotent producer stores duplicates; the
    idempotent one is deduplicated by the broker; without retries the write is indeterminate."""
    alo = expected("at-least-once", "error-after-append")  # NOT_ENOUGH_REPLICAS_AFTER_APPEND
    assert texts(alo, Kind.EFFICACY) == {"duplicates >= 1"}
    assert texts(alo, Kind.AVAILABILITY) == ALL_ACKED
    assert "duplicates == 0" not in texts(alo, Kind.GUARANTEE)
    idem = expected("idempotent", "error-after-append")
    assert {"duplicates == 0", "lost == 0"} <= texts(idem, Kind.GUARANTEE)
    assert texts(idem, Kind.EFFICACY) == set()
    assert texts(expected(profile(acks="all", retries=0), "error-after-append"), Kind.EFFICACY) == {"indeterminate >= 1"}
    assert texts(expected("at-least-once-bounded", "error-after-append"), Kind.EFFICACY) == {"duplicates >= 1"}
    permanent = expected("at-least-once", "error-after-append", error="UNKNOWN_SERVER_ERROR")
    assert texts(permanent, Kind.EFFICACY) == {"indeterminate >= 1"}
    assert texts(permanent, Kind.AVAILABILITY) == set()
    assert texts(expected("idempotent", "error-after-append", error="INVALID_RECORD"), Kind.EFFICACY) == {"indeterminate >= 1"}


def test_retry_budget() -> None:
    short = profile(acks="all", request_timeout_ms=1000, delivery_timeout_ms=5000)
    assert (Setting.of(short, THREE, []).budget_s, Setting.of(short, THREE, []).refused_s) == (5, 5)
    assert texts(expected(short, "replicas-down", 10), Kind.EFFICACY) == REFUSED
    slow = profile(acks="all", retries=3, overrides={"retry.backoff.ms": 20000})
    assert Setting.of(slow, THREE, []).budget_s == 60  # min(60 s delivery timeout, 3 x 20 s)
    assert texts(expected(slow, "leader-kill", 10), Kind.AVAILABILITY) == ALL_ACKED


def test_rows_use_only_suite_expectations() -> None:
    suites = suite_expectations()
    assert len({claim.id for claim in CLAIMS}) == len(CLAIMS)
    for p in [*catalog().values(), profile(**TRANSACTIONAL), profile(acks="all", retries=0)]:
        for fault in FAULT_NAMES:
            for e in expected(p, fault, 70).expectations:
                assert e in suites[e.suite], (p.name, fault, e)


def test_expectation_bounds() -> None:
    assert Expectation("lost", 0, 0, Kind.GUARANTEE, "s", "r").text() == "lost == 0"
    at_least = Expectation("failed", 1, None, Kind.AVAILABILITY, "s", "r")
    assert at_least.text() == "failed >= 1"
    assert (at_least.holds(3), at_least.holds(0), at_least.holds(None)) == (True, False, False)
    assert Expectation("x", None, 2.5, Kind.EFFICACY, "s", "r").text() == "x <= 2.5"
    assert Expectation("x", 1, 2, Kind.EFFICACY, "s", "r").text() == "1 <= x <= 2"


def test_committed_table_is_current() -> None:
    assert DOC.read_text() == to_markdown(default_tables()), "docs/guarantees.md is stale: run `acklab model-table`"


def test_every_class_comes_with_the_rule_and_settings_that_decided_it() -> None:
    assert expected("idempotent").reason == (
        "rule 6 (enable.idempotence=true) matched; decided by acks=all, min.insync.replicas=2, "
        "unclean.leader.election.enable=false, transactional=false, enable.idempotence=true"
    )
    assert expected("leader-ack").reason == "rule 2 (acks=1) matched; decided by acks=1"
    assert expected("at-least-once").reason.startswith("rule 8 (otherwise (acks=all, min.insync >= 2, clean election)) matched; decided by acks=all")
    assert "max.in.flight=5" in expected("at-least-once").reason


@pytest.mark.parametrize(
    ("family", "version", "kafka", "transaction_version"),
    [
        ("librdkafka", "2.16.1", "4.3.1", 1),  # no KIP-890 part 2 (librdkafka #5423)
        ("java", "3.9.1", "4.3.1", 1),
        ("java", "4.3.1", "3.9.2", 1),
        ("java", "4.3.1", "4.3.1", 2),
        ("java", "4.0.0", "4.0.0", 2),
    ],
)
def test_the_model_knows_the_transaction_protocol_each_client_and_kafka_version_run(family: str, version: str, kafka: str, transaction_version: int) -> None:
    from acklab.workload.client import Client

    client = Client(version, "2.16.0" if family == "librdkafka" else "", "", family=family)
    topology = THREE.model_copy(update={"kafka_version": kafka})
    eos = Setting.of(get_profile("idempotent"), topology, [], client, "eos")
    assert eos.transaction_version == transaction_version
    assert f"transaction version {transaction_version}" in expect(get_profile("idempotent"), topology, [], client, "eos").reason
    assert Setting.of(get_profile("transactional"), topology, [], client).transaction_version == transaction_version
    assert Setting.of(get_profile("idempotent"), topology, [], client).transaction_version == 0  # no transactions
    assert Setting.of(get_profile("idempotent"), topology, [], client, "at-least-once").transaction_version == 0
