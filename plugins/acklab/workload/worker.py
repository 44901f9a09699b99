"""One producer process of a load, forked by `acklab.workload.forkserver`, driven by `acklab.workload.producer`.

Protocol: the job arrives as one JSON line on stdin; the worker connects, fetches the topic's
metadata (unless the job gives the partition count: a load may start while no broker answers) and
initialises transactions, prints `ready`, waits for `go` on stdin, produces, then
writes its send-log part, its statistics part and `p<n>.json` (counts). SIGTERM, or the parent
going away, stops producing early; the send-log part still has a row for every planned message
(`unsent` for those never handed to `produce()`), and `stop_reason` says why. SIGINT is ignored:
a Ctrl-C reaches the whole process group, and the parent then sends SIGTERM.

A message `produce()` rejects (e.g. MSG_SIZE_TOO_LARGE) is a failed write (`refused`), and the
load goes on. A fatal error (librdkafka's idempotent producer giving up) ends the load: every
message it did not acknowledge, sent or not, failed by it (`fatal`).

The hot loop does as little per message as Python allows: values are built BLOCK at a time, and
each message costs one `produce` call and one delivery callback that keeps the report's id,
partition and offset in arrays (and notes a failure), both compiled (`acklab.workload.records`);
send and ack times are stamped per chunk and per poll. The reports are folded into the
send-log arrays in bulk once FOLD_EVERY of them are pending (few enough that the arrays stay in
cache), and when the load ends.
"""

from __future__ import annotations

import gc
import importlib.abc
import json
import logging
import math
import os
import signal
import sys
import time
from pathlib import Path

import confluent_kafka
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from confluent_kafka import KafkaError, KafkaException, Producer
from pydantic import BaseModel, ConfigDict

from acklab.store.runs import ScenarioDir
from acklab.store.schemas import PRODUCER_STATS
from acklab.workload import stats
from acklab.workload.partitioners import partition_for
from acklab.workload.profiles import Partitioner, TransactionSpec
from acklab.workload.records import ReportSink, Sender, ValueFormat
from acklab.workload.sendlog import EvidenceError, ProducerLog
from acklab.workload.spec import key, key_topic, scenario_topics

log = logging.getLogger("acklab.workload.worker")
CHUNK = 64  # messages between two polls at full speed


def pacing_chunk(rate: float | None) -> int:
    """Messages sent between two waits for the rate: one chunk per 5 ms (CHUNK at full speed)."""
    return CHUNK if rate is None else max(1, min(CHUNK, int(rate / 200)))

BLOCK = 4096  # values built at once
TOPIC_WAIT_S = 60.0  # for the topic to appear in the metadata
FOLD_EVERY = 8192  # delivery reports kept as they came before they are folded into the send log
TICK_S = 0.25  # delivery reports folded into the arrays, progress published
STOP_FLUSH_S = 5.0  # flush budget once interrupted
DEADLINE = "duration_s reached"  # the stop reason of a load ended by its clock, as planned
SIGTERM_STOP, PARENT_GONE = "stopped by SIGTERM", "the parent process went away"  # interrupted: flush briefly
PRODUCER_NICENESS = 15  # load generators yield the CPU to the brokers under test (their controller stalls otherwise: docs/benchmarks.md)


def yield_cpu_to_brokers() -> None:
    """Run this process (and the processes it starts from now on) at a niceness of at least
    PRODUCER_NICENESS: raised to it, never lowered, never added twice. Every producer process
    (librdkafka's, forked by `acklab.workload.forkserver`; the Java driver, started by
    `acklab.workload.java_worker`) runs so. The Java driver's JVM starts its own session: where the
    kernel groups sessions (autogroup), its niceness weighs only among its own threads, not against
    the brokers."""
    os.nice(max(0, PRODUCER_NICENESS - os.nice(0)))


class WorkerJob(BaseModel):
    """What one producer process sends: ids `first_id .. first_id + count - 1` to `topic`."""

    model_config = ConfigDict(extra="forbid")
    producer: int
    producers: int
    bootstrap_servers: str
    topic: str
    config: dict[str, str | int | float | bool]
    partitioner: Partitioner
    transaction: TransactionSpec | None = None
    first_id: int
    count: int
    max_id: int
    message_bytes: int
    keys: int
    rate: float | None
    duration_s: float | None
    flush_timeout_s: float
    scenario_dir: Path
    partitions: int | None = None  # the topic's partition count; None: read from the metadata
    topics: int = 1  # the scenario's topics (`acklab.workload.spec.scenario_topics` of `topic`); key k goes to `key_topics[k]`

    @property
    def key_topics(self) -> list[str]:
        """The topic each of the producer's keys is sent to."""
        names = scenario_topics(self.topic, self.topics)
        return [names[key_topic(k, self.topics)] for k in range(self.keys)]

    @property
    def name(self) -> str:
        return f"p{self.producer}"

    def file(self, suffix: str) -> Path:
        """This producer's own file (`acklab.store.runs.ScenarioDir.producer_file`)."""
        return ScenarioDir(self.scenario_dir).producer_file(self.name, suffix)


PROGRESS_FILE = "progress.bin"  # the load's int64 [producers, 3]: sent, acked, failed


def client_versions() -> dict[str, str]:
    """The confluent-kafka and librdkafka versions this process produces with."""
    client = confluent_kafka.version()  # a (version, int) tuple before 2.16, a string since
    return {"client_version": client[0] if isinstance(client, tuple) else client, "librdkafka_version": confluent_kafka.libversion()[0]}


class Worker:
    def __init__(self, job: WorkerJob) -> None:
        self.job = job
        self.stopping = False
        self.stop_reason: str | None = None  # why the load ended before its plan, if it did
        self.fatal_error: str | None = None
        self.parent = os.getppid()
        self.format = ValueFormat.for_ids(job.max_id, job.message_bytes)
        self.keys = [key(job.producer, k).encode() for k in range(job.keys)]
        self.stats_rows: list[dict[str, object]] = []
        self.reports = ReportSink(job.count, self.format)  # delivery reports not folded yet
        self._marks: list[tuple[int, float]] = []  # (delivery reports served, time) after each poll
        config = {"statistics.interval.ms": stats.STATS_INTERVAL_MS, **job.config}
        self.stats_interval_s = float(config["statistics.interval.ms"]) / 1000
        if job.transaction is not None:
            config["transactional.id"] = f"acklab-{job.topic}-{job.name}"
        self.producer = Producer(
            {
                **config,
                "bootstrap.servers": job.bootstrap_servers,
                "on_delivery": self.reports.on_delivery,
                "error_cb": self._on_error,
                "stats_cb": lambda raw: self.stats_rows.append(stats.stats_row(job.name, raw)),
            },
            logger=logging.getLogger("acklab.rdkafka"),
        )
        self.partitions = job.partitions or self._wait_for_topic(TOPIC_WAIT_S)
        self.log = ProducerLog(
            job.file(".parquet"),
            job.producer,
            job.first_id,
            job.count,
            job.keys,
            [partition_for(k, self.partitions, job.partitioner) for k in self.keys],
            transactional=job.transaction is not None,
            metadata=client_versions(),
            key_topics=job.key_topics,
        )
        if job.transaction is not None:
            self.producer.init_transactions(job.flush_timeout_s)
        self.progress = np.memmap(ScenarioDir(job.scenario_dir).producer_file("", PROGRESS_FILE), dtype=np.int64, mode="r+", shape=(job.producers, 3))

    def _wait_for_topic(self, timeout_s: float) -> int:
        """The topic's partition count, once it exists: the worker may start while it is created."""
        deadline = time.monotonic() + timeout_s
        while True:
            metadata = self.producer.list_topics(self.job.topic, timeout=timeout_s).topics[self.job.topic]
            if metadata.error is None and metadata.partitions:
                return len(metadata.partitions)
            if time.monotonic() >= deadline or (metadata.error is not None and metadata.error.code() != KafkaError.UNKNOWN_TOPIC_OR_PART):
                raise KafkaException(metadata.error or KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART))
            time.sleep(0.2)

    def _polled(self) -> None:
        """Delivery reports served so far are stamped now (called after every call that serves them)."""
        self._marks.append((self.reports.count, time.time()))

    # ---- running ---------------------------------------------------------------------------

    def run(self) -> dict[str, object]:
        # The load allocates nothing cyclic: the cyclic garbage collector would rescan each block's
        # values and every other live object, again and again, for nothing.
        gc.freeze()
        gc.disable()
        self.started = time.time()
        self._t0 = time.monotonic()
        self._deadline = self._t0 + self.job.duration_s if self.job.duration_s else math.inf
        self._next_tick = self._t0 + TICK_S
        try:
            if self.job.transaction is None:
                self._produce(self.job.count)
            else:
                self._transactions(self.job.transaction)
        except KafkaException as exc:
            error: KafkaError = exc.args[0]
            if error.fatal() or error.code() == KafkaError._FATAL:
                self._fatal(error)
            else:
                self._stop(f"error {error.name()}: {error.str()}")
            log.error("%s stopped producing: %s", self.job.name, self.stop_reason)
        finally:
            self._flush()
            self.ended = time.time()
            self._final_stats()
            self._fold()
            self.progress[self.job.producer] = (self.log.sent, self.log.acked, self.log.failed)
            # A load stopped by its clock planned only what it sent; any other early stop leaves the rest unsent.
            planned = self.log.sent if self.stop_reason == DEADLINE else self.job.count
            self.log.write(planned)
            pq.write_table(pa.Table.from_pylist(self.stats_rows, schema=PRODUCER_STATS), self.job.file(".stats.parquet"))
        return {
            "producer": self.job.name,
            "started": self.started,
            "ended": self.ended,
            "partitions": self.partitions,
            "stop_reason": self.stop_reason,
            "fatal_error": self.fatal_error,
            **client_versions(),
            **self.log.summary(planned),
        }

    def _stop(self, reason: str) -> None:
        """Stop producing; the first reason given is the one recorded."""
        self.stopping = True
        self.stop_reason = self.stop_reason or reason

    def _fatal(self, error: KafkaError) -> None:
        """The producer instance is dead: record the error (its cause, when known) and stop."""
        self.log.fail_fatally(error, time.time())
        if self.fatal_error is None or error.code() != KafkaError._FATAL:
            self.fatal_error = f"{error.name()}: {error.str()}"
        self._stop(f"fatal error {self.fatal_error}")

    def _refuse(self, index: int, error: KafkaError) -> bool:
        """Record a message `produce()` rejected as a failed write; False when the error must end the
        load instead (fatal, or a transaction that must abort)."""
        if error.fatal() or error.code() == KafkaError._FATAL or error.txn_requires_abort():
            return False
        self.log.refuse(index, error, time.time())
        return True

    def _produce(self, end: int) -> None:
        """Send local messages `log.sent .. end - 1`, CHUNK at a time, paced to the job's rate."""
        sender = Sender(self.producer.produce)
        key_topics = self.job.key_topics
        send, poll, polled = sender.send, self.producer.poll, self._polled
        send_ts, now, rate = self.log.send_ts, time.time, self.job.rate
        chunk = pacing_chunk(rate)
        while self.log.sent < end and not self.stopping:
            lo = self.log.sent
            hi = min(end, lo + BLOCK)
            values = self.format.values(self.job.first_id, lo, hi, len(self.keys))
            turn = lo % len(self.keys)
            rotated = self.keys[turn:] + self.keys[:turn]
            keys = rotated * -(-(hi - lo) // len(rotated))
            topics = (key_topics[turn:] + key_topics[:turn]) * -(-(hi - lo) // len(rotated))
            for start in range(0, hi - lo, chunk):
                stop, stamped, j = min(hi - lo, start + chunk), start, start
                try:
                    while j < stop:
                        try:
                            j = send(values, keys, topics, j, stop)
                        except BufferError:  # queue full: record what was accepted, then wait
                            j = sender.position
                            send_ts[lo + stamped : lo + j] = now()
                            stamped, self.log.sent = j, lo + j
                            self._produce_blocking(lo + j, values[j], keys[j], topics[j])
                            j += 1
                        except KafkaException as exc:
                            j = sender.position
                            if not self._refuse(lo + j, exc.args[0]):
                                raise
                            j += 1
                except KafkaException:
                    send_ts[lo + stamped : lo + j] = now()
                    self.log.sent = lo + j
                    raise
                send_ts[lo + stamped : lo + stop] = now()
                self.log.sent = lo + stop
                poll(0)
                polled()
                if rate is not None:
                    due = self._t0 + self.log.sent / rate
                    while (remaining := due - time.monotonic()) > 0:
                        # librdkafka waits in whole milliseconds: a shorter wait would be a busy loop
                        poll(min(math.ceil(remaining * 1000) / 1000, TICK_S))
                        polled()
                        self._tick()
                if time.monotonic() >= self._next_tick:
                    self._tick()
                    if self.stopping:
                        return
            if self.reports.count >= FOLD_EVERY:
                self._fold()

    def _produce_blocking(self, index: int, value: bytes, message_key: bytes, topic: str) -> None:
        """Hand local message `index` to a full queue, serving delivery reports until it is taken."""
        while True:
            self.producer.poll(0.01)
            self._polled()
            self._tick()
            try:
                self.producer.produce(topic, value, message_key)
                return
            except BufferError:
                continue
            except KafkaException as exc:
                if self._refuse(index, exc.args[0]):
                    return
                raise

    def _transactions(self, spec: TransactionSpec) -> None:
        """Transactions of `records_per_txn` messages, each committed or (per the abort ratio) aborted.

        A transaction cut short (stop, or an abortable error) is aborted; its successor starts at
        the next id, so transaction boundaries are recorded, not computed."""
        txn = 0
        while self.log.sent < self.job.count and not self.stopping:
            self.producer.begin_transaction()
            self.log.begin_transaction()
            try:
                self._produce(min(self.job.count, self.log.sent + spec.records_per_txn))
                commit = not spec.aborts(txn) and not self.stopping
                if not commit:  # deliver first, so the aborted records are in the log (and librdkafka#4849)
                    self._drain(self.job.flush_timeout_s)
            except KafkaException as exc:
                if not exc.args[0].txn_requires_abort():
                    self.log.end_transaction("unknown")
                    raise
                commit = False
            self._end_transaction(commit)
            txn += 1

    def _end_transaction(self, commit: bool) -> None:
        """Commit (or abort); retry retriable errors, abort when the commit requires it."""
        deadline = time.monotonic() + self.job.flush_timeout_s
        while True:
            try:
                remaining = max(1.0, deadline - time.monotonic())
                (self.producer.commit_transaction if commit else self.producer.abort_transaction)(remaining)
                self._polled()  # both serve delivery reports
                self.log.end_transaction("committed" if commit else "aborted")
                return
            except KafkaException as exc:
                error: KafkaError = exc.args[0]
                if error.retriable() and time.monotonic() < deadline:
                    continue
                if commit and error.txn_requires_abort():
                    commit = False
                    continue
                self.log.end_transaction("unknown")
                raise

    def _flush(self) -> None:
        """Serve delivery reports until none is outstanding or the flush budget is spent."""
        interrupted = self.stop_reason in (SIGTERM_STOP, PARENT_GONE)
        budget = STOP_FLUSH_S if interrupted else self.job.flush_timeout_s
        self._drain(budget)
        if len(self.producer):
            log.warning("%s: %d messages unreported after %.0fs: recorded as unknown", self.job.name, len(self.producer), budget)

    def _final_stats(self) -> None:
        """Wait (at most one interval) for a statistics sample taken after the load, for exact totals."""
        deadline = time.monotonic() + self.stats_interval_s + 0.5
        while self.stats_interval_s and (not self.stats_rows or self.stats_rows[-1]["ts"] < self.ended) and time.monotonic() < deadline:
            if not self._serve(0.05):
                return

    def _drain(self, budget_s: float) -> None:
        deadline = time.monotonic() + budget_s
        while len(self.producer) and time.monotonic() < deadline:
            if not self._serve(0.1):
                return
            self._tick()

    def _serve(self, timeout_s: float) -> bool:
        """Serve callbacks for up to `timeout_s`; False once the producer is dead: `poll()` raises a
        fatal error it hit (then recorded, as from the error callback), and can serve nothing more."""
        try:
            self.producer.poll(timeout_s)
        except KafkaException as exc:
            error: KafkaError = exc.args[0]
            if not (error.fatal() or error.code() == KafkaError._FATAL):
                raise
            self._fatal(error)
            return False
        finally:
            self._polled()
        return True

    def _on_error(self, error: KafkaError) -> None:
        """Client-level errors are logged by librdkafka; a fatal one ends the load (the evidence stays)."""
        if error.fatal():
            self._fatal(error)

    def _tick(self) -> None:
        """Fold delivery reports when enough are pending, publish progress, check stop conditions."""
        now = time.monotonic()
        if now < self._next_tick:
            return
        self._next_tick = now + TICK_S
        if self.reports.count >= FOLD_EVERY:
            self._fold()
        self._publish()
        if now >= self._deadline:
            self._stop(DEADLINE)
        elif os.getppid() != self.parent:
            self._stop(PARENT_GONE)

    def _publish(self) -> None:
        """Progress for the parent: sent, acked and failed, pending reports included."""
        pending, failures = self.reports.count, len(self.reports.failures)
        self.progress[self.job.producer] = (self.log.sent, self.log.acked + pending - failures, self.log.failed + failures)

    def _fold(self) -> None:
        """Move the delivery reports served so far into the send-log arrays."""
        self._polled()
        reports, n = self.reports, self.reports.count
        if reports.overflow:
            raise EvidenceError(f"{self.job.name}: {reports.overflow} delivery reports more than messages sent")
        served, stamps = zip(*self._marks, strict=True)
        ack_ts = np.asarray(stamps)[np.searchsorted(served, np.arange(n), side="right")]
        self.log.record_deliveries(reports.ids[:n], ack_ts, reports.partitions[:n], reports.offsets[:n], reports.failures)
        reports.clear()
        self._marks.clear()


class _WithoutPandas(importlib.abc.MetaPathFinder):
    """Producers never need pandas, but pyarrow imports it at its first conversion when it can:
    over a second of CPU per producer process, times the producers a scenario group starts at once."""

    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        if name.partition(".")[0] == "pandas":
            raise ImportError("pandas is not used by acklab producer processes")


def preload() -> None:
    """What every producer process needs before its job: no pandas, and pyarrow's first conversion
    done (it looks for pandas then). The fork server calls it once for all its children."""
    if not any(isinstance(finder, _WithoutPandas) for finder in sys.meta_path):
        sys.meta_path.insert(0, _WithoutPandas())
    pa.array([0])


def main() -> None:
    preload()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    job = WorkerJob.model_validate_json(sys.stdin.readline())
    worker = Worker(job)

    def stop(_signum: int, _frame: object) -> None:
        worker._stop(SIGTERM_STOP)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole group: the parent decides
    print("ready", flush=True)
    if sys.stdin.readline().strip() != "go":
        return  # the parent gave up before the start: nothing was sent
    result = worker.run()
    out = job.file(".json")
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(result))
    os.replace(tmp, out)

