"""Dumping the Kafka JVMs' class archive (`acklab.cluster.jvm.class_archive`) at `acklab setup`: a
training node (one combined broker and controller, started with `-XX:ArchiveClassesAtExit`) creates
a topic, takes idempotent and transactional writes and shuts down cleanly, writing the archive as it
exits. Local nodes and the storage tool then start from it."""

from __future__ import annotations

import logging
import os
import subprocess
import tempfile
import time
from pathlib import Path

from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from acklab.base.maven import kafka_libs
from acklab.cluster.jvm import STORAGE_TOOL, class_archive
from acklab.cluster.layout import new_cluster_id, plan_nodes, write_configs
from acklab.cluster.local import LocalRunner
from acklab.cluster.state import ClusterState, ProcessState, kill_and_wait
from acklab.cluster.topology import load_topology

TRAINING_TIMEOUT_S = 120.0
log = logging.getLogger(__name__)


def dump(version: str) -> Path | None:
    """Dump the archive of Kafka `version` unless there is one; return it (None if the JVM could not
    dump one: nodes then start without it). Every process started here is stopped before returning."""
    path = class_archive(version)
    if path.exists():
        return path
    partial = path.with_name(f".{path.name}.{os.getpid()}")
    topology = load_topology("single-broker").model_copy(update={"kafka_version": version})
    with tempfile.TemporaryDirectory(prefix="acklab-class-archive-") as work:
        nodes, control_port = plan_nodes(topology, Path(work))
        state = ClusterState(
            topology=topology, cluster_id=new_cluster_id(), nodes=nodes, proxy=ProcessState(control_port=control_port),
            lease_deadline=time.time() + TRAINING_TIMEOUT_S,
        )
        write_configs(state)
        node = nodes[0]
        runner = LocalRunner(state, Path(work), dump_classes_to=partial)
        try:
            runner.create(node)
            runner.start(node)
            _train(f"127.0.0.1:{node.direct_port}")
            runner.stop(node, TRAINING_TIMEOUT_S)  # the JVM writes the archive as it exits
        except (KafkaException, RuntimeError, OSError) as exc:
            log.warning("kafka %s: no class archive (nodes start without it): %s", version, exc)
        finally:
            kill_and_wait(node)
    if not _usable(partial, version):
        partial.unlink(missing_ok=True)
        return None
    partial.replace(path)
    return path


def _usable(archive: Path, version: str) -> bool:
    """Whether a JVM of the nodes' classpath maps `archive` (with `-Xshare:on` it refuses to start
    otherwise): a JVM killed while writing it leaves one it cannot map."""
    if not archive.exists():
        return False
    java = os.environ.get("ACKLAB_JAVA", "java")
    command = [java, "-Xshare:on", f"-XX:SharedArchiveFile={archive}", "-cp", f"{kafka_libs(version)}/*", STORAGE_TOOL, "random-uuid"]
    return subprocess.run(command, capture_output=True, timeout=60).returncode == 0


def _train(bootstrap: str) -> None:
    """Create a topic and write to it as the workloads do (idempotent, then in a transaction)."""
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    deadline = time.monotonic() + TRAINING_TIMEOUT_S
    while True:  # the node takes a few seconds to serve
        try:
            admin.create_topics([NewTopic("acklab-class-archive", 1, 1)])["acklab-class-archive"].result(10)
            break
        except KafkaException:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
    common = {"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all", "log_level": 0}
    _write(Producer(common))
    transactional = Producer({**common, "transactional.id": "acklab-class-archive"})
    transactional.init_transactions(30)
    transactional.begin_transaction()
    _write(transactional)
    transactional.commit_transaction(30)


def _write(producer: Producer) -> None:
    for n in range(1000):
        producer.produce("acklab-class-archive", key=f"k{n % 16}", value=f"{n}:{n}:")
    if producer.flush(30):
        raise RuntimeError("the training node did not acknowledge its records")
