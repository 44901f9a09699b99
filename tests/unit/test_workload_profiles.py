"""Producer profiles: the catalog is valid, contradictions fail with one line naming the field."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from acklab.base.spec import SpecError, parse_model
from acklab.plan.planner import make_plan
from acklab.workload import librdkafka
from acklab.workload.profiles import ProducerProfile, TransactionSpec, catalog, get_profile, load_profiles_file


def profile(**fields: object) -> ProducerProfile:
    return parse_model(ProducerProfile, {"name": "p", **fields}, "profile p")


def test_catalog_has_every_delivery_mode() -> None:
    expected = {
        "at-most-once": ("0", False, 5, False),
        "leader-ack": ("1", False, 5, False),
        "at-least-once": ("all", False, 5, False),
        "at-least-once-ordered": ("all", False, 1, False),
        "idempotent": ("all", True, 5, False),
        "transactional": ("all", True, 5, True),
    }
    profiles = catalog()
    assert {n: (profiles[n].acks, profiles[n].enable_idempotence, profiles[n].max_in_flight, profiles[n].transaction is not None) for n in expected} == expected
    assert all(p.partitioner == "consistent_random" for p in profiles.values())
    transaction = get_profile("transactional").transaction
    assert transaction is not None and (transaction.records_per_txn, transaction.abort_ratio) == (4000, 0.25)
    assert all(p.partitioner == "consistent_random" for p in profiles.values())


def test_producer_config_uses_librdkafka_names_and_keeps_overrides() -> None:
    config = librdkafka.config(profile(acks="all", enable_idempotence=True, partitioner="murmur2_random", overrides={"compression.type": "lz4"}))
    assert config["acks"] == "all" and config["enable.idempotence"] is True
    assert config["partitioner"] == "murmur2_random" and config["compression.type"] == "lz4"
    assert "transaction.timeout.ms" not in config
    assert librdkafka.config(get_profile("transactional"))["transaction.timeout.ms"] == 60000


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"acks": "0", "enable_idempotence": True}, "enable_idempotence requires acks=all, got acks=0"),
        ({"acks": "1", "enable_idempotence": True}, "enable_idempotence requires acks=all, got acks=1"),
        ({"acks": "all", "enable_idempotence": True, "max_in_flight": 6}, "enable_idempotence requires max_in_flight <= 5"),
        ({"acks": "all", "enable_idempotence": True, "retries": 0}, "enable_idempotence requires retries > 0"),
        ({"acks": "all", "transaction": {}}, "transaction requires enable_idempotence: true"),
        ({"acks": "1", "transaction": {"records_per_txn": 10}}, "transaction requires enable_idempotence: true"),
        (
            {"acks": "all", "enable_idempotence": True, "delivery_timeout_ms": 90000, "transaction": {}},
            "transaction.timeout_ms (60000) must be >= delivery_timeout_ms (90000)",
        ),
        ({"acks": "all", "enable_idempotence": True, "transaction": {"abort_ratio": 1.5}}, "transaction.abort_ratio: Input should be less than or equal to 1"),
        ({"acks": "all", "enable_idempotence": True, "transaction": {"records_per_txn": 0}}, "transaction.records_per_txn"),
        ({"acks": "1", "partitioner": "random"}, "partitioner: Input should be 'consistent_random' or 'murmur2_random'"),
        ({"acks": "1", "delivery_timeout_ms": 5000, "request_timeout_ms": 6000}, "delivery_timeout_ms must be >= request_timeout_ms"),
        ({"acks": "1", "overrides": {"acks": "all"}}, "overrides: acks is set by acks, not by overrides"),
        ({"acks": "1", "overrides": {"request.required.acks": -1}}, "request.required.acks is set by acks"),
        ({"acks": "1", "overrides": {"message.timeout.ms": 1000}}, "message.timeout.ms is set by delivery_timeout_ms"),
        ({"acks": "1", "overrides": {"transactional.id": "x"}}, "transactional.id is set by transaction"),
        ({"acks": "1", "overrides": {"bootstrap.servers": "h:1"}}, "bootstrap.servers is set by the cluster"),
        ({"acks": "1", "overrides": {"stats_cb": "x"}}, "librdkafka property stats_cb refused: callbacks are the workload's own"),
        ({"acks": "2"}, "acks: Input should be '0', '1' or 'all'"),
        ({"acks": "1", "colour": "blue"}, "colour: Extra inputs are not permitted"),
    ],
)
def test_contradictions_are_rejected_in_one_line(fields: dict, message: str) -> None:
    with pytest.raises(SpecError) as error:
        profile(**fields)
    assert message in str(error.value)
    assert str(error.value).startswith("profile p: ") and "\n" not in str(error.value)


@pytest.mark.parametrize(("ratio", "aborted"), [(0.0, []), (0.1, [9, 19, 29]), (0.25, [3, 7, 11, 15, 19, 23, 27]), (1.0, list(range(30)))])
def test_aborted_transactions_are_evenly_spread(ratio: float, aborted: list[int]) -> None:
    spec = TransactionSpec(abort_ratio=ratio)
    assert [txn for txn in range(30) if spec.aborts(txn)] == aborted


def test_run_params_override_the_partitioner_and_carry_the_load_knobs() -> None:
    plan = make_plan(
        {"profiles": ["leader-ack", "transactional"], "faults": ["none"], "partitioner": "murmur2_random",
         "producers": 3, "keys": 5, "duration_s": 4, "rate": None, "messages": 1000, "message_bytes": 64}
    )
    assert {s.profile.partitioner for s in plan.checked} == {"murmur2_random"}
    assert (plan.load.producers, plan.load.keys, plan.load.duration_s, plan.load.rate, plan.load.message_bytes) == (3, 5, 4, None, 64)
    assert get_profile("leader-ack").partitioner == "consistent_random"  # the catalog is untouched


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"partitioner": "crc"}, "params: partitioner: Input should be 'consistent_random' or 'murmur2_random'"),
        ({"producers": 0}, "params: producers: Input should be greater than or equal to 1"),
        ({"producers": 5, "messages": 4}, "producers (5) > messages (4)"),
        ({"topics": 3, "keys": 2}, "topics (3) > keys (2): every topic needs a key"),
        ({"topics": 17}, "params: topics: Input should be less than or equal to 16"),
        ({"topics": 2, "profiles": [], "processing": ["eos"]}, "params.topics: a pipeline reads one input topic"),
        ({"messages": 10**8, "message_bytes": 16}, "message_bytes (16) must be >= 18 to hold the id and seq of 100000000 messages"),
        ({"duration_s": 1, "rate": None, "fault_at_s": 2, "faults": ["leader-kill"]}, "leader-kill at 2.0s would start after the load ends"),
    ],
)
def test_bad_load_knobs_fail_before_anything_starts(params: dict, message: str) -> None:
    with pytest.raises(SpecError, match=message.replace("(", r"\(").replace(")", r"\)")):
        make_plan(params)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"no.such.property": 1}, 'rejects the configuration: No such configuration property: "no.such.property"'),
        ({"compression.type": "zip"}, 'Invalid value "zip" for configuration property'),
        ({"enable.gapless.guarantee": True}, "`enable.gapless.guarantee` requires `enable.idempotence`"),
    ],
)
def test_librdkafka_of_the_run_client_validates_every_profile_before_anything_starts(overrides: dict, message: str) -> None:
    custom = {"mine": {"acks": "1", "overrides": overrides}}
    with pytest.raises(SpecError) as error:
        make_plan({"profiles": ["mine"], "custom_profiles": custom, "faults": ["none"]})
    assert str(error.value).startswith("profile mine: librdkafka ") and message in str(error.value)


def test_raw_librdkafka_properties_are_the_producer_they_configure() -> None:
    """librdkafka names and aliases map to the typed fields, its defaults fill the rest, anything
    else stays an override; the configuration handed to librdkafka is the user's."""
    raw = ProducerProfile.from_librdkafka("raw", {"request.required.acks": "-1", "enable.idempotence": "true", "linger.ms": "20", "compression.type": "lz4"})
    assert (raw.acks, raw.enable_idempotence, raw.max_in_flight, raw.linger_ms, raw.retries) == ("all", True, 5, 20, 2147483647)
    assert (raw.request_timeout_ms, raw.delivery_timeout_ms) == (30000, 300000)
    config = librdkafka.config(raw)
    assert config["socket.timeout.ms"] == 60000 and config["compression.type"] == "lz4"
    plain = ProducerProfile.from_librdkafka("plain", {"acks": "1"})
    assert (plain.acks, plain.enable_idempotence, plain.max_in_flight) == ("1", False, 1000000)
    txn = ProducerProfile.from_librdkafka("txn", {"transactional.id": "app-1", "transaction.timeout.ms": 400000})
    assert txn.enable_idempotence and txn.transaction is not None and txn.transaction.timeout_ms == 400000


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"librdkafka": {"acks": "1", "enable.idempotence": "true"}}, "enable_idempotence requires acks=all, got acks=1"),
        ({"librdkafka": {"enable.idempotence": "maybe"}}, "enable.idempotence: expected true or false, got 'maybe'"),
        ({"librdkafka": {"retries": "many"}}, "retries: expected an integer, got 'many'"),
        ({"librdkafka": {"bootstrap.servers": "h:1"}}, "bootstrap.servers is set by acklab"),
        ({"librdkafka": {"acks": "all"}, "acks": "1"}, "with librdkafka only `description` may be given"),
        ({"librdkafka": {"max.in.flight": 6, "enable.idempotence": True}}, "enable_idempotence requires max_in_flight <= 5"),
        ({"acks": "1", "colour": "red"}, "colour: Extra inputs are not permitted"),
        ("acks=all", "expected a mapping of fields"),
    ],
)
def test_bad_user_profiles_fail_in_one_line_naming_the_property(tmp_path: Path, spec: object, message: str) -> None:
    path = tmp_path / "profiles.yaml"
    path.write_text(yaml.safe_dump({"mine": spec}))
    with pytest.raises(SpecError) as error:
        load_profiles_file(path)
    assert message in str(error.value) and "\n" not in str(error.value)
    assert str(error.value).startswith(f"profiles file {path}: profile mine")


def test_a_profiles_file_and_the_catalog_together(tmp_path: Path) -> None:
    path = tmp_path / "profiles.yaml"
    path.write_text(yaml.safe_dump({"ours": {"librdkafka": {"acks": "all", "enable.idempotence": "true"}}}))
    plan = make_plan({"profiles": ["ours", "leader-ack"], "custom_profiles": load_profiles_file(path), "faults": ["none"]})
    assert [(s.profile.name, str(s.expected.guarantee)) for s in plan.checked] == [("ours", "exactly-once"), ("leader-ack", "leader-durable")]
    assert "enable.idempotence=true" in plan.checked[0].expected.reason
    with pytest.raises(SpecError, match="unknown profile 'theirs'; valid: .*ours"):
        make_plan({"profiles": ["theirs"], "custom_profiles": load_profiles_file(path)})
