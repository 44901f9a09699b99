"""The Java client family (`acklab.workload.client.ClientFamily`): Apache Kafka's `kafka-clients`,
driven by acklab's Java producer driver (the sources of `workload/java/`, package `dev.acklab`).

`acklab setup --java-client-version X` fetches kafka-clients X and its runtime dependencies (plus an
slf4j backend, so the client's own log lines reach the producer's log) from Maven Central into
`<cache>/java-clients/X/lib`, and compiles the driver against them into `<cache>/java-clients/X/driver.jar`.
It then dumps a class-data-sharing archive (`driver.jsa`, AppCDS) of the classes a producer loads,
which halves the CPU a JVM spends starting (`acklab.workload.java_host`: one per process and version); a JVM whose
archive does not match (another JDK) starts without it. The driver's source digest is stamped: a
changed driver is recompiled by the next setup.

A profile reaches the Java client in one of two forms: the catalog's typed fields, translated here to
Java properties (the same meaning librdkafka's translation gives them), or the user's own properties
(`{java: {...}}`, a `producer.properties`), run verbatim. Either way the model reads the *documented*
effective configuration at the client's version (`effective`): Java's defaults changed in 3.0 (acks=all,
idempotence on), 3.2 silently turns an unset idempotence off when acks, retries or in-flight conflict
with it (KAFKA-13673), and 4.0 made linger.ms 5."""

from __future__ import annotations

import hashlib
import json
import logging
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from acklab.base.maven import DEFAULT_KAFKA_VERSION, SetupError, fetch_java_client
from acklab.base.paths import cache_dir
from acklab.base.spec import SpecError, first_error
from acklab.workload.client import Client, Launcher, ProducerProcess
from acklab.workload.profiles import IDEMPOTENT_MAX_IN_FLIGHT, ProducerProfile
from acklab.workload.spec import LoadSpec

if TYPE_CHECKING:  # a client's own interpreter imports this module without the processors' dependencies (jinja2)
    from acklab.workload.java_host import JavaHost
    from acklab.workload.processing import ProcessorConfig

NAME = "java"
log = logging.getLogger(__name__)
LOCKED = DEFAULT_KAFKA_VERSION  # the kafka-clients of the project's default Kafka
VERSION_PATTERN = r"^[34]\.\d+\.\d+$"
VERSIONS_TEXT = "kafka-clients 3.x.y or 4.x.y"
SOURCE_DIR = Path(__file__).parent / "java"  # the driver: every .java file here, compiled together
MAIN_CLASS = "dev.acklab.AcklabProducer"
# The client's log: warnings, plus NetworkClient's disconnects and request timeouts (field note #8).
LOG_PROPERTIES = (
    "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
    "-Dorg.slf4j.simpleLogger.log.org.apache.kafka.clients.NetworkClient=info",
    "-Dorg.slf4j.simpleLogger.showDateTime=true",
    "-Dorg.slf4j.simpleLogger.dateTimeFormat=yyyy-MM-dd'T'HH:mm:ss.SSSZ",
)
# The JVM's own warnings (e.g. a class archive it cannot use) go to stderr: stdout is the driver's protocol.
JVM_OPTIONS = (
    "-Xms64m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xlog:disable", "-Xlog:all=warning:stderr",
    *LOG_PROPERTIES,
)
# The host JVM's heap at most: its producers' buffers (buffer.memory, 32 MB each by default) and send
# logs, which seven JVMs of 512 MB held before they shared one.
HOST_HEAP = "4g"
DRIVER_JAR = "driver.jar"
CLASS_ARCHIVE = "driver.jsa"
# What the class archive is dumped from: a transactional producer built and closed (`validate`).
ARCHIVE_TRAINING = {"enable.idempotence": "true", "acks": "all", "transactional.id": "acklab-class-archive"}
LAYOUT = 2  # driver.jar and driver.jsa; a cache of another layout is set up again
# Java's documented defaults the model reads (ProducerConfig): retry backoff, and its cap (KIP-580, 3.7).
DEFAULTS: Mapping[str, float] = {"retry.backoff.ms": 100, "retry.backoff.max.ms": 1000}
# librdkafka overrides with the same name and meaning in Java; a typed profile's other overrides have no translation.
SHARED_OVERRIDES = frozenset({"retry.backoff.ms", "retry.backoff.max.ms", "compression.type", "batch.size"})


def check_version(client_version: str) -> str:
    """The version if acklab can run it; SetupError naming what is allowed otherwise."""
    if not re.match(VERSION_PATTERN, client_version):
        raise SetupError(f"java client version {client_version!r}: {VERSIONS_TEXT} (the default is {LOCKED})")
    return client_version


def client_dir(client_version: str) -> Path:
    return cache_dir() / "java-clients" / client_version


def sources() -> list[Path]:
    """The driver's source files, in name order."""
    return sorted(SOURCE_DIR.glob("*.java"))


@cache
def source_digest() -> str:
    """The digest of every source file's name and content: a change to any one recompiles the driver."""
    digest = hashlib.sha256()
    for source in sources():
        content = source.read_bytes()
        digest.update(f"{source.name}\0{len(content)}\0".encode() + content)
    return digest.hexdigest()[:16]


def classpath(client_version: str) -> str:
    """The driver's classes and the client's jars, once set up."""
    folder = client_dir(client_version)
    return ":".join([str(folder / DRIVER_JAR), *map(str, sorted((folder / "lib").glob("*.jar")))])


def client(client_version: str | None) -> Client:
    """The set-up Java client of `client_version` (None: LOCKED); SetupError if it is not set up."""
    client_version = check_version(client_version or LOCKED)
    stamp = client_dir(client_version) / ".complete"
    if not stamp.exists() or json.loads(stamp.read_text()) != _stamp(client_version):
        raise SetupError(
            f"java client {client_version} is not set up (or its driver changed): run `acklab setup --java-client-version {client_version}` (or make setup)"
        )
    return Client(client_version, "", sys.executable, family=NAME)


def fetch_client(client_version: str) -> Client:
    """Fetch kafka-clients `client_version` with its dependencies and compile the driver against it (idempotent)."""
    folder = client_dir(check_version(client_version))
    try:
        return client(client_version)
    except SetupError:
        pass
    if shutil.which("javac") is None:
        raise SetupError("a JDK (`javac`) is required to build the Java producer driver: apt-get install openjdk-17-jdk-headless")
    folder.mkdir(parents=True, exist_ok=True)
    fetch_java_client(client_version, folder / "lib")
    shutil.rmtree(folder / "driver", ignore_errors=True)  # the classes' folder of layout 1
    lib = ":".join(map(str, sorted((folder / "lib").glob("*.jar"))))
    with tempfile.TemporaryDirectory(prefix="acklab-javac-") as classes:
        done = subprocess.run(["javac", "-nowarn", "-d", classes, "-cp", lib, *map(str, sources())], capture_output=True, text=True)
        if done.returncode != 0:
            raise SetupError(f"compiling the Java producer driver against kafka-clients {client_version} failed: {done.stderr.strip()[-500:]}")
        with zipfile.ZipFile(folder / DRIVER_JAR, "w") as jar:
            for path in sorted(Path(classes).rglob("*.class")):
                jar.write(path, path.relative_to(classes).as_posix())
    _dump_class_archive(client_version)
    reported = subprocess.run(java_command(client_version, "version"), capture_output=True, text=True, check=False).stdout.strip()
    if reported != client_version:
        raise SetupError(f"java client {client_version}: the driver reports kafka-clients {reported!r}")
    (folder / ".complete").write_text(json.dumps(_stamp(client_version)))
    return client(client_version)


def _stamp(client_version: str) -> dict[str, Any]:
    return {"version": client_version, "driver": source_digest(), "layout": LAYOUT}


def _dump_class_archive(client_version: str) -> None:
    """Write the driver's class archive (`CLASS_ARCHIVE`); without one (the JVM could not dump it)
    the driver starts from its jars, only slower."""
    archive = client_dir(client_version) / CLASS_ARCHIVE
    archive.unlink(missing_ok=True)  # the JVM dumping it must not start from the old one
    with tempfile.TemporaryDirectory(prefix="acklab-class-archive-") as work:
        training = Path(work) / "producer.properties"
        write_properties(training, ARCHIVE_TRAINING)
        command = java_command(client_version, "validate", str(training))
        done = subprocess.run([command[0], f"-XX:ArchiveClassesAtExit={archive}", *command[1:]], capture_output=True, text=True, timeout=120)
    if done.returncode != 0 or not archive.exists():
        archive.unlink(missing_ok=True)
        log.warning("java client %s: no class archive (the driver starts without it): %s", client_version, done.stderr.strip()[-300:])


def java_command(client_version: str, *args: str, max_heap: str = "512m") -> list[str]:
    """The command that runs the driver on kafka-clients `client_version` (with its class archive, if
    any), its heap at most `max_heap`."""
    archive = client_dir(client_version) / CLASS_ARCHIVE
    sharing = [f"-XX:SharedArchiveFile={archive}"] if archive.exists() else []
    return ["java", *JVM_OPTIONS, f"-Xmx{max_heap}", *sharing, "-cp", classpath(client_version), MAIN_CLASS, *args]


# ---- profiles: one meaning, the Java translation -------------------------------------------------


def config(profile: ProducerProfile) -> dict[str, str]:
    """The Java properties of `profile`: the user's own verbatim, or the typed fields translated
    (librdkafka's translation is `acklab.workload.librdkafka.config`)."""
    if profile.java is not None:
        return {key: value for key, value in profile.java.items() if not is_cluster_property(key)}
    if untranslatable := sorted(set(profile.overrides) - SHARED_OVERRIDES):
        raise SpecError(
            f"profile {profile.name}: librdkafka overrides {', '.join(untranslatable)} have no Java translation; "
            "give the Java client its own properties ({java: {property: value}} or --producer-config FILE.properties)"
        )
    properties = {
        "acks": profile.acks,
        "enable.idempotence": profile.enable_idempotence,
        "retries": profile.retries,
        "max.in.flight.requests.per.connection": profile.max_in_flight,
        "linger.ms": profile.linger_ms,
        "request.timeout.ms": profile.request_timeout_ms,  # client-side in Java
        "delivery.timeout.ms": profile.delivery_timeout_ms,
        **profile.overrides,
    }
    if profile.transaction is not None:
        properties["transaction.timeout.ms"] = profile.transaction.timeout_ms
    return {name: str(value).lower() if isinstance(value, bool) else str(value) for name, value in properties.items()}  # as the file holds them


def _version(version: str) -> tuple[int, int]:
    """(major, minor) of a kafka-clients or Kafka version (`X.Y.Z`)."""
    major, minor, _ = version.split(".", 2)
    return int(major), int(minor)


def defaults(client_version: str) -> dict[str, Any]:
    """kafka-clients' documented defaults of the typed fields at `client_version` (ProducerConfig)."""
    at = _version(client_version)
    return {
        "acks": "all" if at >= (3, 0) else "1",
        "enable_idempotence": at >= (3, 0),
        "retries": 2147483647,
        "max_in_flight": 5,
        "linger_ms": 5 if at >= (4, 0) else 0,
        "request_timeout_ms": 30000,
        "delivery_timeout_ms": 120000,
        "partitioner": "murmur2_random",
    }


# Java property -> typed field (the ones the model reads); the rest stay in `overrides`.
TYPED = {
    "acks": "acks",
    "enable.idempotence": "enable_idempotence",
    "retries": "retries",
    "max.in.flight.requests.per.connection": "max_in_flight",
    "linger.ms": "linger_ms",
    "request.timeout.ms": "request_timeout_ms",
    "delivery.timeout.ms": "delivery_timeout_ms",
}


def effective(name: str, properties: Mapping[str, str], client_version: str, description: str = "") -> ProducerProfile:
    """The profile the Java client documents for `properties` at `client_version`: its defaults for
    what they leave out, and its documented adjustment (from 3.2, KAFKA-13673: an unset
    enable.idempotence is off when acks is not all, retries is 0 or more than 5 requests may be in
    flight). SpecError (one line) if the model cannot represent it."""
    fields: dict[str, Any] = {}
    overrides: dict[str, str] = {}
    for key, value in properties.items():
        if key in TYPED:
            if (typed_value := _typed(key, value)) is not None:  # else the client's validation names it
                fields[TYPED[key]] = typed_value
        elif key in UNSUPPORTED and str(value).strip().lower() not in ("", "false"):
            raise SpecError(f"profile {name}: {key}={value}: {UNSUPPORTED[key]} is not supported (acklab checks that a keyed record lands on murmur2's partition)")
        elif key not in ("transactional.id", "transaction.timeout.ms"):
            overrides[key] = value
    typed = {**defaults(client_version), **fields}
    if "enable_idempotence" not in fields and typed["enable_idempotence"]:
        conflicts = typed["acks"] != "all" or typed["retries"] == 0 or typed["max_in_flight"] > IDEMPOTENT_MAX_IN_FLIGHT
        if conflicts:
            typed["enable_idempotence"] = False
    if "transactional.id" in properties:
        timeout = _typed("transaction.timeout.ms", properties.get("transaction.timeout.ms", "60000"))
        typed["transaction"] = {"timeout_ms": timeout or 60000}
        typed["enable_idempotence"] = True
    try:
        return ProducerProfile.model_validate(
            {
                "name": name,
                "description": description or "the user's Java producer properties",
                **typed,
                "java": dict(properties),
                "overrides": overrides,
            }
        )
    except ValidationError as exc:
        raise SpecError(f"profile {name}: {first_error(exc)[1]}") from None


def _typed(key: str, value: str) -> Any:
    """The typed field's value of a Java property, or None when the client will refuse it."""
    text = str(value).strip().lower()
    if key == "acks":
        return {"-1": "all", "all": "all", "0": "0", "1": "1"}.get(text)
    if key == "enable.idempotence":
        return {"true": True, "false": False}.get(text)
    try:
        return int(text)
    except ValueError:
        return None


def resolve(profile: ProducerProfile, target: Client) -> ProducerProfile:
    """`profile` as the Java client at `target`'s version runs it: the user's properties read at
    that version (`effective`), or the typed fields with Java's only keyed partitioner (murmur2)."""
    if profile.java is not None:
        return effective(profile.name, config(profile), target.version, profile.description)
    config(profile)  # SpecError for overrides without a translation
    return profile.model_copy(update={"partitioner": "murmur2_random", "socket_timeout_ms": None})


_ANSWERS: dict[tuple[str, str, str], dict[str, Any]] = {}  # (version, mode, properties as JSON) -> the driver's answer


def _verdicts(target: Client, mode: str, configs: Sequence[Mapping[str, object]]) -> list[dict[str, Any]]:
    """The driver's answer (`validate` or `validate-consumer` mode) on each of `configs`, one JSON object each.
    An answer depends only on the version, the mode and the properties, so each is asked once per
    process: the configs not asked before go to one JVM together."""
    keys = [(target.version, mode, json.dumps(properties, sort_keys=True, default=str)) for properties in configs]
    asked = {key: properties for key, properties in zip(keys, configs, strict=True) if key not in _ANSWERS}
    if asked:
        with tempfile.TemporaryDirectory(prefix="acklab-java-validate-") as work:
            files = []
            for n, properties in enumerate(asked.values()):
                path = Path(work) / f"{n}.properties"
                write_properties(path, properties)
                files.append(str(path))
            done = subprocess.run(java_command(target.version, mode, *files), capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise SetupError(f"java client {target.version} could not check the properties: {done.stderr.strip().splitlines()[-1:]}")
        answers = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
        if len(answers) != len(asked):
            raise SetupError(f"java client {target.version} answered {len(answers)} of {len(asked)} property sets")
        _ANSWERS.update(zip(asked, answers, strict=True))
    return [dict(_ANSWERS[key]) for key in keys]


def _named(answer: Mapping[str, Any], properties: Mapping[str, object]) -> str:
    """` NAME` of the property a refusal names (by the driver, or found in its message), or ''."""
    named = answer["property"] or next((k for k in properties if re.search(rf"(?<![\w.]){re.escape(k)}(?![\w.])", answer["error"])), None)
    return f" {named}" if named else ""


def validate(target: Client, profiles: Sequence[ProducerProfile], load: LoadSpec) -> None:
    """kafka-clients itself (its ProducerConfig and KafkaProducer constructor, in the driver's validate
    mode) must accept each profile's properties, and the load's largest record must fit max.request.size."""
    configs = [config(profile) for profile in profiles]
    for profile, properties, answer in zip(profiles, configs, _verdicts(target, "validate", configs), strict=True):
        if answer["error"]:
            raise SpecError(f"profile {profile.name}: kafka-clients {target.version} rejects{_named(answer, properties)}: {answer['error']}")
        if answer["idempotence"] is not None and answer["idempotence"] != profile.enable_idempotence:
            log.warning(
                "profile %s: kafka-clients %s itself enables idempotence: %s; its documentation: %s (the model expects the documented)",
                profile.name, target.version, answer["idempotence"], profile.enable_idempotence,
            )
        limit = int(properties.get("max.request.size", 1048576))
        if (size := load.largest_batch_bytes) > limit:
            raise SpecError(
                f"params.message_bytes: {load.message_bytes}-byte messages are refused by the producer of profile {profile.name} "
                f"(kafka-clients {target.version}: RecordTooLargeException, a record of about {size} bytes is above max.request.size {limit})"
            )


def validate_processor(target: Client, processor_config: ProcessorConfig) -> None:
    """kafka-clients itself must accept the processors' own properties: the consumer's by its
    ConsumerConfig (`validate-consumer` mode), the producer's as a profile's. No JVM starts when
    there are none."""
    for side, mode in (("consumer", "validate-consumer"), ("producer", "validate")):
        if properties := processor_config.as_text(side, target.family):  # type: ignore[arg-type]
            (answer,) = _verdicts(target, mode, [properties])
            if answer["error"]:
                raise SpecError(
                    f"params.processor_config.{side}: kafka-clients {target.version} rejects{_named(answer, properties)}: {answer['error']}"
                )


def write_properties(path: Path, properties: Mapping[str, object]) -> None:
    """A Java properties file (keys and values escaped as java.util.Properties reads them; booleans
    lower-case, None left out)."""

    def escape(text: str, key: bool) -> str:
        out = text.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")
        out = out.replace("=", "\\=").replace(":", "\\:").replace("#", "\\#").replace("!", "\\!")
        if key:
            out = out.replace(" ", "\\ ")
        return ("\\" + out) if out.startswith(" ") else out

    text = {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in properties.items() if v is not None}
    path.write_text("".join(f"{escape(k, True)}={escape(v, False)}\n" for k, v in text.items()), encoding="utf-8")


def read_properties(target: Client, path: Path) -> dict[str, str]:
    """A user's producer.properties as the Java client reads it (java.util.Properties, in the driver's
    `read` mode), without the cluster's connection settings (CLUSTER_PROPERTIES: acklab's cluster
    replaces them). SpecError (one line) for a file that cannot be read or holds nothing."""
    if not path.is_file():
        raise SpecError(f"producer config {path}: no such file")
    done = subprocess.run(java_command(target.version, "read", str(path)), capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise SpecError(f"producer config {path}: cannot read it: {(done.stderr.strip().splitlines() or ['?'])[-1]}")
    properties = json.loads(done.stdout)
    if not properties:
        raise SpecError(f"producer config {path}: no properties in it")
    return {key: value for key, value in properties.items() if not is_cluster_property(key)}


# A user's file names its own cluster and how to reach it; acklab's cluster under test replaces these.
CLUSTER_PROPERTIES = frozenset({"bootstrap.servers", "key.serializer", "value.serializer", "security.protocol", "client.dns.lookup"})
# Settings the checker cannot follow: it expects a keyed record on the default partitioner's partition (murmur2).
UNSUPPORTED = {"partitioner.class": "a custom partitioner", "partitioner.ignore.keys": "keys ignored by the partitioner"}


def is_cluster_property(key: str) -> bool:
    """A connection setting of the user's own cluster (left out: acklab's cluster replaces it)."""
    return key in CLUSTER_PROPERTIES or key.startswith(("ssl.", "sasl."))


def processor_command(client: Client, job: Path) -> list[str]:
    """The command that runs a pipeline processor instance of `client` on `job` (the driver's
    `process JOB`, `dev.acklab.Processor`: the contract of `acklab.workload.processing`)."""
    return java_command(client.version, "process", str(job))


def processor_problem(client: Client, group_protocol: str, kafka_version: str) -> str | None:
    """KIP-848's group.protocol=consumer is generally available from kafka-clients 4.0 and Kafka 4.0."""
    if group_protocol == "consumer":
        if _version(client.version) < (4, 0):
            return f"kafka-clients {client.version} has no generally available group.protocol=consumer (KIP-848: kafka-clients 4.0 or later)"
        if _version(kafka_version) < (4, 0):
            return f"Kafka {kafka_version} brokers do not serve group.protocol=consumer by default (KIP-848: Kafka 4.0 or later)"
    return None


def transaction_version(client: Client, kafka_version: str) -> int:
    """2 from kafka-clients 4.0 on Kafka 4.0 or later (a cluster formatted at 4.0+ enables the
    `transaction.version` 2 feature, which the 4.x producer uses: KIP-890 part 2), else 1."""
    return 2 if _version(client.version) >= (4, 0) and _version(kafka_version) >= (4, 0) else 1


class JavaLauncher:
    """Starts Java producer processes (`acklab.workload.java_worker`) of a client (`acklab.workload.client.Launcher`),
    forked from the shared fork server of its interpreter (`acklab.workload.forkserver`), each running its
    producer in this process's one JVM of the client (`acklab.workload.java_host`)."""

    def __init__(self, client: Client) -> None:
        self.client = client

    def spawn(self, log: Path) -> ProducerProcess:
        from acklab.workload.forkserver import ForkServer  # imports the workers: only when a load starts
        from acklab.workload.java_host import HOST_ENV

        return ForkServer.shared(self.client.python, self.client.env).spawn(log, "java", {HOST_ENV: str(host(self.client.version).socket)})


def host(client_version: str) -> JavaHost:
    """This process's one JVM running Java producers of kafka-clients `client_version` (`acklab.workload.java_host`)."""
    from acklab.workload.java_host import JavaHost  # imports the workers: only when a load starts

    return JavaHost.shared(client_version, lambda socket: java_command(client_version, "host", str(socket), max_heap=HOST_HEAP))


class Java:
    """The family object (`acklab.workload.client.ClientFamily`) over this module's functions."""

    name = NAME
    locked = LOCKED
    version_pattern = VERSION_PATTERN
    defaults = DEFAULTS

    def check_version(self, version: str) -> str:
        return check_version(version)

    def client(self, version: str | None) -> Client:
        return client(version)

    def fetch(self, version: str) -> Client:
        return fetch_client(version)

    def config(self, profile: ProducerProfile) -> dict[str, Any]:
        return config(profile)

    def resolve(self, profile: ProducerProfile, client: Client) -> ProducerProfile:
        return resolve(profile, client)

    def validate(self, client: Client, profiles: Sequence[ProducerProfile], load: LoadSpec) -> None:
        validate(client, profiles, load)

    def validate_processor(self, client: Client, processor_config: ProcessorConfig) -> None:
        validate_processor(client, processor_config)

    def label(self, client: Client) -> str:
        return f"kafka-clients {client.version} (Java)"

    def launcher(self, client: Client) -> Launcher:
        return JavaLauncher(client)

    def processor_problem(self, client: Client, group_protocol: str, kafka_version: str) -> str | None:
        return processor_problem(client, group_protocol, kafka_version)

    def processor_command(self, client: Client, job: Path) -> list[str]:
        return processor_command(client, job)

    def transaction_version(self, client: Client, kafka_version: str) -> int:
        return transaction_version(client, kafka_version)
