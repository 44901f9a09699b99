"""The librdkafka client family (`acklab.workload.client.ClientFamily`): confluent-kafka and the
librdkafka it bundles, its versions, its configuration of a profile, and its documented defaults.

The locked version runs in acklab's own interpreter. Any other release (wheels for Python 3.11 exist
from 2.0.2 on) runs in a virtualenv of its own under `<cache>/clients/confluent-kafka-<version>`,
made by `acklab setup --client-version X` with uv from the package registry: that confluent-kafka
plus the exact numpy, pyarrow, pydantic and PyYAML acklab's producer processes import, which find
acklab itself on PYTHONPATH. A client's librdkafka validates profiles for it (`probe`), in its own
interpreter."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from functools import cache
from importlib.metadata import version
from pathlib import Path
from typing import TYPE_CHECKING, Any

from acklab.base.maven import SetupError
from acklab.base.paths import cache_dir
from acklab.base.spec import SpecError
from acklab.workload.client import Client, Launcher
from acklab.workload.profiles import ProducerProfile
from acklab.workload.spec import LoadSpec

if TYPE_CHECKING:  # a client's own interpreter imports this module without the processors' dependencies (jinja2)
    from acklab.workload.processing import ProcessorConfig

LOCKED = version("confluent-kafka")
CLIENT_VERSION_PATTERN = r"^2\.\d+\.\d+$"
OLDEST = (2, 0, 2)  # the first confluent-kafka with wheels for Python 3.11
# What producer processes import besides confluent-kafka, pinned to acklab's own versions.
WORKER_PACKAGES = ("numpy", "pyarrow", "pydantic", "pydantic-core", "annotated-types", "typing-extensions", "typing-inspection", "pyyaml")
COMPLETE = ".complete"  # in a client's folder: JSON {version, librdkafka}, written last


def check_version(client_version: str) -> str:
    """The version if acklab can run it; SetupError naming what is allowed otherwise."""
    if not re.match(CLIENT_VERSION_PATTERN, client_version) or tuple(map(int, client_version.split("."))) < OLDEST:
        raise SetupError(
            f"client_version {client_version!r}: confluent-kafka releases from {'.'.join(map(str, OLDEST))} on "
            f"(2.x.y; the locked one is {LOCKED})"
        )
    return client_version


def client_dir(client_version: str) -> Path:
    return cache_dir() / "clients" / f"confluent-kafka-{client_version}"


@cache
def _locked() -> Client:
    import confluent_kafka

    return Client(LOCKED, confluent_kafka.libversion()[0], sys.executable)


def client(client_version: str | None) -> Client:
    """The client of `client_version` (None: the locked one); SetupError if it is not set up."""
    if client_version is None or client_version == LOCKED:
        return _locked()
    folder = client_dir(check_version(client_version))
    stamp = folder / COMPLETE
    if not stamp.exists():
        raise SetupError(f"client {client_version} is not set up: run `acklab setup --client-version {client_version}` (or make setup)")
    recorded = json.loads(stamp.read_text())
    return Client(client_version, recorded["librdkafka"], str(folder / "bin" / "python"))


def fetch_client(client_version: str) -> Client:
    """Create the client's virtualenv with uv (idempotent: a complete one is kept)."""
    folder = client_dir(check_version(client_version))
    if client_version == LOCKED or (folder / COMPLETE).exists():
        return client(client_version)
    uv = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")
    if uv is None:
        raise SetupError("uv is required to set up client versions (make setup installs it)")
    base = getattr(sys, "_base_executable", sys.executable)
    shutil.rmtree(folder, ignore_errors=True)
    pins = [f"{name}=={version(name)}" for name in WORKER_PACKAGES]
    for command in (
        [uv, "venv", "-q", "-p", base, str(folder)],
        [uv, "pip", "install", "-q", "-p", str(folder / "bin" / "python"), f"confluent-kafka=={client_version}", *pins],
    ):
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            shutil.rmtree(folder, ignore_errors=True)
            raise SetupError(f"setting up client {client_version} failed: {(done.stderr or done.stdout).strip().splitlines()[-1:]}")
    probe = subprocess.run(
        [str(folder / "bin" / "python"), "-c", "from acklab.workload.worker import client_versions as v; print(*v().values())"],
        capture_output=True, text=True, check=True, env=Client(client_version, "", "").env,
    )
    installed, librdkafka = probe.stdout.split()
    if installed != client_version:
        raise SetupError(f"client {client_version}: the virtualenv has confluent-kafka {installed}")
    (folder / COMPLETE).write_text(json.dumps({"version": installed, "librdkafka": librdkafka}))
    return client(client_version)


def probe(target: Client, items: list[dict[str, object]]) -> list[dict[str, object]]:
    """librdkafka's verdict on each item, from `target`'s own librdkafka (`acklab.workload.probe`)."""
    if target.python == sys.executable:
        from acklab.workload.probe import check

        return check(items)
    done = subprocess.run(
        [target.python, "-m", "acklab.workload.probe"], input=json.dumps(items), capture_output=True, text=True,
        env=target.env, timeout=120,
    )
    if done.returncode != 0:
        raise SetupError(f"client {target.version} could not check the profiles: {done.stderr.strip().splitlines()[-1:]}")
    return json.loads(done.stdout)


# librdkafka's documented defaults (CONFIGURATION.md) of the retry settings a profile may set in `overrides`.
DEFAULTS: Mapping[str, float] = {"retry.backoff.ms": 100, "retry.backoff.max.ms": 1000}


def config(profile: ProducerProfile) -> dict[str, str | int | float | bool]:
    """librdkafka's configuration of `profile` (without bootstrap.servers and transactional.id)."""
    properties: dict[str, str | int | float | bool] = {
        "acks": profile.acks,
        "enable.idempotence": profile.enable_idempotence,
        "retries": profile.retries,
        "max.in.flight.requests.per.connection": profile.max_in_flight,
        "linger.ms": profile.linger_ms,
        "request.timeout.ms": profile.request_timeout_ms,
        # librdkafka enforces request.timeout.ms on the broker only; the client times a request
        # out after socket.timeout.ms. The catalog sets both, as Java's client-side request.timeout.ms.
        "socket.timeout.ms": profile.socket_timeout_ms or profile.request_timeout_ms,
        "delivery.timeout.ms": profile.delivery_timeout_ms,
        "partitioner": profile.partitioner,
    }
    if profile.transaction is not None:
        properties["transaction.timeout.ms"] = profile.transaction.timeout_ms
    return {**properties, **profile.overrides}


def validate(client: Client, profiles: Sequence[ProducerProfile], load: LoadSpec) -> None:
    """The client's own librdkafka must accept each profile and the load's largest message."""
    items = [{"config": config(p), "key": load.longest_key, "value_bytes": load.message_bytes} for p in profiles]
    for profile, answer in zip(profiles, probe(client, items), strict=True):
        if answer["error"]:
            raise SpecError(f"profile {profile.name}: librdkafka {client.librdkafka} rejects the configuration: {answer['error']}")
        if answer["largest"] is not None:
            raise SpecError(
                f"params.message_bytes: {load.message_bytes}-byte messages are refused by the producer of profile "
                f"{profile.name} (librdkafka {client.librdkafka}: MSG_SIZE_TOO_LARGE, above its message.max.bytes); "
                f"at most {answer['largest']} bytes fit"
            )


def validate_processor(client: Client, processor_config: ProcessorConfig) -> None:
    """The client's own librdkafka must accept the processors' own properties: the consumer's as a
    consumer's configuration, the producer's as a producer's."""
    configs = {side: processor_config.as_text(side, client.family) for side in ("consumer", "producer")}  # type: ignore[arg-type]
    sides = [side for side, properties in configs.items() if properties]
    items = [{"config": configs[side], "kind": side, "key": "", "value_bytes": 1} for side in sides]
    for side, answer in zip(sides, probe(client, items) if items else [], strict=True):
        if answer["error"]:
            raise SpecError(f"params.processor_config.{side}: librdkafka {client.librdkafka} rejects it: {answer['error']}")


class Librdkafka:
    """The family object (`acklab.workload.client.ClientFamily`) over this module's functions."""

    name = "librdkafka"
    locked = LOCKED
    version_pattern = CLIENT_VERSION_PATTERN
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
        if profile.java_only:
            raise SpecError(f"profile {profile.name} is Java producer properties: it runs on the java client (--client java:VERSION)")
        return profile.model_copy(update={"java": None})

    def validate(self, client: Client, profiles: Sequence[ProducerProfile], load: LoadSpec) -> None:
        validate(client, profiles, load)

    def validate_processor(self, client: Client, processor_config: ProcessorConfig) -> None:
        validate_processor(client, processor_config)

    def label(self, client: Client) -> str:
        return f"confluent-kafka {client.version} (librdkafka {client.librdkafka})"

    def launcher(self, client: Client) -> Launcher:
        """The shared fork server of the client's interpreter (`acklab.workload.forkserver`)."""
        from acklab.workload.forkserver import ForkServer  # imports the worker: only when a load starts

        return ForkServer.shared(client.python, client.env)

    def processor_problem(self, client: Client, group_protocol: str, kafka_version: str) -> str | None:
        """KIP-848's group.protocol=consumer is generally available from librdkafka 2.10.0 and Kafka 4.0."""
        if group_protocol == "consumer":
            if _release(client.librdkafka) < (2, 10):
                return f"librdkafka {client.librdkafka} has no generally available group.protocol=consumer (KIP-848: librdkafka 2.10.0 or later)"
            if _release(kafka_version) < (4, 0):
                return f"Kafka {kafka_version} brokers do not serve group.protocol=consumer by default (KIP-848: Kafka 4.0 or later)"
        return None

    def processor_command(self, client: Client, job: Path) -> list[str]:
        """The command that runs a pipeline processor instance of `client` on `job` (`acklab.workload.processor`)."""
        return [client.python, "-m", "acklab.workload.processor", str(job)]

    def transaction_version(self, client: Client, kafka_version: str) -> int:
        """1 at every version: librdkafka sends EndTxn v1 at most and has no KIP-890 part 2
        (librdkafka #5423, open as read on 2026-11-29)."""
        return 1


def _release(version: str) -> tuple[int, int]:
    """(major, minor) of a version string; (0, 0) if it has none."""
    parts = re.findall(r"\d+", version)[:2]
    return (int(parts[0]), int(parts[1])) if len(parts) == 2 else (0, 0)
