"""The Java client family's pure logic: a profile's translation to Java properties, the effective
configuration the Java client documents at each version (defaults, KAFKA-13673's adjustment), and
the model's expectations that follow. The driver itself runs in tests/integration/test_java_producer.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from acklab.base.spec import SpecError
from acklab.cluster.topology import load_topology
from acklab.model.classes import Guarantee
from acklab.model.guarantees import expect
from acklab.nemesis.faults import PLANTING
from acklab.nemesis.schedule import schedule_for
from acklab.plan.params import RunParams
from acklab.workload import families, java_client
from acklab.workload.client import Client
from acklab.workload.profiles import get_profile, profile_from_spec


def _java(version: str) -> Client:
    return Client(version, "", "python", family="java")


def test_the_catalog_profiles_mean_the_same_in_java_properties() -> None:
    assert java_client.config(get_profile("idempotent")) == {
        "acks": "all", "enable.idempotence": "true", "retries": "2147483647", "max.in.flight.requests.per.connection": "5",
        "linger.ms": "5", "request.timeout.ms": "10000", "delivery.timeout.ms": "60000",
    }
    assert java_client.config(get_profile("at-least-once"))["enable.idempotence"] == "false"
    assert java_client.config(get_profile("transactional"))["transaction.timeout.ms"] == "60000"
    resolved = java_client.resolve(get_profile("leader-ack"), _java("4.3.1"))
    assert resolved.partitioner == "murmur2_random" and resolved.acks == "1"  # Java keys records with murmur2 only


def test_librdkafka_overrides_without_a_java_meaning_are_refused() -> None:
    profile = profile_from_spec("mine", {"acks": "all", "overrides": {"queue.buffering.max.messages": 10}}, "test")
    with pytest.raises(SpecError, match=r"profile mine: librdkafka overrides queue.buffering.max.messages have no Java translation"):
        java_client.resolve(profile, _java("4.3.1"))
    shared = profile_from_spec("mine", {"acks": "all", "overrides": {"compression.type": "lz4"}}, "test")
    assert java_client.config(shared)["compression.type"] == "lz4"


@pytest.mark.parametrize(
    ("version", "properties", "acks", "idempotent", "linger_ms"),
    [
        ("3.1.0", {}, "all", True, 0),  # documented default since 3.0 (KAFKA-13598 broke it in 3.0.0 and 3.1.0)
        ("3.9.1", {}, "all", True, 0),
        ("4.3.1", {}, "all", True, 5),  # KIP-1030: linger.ms 5 from 4.0
        ("3.2.3", {"acks": "1"}, "1", False, 0),  # KAFKA-13673: an unset idempotence yields to acks != all
        ("3.2.3", {"max.in.flight.requests.per.connection": "6"}, "all", False, 0),
        ("3.2.3", {"retries": "0"}, "all", False, 0),
        ("4.3.1", {"acks": "-1", "enable.idempotence": "false"}, "all", False, 5),
        ("3.9.1", {"transactional.id": "app"}, "all", True, 0),
    ],
)
def test_the_effective_configuration_is_what_the_java_client_documents(
    version: str, properties: dict[str, str], acks: str, idempotent: bool, linger_ms: int
) -> None:
    profile = java_client.effective("custom", properties, version)
    assert (profile.acks, profile.enable_idempotence, profile.linger_ms) == (acks, idempotent, linger_ms)
    assert (profile.delivery_timeout_ms, profile.request_timeout_ms, profile.max_in_flight) == (
        120_000, 30_000, int(properties.get("max.in.flight.requests.per.connection", 5))
    )
    assert (profile.transaction is not None) == ("transactional.id" in properties)
    assert java_client.config(profile) == properties  # the user's own properties run verbatim


def test_java_properties_are_resolved_per_version_and_those_of_another_cluster_refused() -> None:
    for name, value in (("bootstrap.servers", "prod:9092"), ("security.protocol", "SASL_SSL"), ("sasl.mechanism", "PLAIN"),
                        ("key.serializer", "org.example.Avro")):
        with pytest.raises(SpecError, match=rf"params.custom_profiles: profile custom: .*java property {name} refused: "):
            profile_from_spec("custom", {"java": {name: value, "acks": "1"}}, "params.custom_profiles")
    profile = profile_from_spec("custom", {"java": {"acks": "1", "linger.ms": 20}}, "params.custom_profiles")
    assert java_client.config(profile) == {"acks": "1", "linger.ms": "20"}
    resolved = java_client.resolve(profile, _java("3.2.3"))
    assert (resolved.acks, resolved.enable_idempotence, resolved.linger_ms) == ("1", False, 20)
    with pytest.raises(SpecError, match="profile custom is Java producer properties: it runs on the java client"):
        families.default().resolve(profile, families.default().client(None))


def test_a_custom_partitioner_cannot_be_checked_and_is_refused() -> None:
    with pytest.raises(SpecError, match=r"partitioner.class=.*a custom partitioner is not supported"):
        java_client.effective("custom", {"partitioner.class": "org.apache.kafka.clients.producer.RoundRobinPartitioner"}, "4.3.1")


def test_the_model_expects_what_the_documentation_promises_not_what_a_buggy_client_does() -> None:
    """KAFKA-13598: kafka-clients 3.1.0 documents idempotence on by default; the model expects it, so a
    3.1.0 producer that duplicates under lost acks is red."""
    topology, schedule = load_topology("three-brokers"), schedule_for("ack-loss", 2.0, 10.0)
    for version in ("3.1.0", "3.2.3"):
        profile = java_client.effective("java-defaults", {}, version)
        expected = expect(profile, topology, schedule, _java(version))
        assert expected.guarantee is Guarantee.EXACTLY_ONCE, expected.reason
        assert any(e.column == "duplicates" and e.max == 0 for e in expected.expectations)
    legacy = expect(java_client.effective("acks1", {"acks": "1"}, "3.2.3"), topology, schedule, _java("3.2.3"))
    assert legacy.guarantee is not Guarantee.EXACTLY_ONCE


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("python:1.0", "String should match pattern"),
        ("java:2.8.0", "kafka-clients 3.x.y or 4.x.y"),
        ("java:3.8.0", "java client 3.8.0 is not set up (or its driver changed): run `acklab setup --java-client-version 3.8.0`"),
    ],
)
def test_a_client_is_named_family_colon_version(spec: str, message: str) -> None:
    from acklab.plan.planner import make_plan

    with pytest.raises(SpecError, match=message.replace("(", r"\(").replace(")", r"\)")):
        make_plan({"client": spec})


def test_client_and_client_version_cannot_both_name_the_client() -> None:
    with pytest.raises(ValueError, match="both name the client"):
        RunParams(client="java:4.3.1", client_version="2.3.0")


def test_clients_side_by_side_share_each_fault_group() -> None:
    from acklab.plan.planner import make_plan

    plan = make_plan({"clients": ["librdkafka", "java"], "profiles": ["leader-ack", "idempotent"], "faults": ["none", "leader-kill"]})
    assert [s.name for s in plan.checked] == [
        "leader-ack__none", "leader-ack__leader-kill", "idempotent__none", "idempotent__leader-kill",
        "leader-ack.java__none", "leader-ack.java__leader-kill", "idempotent.java__none", "idempotent.java__leader-kill",
    ]
    assert [[s.name for s in group] for group in plan.groups()][len(PLANTING) + 1] == [
        "leader-ack__leader-kill", "idempotent__leader-kill", "leader-ack.java__leader-kill", "idempotent.java__leader-kill",
    ]
    java = [s for s in plan.scenarios if s.client.family == "java"]
    assert len(java) == 4 and all(s.profile.partitioner == "murmur2_random" for s in java)
    assert plan.client.family == "librdkafka"
    with pytest.raises(ValueError, match="clients names every client of the run"):
        RunParams(clients=["java"], client="java:4.3.1")
    with pytest.raises(SpecError, match="params.clients: each client once"):
        make_plan({"clients": ["java", "java:4.3.1"]})


def test_a_profile_written_for_each_client_runs_each_clients_own_properties() -> None:
    spec = {"librdkafka": {"acks": "1", "message.timeout.ms": 50000}, "java": {"acks": "1", "max.block.ms": 2000}}
    profile = profile_from_spec("both", spec, "params.custom_profiles")
    rdkafka = families.default().resolve(profile, families.default().client(None))
    assert rdkafka.java is None and families.default().config(rdkafka)["delivery.timeout.ms"] == 50000
    java = java_client.resolve(profile, _java("4.3.1"))
    assert java_client.config(java) == {"acks": "1", "max.block.ms": "2000"}  # the Java properties verbatim
    assert (java.acks, java.enable_idempotence, java.delivery_timeout_ms) == ("1", False, 120_000)  # what Java documents for them
    with pytest.raises(SpecError, match="at most librdkafka"):
        profile_from_spec("both", {**spec, "acks": "all"}, "params.custom_profiles")


def test_in_flight_1_keeps_order_is_a_java_guarantee_and_a_librdkafka_belief() -> None:
    """The Java client documents that one request in flight keeps order under retries; librdkafka
    documents that retries may reorder without idempotence: there it is a belief, never a red row."""
    from acklab.model.beliefs import applying
    from acklab.model.setting import Setting

    topology, schedule = load_topology("three-brokers"), schedule_for("leader-kill", 2.0, 10.0)
    ordered = get_profile("at-least-once-ordered")
    java = java_client.resolve(ordered, _java("4.3.1"))
    on_java = expect(java, topology, schedule, _java("4.3.1"))
    assert [e.suite for e in on_java.expectations if e.column == "reordered"] == ["guarantee_in-flight-1-keeps-order"]
    assert "in-flight-1-keeps-order" not in applying(Setting.of(java, topology, schedule, _java("4.3.1")))
    rdkafka = families.default().client(None)
    on_librdkafka = expect(ordered, topology, schedule, rdkafka)
    assert not [e for e in on_librdkafka.expectations if e.column == "reordered"]
    assert "in-flight-1-keeps-order" in applying(Setting.of(ordered, topology, schedule, rdkafka))
    at_least_once = expect(java_client.resolve(get_profile("at-least-once"), _java("4.3.1")), topology, schedule, _java("4.3.1"))
    assert not [e for e in at_least_once.expectations if e.column == "reordered"]  # 5 in flight without idempotence may reorder


def test_the_java_worker_and_its_jvm_yield_the_cpu_to_the_brokers(tmp_path) -> None:
    """The Java producer runs at the producers' niceness, as librdkafka's forked workers do: seven
    JVMs at the brokers' priority starved their heartbeats on two cores (a broker fenced, an
    unplanned leader change in a no-fault group). So does the host JVM its producers run in."""
    import time

    import psutil

    from acklab.workload.forkserver import ForkServer
    from acklab.workload.worker import PRODUCER_NICENESS

    client = java_client.client(None)
    worker = java_client.JavaLauncher(client).spawn(tmp_path / "p0.log")  # waits for its job on stdin
    try:
        deadline = time.monotonic() + 20
        while psutil.Process(worker.pid).nice() < PRODUCER_NICENESS and time.monotonic() < deadline:
            time.sleep(0.05)
        expected = max(psutil.Process().nice(), PRODUCER_NICENESS)
        assert psutil.Process(worker.pid).nice() == expected
        assert psutil.Process(java_client.host(client.version).pid).nice() == expected
        # Forked from the pre-imported server, as librdkafka's workers are, not started from scratch.
        assert psutil.Process(worker.pid).ppid() == ForkServer.shared(client.python, client.env).pid
    finally:
        worker.kill()
        worker.wait()


def test_the_host_jvm_ends_with_its_owner_even_a_killed_one(tmp_path) -> None:
    """The host's stdin is held by its owner alone: the owner killed with SIGKILL, the host exits
    (and a second process has its own host, never its parent's)."""
    import subprocess
    import sys
    import time

    import psutil

    java_client.client(None)  # set up
    owner = subprocess.Popen(
        [sys.executable, "-c", "from acklab.workload import java_client; "
         "h = java_client.host(java_client.LOCKED); print(h.pid, h.socket, flush=True); import time; time.sleep(600)"],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        pid, socket_path = owner.stdout.readline().split()  # type: ignore[union-attr]
        host = psutil.Process(int(pid))
        assert host.is_running() and Path(socket_path).exists()
        assert oct(Path(socket_path).parent.stat().st_mode & 0o777) == "0o700"
    finally:
        owner.kill()
        owner.wait()
    deadline = time.monotonic() + 15
    while host.is_running() and host.status() != psutil.STATUS_ZOMBIE and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not host.is_running() or host.status() == psutil.STATUS_ZOMBIE
    assert not Path(socket_path).parent.exists()  # the host removed its socket's folder


def test_the_driver_starts_from_its_class_archive_and_a_bad_archive_only_slows_it(tmp_path) -> None:
    """Set up, the driver's JVM maps the producer's classes from the client's class archive (the
    host JVM starts on a group's critical path); an archive the JVM cannot use is reported on stderr and
    leaves stdout, the driver's protocol, as it was."""
    import subprocess

    java_client.client(None)  # set up
    properties = tmp_path / "p.properties"
    java_client.write_properties(properties, {"acks": "all"})
    command = java_client.java_command(java_client.LOCKED, "validate", str(properties))
    at = command.index("-cp")
    traced = subprocess.run([*command[:at], "-Xlog:class+load=info:stdout", *command[at:]], capture_output=True, text=True, timeout=60)
    loaded = [line for line in traced.stdout.splitlines() if "clients.producer.KafkaProducer " in line]
    assert loaded and loaded[0].endswith("source: shared objects file (top)"), loaded

    bad = tmp_path / "bad.jsa"
    bad.write_bytes(b"\0" * 4096)
    archive = next(i for i, arg in enumerate(command) if arg.startswith("-XX:SharedArchiveFile="))
    command[archive] = f"-XX:SharedArchiveFile={bad}"
    done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0
    assert done.stdout.startswith('{"property": null, "error": null'), done.stdout


def test_the_driver_is_every_source_of_its_folder_and_a_change_to_any_one_recompiles_it(tmp_path, monkeypatch) -> None:
    """The set-up stamp carries a digest of all the driver's sources (names and contents): adding,
    renaming or editing any one of them makes `client` refuse the cached driver until it is compiled again."""
    assert {path.name for path in java_client.sources()} >= {"AcklabProducer.java", "SendLoop.java", "SendLog.java"}
    (tmp_path / "A.java").write_text("class A {}\n")
    (tmp_path / "B.java").write_text("class B {}\n")
    monkeypatch.setattr(java_client, "SOURCE_DIR", tmp_path)

    def digest() -> str:
        java_client.source_digest.cache_clear()
        return java_client.source_digest()

    seen = [digest()]
    (tmp_path / "B.java").write_text("class B { int x; }\n")
    seen.append(digest())
    (tmp_path / "C.java").write_text("")
    seen.append(digest())
    (tmp_path / "C.java").rename(tmp_path / "D.java")
    seen.append(digest())
    java_client.source_digest.cache_clear()
    assert len(set(seen)) == 4, seen
