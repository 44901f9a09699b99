"""librdkafka statistics (`statistics.interval.ms` + `stats_cb`) sampled during the load (the Java
client's producer metrics fill the same columns: `acklab.workload.java_worker`).

Each sample of each producer becomes one row of the scenario's statistics file
(`acklab.store.schemas.PRODUCER_STATS`); broker-level counters are summed over the producer's
broker connections. The manifest carries a summary.
"""

from __future__ import annotations

import json
import time

import pyarrow as pa

from acklab.store.schemas import STATS_COUNTERS, STATS_GAUGES

# A librdkafka producer waits after its load for one sample taken after it (exact totals), and a
# group for the last of its producers: 1.08-1.31 s after a group of seven's load with 1000 ms,
# 0.40-0.63 s with 250 ms (three alternating pairs). Four samples a second cost an idempotent
# producer about 1 ms of CPU per second more than one (librdkafka's emission and `stats_row`).
STATS_INTERVAL_MS = 250
BROKER_FIELDS = ("txretries", "txerrs", "req_timeouts", "disconnects", "outbuf_cnt", "outbuf_msg_cnt", "waitresp_cnt", "waitresp_msg_cnt")


def stats_row(producer: str, raw: str) -> dict[str, object]:
    """One row from a librdkafka statistics JSON document."""
    stats = json.loads(raw)
    brokers = stats.get("brokers", {}).values()
    row: dict[str, object] = {"ts": time.time(), "producer": producer, "txmsgs": stats["txmsgs"], "msg_cnt": stats["msg_cnt"]}
    for name in BROKER_FIELDS:
        row[name] = sum(broker[name] for broker in brokers)
    row["request_latency_avg_ms"] = max((broker["rtt"]["avg"] for broker in brokers), default=0) // 1000
    row["request_latency_max_ms"] = max((broker["rtt"]["max"] for broker in brokers), default=0) // 1000
    return row


def summarize(table: pa.Table) -> dict[str, int]:
    """Totals of the counters (last sample of each producer) and maxima of the gauges."""
    import pyarrow.compute as pc  # here, not at import: producer processes start faster without it

    summary = {"samples": table.num_rows}
    if table.num_rows == 0:
        return summary
    last = table.group_by("producer").aggregate([(name, "max") for name in STATS_COUNTERS])
    for name in STATS_COUNTERS:
        if (total := pc.sum(last[f"{name}_max"]).as_py()) is not None:
            summary[name] = int(total)
    for name in STATS_GAUGES:
        if (largest := pc.max(table[name]).as_py()) is not None:  # null: the client has no such statistic
            summary[f"max_{name}"] = int(largest)
    return summary
