"""`make bench-load`: how close the instrumented workload gets to an uninstrumented producer.

On one fresh 3-broker cluster and one profile, each round measures, in rotating order and each on
a fresh topic (3 partitions, RF 3): (a) a bare confluent-kafka produce loop with no delivery
callback and a constant payload, (b) the same loop with a minimal delivery callback (the loop
users actually run: it counts failures), (c) the instrumented workload (`run_load`), (d) Kafka's own
`org.apache.kafka.tools.ProducerPerformance` from the cluster's jars. Throughput is messages per
second from the first send until every message is acknowledged. A first warm-up round (the brokers'
JIT) is run and not counted. Once its brokers are up, the benchmark yields the CPU to them as the
workload's producer processes do (`acklab.workload.worker.yield_cpu_to_brokers`), so every
contender runs at the same niceness. The ratios printed as the last three lines are medians of
per-round ratios: the contenders of a round run back to back, so a slow spell of this shared
machine slows both sides of a ratio alike.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from acklab.base.maven import kafka_libs
from acklab.base.paths import runs_dir
from acklab.cluster.cluster import Cluster
from acklab.cluster.topology import load_topology
from acklab.store.runs import ScenarioDir
from acklab.workload import librdkafka
from acklab.workload.producer import run_load
from acklab.workload.profiles import ProducerProfile, get_profile
from acklab.workload.spec import LoadSpec
from acklab.workload.worker import yield_cpu_to_brokers

PERF_TOOL = "org.apache.kafka.tools.ProducerPerformance"
PERF_TOTAL = re.compile(r"(\d+) records sent, ([\d.]+) records/sec")
KEYS = 16
RDKAFKA_LOG = logging.getLogger("acklab.rdkafka")


def bare(bootstrap: str, topic: str, profile: ProducerProfile, messages: int, size: int, callback: bool = False) -> float:
    """Messages per second of the simplest loop: produce a constant keyed value, poll now and then;
    with `callback`, a delivery callback that counts failures."""
    failures = []
    hooks = {"on_delivery": lambda err, msg: err is None or failures.append(err)} if callback else {}
    producer = Producer({**librdkafka.config(profile), "bootstrap.servers": bootstrap, **hooks}, logger=RDKAFKA_LOG)
    producer.list_topics(topic, timeout=30)
    value, keys = b"x" * size, [f"p0-k{k}".encode() for k in range(KEYS)]
    produce, poll = producer.produce, producer.poll
    started = time.monotonic()
    for i in range(messages):
        while True:
            try:
                produce(topic, value, keys[i % KEYS])
                break
            except BufferError:
                poll(0.01)
        if i % 64 == 0:
            poll(0)
    if producer.flush(profile.delivery_timeout_ms / 1000 + 10) or failures:
        raise RuntimeError(f"bare loop: messages left unacknowledged or failed ({len(failures)} failed)")
    return messages / (time.monotonic() - started)


def instrumented(bootstrap: str, topic: str, profile: ProducerProfile, messages: int, size: int, producers: int, work: Path) -> float:
    """Messages per second of `run_load` (load window: first send to last delivery report)."""
    spec = LoadSpec(messages=messages, message_bytes=size, keys=KEYS, producers=producers)
    result = run_load(bootstrap, topic, profile, spec, ScenarioDir(work / topic))
    if result.acked != messages:
        raise RuntimeError(f"instrumented load: {result.acked} of {messages} acked ({result.errors})")
    return result.acked / (result.ended - result.started)


def perf_properties(profile: ProducerProfile) -> dict[str, object]:
    """ProducerPerformance's producer settings for `profile`, with librdkafka's batch size."""
    return {
        "acks": profile.acks,
        "enable.idempotence": str(profile.enable_idempotence).lower(),
        "max.in.flight.requests.per.connection": profile.max_in_flight,
        "linger.ms": profile.linger_ms,
        "request.timeout.ms": profile.request_timeout_ms,
        "delivery.timeout.ms": profile.delivery_timeout_ms,
        "retries": profile.retries,
        "batch.size": 1_000_000,  # librdkafka's default batch.size (the Java default is 16384)
    }


def kafka_perf(bootstrap: str, topic: str, properties: dict[str, object], messages: int, size: int, classpath: str) -> float:
    """Messages per second reported by Kafka's ProducerPerformance with `properties`."""
    command = [
        os.environ.get("ACKLAB_JAVA", "java"), "-Xmx512m", "-cp", classpath, PERF_TOOL,
        "--topic", topic, "--num-records", str(messages), "--record-size", str(size), "--throughput", "-1",
        "--producer-props", f"bootstrap.servers={bootstrap}", *(f"{k}={v}" for k, v in properties.items()),
    ]
    output = subprocess.run(command, capture_output=True, text=True, timeout=900, check=True).stdout
    totals = PERF_TOTAL.findall(output)
    if not totals or int(totals[-1][0]) != messages:
        raise RuntimeError(f"ProducerPerformance: no total line for {messages} records:\n{output[-2000:]}")
    return float(totals[-1][1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="leader-ack")
    parser.add_argument("--messages", type=int, default=500_000)
    parser.add_argument("--message-bytes", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--warmup", type=int, default=1, help="rounds run first and not counted")
    parser.add_argument("--producers", type=int, default=1, help="producer processes of the instrumented workload")
    parser.add_argument("--topology", default="three-brokers")
    args = parser.parse_args()
    profile = get_profile(args.profile)
    topology = load_topology(args.topology)
    root = runs_dir() / f"bench-load-{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}"
    cluster = Cluster.provision(topology, root / "cluster", owner_pid=os.getpid())
    try:
        yield_cpu_to_brokers()  # the brokers keep their priority; the contenders all run at the producers'
        libs = kafka_libs(topology.kafka_version)
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers}, logger=RDKAFKA_LOG)
        with tempfile.TemporaryDirectory(dir=root) as work:
            n, size, bs = args.messages, args.message_bytes, cluster.bootstrap_servers
            contenders: dict[str, Callable[[str], float]] = {
                "bare": lambda topic: bare(bs, topic, profile, n, size),
                "bare-callback": lambda topic: bare(bs, topic, profile, n, size, callback=True),
                "instrumented": lambda topic: instrumented(bs, topic, profile, n, size, args.producers, Path(work)),
                "kafka-perf": lambda topic: kafka_perf(bs, topic, perf_properties(profile), n, size, f"{libs}/*"),
            }
            rates: dict[str, list[float]] = {name: [] for name in contenders}
            names = list(contenders)
            for round_ in range(-args.warmup, args.rounds):
                label = f"warm-up {round_ + args.warmup + 1}/{args.warmup}" if round_ < 0 else f"round {round_ + 1}/{args.rounds}"
                for name in names[round_ % len(names) :] + names[: round_ % len(names)]:
                    topic = f"bench-{round_ + args.warmup}-{name}"
                    cluster.create_topic(topic, topology.partitions, topology.replication_factor)
                    rate = contenders[name](topic)
                    if round_ >= 0:
                        rates[name].append(rate)
                    admin.delete_topics([topic])[topic].result(30)
                    print(f"{label} {name:>12}: {rate:>10,.0f} msg/s", flush=True)
    finally:
        cluster.teardown()
    median = {name: statistics.median(values) for name, values in rates.items()}
    print(
        f"profile {profile.name}, {args.messages:,} messages of {args.message_bytes} B, {args.producers} instrumented "
        f"producer process(es), {topology.name} "
        f"(Kafka {topology.kafka_version}), median of {args.rounds} rounds after {args.warmup} warm-up round(s):"
    )
    for name, value in median.items():
        print(f"  {name:>12}: {value:>10,.0f} msg/s  (rounds: {', '.join(f'{v:,.0f}' for v in rates[name])})")
    for other in ("bare", "bare-callback", "kafka-perf"):
        ratios = [mine / theirs for mine, theirs in zip(rates["instrumented"], rates[other], strict=True)]
        print(f"ratio instrumented/{other}: {statistics.median(ratios):.3f}  (rounds: {', '.join(f'{r:.2f}' for r in ratios)})")


if __name__ == "__main__":
    main()
