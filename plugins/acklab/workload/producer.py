"""Drive producer processes with a profile and collect every message's fate into one send log.

`run_load` starts `spec.producers` worker processes (`acklab.workload.worker`), each with its own
producer, id range and keys; starts them together (after calling `on_start`, e.g. the nemesis);
reports progress once a second; and joins their send-log parts into the scenario folder's send log
and their librdkafka statistics into its statistics file (`acklab.store.runs.ScenarioDir`). The processes are forked from a
pre-imported server (`acklab.workload.forkserver`) rather than with `multiprocessing`, so the load
also runs inside daemonic workers (Celery) and never forks a process that holds librdkafka threads.
"""

from __future__ import annotations

import json
import logging
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from acklab.store.runs import ScenarioDir
from acklab.store.schemas import PRODUCER_STATS
from acklab.workload import families, stats
from acklab.workload.client import Client, Launcher, ProducerProcess
from acklab.workload.profiles import ProducerProfile
from acklab.workload.sendlog import combine
from acklab.workload.spec import LoadSpec
from acklab.workload.worker import DEADLINE, PROGRESS_FILE, WorkerJob

log = logging.getLogger(__name__)
START_TIMEOUT_S = 120


@dataclass(frozen=True)
class LoadResult:
    """Counts and times of a finished load; the details are in the send log and the statistics."""

    started: float
    ended: float
    planned: int  # rows of the send log: every message the load planned
    sent: int  # handed to produce(): acked + failed + unknown
    acked: int
    failed: int
    unknown: int
    unsent: int  # planned, never handed to produce() (the load stopped early)
    aborted: int
    refused: int  # failed at produce() itself
    fatal: int  # failed by a producer's fatal error
    errors: dict[str, int]
    stats: dict[str, int] = field(default_factory=dict)
    stop_reasons: dict[str, str] = field(default_factory=dict)  # producer -> why it stopped before its plan
    fatal_errors: dict[str, str] = field(default_factory=dict)  # producer -> its fatal error
    client_version: str = ""  # confluent-kafka, as the producer processes reported it
    librdkafka_version: str = ""


Progress = Callable[[int, int, int], None]
"""Called about once a second with the totals sent, acked and failed so far."""


class WorkloadError(RuntimeError):
    """A producer process failed; its log is quoted."""


class ProgressMeter:
    """A `Progress` that writes `sent N (R/s) acked N (R/s) failed N` lines to `sink`."""

    def __init__(self, sink: Callable[[str], object]) -> None:
        self._sink = sink
        self._last = (0, 0, time.monotonic())

    def __call__(self, sent: int, acked: int, failed: int) -> None:
        last_sent, last_acked, last_t = self._last
        now = time.monotonic()
        if sent < last_sent:  # a new load (run_load reports 0, 0, 0 first)
            last_sent = last_acked = 0
        elapsed = max(now - last_t, 1e-3)
        self._sink(
            f"sent {sent} ({(sent - last_sent) / elapsed:,.0f}/s) "
            f"acked {acked} ({(acked - last_acked) / elapsed:,.0f}/s) failed {failed}"
        )
        self._last = (sent, acked, now)


def run_load(
    bootstrap_servers: str,
    topic: str,
    profile: ProducerProfile,
    spec: LoadSpec,
    files: ScenarioDir,
    progress: Progress | None = None,
    on_start: Callable[[], None] | None = None,
    client: Client | None = None,
    partitions: int | None = None,
) -> LoadResult:
    """Send `spec` to `topic` with `profile` from producer processes of `client` (default: the
    default family's locked one), launched by its family; write the send log and the producer statistics into `files`. With `partitions`
    (the topic's partition count) the producers start without waiting for the topic's metadata."""
    client = client or families.default().client(None)
    family = families.of(client)
    files.producers.mkdir(parents=True, exist_ok=True)
    progress_file = files.producer_file("", PROGRESS_FILE)
    counters = np.memmap(progress_file, dtype=np.int64, mode="w+", shape=(spec.producers, 3))
    jobs = [
        WorkerJob(
            producer=n,
            producers=spec.producers,
            bootstrap_servers=bootstrap_servers,
            topic=topic,
            config=family.config(profile),
            partitioner=profile.partitioner,
            transaction=profile.transaction,
            first_id=first_id,
            count=count,
            max_id=spec.messages - 1,
            message_bytes=spec.message_bytes,
            keys=spec.keys,
            rate=spec.rate / spec.producers if spec.rate else None,
            duration_s=spec.duration_s,
            flush_timeout_s=profile.delivery_timeout_ms / 1000 + 10,
            scenario_dir=files.root,
            partitions=partitions,
            topics=spec.topics,
        )
        for n, (first_id, count) in enumerate(spec.ranges())
    ]
    launcher = family.launcher(client)
    workers = [_spawn(launcher, job) for job in jobs]
    try:
        for job, worker in zip(jobs, workers, strict=True):
            if worker.stdout.readline().strip() != "ready":
                worker.wait(START_TIMEOUT_S)
                raise WorkloadError(f"producer {job.name} failed to start: {_tail(job)}")
        if on_start is not None:
            on_start()
        for worker in workers:
            worker.stdin.write("go\n")
            worker.stdin.close()
        _watch(workers, counters, progress)
    except BaseException:
        for worker in workers:
            if not worker.stdin.closed:
                worker.stdin.close()  # not started: exits at EOF
            worker.terminate()  # started: stops producing, still writes its evidence
        for worker in workers:
            try:
                worker.wait(60)
            except subprocess.TimeoutExpired:
                worker.kill()
        raise
    for job, worker in zip(jobs, workers, strict=True):
        if worker.returncode != 0 or not job.file(".json").exists():
            raise WorkloadError(f"producer {job.name} exited with {worker.returncode}: {_tail(job)}")
    results = [json.loads(job.file(".json").read_text()) for job in jobs]
    for result in results:
        if result["stop_reason"]:
            log.warning("producer %s stopped early: %s", result["producer"], result["stop_reason"])
    rows = combine([job.file(".parquet") for job in jobs], files.send_log)
    stats_table = pa.concat_tables(pq.read_table(job.file(".stats.parquet"), schema=PRODUCER_STATS) for job in jobs)
    pq.write_table(stats_table, files.stats)
    for part in [progress_file, *(job.file(suffix) for job in jobs for suffix in (".parquet", ".stats.parquet"))]:
        part.unlink()
    planned = sum(r["planned"] for r in results)
    if rows != planned:
        raise WorkloadError(f"send log has {rows} rows for {planned} planned messages")
    if spec.duration_s is None and planned != spec.messages:
        raise WorkloadError(f"producers planned {planned} messages, the load {spec.messages}")
    errors: dict[str, int] = {}
    for result in results:
        for name, count in result["errors"].items():
            errors[name] = errors.get(name, 0) + count
    total = {name: sum(r[name] for r in results) for name in ("planned", "sent", "acked", "failed", "unknown", "unsent", "aborted", "refused", "fatal")}
    versions = {(r["client_version"], r["librdkafka_version"]) for r in results}
    if len(versions) != 1 or next(iter(versions))[0] != client.version:
        raise WorkloadError(f"producer processes ran clients {sorted(versions)}, not {client.version}")
    ((client_version, librdkafka_version),) = versions
    return LoadResult(
        started=min(r["started"] for r in results),
        ended=max(r["ended"] for r in results),
        **total,
        errors=errors,
        stats=stats.summarize(stats_table),
        stop_reasons={r["producer"]: r["stop_reason"] for r in results if r["stop_reason"] and r["stop_reason"] != DEADLINE},
        fatal_errors={r["producer"]: r["fatal_error"] for r in results if r["fatal_error"]},
        client_version=client_version,
        librdkafka_version=librdkafka_version,
    )


def _spawn(launcher: Launcher, job: WorkerJob) -> ProducerProcess:
    worker = launcher.spawn(job.file(".log"))
    worker.stdin.write(job.model_dump_json() + "\n")
    worker.stdin.flush()
    return worker


def _watch(workers: list[ProducerProcess], counters: np.ndarray, progress: Progress | None) -> None:
    """Wait for every worker, reporting progress from 0 and then about once a second."""
    if progress is not None:
        progress(0, 0, 0)
    next_report = time.monotonic() + 1.0
    while any(worker.poll() is None for worker in workers):
        time.sleep(0.1)
        if progress is not None and time.monotonic() >= next_report:
            next_report += 1.0
            sent, acked, failed = (int(v) for v in counters.sum(axis=0))
            progress(sent, acked, failed)
    if progress is not None:
        progress(*(int(v) for v in counters.sum(axis=0)))


def _tail(job: WorkerJob, chars: int = 2000) -> str:
    path = job.file(".log")
    return path.read_text(errors="replace")[-chars:] if path.exists() else "(no log)"
