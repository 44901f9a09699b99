"""confluent-kafka's processor: one pipeline processor instance (`python -m acklab.workload.processor JOB`),
as `acklab.workload.processing` states the contract (styles, the point, the output value, the log).

The loop, per `consume()` batch of at most `max_batch` records (eos): `begin_transaction`, produce
each transformed record, flush, pass the point, `send_offsets_to_transaction(next offsets,
consumer_group_metadata())`, `commit_transaction`. A rebalance happens inside `consume()` only,
so never while a transaction is open. An abortable error (`txn_requires_abort`): abort, rewind to
the committed offsets. A fatal one (fenced): the producer is closed and a new one with the same
`transactional.id` fences any earlier epoch, then rewind. A retriable one: the call is retried
(librdkafka documents retrying commit/abort/send_offsets on `retriable()`). Every step has a budget
(`STEP_S`): a flush that outlasts it aborts the transaction, a call that keeps failing is recovered
from its last error, so no step waits without end. A transaction call runs in a thread of its own,
waited for its timeout and `OVERRUN_GRACE_S` more: librdkafka does not keep the timeout of
`send_offsets_to_transaction` when the group coordinator goes away (librdkafka #5456, #5511: seen
blocked for minutes after a group-coordinator-kill). A call that overruns is logged (`overran`) and
abandoned as an application must: a new producer with the same `transactional.id` fences it (its
open transaction is aborted), then rewind. The consumer's own offset commit (the other styles) takes
no timeout in confluent-kafka: it is `_bounded` by `STEP_S` too, and an instance whose commit overran
cannot go on with that consumer: it logs the error and exits 1 without closing it (`_stuck`; its group
moves on after the session timeout). SIGQUIT dumps every thread's stack to stderr (the
processor group sends it before killing an instance that outlasted its stop).

The group generation is read from the consumer's group metadata (librdkafka's serialized
`rd_kafka_consumer_group_metadata_t`: magic `CGMDv2:`, then the generation id as a native int32).
"""

from __future__ import annotations

import faulthandler
import json
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition, libversion, version

from acklab.workload.processing import TRANSACTIONAL_STYLES, ProcessorJob, input_prefix, output_value

CGMD_MAGIC = b"CGMDv2:"
STEP_S = 30.0
"""A transaction step's budget (seconds): the output's flush, and each of send_offsets, commit and abort with
their retries of a retriable error (0.5 s apart). A step that outlasts it fails the transaction as the
client's own timeout would (eos: a flush is aborted, a call's last error recovered), so a processor
never waits on a step without end."""
COORDINATOR_MOVED = frozenset({
    KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_NOT_AVAILABLE, KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
    KafkaError._WAIT_COORD, KafkaError.REQUEST_TIMED_OUT, KafkaError._TIMED_OUT, KafkaError._TRANSPORT,
})
"""The errors of a group call that a later attempt may not meet: the coordinator moved, is not known
yet, is loading, or did not answer in time."""
STUCK = "stuck"
"""The `stop` reason of an instance whose consumer commit overran (`Processor._stuck`)."""
OVERRUN_GRACE_S = 10.0
"""How long past its own timeout a transaction call may block before the processor abandons it."""
STOP_GRACE_S = 1.0
"""Once the processor is stopping (SIGTERM), how long past its own timeout a call may block before it
is abandoned: `OVERRUN_GRACE_S` serves a processor that goes on, a stopping one only delays its stop."""


class Overran(Exception):
    """A client call (`call`) blocked past its timeout and `OVERRUN_GRACE_S` (the client did not keep its timeout)."""

    def __init__(self, call: str, message: str) -> None:
        super().__init__(message)
        self.call = call


def generation(metadata: object) -> int:
    """The generation id (member epoch under KIP-848) in confluent-kafka's group metadata; -1 if unknown."""
    raw = bytes(metadata) if isinstance(metadata, (bytes, bytearray)) else b""
    if raw.startswith(CGMD_MAGIC) and len(raw) >= len(CGMD_MAGIC) + 4:
        return int.from_bytes(raw[len(CGMD_MAGIC) : len(CGMD_MAGIC) + 4], sys.byteorder, signed=True)
    return -1


class Log:
    """The JSON-lines log: one event per line, flushed."""

    def __init__(self, path: Path) -> None:
        self.file: TextIO = path.open("a", buffering=1)

    def __call__(self, event: str, **fields: Any) -> None:
        self.file.write(json.dumps({"t": time.time(), "ev": event, **fields}, separators=(",", ":")) + "\n")
        self.file.flush()


class Processor:
    """One instance's loop (`run`) and its state: the consumer, the producer, the point's arming."""

    def __init__(self, job: ProcessorJob) -> None:
        self.job = job
        self.log = Log(Path(job.log))
        self.armed = False
        self.stopping: str | None = None
        self.txn = 0
        self.generation = -1
        self.abandoned: list[Producer | Consumer] = []  # clients left blocked in an overrun call: kept alive while they block
        self.install_signals()  # before the clients: a SIGTERM during init_transactions stops cleanly
        self.consumer = Consumer(self._consumer_config())
        self.producer = self._producer()

    # ---- configuration -------------------------------------------------------------------------

    def _consumer_config(self) -> dict[str, object]:
        job = self.job
        config: dict[str, object] = {
            "bootstrap.servers": job.bootstrap_servers,
            "group.id": job.group_id,
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "earliest",
        }
        if job.group_protocol == "consumer":
            config["group.protocol"] = "consumer"
        else:
            config["session.timeout.ms"] = job.session_timeout_ms
            config["max.poll.interval.ms"] = job.max_poll_interval_ms
            config["heartbeat.interval.ms"] = job.heartbeat_interval_ms
        config.update(job.consumer_config)
        return config

    def _producer(self) -> Producer:
        job = self.job
        config: dict[str, object] = {
            "bootstrap.servers": job.bootstrap_servers,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 5,
        }
        if job.style in TRANSACTIONAL_STYLES:
            config["transactional.id"] = job.transactional_id
            config["transaction.timeout.ms"] = job.transaction_timeout_ms
        config.update(job.producer_config)
        producer = Producer(config)
        if job.style in TRANSACTIONAL_STYLES:
            self._bounded("init_transactions", producer.init_transactions, 60.0)
        return producer

    # ---- signals ------------------------------------------------------------------------------

    def install_signals(self) -> None:
        signal.signal(signal.SIGUSR1, lambda *_: setattr(self, "armed", True))
        signal.signal(signal.SIGTERM, lambda *_: setattr(self, "stopping", self.stopping or "SIGTERM"))  # a `stuck` instance stays stuck
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        faulthandler.register(signal.SIGQUIT, all_threads=True)  # a stack dump to stderr, even while a client call blocks

    def point(self) -> None:
        """The point between a batch's two steps: if armed, log it and stop this process."""
        if self.armed:
            self.armed = False
            self.log("point", txn=self.txn)
            os.kill(os.getpid(), signal.SIGSTOP)

    # ---- the loop -----------------------------------------------------------------------------

    def run(self) -> int:
        job = self.job
        self.log(
            "start", instance=job.instance, incarnation=job.incarnation, pid=os.getpid(), client_family="librdkafka",
            client_version=f"{version()} (librdkafka {libversion()[0]})", transactional_id=job.transactional_id,
        )
        self.consumer.subscribe([job.input_topic], on_assign=self._assigned, on_revoke=self._revoked, on_lost=self._revoked)
        step = {
            "eos": self._eos, "eos-naive": self._eos_naive, "at-least-once": self._at_least_once, "at-most-once": self._at_most_once,
            "bare": self._produce,
        }[job.style]
        try:
            while self.stopping is None:
                if job.parent_pid is not None and os.getppid() != job.parent_pid:
                    self.stopping = "parent gone"
                    break
                records = [m for m in self.consumer.consume(job.max_batch, job.poll_timeout_ms / 1000) if not m.error()]
                if records:
                    step(records)
                    self.txn += 1
        finally:
            self._close()
        return 1 if self.stopping == STUCK else 0

    def _assigned(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.log("assigned", generation=self._generation(), member=consumer.memberid(), partitions=sorted(p.partition for p in partitions))

    def _revoked(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.log("revoked", generation=self._generation(), member=consumer.memberid(), partitions=sorted(p.partition for p in partitions))

    def _generation(self) -> int:
        try:
            return generation(self.consumer.consumer_group_metadata())
        except KafkaException:
            return -1

    def _batch(self, records: list[Any]) -> dict[str, int]:
        """Log the polled batch (`batch`, with the generation it is produced under); the next offset per partition."""
        self.generation = self._generation()
        inputs: dict[str, list[int]] = {}
        for record in records:
            span = inputs.setdefault(str(record.partition()), [record.offset(), record.offset()])
            span[1] = record.offset()
        self.log("batch", txn=self.txn, generation=self.generation, count=len(records), inputs=inputs)
        return {p: span[1] + 1 for p, span in inputs.items()}

    def _produce(self, records: list[Any]) -> None:
        """Produce the batch's transformed records."""
        job, gen, produce = self.job, self.generation, self.producer.produce
        for record in records:
            value = output_value(input_prefix(record.value()), job.instance, job.incarnation, gen, record.partition(), record.offset(), self.txn)
            while True:
                try:
                    produce(job.output_topic, value, record.key())
                    break
                except BufferError:
                    self.producer.poll(0.05)

    def _offsets(self, next_offsets: dict[str, int]) -> list[TopicPartition]:
        return [TopicPartition(self.job.input_topic, int(p), o) for p, o in sorted(next_offsets.items())]

    def _eos(self, records: list[Any]) -> None:
        try:
            offsets = self._batch(records)
            self.producer.begin_transaction()
            self._produce(records)
            self._flush(STEP_S)  # the output is in the log (uncommitted) before the point
            self.point()
            producer, metadata = self.producer, self.consumer.consumer_group_metadata()
            self._retrying("send_offsets_to_transaction", lambda t: producer.send_offsets_to_transaction(self._offsets(offsets), metadata, t))
            self._retrying("commit_transaction", producer.commit_transaction)
            self.log("committed", txn=self.txn, offsets=offsets)
        except KafkaException as exc:
            self._recover(exc)
        except Overran as exc:
            self._abandon(exc)

    def _eos_naive(self, records: list[Any]) -> None:
        try:
            offsets = self._batch(records)
            self.producer.begin_transaction()
            self._produce(records)
            self._retrying("commit_transaction", self.producer.commit_transaction)
            self.log("txn_committed", txn=self.txn)
            self.point()
            self._commit(offsets)
            self.log("committed", txn=self.txn, offsets=offsets)
        except KafkaException as exc:
            self._recover(exc)
        except Overran as exc:
            self._abandon(exc)

    def _at_least_once(self, records: list[Any]) -> None:
        offsets = self._batch(records)
        self._produce(records)
        self._flush()
        self.point()
        try:
            self._commit(offsets)
            self.log("committed", txn=self.txn, offsets=offsets)
        except KafkaException as exc:
            self.log("error", txn=self.txn, error=_name(exc), fatal=False)
            self._rewind()
        except Overran as exc:
            self._stuck(exc)

    def _at_most_once(self, records: list[Any]) -> None:
        next_offsets = self._batch(records)
        try:
            self._commit(next_offsets)
            self.log("committed", txn=self.txn, offsets=next_offsets)
        except KafkaException as exc:
            self.log("error", txn=self.txn, error=_name(exc), fatal=False)
            self._rewind()
            return
        except Overran as exc:
            self._stuck(exc)
            return
        self.point()
        self._produce(records)
        self._flush()

    def _flush(self, budget_s: float | None = None) -> None:
        """Wait until every produced record is delivered; with `budget_s`, at most that long, then
        fail the transaction (an abortable `_TIMED_OUT`: the records left are aborted with it)."""
        deadline = None if budget_s is None else time.monotonic() + budget_s
        while (left := self.producer.flush(30 if deadline is None else max(0.0, min(30.0, deadline - time.monotonic())))) > 0:
            if deadline is not None and time.monotonic() >= deadline:
                error = KafkaError(KafkaError._TIMED_OUT, f"flush: {left} record(s) undelivered after {budget_s:g} s", txn_requires_abort=True)
                raise KafkaException(error)

    def _retrying(self, name: str, call: Callable[[float], object]) -> None:
        """`call(timeout_s)` until it succeeds, retrying a retriable error 0.5 s later, within `STEP_S`
        in all; the last error is raised when the budget is spent (and any other at once). Each call
        is `_bounded`: Overran if the client blocks past the timeout it was given."""
        deadline = time.monotonic() + STEP_S
        while True:
            try:
                self._bounded(name, call, max(1.0, deadline - time.monotonic()))
                return
            except KafkaException as exc:
                error: KafkaError = exc.args[0]
                if not error.retriable() or error.txn_requires_abort() or error.fatal() or time.monotonic() + 0.5 >= deadline:
                    raise
                time.sleep(0.5)

    def _recover(self, exc: KafkaException) -> None:
        """After a failed transaction step: abort (abortable) or a new producer (fatal), then rewind."""
        error: KafkaError = exc.args[0]
        fatal = error.fatal() or not error.txn_requires_abort()
        self.log("error", txn=self.txn, error=_name(exc), fatal=fatal)
        if not fatal:
            try:
                self._retrying("abort_transaction", self.producer.abort_transaction)
                self.log("aborted", txn=self.txn, error=_name(exc))
            except KafkaException as again:
                self.log("error", txn=self.txn, error=_name(again), fatal=True)
                fatal = True
            except Overran as again:
                self._abandon(again)
                return
        if fatal:
            # A fatal producer is unusable (even flush raises): a new one with the same
            # transactional.id fences its epoch and aborts its open transaction.
            self.producer = self._producer()
        self._rewind()

    def _bounded(self, name: str, call: Callable[[float], object], timeout_s: float) -> None:
        """`call(timeout_s)` in a thread of its own, waited for `timeout_s + OVERRUN_GRACE_S`
        (`timeout_s + STOP_GRACE_S` once the processor is stopping): its error is raised here; if it
        still blocks then, `overran` is logged and Overran raised (the thread is left blocked in the
        client, which keeps the producer alive: `abandoned`)."""
        outcome: list[BaseException | None] = []

        def target() -> None:
            try:
                call(timeout_s)
            except BaseException as exc:  # handed to the caller's thread
                outcome.append(exc)
            else:
                outcome.append(None)

        started = time.monotonic()
        thread = threading.Thread(target=target, name=name, daemon=True)
        thread.start()
        while thread.is_alive():
            grace = OVERRUN_GRACE_S if self.stopping is None else STOP_GRACE_S  # SIGTERM may come while it waits
            left = started + timeout_s + grace - time.monotonic()
            if left <= 0:
                break
            thread.join(min(0.1, left))
        if thread.is_alive():
            waited = time.monotonic() - started
            self.log("overran", txn=self.txn, call=name, timeout_s=round(timeout_s, 3), waited_s=round(waited, 3))
            raise Overran(name, f"{name} still blocked {waited:.1f} s after it was given {timeout_s:.1f} s")
        if outcome and outcome[0] is not None:
            raise outcome[0]

    def _commit(self, offsets: dict[str, int]) -> None:
        """The consumer's synchronous commit of `offsets` (next offset per input partition), `_bounded`
        by `STEP_S` (confluent-kafka's commit takes no timeout: it is given none)."""
        self._bounded("commit", lambda _timeout_s: self.consumer.commit(offsets=self._offsets(offsets), asynchronous=False), STEP_S)

    def _stuck(self, exc: Overran) -> None:
        """The consumer's commit overran: this instance cannot use its consumer again. Logged as a
        fatal error; the loop stops (`stop` reason `stuck`, exit 1) without closing the consumer."""
        self.log("error", txn=self.txn, error=f"Overran: {exc}", fatal=True)
        self.abandoned.append(self.consumer)
        self.stopping = STUCK

    def _abandon(self, exc: Overran) -> None:
        """After a transaction call overran: a new producer with the same `transactional.id` fences the
        blocked one, then rewind. Its `init_transactions` returns once the open transaction has ended:
        aborted, unless the call that overran was `commit_transaction`, whose EndTxn the coordinator may
        have taken (then the outcome is unknown: only the fatal `error` is logged). A consumer commit
        that overran (eos-naive) is `_stuck` instead."""
        if exc.call == "commit":
            self._stuck(exc)
            return
        self.log("error", txn=self.txn, error=f"Overran: {exc}", fatal=True)
        self.abandoned.append(self.producer)
        self.producer = self._producer()
        if exc.call != "commit_transaction":
            self.log("aborted", txn=self.txn, error=f"Overran: {exc}; fenced by a new producer")
        self._rewind()

    def _rewind(self) -> None:
        """Set the consumer back to its committed offsets (its assignment's), read within `STEP_S`:
        an error of a group coordinator that moved or is loading (`COORDINATOR_MOVED`, which
        confluent-kafka's `committed` raises at once rather than retrying) is retried 0.5 s later."""
        assignment = self.consumer.assignment()
        if not assignment:
            return
        deadline = time.monotonic() + STEP_S
        while True:
            try:
                committed = self.consumer.committed(assignment, max(1.0, deadline - time.monotonic()))
                break
            except KafkaException as exc:
                code = exc.args[0].code() if isinstance(exc.args[0], KafkaError) else None
                if code not in COORDINATOR_MOVED or time.monotonic() + 0.5 >= deadline:
                    raise
                if self.stopping is not None:
                    return  # nothing more is consumed: no position to set
                time.sleep(0.5)
        offsets: dict[str, int] = {}
        for tp in committed:
            if tp.offset >= 0:
                self.consumer.seek(tp)
                offsets[str(tp.partition)] = tp.offset
            else:  # nothing committed yet: from the start
                self.consumer.seek(TopicPartition(tp.topic, tp.partition, 0))
                offsets[str(tp.partition)] = 0
        self.log("rewound", offsets=offsets)

    def _close(self) -> None:
        try:
            if self.consumer not in self.abandoned:  # a consumer blocked in a call would block its close too
                self.consumer.close()
        finally:
            self.producer.flush(10)
            self.log("stop", reason=self.stopping or "error")


def _name(exc: KafkaException) -> str:
    error = exc.args[0]
    return f"{error.name()}: {error.str()}" if isinstance(error, KafkaError) else str(exc)


def main(argv: list[str]) -> int:
    job = ProcessorJob.model_validate_json(Path(argv[0]).read_text())
    processor = Processor(job)
    try:
        code = processor.run()
    except BaseException:
        if not processor.abandoned:
            raise
        traceback.print_exc()
        code = 1
    if processor.abandoned:  # a client still blocked in librdkafka: destroying it at exit could block too
        sys.stderr.flush()
        os._exit(code)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
