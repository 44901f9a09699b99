"""`make bench-proxy`: producer throughput through the fault proxy (no active fault) vs direct.

One 3-broker cluster; the same bare confluent-kafka produce loop alternates between the DIRECT
listeners and the proxied CLIENT listeners, several rounds, and the median ratio is printed.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

from confluent_kafka import Producer

from acklab.cluster.cluster import Cluster
from acklab.cluster.topology import load_topology


def produce(bootstrap: str, topic: str, messages: int, size: int) -> float:
    """Messages per second of an acks=all produce loop with no bookkeeping, until all are acked."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    value = b"x" * size
    started = time.perf_counter()
    for i in range(messages):
        while True:
            try:
                producer.produce(topic, value)
                break
            except BufferError:
                producer.poll(0.01)
        if i % 1000 == 0:
            producer.poll(0)
    if producer.flush(120):
        raise RuntimeError("messages left unacknowledged")
    return messages / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=int, default=300_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    os.environ.setdefault("ACKLAB_RUNS", tempfile.mkdtemp(prefix="acklab-bench-"))
    cluster = Cluster.provision(load_topology("three-brokers"), Path(os.environ["ACKLAB_RUNS"]) / "bench-proxy" / "cluster", owner_pid=os.getpid())
    try:
        cluster.create_topic("bench", 3, 3)
        produce(cluster.direct_bootstrap_servers, "bench", args.messages // 10, args.size)  # warm-up
        ratios = []
        for round_ in range(args.rounds):
            direct = produce(cluster.direct_bootstrap_servers, "bench", args.messages, args.size)
            proxied = produce(cluster.bootstrap_servers, "bench", args.messages, args.size)
            ratios.append(proxied / direct)
            print(f"round {round_ + 1}: direct {direct:,.0f} msg/s, proxy {proxied:,.0f} msg/s, ratio {proxied / direct:.2f}")
        print(f"proxy counters: {cluster.proxy().stats()}")
    finally:
        cluster.teardown()
    print(f"ratio proxy/direct: {statistics.median(ratios):.2f}")


if __name__ == "__main__":
    main()
