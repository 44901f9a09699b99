"""One producer process of a load on the Java client: the worker protocol of
`acklab.workload.worker` (a `WorkerJob` line on stdin, `ready`, then `go`) around a run of the Java
producer driver (`workload/java/`, `ProducerRun`) in its owner's host JVM (`acklab.workload.java_host`,
whose socket `HOST_ENV` names), whose record of every message becomes this producer's send-log part,
statistics part and counts, exactly as the librdkafka worker writes them (`acklab.workload.sendlog.ProducerLog`).

SIGTERM here, or the parent going away, is passed on as `stop <reason>`: the run stops producing and
still writes its record. This process dying ends its connection, which stops its run the same way:
nothing of it keeps producing. The run's own log (the client's lines) is appended to this process's."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
from datetime import datetime
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from acklab.store.schemas import PRODUCER_STATS, STATS_COUNTERS, STATS_GAUGES
from acklab.workload.java_client import write_properties
from acklab.workload.java_host import HOST_ENV, LOG_SUFFIX, HostedRun
from acklab.workload.partitioners import partition_for
from acklab.workload.sendlog import ProducerLog, read_reports
from acklab.workload.spec import key
from acklab.workload.stats import STATS_INTERVAL_MS
from acklab.workload.worker import PARENT_GONE, PROGRESS_FILE, SIGTERM_STOP, WorkerJob, pacing_chunk, yield_cpu_to_brokers

# The driver's statistics line (workload/java/Stats.java, sampleOnce), after ts.
STATS_FIELDS = (*STATS_COUNTERS, *STATS_GAUGES)
TIMEOUT_LINE = "due to request timeout"  # NetworkClient, at INFO (java_client.LOG_PROPERTIES)


def start_run(job: WorkerJob, host: str) -> HostedRun:
    """The run of `job` in the host at `host`, its configuration and job written beside the producer's other files."""
    config = job.file(".java.properties")
    write_properties(config, job.config)
    transaction = job.transaction
    job_file = job.file(".java.job")
    write_properties(job_file, {
        "producer": job.producer,
        "producers": job.producers,
        "bootstrap.servers": job.bootstrap_servers,
        "topic": job.topic,
        "key.topics": ",".join(job.key_topics),
        "first.id": job.first_id,
        "count": job.count,
        "max.id": job.max_id,
        "message.bytes": job.message_bytes,
        "keys": job.keys,
        "rate": job.rate,
        "chunk": pacing_chunk(job.rate),
        "duration.s": job.duration_s,
        "flush.timeout.s": job.flush_timeout_s,
        "partitions": job.partitions,
        "transactional": transaction is not None,
        "records.per.txn": transaction.records_per_txn if transaction else None,
        "abort.ratio": transaction.abort_ratio if transaction else None,
        "stats.interval.ms": STATS_INTERVAL_MS,
        "progress.file": job.file("").parent / PROGRESS_FILE,
        "config.file": config,
        "out.prefix": job.file(""),
    })
    return HostedRun(host, job_file)


def collect(job: WorkerJob) -> dict[str, object]:
    """The driver's record as this producer's send-log part, statistics part and counts."""
    result = json.loads(job.file(".java.json").read_text())
    reports = read_reports(job.file(".java.bin"), job.count)
    keys = [key(job.producer, k).encode() for k in range(job.keys)]
    log = ProducerLog(
        job.file(".parquet"), job.producer, job.first_id, job.count, job.keys,
        [partition_for(k, result["partitions"], job.partitioner) for k in keys],
        transactional=job.transaction is not None,
        metadata={"client_version": result["client_version"], "librdkafka_version": ""},
        key_topics=job.key_topics,
        retriable_codes=np.asarray(result["retriable_codes"], dtype=np.int32),
    )
    fatal = (result["fatal_code"], result["fatal_ts"]) if result["fatal_code"] is not None else None
    log.adopt(
        result["sent"], reports, {int(code): name for code, name in result["error_names"].items()},
        (result["txn_starts"], result["txn_outcomes"]), fatal,
    )
    log.write(result["planned"])
    timeouts = request_timeouts(job.file(LOG_SUFFIX))
    rows = []
    for line in job.file(".java.stats").read_text().splitlines():
        ts, *values = line.split(",")
        row: dict[str, object] = {"ts": float(ts), "producer": job.name, **{f: int(v) if v else None for f, v in zip(STATS_FIELDS, values, strict=True)}}
        row["req_timeouts"] = int(np.searchsorted(timeouts, float(ts), side="right"))
        rows.append(row)
    pq.write_table(pa.Table.from_pylist(rows, schema=PRODUCER_STATS), job.file(".stats.parquet"))
    for suffix in (".java.bin", ".java.stats", ".java.json"):
        job.file(suffix).unlink()
    return {
        "producer": job.name,
        "started": result["started"],
        "ended": result["ended"],
        "partitions": result["partitions"],
        "stop_reason": result["stop_reason"],
        "fatal_error": result["fatal_error"],
        "client_version": result["client_version"],
        "librdkafka_version": "",
        **log.summary(result["planned"]),
    }


def request_timeouts(log: Path) -> np.ndarray:
    """Epoch seconds of each request the client timed out, from NetworkClient's log lines
    ("Disconnecting from node N due to request timeout"), in order."""
    stamps = []
    for line in log.read_text(errors="replace").splitlines() if log.exists() else []:
        if TIMEOUT_LINE in line:
            try:
                stamps.append(datetime.strptime(line.split(" ", 1)[0], "%Y-%m-%dT%H:%M:%S.%f%z").timestamp())
            except ValueError:
                continue
    return np.sort(np.asarray(stamps, dtype=np.float64))


def adopt_run_log(job: WorkerJob) -> None:
    """Append the run's own log to this process's (stderr, the producer's log) and remove it."""
    run_log = job.file(LOG_SUFFIX)
    if run_log.exists():
        sys.stderr.flush()
        with run_log.open("rb") as lines:
            shutil.copyfileobj(lines, sys.stderr.buffer)
        sys.stderr.flush()
        run_log.unlink()


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole group: the parent decides
    yield_cpu_to_brokers()
    stop_reason: list[str] = []
    signal.signal(signal.SIGTERM, lambda *_: stop_reason.append(SIGTERM_STOP))
    job = WorkerJob.model_validate_json(sys.stdin.readline())
    run = start_run(job, os.environ[HOST_ENV])
    try:
        _drive(job, run, stop_reason)
    finally:
        run.close()  # a run still going stops at the connection's end
        adopt_run_log(job)


def _drive(job: WorkerJob, run: HostedRun, stop_reason: list[str]) -> None:
    """The worker protocol around `run`, then this producer's files from its record."""
    parent = os.getppid()
    ready = run.readline().split()
    if not ready or ready[0] != "ready":
        sys.exit(f"{job.name}: the Java driver did not start its run (said {' '.join(ready)!r}); its log is above")
    print("ready", flush=True)
    if sys.stdin.readline().strip() != "go":
        return  # not started: the run ends at the connection's end, nothing was sent
    run.send("go")
    told = False
    while run.poll(0.1) is None:
        if os.getppid() != parent and not stop_reason:
            stop_reason.append(PARENT_GONE)
        if stop_reason and not told:
            told = True
            run.send(f"stop {stop_reason[0]}")
    if run.returncode != 0 or not job.file(".java.json").exists():
        sys.exit(f"{job.name}: the Java driver's run ended with {run.returncode} without its record; its log is above")
    result = collect(job)
    out = job.file(".json")
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(result))
    os.replace(tmp, out)

if __name__ == "__main__":
    main()
