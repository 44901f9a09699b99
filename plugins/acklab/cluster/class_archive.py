"""The Kafka nodes' class-data-sharing archive (AppCDS), one per Kafka version.

A Kafka JVM loads several thousand classes from about a hundred jars before it serves anything; an
archive of them is mapped from one file instead. Measured on 2 cores (three brokers, 450 partitions):
provisioning 11.0-11.2 s -> 7.6 s, a SIGKILLed broker back in sync 6.6-8.2 s -> 5.1-6.6 s, a
stopped one 5.9-6.4 s -> 4.5-4.6 s. `acklab setup` dumps it from a training node (`dump`); local
nodes start with it when it exists (`acklab.cluster.local`), and a JVM whose archive does not match
(another JDK) starts without it, only slower."""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

from acklab.base.maven import kafka_class_archive
from acklab.base.paths import runs_dir
from acklab.cluster.cluster import Cluster
from acklab.cluster.local import LocalRunner
from acklab.cluster.topology import load_topology

TRAINING_TOPOLOGY = "single-broker"  # a combined broker and controller: both roles' classes
STOP_TIMEOUT_S = 120.0  # the JVM writes the archive as it exits

log = logging.getLogger(__name__)


def dump(kafka_version: str) -> Path | None:
    """Write `kafka_version`'s class archive: a training node is started with the cluster's own
    command line, made to create a topic, and stopped cleanly, dumping the classes it loaded. Return
    the archive, or None (with a warning) if the JVM could not dump one."""
    archive = kafka_class_archive(kafka_version)
    archive.unlink(missing_ok=True)  # the training nodes must not start from an old one
    topology = load_topology(TRAINING_TOPOLOGY).model_copy(update={"kafka_version": kafka_version})
    partial = archive.with_name(f"{archive.name}.part")  # beside it: moved in place in one rename
    # In the run store, so that `acklab reap` (or the next provisioning) finds it if setup is killed.
    work = runs_dir() / f"class-archive-{kafka_version}-{os.getpid()}"
    try:
        cluster = Cluster.provision(topology, work / "cluster", owner_pid=os.getpid())
        try:
            (node,) = cluster.state.nodes
            runner = cluster.runner
            assert isinstance(runner, LocalRunner)  # the default backend
            cluster.stop(node.node_id)
            runner.start(node, sharing=[f"-XX:ArchiveClassesAtExit={partial}"])
            cluster.state.save(cluster.root)
            cluster.wait_healthy()
            cluster.create_topic("acklab-class-archive", 1, 1)
            cluster.stop(node.node_id, STOP_TIMEOUT_S)
        finally:
            cluster.teardown()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if not partial.exists():
        log.warning("kafka %s: no class archive (nodes start without it)", kafka_version)
        return None
    partial.replace(archive)
    return archive
