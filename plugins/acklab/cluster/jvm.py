"""The command line of a Kafka JVM (broker, controller or storage tool), for every backend."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from acklab.base.maven import kafka_libs
from acklab.cluster.layout import GC_LOG, LOG_CONFIG, uses_log4j1
from acklab.cluster.state import NodeState
from acklab.cluster.topology import Topology

KAFKA_MAIN = "kafka.Kafka"
STORAGE_TOOL = "kafka.tools.StorageTool"
CLASS_ARCHIVE = "kafka.jsa"  # beside the version's jars; a folder fetched again has none until the next setup


def class_archive(version: str) -> Path:
    """The class-data-sharing archive (AppCDS) of Kafka `version`'s JVMs, dumped by `acklab setup`
    (`acklab.cluster.class_archive`): a JVM started from it maps the classes it would otherwise load
    and verify from ~100 jars. One that cannot use it (another JDK) warns and starts without it."""
    return kafka_libs(version) / CLASS_ARCHIVE


def sharing_options(version: str) -> list[str]:
    """The JVM options that start a Kafka JVM of `version` from its class archive (none without one)."""
    archive = class_archive(version)
    return [f"-XX:SharedArchiveFile={archive}"] if archive.exists() else []


def java_command(
    java: str, libs: str, node: NodeState, topology: Topology, main: str, *args: str, jvm_options: Sequence[str] = ()
) -> list[str]:
    """Run `main` with `args` from the jars in `libs` (a folder path as the JVM sees it), with the
    node's heap, GC settings (its GC log beside its other logs), logging config and `jvm_options`."""
    log_config = node.dir / LOG_CONFIG
    logging = [f"-Dlog4j.configuration=file:{log_config}"] if uses_log4j1(topology.kafka_version) else [f"-Dlog4j2.configurationFile={log_config}"]
    return [
        java,
        f"-Xmx{topology.heap_mb}m",
        "-Xms128m",
        "-XX:+UseG1GC",
        "-XX:MaxGCPauseMillis=20",
        f"-Xlog:gc,safepoint:file={node.dir / GC_LOG}:time,uptime,level,tags:filecount=2,filesize=20m",
        "-Djava.awt.headless=true",
        f"-Dkafka.logs.dir={node.dir}",
        *logging,
        *jvm_options,
        "-cp",
        f"{libs}/*",
        main,
        *args,
    ]
