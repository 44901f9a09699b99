"""The command line of a Kafka JVM (broker, controller or storage tool), for every backend."""

from __future__ import annotations

from acklab.cluster.layout import GC_LOG, LOG_CONFIG, uses_log4j1
from acklab.cluster.state import NodeState
from acklab.cluster.topology import Topology

KAFKA_MAIN = "kafka.Kafka"
STORAGE_TOOL = "kafka.tools.StorageTool"


def java_command(java: str, libs: str, node: NodeState, topology: Topology, main: str, *args: str) -> list[str]:
    """Run `main` with `args` from the jars in `libs` (a folder path as the JVM sees it), with the
    node's heap, GC settings (its GC log beside its other logs) and logging config."""
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
        "-cp",
        f"{libs}/*",
        main,
        *args,
    ]
