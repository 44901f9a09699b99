"""`make bench-processor`: how fast a pipeline's processor processes, against a bare consume-produce
loop of the same client.

On one fresh 3-broker cluster, an input topic (3 partitions, RF 3) is filled once with `--messages`
records of the load's format. Each round then runs, per client family and in rotating order, on a
fresh output topic and consumer group, one processor instance (`acklab.workload.processors`) of the
`bare` style (consume and produce, nothing else: the baseline) and one of the `eos` style (a
transaction per polled batch with its offsets). A contender's time runs from its first assignment
(its log's `assigned`: the JVM's or interpreter's start and the group join are not counted) until
its work is done: for eos, until the group has committed every input partition to its end; for the
bare loop, until the output topic holds every record. The ratios printed last are medians of
per-round ratios (`ratio eos/bare <family>`), so a slow spell of this shared machine slows both
sides of a ratio alike; the eos throughputs are printed beside the standard matrix's load rate
(2,000 msg/s per scenario), which a processor must keep up with.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition

from acklab.base.paths import runs_dir
from acklab.cluster.cluster import Cluster
from acklab.cluster.topology import load_topology
from acklab.workload import families
from acklab.workload.processing import BARE, ProcessorJob
from acklab.workload.processors import ProcessorGroup
from acklab.workload.worker import yield_cpu_to_brokers

PARTITIONS = 3
STANDARD_RATE = 2000.0  # msg/s per scenario in the standard matrix (`acklab.plan.params.standard_matrix`)


def fill(bootstrap: str, topic: str, messages: int, size: int) -> None:
    """`messages` records of the load's value format (`<id>:<seq>:` then padding), idempotent."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 20})
    pad = b"x" * max(0, size - 16)
    for n in range(messages):
        while True:
            try:
                producer.produce(topic, b"%07d:%07d:" % (n, 0) + pad, b"p0-k%d" % (n % 16))
                break
            except BufferError:
                producer.poll(0.1)
    producer.flush(120)


def ends(bootstrap: str, topic: str) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-ends"})
    try:
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), 10)[1] for p in range(PARTITIONS)}
    finally:
        consumer.close()


def measure(cluster: Cluster, family_name: str, style: str, topic: str, messages: int, folder: Path, round_: int, max_batch: int) -> float:
    """Messages per second of one processor instance of `style` over the filled input topic."""
    bootstrap = cluster.bootstrap_servers
    name = f"{family_name}-{style}-{round_}"
    output = f"out-{name}"
    with cluster.admin() as admin:
        admin.create_topic(output, PARTITIONS, 3)
        admin.wait_in_sync(output, 60)
    family = families.named(family_name)
    template = ProcessorJob(
        bootstrap_servers=bootstrap, input_topic=topic, output_topic=output, group_id=f"g-{name}", instance=0, style=style, log="-",
        max_batch=max_batch,
    )
    group = ProcessorGroup(family, family.client(None), folder / name, template, 1)
    target = ends(bootstrap, topic)
    try:
        group.start()
        group.wait_assigned(PARTITIONS, 120)
        started = next(e["t"] for e in group.current[0].events() if e["ev"] == "assigned")
        while True:
            if style == BARE:
                done = sum(ends(bootstrap, output).values()) >= messages
            else:
                done = all(group.committed(bootstrap, PARTITIONS).get(p, -1) >= end for p, end in target.items())
            if done:
                break
            time.sleep(0.05)
        elapsed = time.time() - started
        group.stop()
    finally:
        group.close()
    return messages / elapsed


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--families", nargs="+", default=list(families.FAMILIES))
    parser.add_argument("--max-batch", type=int, default=ProcessorJob.model_fields["max_batch"].default, help="records per poll (per transaction)")
    args = parser.parse_args(argv)
    root = runs_dir() / f"bench-processor-{os.getpid()}"
    cluster = Cluster.provision(load_topology("three-brokers"), root / "cluster", owner_pid=os.getpid())
    try:
        yield_cpu_to_brokers()
        topic = "bench-processor-in"
        with cluster.admin() as admin:
            admin.create_topic(topic, PARTITIONS, 3)
            admin.wait_in_sync(topic, 60)
        fill(cluster.bootstrap_servers, topic, args.messages, args.size)
        ratios: dict[str, list[float]] = {family: [] for family in args.families}
        rates: dict[str, list[float]] = {family: [] for family in args.families}
        with tempfile.TemporaryDirectory(prefix="bench-processor-") as folder:
            for round_ in range(args.rounds):
                for family in args.families:
                    order = ["eos", BARE] if round_ % 2 else [BARE, "eos"]
                    got = {style: measure(cluster, family, style, topic, args.messages, Path(folder), round_, args.max_batch) for style in order}
                    print(f"round {round_} {family}: bare {got[BARE]:,.0f} msg/s, eos {got['eos']:,.0f} msg/s", flush=True)
                    ratios[family].append(got["eos"] / got[BARE])
                    rates[family].append(got["eos"])
        for family in args.families:
            print(f"eos msg/s {family}: {statistics.median(rates[family]):,.0f} (the standard matrix's load: {STANDARD_RATE:,.0f})")
        for family in args.families:
            print(f"ratio eos/bare {family}: {statistics.median(ratios[family]):.2f}")
    finally:
        cluster.teardown()


if __name__ == "__main__":
    main()
