"""`make bench-java`: how close acklab's Java producer driver, with its full evidence, gets to Kafka's
own ProducerPerformance on the same kafka-clients.

On one fresh 3-broker cluster and one profile, each round measures, in alternating order and each on a
fresh topic (3 partitions, RF 3): (a) the Java driver through `run_load` (one producer process: the
worker and its JVM; every record keyed and recorded in the send log), and (b)
`org.apache.kafka.tools.ProducerPerformance` of the cluster's Kafka jars with the client's kafka-clients
first on its classpath, given the very same producer properties (the profile's Java translation).
ProducerPerformance sends values of the same size without keys. Throughput is messages per second from
the first send until every message is acknowledged; a warm-up round is not counted. Both run at the
producer processes' niceness (`acklab.workload.worker.yield_cpu_to_brokers`). The last line is
`ratio java/kafka-perf: X`, the median of the per-round ratios."""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

from confluent_kafka.admin import AdminClient

from acklab.base.maven import kafka_libs
from acklab.base.paths import runs_dir
from acklab.cluster.cluster import Cluster
from acklab.cluster.topology import load_topology
from acklab.store.runs import ScenarioDir
from acklab.tools.bench_load import RDKAFKA_LOG, kafka_perf
from acklab.workload import java_client
from acklab.workload.producer import run_load
from acklab.workload.profiles import get_profile
from acklab.workload.spec import LoadSpec
from acklab.workload.worker import yield_cpu_to_brokers


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--client", default=java_client.LOCKED, help="kafka-clients version (set up)")
    parser.add_argument("--profile", default="leader-ack")
    parser.add_argument("--messages", type=int, default=500_000)
    parser.add_argument("--message-bytes", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=1, help="rounds run first and not counted")
    parser.add_argument("--topology", default="three-brokers")
    args = parser.parse_args()
    client = java_client.client(args.client)
    profile = java_client.resolve(get_profile(args.profile), client)
    properties = java_client.config(profile)
    topology = load_topology(args.topology)
    classpath = f"{java_client.classpath(client.version)}:{kafka_libs(topology.kafka_version)}/*"  # the client's jars first
    root = runs_dir() / f"bench-java-{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}"
    cluster = Cluster.provision(topology, root / "cluster", owner_pid=os.getpid())
    rates: dict[str, list[float]] = {"java": [], "kafka-perf": []}
    try:
        yield_cpu_to_brokers()
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers}, logger=RDKAFKA_LOG)
        with tempfile.TemporaryDirectory(dir=root) as work:
            n, size, bootstrap = args.messages, args.message_bytes, cluster.bootstrap_servers

            def java(topic: str) -> float:
                spec = LoadSpec(messages=n, message_bytes=size, keys=16)
                result = run_load(bootstrap, topic, profile, spec, ScenarioDir(Path(work) / topic), client=client)
                if result.acked != n:
                    raise RuntimeError(f"java driver: {result.acked} of {n} acked ({result.errors})")
                return result.acked / (result.ended - result.started)

            contenders = {"java": java, "kafka-perf": lambda topic: kafka_perf(bootstrap, topic, properties, n, size, classpath)}
            names = list(contenders)
            for round_ in range(-args.warmup, args.rounds):
                label = "warm-up" if round_ < 0 else f"round {round_ + 1}/{args.rounds}"
                for name in names[round_ % 2 :] + names[: round_ % 2]:
                    topic = f"bench-{round_ + args.warmup}-{name}"
                    cluster.create_topic(topic, topology.partitions, topology.replication_factor)
                    rate = contenders[name](topic)
                    if round_ >= 0:
                        rates[name].append(rate)
                    admin.delete_topics([topic])[topic].result(30)
                    print(f"{label} {name:>10}: {rate:>10,.0f} msg/s", flush=True)
    finally:
        cluster.teardown()
    print(
        f"kafka-clients {client.version}, profile {profile.name}, {args.messages:,} messages of {args.message_bytes} B, "
        f"{topology.name} (Kafka {topology.kafka_version}), median of {args.rounds} rounds after {args.warmup} warm-up round(s):"
    )
    for name, values in rates.items():
        print(f"  {name:>10}: {statistics.median(values):>10,.0f} msg/s  (rounds: {', '.join(f'{v:,.0f}' for v in values)})")
    ratios = [mine / theirs for mine, theirs in zip(rates["java"], rates["kafka-perf"], strict=True)]
    print(f"ratio java/kafka-perf: {statistics.median(ratios):.3f}  (rounds: {', '.join(f'{r:.2f}' for r in ratios)})")


if __name__ == "__main__":
    main()
