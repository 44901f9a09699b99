"""`make bench-audit`: how the Spark audit scales, and whether it keeps up with the load.

1. Load rate: `acklab.workload.producer.run_load` sends `--load-messages` at full speed to a fresh
   topic of a real 3-broker local cluster (direct listeners, no proxy), with 1 and with 2 producer
   processes; the faster one gives the workload's seconds per million messages.
2. Audit: for each size, synthetic evidence with planted anomalies (`acklab.testing.synthetic`)
   is audited by ONE spark-submit of `spark/delivery_matrix.py --topic-records` (the same job the
   pipeline runs, from its Parquet archive instead of Kafka). The matrix must equal the planted
   counts, else the bench fails. Audit time is the spark-submit's wall time, JVM start included.

The last lines are `audit seconds per million: <size>: X` per size, `scaling 20M/10M: X`
(time ratio of the two largest sizes) and `audit/load time: Y`: audit seconds per million at the
largest size over the load's seconds per million. Both sides leave out fixed start-up costs in the
same way: the load's cluster and topic setup is not timed, and the audit's JVM start (~10 s) is
spread over the largest run. Wall times depend on what else runs on the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import time
from pathlib import Path

from acklab.base.paths import runs_dir
from acklab.checker.submit import audit_job, submit
from acklab.cluster.cluster import Cluster
from acklab.cluster.topology import load_topology
from acklab.store.runs import RunDir, ScenarioDir
from acklab.testing.synthetic import generate
from acklab.workload.producer import run_load
from acklab.workload.profiles import get_profile
from acklab.workload.spec import LoadSpec

MILLION = 1_000_000


def measure_load(work: Path, messages: int, profile: str, producer_counts: list[int]) -> float:
    """Seconds per million messages of the fastest full-speed load (first send to last report)."""
    cluster = Cluster.provision(load_topology("three-brokers"), work / "cluster", owner_pid=os.getpid())
    try:
        best = float("inf")
        for producers in producer_counts:
            topic = f"bench-load-{producers}"
            cluster.create_topic(topic, cluster.topology.partitions, cluster.topology.replication_factor)
            spec = LoadSpec(messages=messages, rate=None, producers=producers)
            result = run_load(cluster.direct_bootstrap_servers, topic, get_profile(profile), spec, ScenarioDir(work / topic))
            per_million = (result.ended - result.started) / result.sent * MILLION
            print(f"load {profile}, {producers} producer(s): {result.sent} sent, {result.acked} acked in "
                  f"{result.ended - result.started:.1f} s = {per_million:.2f} s per million "
                  f"({result.sent / (result.ended - result.started):,.0f} msg/s)", flush=True)
            best = min(best, per_million)
        return best
    finally:
        cluster.teardown()


def audit(work: Path, messages: int, master: str) -> float:
    """Generate evidence of `messages` messages, audit it in one spark-submit, check it; seconds."""
    run_dir = work / f"audit-{messages}"
    started = time.monotonic()
    evidence = generate(run_dir, messages)
    print(f"evidence {messages:,}: generated in {time.monotonic() - started:.1f} s", flush=True)
    job = audit_job(RunDir.of_manifest(evidence.manifest), topic_records=evidence.topic_records)
    started = time.monotonic()
    matrix_json = submit(job, master)
    seconds = time.monotonic() - started
    (row,) = json.loads(matrix_json.read_text())
    if wrong := evidence.mismatches(row):
        raise SystemExit(f"audit of {messages:,} messages is wrong (got, planted): {wrong}")
    print(f"audit {messages:,}: {seconds:.1f} s, matrix equals the planted counts", flush=True)
    shutil.copy(matrix_json, work / f"matrix-{messages}.json")
    shutil.rmtree(run_dir)
    return seconds


def _label(messages: int) -> str:
    return f"{messages // MILLION}M" if messages % MILLION == 0 else f"{messages:,}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[5 * MILLION, 10 * MILLION, 20 * MILLION])
    parser.add_argument("--load-messages", type=int, default=200_000)
    parser.add_argument("--load-profile", default="leader-ack")
    parser.add_argument("--master", default=os.environ.get("ACKLAB_SPARK_MASTER", "local[*]"))
    args = parser.parse_args()

    work = runs_dir() / time.strftime("bench-audit-%Y%m%dT%H%M%S")
    work.mkdir(parents=True)
    load_per_million = measure_load(work, args.load_messages, args.load_profile, [1, 2])
    seconds = {size: audit(work, size, args.master) for size in sorted(args.sizes)}

    per_million = {size: s / size * MILLION for size, s in seconds.items()}
    summary = {"load_s_per_million": load_per_million, "audit_s": seconds, "audit_s_per_million": per_million}
    (work / "bench.json").write_text(json.dumps(summary, indent=2))
    print(f"results: {work}")
    for size, value in per_million.items():
        print(f"audit seconds per million: {_label(size)}: {value:.2f}")
    if len(seconds) >= 2:
        small, large = sorted(seconds)[-2:]
        print(f"scaling {_label(large)}/{_label(small)}: {seconds[large] / seconds[small]:.2f}")
    print(f"audit/load time: {per_million[max(per_million)] / load_per_million:.2f}")


if __name__ == "__main__":
    main()
