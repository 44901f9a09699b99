"""Fetch jar sets (Kafka broker, Java client) from Maven Central into the local cache.

Maven resolves and downloads; we only render a throw-away POM and copy the result into
`<cache>/<kind>/<version>/`. A stamp file makes a second call a no-op.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from acklab.base.paths import cache_dir

DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"
DEFAULT_KAFKA_VERSION = "4.3.1"
KAFKA_VERSION_PATTERN = r"^(3\.[3-9]|4\.\d+)\.\d+$"  # the KRaft releases acklab runs (3.3 made KRaft production-ready)
KAFKA_VERSIONS_TEXT = "3.3.x to 3.9.x, or 4.x"


class SetupError(RuntimeError):
    """A jar set is missing or could not be fetched."""


@dataclass(frozen=True)
class Artifact:
    """One Maven coordinate."""

    group: str
    artifact: str
    version: str

    @property
    def coordinate(self) -> str:
        return f"{self.group}:{self.artifact}:{self.version}"


def kafka_artifacts(version: str) -> list[Artifact]:
    """Broker, storage tool and perf tools for one Kafka version, plus a logging backend."""
    if not re.match(KAFKA_VERSION_PATTERN, version):
        raise SetupError(f"kafka_version {version!r}: supported versions are {KAFKA_VERSIONS_TEXT}")
    kafka = [Artifact("org.apache.kafka", "kafka_2.13", version), Artifact("org.apache.kafka", "kafka-tools", version)]
    if version.startswith("3."):
        return kafka + [
            Artifact("org.slf4j", "slf4j-reload4j", "1.7.36"),
            Artifact("ch.qos.reload4j", "reload4j", "1.2.25"),
        ]
    return kafka + [
        Artifact("org.slf4j", "slf4j-api", "2.0.16"),
        Artifact("org.apache.logging.log4j", "log4j-core", "2.24.3"),
        Artifact("org.apache.logging.log4j", "log4j-slf4j2-impl", "2.24.3"),
    ]


def java_client_artifacts(version: str) -> list[Artifact]:
    """Apache Kafka's Java client (its runtime dependencies resolved) and an slf4j backend for its log."""
    return [Artifact("org.apache.kafka", "kafka-clients", version), Artifact("org.slf4j", "slf4j-simple", "1.7.36")]


def fetch_java_client(version: str, dest: Path) -> Path:
    """Fetch the Java client's jars (transitively) for `version` into `dest`."""
    return _fetch(java_client_artifacts(version), dest)


def kafka_libs(version: str) -> Path:
    """The folder of jars for a Kafka version; a clear error if setup has not fetched it."""
    return _require(cache_dir() / "kafka" / version, f"acklab setup --kafka-version {version}")


def fetch_kafka(version: str) -> Path:
    """Fetch the Kafka jars (transitively) for `version`."""
    return _fetch(kafka_artifacts(version), cache_dir() / "kafka" / version)


def _require(folder: Path, command: str) -> Path:
    if not (folder / ".complete").exists():
        raise SetupError(f"jars missing in {folder}: run `{command}` (or `make setup`)")
    return folder


def _fetch(artifacts: list[Artifact], dest: Path) -> Path:
    """`artifacts` and their runtime dependencies into `dest`, replaced whole unless it holds them already."""
    stamp = dest / ".complete"
    wanted = "\n".join(a.coordinate for a in artifacts)
    if stamp.exists() and stamp.read_text() == wanted:
        return dest
    if shutil.which("mvn") is None:
        raise SetupError("Maven (`mvn`) is required to fetch jars: apt-get install maven")
    staging = Path(tempfile.mkdtemp(prefix=f".{dest.name}-", dir=dest.parent if dest.parent.exists() else None))
    try:
        _copy_dependencies(artifacts, staging)
        (staging / ".complete").write_text(wanted)
        if dest.exists():
            shutil.rmtree(dest)
        dest.parent.mkdir(parents=True, exist_ok=True)
        staging.rename(dest)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return dest


def _copy_dependencies(artifacts: list[Artifact], out: Path) -> None:
    from jinja2 import Environment, PackageLoader  # here: producer processes import this module's constants

    template = Environment(loader=PackageLoader("acklab"), autoescape=False).get_template("fetch-pom.xml.j2")
    with tempfile.TemporaryDirectory(prefix="acklab-pom-") as work:
        pom = Path(work) / "pom.xml"
        pom.write_text(template.render(name=out.name.lstrip("."), dependencies=artifacts))
        _mvn(f"{DEPENDENCY_PLUGIN}:copy-dependencies", "-f", str(pom), "-DincludeScope=runtime", f"-DoutputDirectory={out}")


def _mvn(*args: str) -> None:
    result = subprocess.run(["mvn", "-B", "-q", *args], capture_output=True, text=True)
    if result.returncode != 0:
        errors = [line for line in result.stdout.splitlines() if "[ERROR]" in line][:3]
        raise SetupError("Maven failed: " + (" | ".join(errors) or result.stderr.strip()[-500:]))
