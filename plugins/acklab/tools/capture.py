"""Record the PRODUCE frames real clients and real brokers exchange: the codec's test fixtures
(`tests/unit/data/produce_frames.json`), and which Produce versions each client negotiates.

    python -m acklab.tools.capture OUT.json --kafka-version 4.3.1 --kafka-version 3.9.2 \\
        [--python /path/to/other-venv/bin/python ...]

For each Kafka version a 3-broker cluster is provisioned and its fault proxy replaced by a plain
relay on the same (advertised) ports that records every frame, independent of the proxy's codec.
Each client interpreter (with confluent_kafka; default this one) produces a few records as a
plain (acks=all), an idempotent and a transactional producer; the first PRODUCE request of each
and its response are kept, hex-encoded, with the versions seen.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import struct
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from acklab.cluster.cluster import Cluster
from acklab.cluster.state import kill_and_wait
from acklab.cluster.topology import Topology, load_topology

PRODUCERS = {
    "acks-all": {"acks": "all"},
    "idempotent": {"enable.idempotence": True},
    "transactional": {"enable.idempotence": True, "transactional.id": "acklab-capture"},
}
CLIENT = """
import json, sys
from importlib.metadata import version
from confluent_kafka import Producer, libversion
bootstrap, topic, config = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50, **config})
if "transactional.id" in config:
    producer.init_transactions(30)
    producer.begin_transaction()
for i in range(3):
    producer.produce(topic, b"value-%d" % i, b"key-%d" % i, partition=0)
if "transactional.id" in config:
    producer.commit_transaction(30)
assert producer.flush(30) == 0
print(json.dumps({"confluent_kafka": version("confluent-kafka"), "librdkafka": libversion()[0]}))
"""


class Recorder:
    """A relay on each proxy port that keeps every PRODUCE request and the response to it."""

    def __init__(self) -> None:
        self.exchanges: list[dict[str, object]] = []
        self.lock = threading.Lock()

    async def relay(self, listen_port: int, upstream_port: int) -> asyncio.Server:
        async def serve(client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
            upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1", upstream_port)
            requests: dict[int, tuple[int, bytes]] = {}

            async def pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, requests_side: bool) -> None:
                while True:
                    size = await reader.readexactly(4)
                    body = await reader.readexactly(int.from_bytes(size, "big"))
                    writer.write(size + body)
                    if requests_side:
                        api_key, version, correlation = struct.unpack_from(">hhi", body)
                        if api_key == 0:
                            requests[correlation] = (version, body)
                    elif (request := requests.pop(struct.unpack_from(">i", body)[0], None)) is not None:
                        with self.lock:
                            self.exchanges.append({"api_version": request[0], "request": request[1].hex(), "response": body.hex()})

            tasks = [asyncio.create_task(pump(client_reader, upstream_writer, True)), asyncio.create_task(pump(upstream_reader, client_writer, False))]
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            for task in tasks:
                task.cancel()
            client_writer.close()
            upstream_writer.close()

        return await asyncio.start_server(serve, "127.0.0.1", listen_port, reuse_address=True)

    def take(self) -> list[dict[str, object]]:
        with self.lock:
            taken, self.exchanges = self.exchanges, []
        return taken


def capture(topology: Topology, pythons: list[str], root: Path) -> list[dict[str, object]]:
    """Every client's first PRODUCE exchange per producer kind on a cluster of `topology`."""
    cluster = Cluster.provision(topology, root, owner_pid=os.getpid())
    recorder, loop = Recorder(), asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    frames = []
    try:
        kill_and_wait(cluster.state.proxy)
        cluster.state.save(cluster.root)
        brokers = [n for n in cluster.state.nodes if n.is_broker]
        for node in brokers:
            loop.run_until_complete(recorder.relay(node.proxy_port, node.client_port))  # type: ignore[arg-type]
        thread.start()
        for python in pythons:
            for kind, config in PRODUCERS.items():
                topic = f"capture-{kind}-{len(frames)}"
                cluster.create_topic(topic, 1, 3)
                run = subprocess.run([python, "-c", CLIENT, cluster.bootstrap_servers, topic, json.dumps(config)],
                                     capture_output=True, text=True, timeout=120, check=True)
                versions = json.loads(run.stdout.strip().splitlines()[-1])
                exchanges = recorder.take()
                print(f"kafka {topology.kafka_version}, confluent_kafka {versions['confluent_kafka']} (librdkafka {versions['librdkafka']}), "
                      f"{kind}: Produce v{sorted({e['api_version'] for e in exchanges})}")
                frames.append({"kafka": topology.kafka_version, **versions, "producer": kind, **exchanges[0]})
    finally:
        loop.call_soon_threadsafe(loop.stop)
        cluster.teardown()
    return frames


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path)
    parser.add_argument("--kafka-version", action="append", required=True)
    parser.add_argument("--python", action="append", help="a client interpreter with confluent_kafka (default: this one)")
    args = parser.parse_args()
    root = Path(os.environ.get("ACKLAB_RUNS") or tempfile.mkdtemp(prefix="acklab-capture-"))
    frames = []
    for kafka_version in args.kafka_version:
        topology = load_topology("three-brokers").model_copy(update={"kafka_version": kafka_version})
        frames += capture(topology, args.python or [sys.executable], root / f"capture-{kafka_version}" / "cluster")
    args.out.write_text(json.dumps(frames, indent=1) + "\n")


if __name__ == "__main__":
    main()
