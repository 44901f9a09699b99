"""Drive a confluent-kafka producer with a profile and record every delivery report."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import KafkaError, Message, Producer
from pydantic import BaseModel, ConfigDict, Field

from acklab.profiles import ProducerProfile
from acklab.workload.sendlog import NO_ERROR, UNREPORTED, SendLog

log = logging.getLogger(__name__)
RDKAFKA_LOG = logging.getLogger("acklab.rdkafka")


class LoadSpec(BaseModel):
    """How much to send and how fast."""

    model_config = ConfigDict(extra="forbid")
    messages: int = Field(ge=1, le=100_000_000)
    rate: float | None = Field(None, gt=0, description="messages per second; None = as fast as possible")
    message_bytes: int = Field(100, ge=16, le=1_000_000)
    keys: int = Field(16, ge=1)


@dataclass(frozen=True)
class LoadResult:
    """Counts and times of a finished load; the details are in the send log."""

    started: float
    ended: float
    sent: int
    acked: int
    failed: int
    unknown: int
    errors: dict[str, int]


Progress = Callable[[int, int, int], None]


def run_load(
    bootstrap_servers: str,
    topic: str,
    profile: ProducerProfile,
    spec: LoadSpec,
    send_log_path: Path,
    progress: Progress | None = None,
) -> LoadResult:
    """Send `spec.messages` messages to `topic`, then write the send log (even on error)."""
    record = SendLog(spec.messages, spec.keys)

    def on_delivery(err: KafkaError | None, msg: Message) -> None:
        value = msg.value()
        message_id = int(value[: value.index(b":")])
        record.ack_ts[message_id] = time.time()
        if err is None:
            record.error[message_id] = NO_ERROR
            record.partition[message_id] = msg.partition()
            record.offset[message_id] = msg.offset()
            record.acked += 1
        else:
            record.error[message_id] = err.code()
            record.error_names.setdefault(err.code(), err.name())
            record.failed += 1

    producer = Producer(
        {"bootstrap.servers": bootstrap_servers, "on_delivery": on_delivery, **profile.producer_config()},
        logger=RDKAFKA_LOG,
    )
    started = time.time()
    try:
        _produce_all(producer, topic, spec, record, progress)
        flush_s = profile.delivery_timeout_ms / 1000 + 10
        remaining = producer.flush(flush_s)
        if remaining:
            log.warning("%d messages still unreported after %.0fs flush: recorded as unknown", remaining, flush_s)
    finally:
        ended = time.time()
        record.write(send_log_path)
    errors = record.error[: record.sent]
    counts = {record.error_names[code]: int((errors == code).sum()) for code in record.error_names}
    return LoadResult(
        started=started,
        ended=ended,
        sent=record.sent,
        acked=int((errors == NO_ERROR).sum()),
        failed=int(((errors != NO_ERROR) & (errors != UNREPORTED)).sum()),
        unknown=int((errors == UNREPORTED).sum()),
        errors=counts,
    )


def _produce_all(
    producer: Producer,
    topic: str,
    spec: LoadSpec,
    record: SendLog,
    progress: Progress | None,
) -> None:
    padding = b"x" * spec.message_bytes
    keys = [f"k{k}".encode() for k in range(spec.keys)]
    started = time.monotonic()
    next_report = started + 1.0
    for message_id in range(spec.messages):
        prefix = b"%d:%d:" % (message_id, message_id // spec.keys)
        value = prefix + padding[len(prefix):]
        key = keys[message_id % spec.keys]
        while True:
            try:
                producer.produce(topic, value, key)
                break
            except BufferError:
                producer.poll(0.05)
        record.send_ts[message_id] = time.time()
        record.sent = message_id + 1
        if message_id % 1000 == 999:
            producer.poll(0)
            now = time.monotonic()
            if spec.rate is not None:
                resume_at = started + (message_id + 1) / spec.rate
                while now < resume_at:  # poll() returns early on events, so loop until due
                    producer.poll(min(0.01, resume_at - now))
                    now = time.monotonic()
            if progress is not None and now >= next_report:
                next_report = now + 1.0
                progress(record.sent, record.acked, record.failed)
