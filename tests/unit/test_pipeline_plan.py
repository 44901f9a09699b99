"""Planning pipeline scenarios: what a run of `processing` styles becomes, and the bad inputs refused
in one line before anything starts."""

from __future__ import annotations

import re

import pytest
from confluent_kafka import KafkaError, KafkaException
from pydantic import ValidationError

from acklab.base.spec import SpecError
from acklab.model.claims import Kind
from acklab.nemesis.actions import java_hash
from acklab.plan.planner import make_plan
from acklab.workload import families
from acklab.workload.processing import ProcessorConfig, ProcessorJob
from acklab.workload.processors import ProcessorGroup, balanced

PIPELINE = {"processing": ["eos"], "profiles": [], "faults": ["processor-kill"], "negative_control": False, "messages": 4000, "rate": 1000.0}


def test_processing_styles_make_pipeline_scenarios_beside_the_profiles() -> None:
    plan = make_plan({**PIPELINE, "processing": ["eos", "at-least-once"], "profiles": ["idempotent"], "faults": ["leader-kill", "zombie"]})
    names = sorted(s.name for s in plan.scenarios)
    # processor faults act on pipelines only: no producer scenario under zombie
    assert names == ["idempotent__leader-kill", "pipeline-at-least-once__leader-kill", "pipeline-at-least-once__zombie",
                     "pipeline-eos__leader-kill", "pipeline-eos__zombie"]
    eos = next(s for s in plan.scenarios if s.name == "pipeline-eos__zombie")
    assert eos.pipeline is not None and eos.pipeline.style == "eos" and eos.pipeline.processors == 2
    assert eos.profile.name == "idempotent"  # the input profile
    suites = {e.suite for e in eos.expected.expectations}
    assert {"guarantee_processing-exactly-once", "evidence_pipeline-drained"} <= suites
    assert not any(e.suite.startswith("guarantee_processing-at") for e in eos.expected.expectations)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"processors": 0}, "processors"),
        ({"processing": ["exactly-twice"]}, "processing"),
        ({"processing": [], "faults": ["processor-kill"], "profiles": ["idempotent"]}, "acts on a pipeline's processors"),
        ({"processing": [], "profiles": []}, "profiles or processing"),
        ({"faults": ["txn-coordinator-kill"], "processing": [], "profiles": ["idempotent"]}, "coordinators"),
        ({"schedule": [{"fault": "processor-kill", "options": {"instance": 2}}]}, "instance 2 does not exist"),
        ({"input_profile": "transactional"}, "non-transactional"),
        ({"processing": ["eos", "eos"]}, "distinct"),
    ],
)
def test_bad_pipeline_inputs_are_refused_in_one_line(change: dict, message: str) -> None:
    with pytest.raises((SpecError, ValueError)) as raised:
        make_plan({**PIPELINE, **change})
    assert message in str(raised.value)


def test_a_group_protocol_the_client_or_broker_cannot_serve_is_named() -> None:
    family = families.default()
    client = family.client(None)
    assert family.processor_problem(client, "classic", "3.0.0") is None
    assert "Kafka 3.9.1" in (family.processor_problem(client, "consumer", "3.9.1") or "")
    old = type(client)(client.version, "2.4.0", client.python, client.family)
    assert "librdkafka 2.4.0" in (family.processor_problem(old, "consumer", "4.3.1") or "")


def test_the_pipeline_claims_are_documented_guarantees_with_an_evidence_rule() -> None:
    from acklab.model.claims import claim

    assert claim("guarantee_processing-exactly-once").kind is Kind.GUARANTEE
    assert claim("evidence_pipeline-drained").kind is Kind.EVIDENCE
    assert [c for c, *_ in claim("guarantee_processing-at-least-once").bounds] == ["processed_lost"]


def test_java_hash_is_kafkas_partitioning_hash() -> None:
    # String.hashCode() values as the JVM computes them; Kafka takes Utils.abs of it.
    assert java_hash("hello") == 99162322
    assert java_hash("polygenelubricants") == 0  # Integer.MIN_VALUE: Utils.abs maps it to 0
    assert java_hash("Aa") == java_hash("BB") == 2112


@pytest.mark.parametrize(
    "name",
    ["interceptor.classes", "partition.assignment.strategy", "plugin.library.paths", "ssl.keystore.location", "sasl.jaas.config",
     "bootstrap.servers", "group.id", "transactional.id", "isolation.level", "enable.auto.commit", "key.deserializer"],
)
def test_a_processor_property_that_could_load_code_read_files_reach_hosts_or_undo_the_style_is_refused(name: str) -> None:
    for side in ("consumer", "producer"):
        with pytest.raises(SpecError, match=rf"{side} property '{re.escape(name)}' is not one a processor may take"):
            make_plan({**PIPELINE, "processor_config": {side: {name: "x"}}})


def test_the_processors_tunable_properties_reach_every_pipeline_but_the_control() -> None:
    config = {"consumer": {"session.timeout.ms": 8000, "max.poll.records": 50}, "producer": {"request.timeout.ms": 3000, "enable.idempotence": True}}
    plan = make_plan({**PIPELINE, "processing": ["eos", "at-least-once"], "processor_config": config, "negative_control": True})
    control, *pipelines = [s for s in plan.scenarios if s.pipeline is not None]
    assert control.control and control.pipeline is not None and control.pipeline.config == ProcessorConfig()
    for scenario in pipelines:
        assert scenario.pipeline is not None
        for family in ("librdkafka", "java"):
            assert scenario.pipeline.config.as_text("consumer", family) == {"session.timeout.ms": "8000", "max.poll.records": "50"}
            assert scenario.pipeline.config.as_text("producer", family) == {"request.timeout.ms": "3000", "enable.idempotence": "true"}


def test_a_familys_own_processor_properties_reach_that_family_only() -> None:
    config = ProcessorConfig.model_validate({"producer": {"request.timeout.ms": 3000}, "librdkafka": {"producer": {"socket.timeout.ms": 2000}}})
    assert config.as_text("producer", "librdkafka") == {"request.timeout.ms": "3000", "socket.timeout.ms": "2000"}
    assert config.as_text("producer", "java") == {"request.timeout.ms": "3000"}
    with pytest.raises(ValidationError, match="consumer property 'interceptor.classes' is not one a processor may take"):
        ProcessorConfig.model_validate({"java": {"consumer": {"interceptor.classes": "com.example.Spy"}}})


@pytest.mark.parametrize(
    ("held", "partitions", "ready"),
    [
        ([{0, 1, 2}, set()], 3, False),  # KIP-848: the first member took all, the second's share not yet handed over
        ([{0, 1}, {2}], 3, True),
        ([{0, 1}, {1, 2}], 3, False),  # a partition not yet revoked from its old holder
        ([{0}, {1}], 3, False),  # partition 2 unheld
        ([{0}, {1}, set()], 2, True),  # more instances than partitions: one stays idle
    ],
)
def test_a_pipelines_group_is_ready_when_every_partition_has_one_holder_and_no_instance_that_could_hold_one_is_idle(
    held: list[set[int]], partitions: int, ready: bool
) -> None:
    assert balanced(held, partitions) is ready


class _Unanswered:
    """A group whose committed offsets are unreadable for the first `failures` reads (pure logic:
    `ProcessorGroup.drain` around its `committed`)."""

    def __init__(self, failures: int, offsets: dict[int, int]) -> None:
        self.failures, self.offsets, self.reads = failures, offsets, 0
        self.template = ProcessorJob(bootstrap_servers="127.0.0.1:1", input_topic="in", output_topic="out", group_id="g", instance=0,
                                     style="eos", log="-")

    def committed(self, bootstrap: str, partitions: int, timeout_s: float = 30.0) -> dict[int, int]:
        self.reads += 1
        if self.reads <= self.failures:
            raise KafkaException(KafkaError(KafkaError.NOT_COORDINATOR, "the coordinator moved"))
        return self.offsets


def test_a_drain_reads_again_while_the_group_coordinator_moves() -> None:
    """A coordinator kill can answer NOT_COORDINATOR for longer than one read: the drain goes on."""
    group = _Unanswered(failures=2, offsets={0: 10, 1: 5})
    assert ProcessorGroup.drain(group, "127.0.0.1:1", {0: 10, 1: 5}, timeout_s=5.0) == {0: 10, 1: 5}  # type: ignore[arg-type]
    assert group.reads == 3


def test_a_drain_that_never_reads_the_offsets_leaves_every_input_unprocessed() -> None:
    group = _Unanswered(failures=10**6, offsets={})
    assert ProcessorGroup.drain(group, "127.0.0.1:1", {0: 10}, timeout_s=1.0) == {}  # type: ignore[arg-type]
    assert group.reads >= 2
