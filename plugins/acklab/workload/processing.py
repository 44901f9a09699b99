"""The processor contract: what a pipeline's processor instance is given, what it writes to its
output topic and what it logs. One home for both client families' processors (confluent-kafka's
`acklab.workload.processor`, the Java driver's `AcklabProcessor`) and for the audit that reads
their evidence (`acklab.checker.pipeline_audit`).

A processor instance is one process and one consumer-group member. It consumes the input topic
with `isolation.level=read_committed` and auto-commit off, transforms each record and produces it
to the output topic, then makes its progress durable the way its *style* says:

============== ====================================================================================
eos            per polled batch: begin a transaction, produce, flush, send the batch's next offsets to the
               transaction with the consumer's group metadata (KIP-447), commit. An abortable error:
               abort, rewind the consumer to its committed offsets. A fatal one (fenced): close the
               producer, log it, build a new one with the same `transactional.id`.
eos-naive      a planted bug: the transaction holds the output only; the offsets are committed with
               the consumer's own commit after the transaction committed.
at-least-once  produce, flush, then commit the offsets (synchronously).
at-most-once   commit the offsets (synchronously), then produce and flush.
bare           a benchmark's baseline, never a scenario's style: produce each record, nothing else (no
               transaction, no offsets committed, no flush per batch, no point).
============== ====================================================================================

**The point.** Between its two steps (output and offsets; for at-most-once offsets and output) a
processor passes *the point* once per batch. When armed by SIGUSR1 it logs a `point` event at its
next pass (flushed) and stops itself (SIGSTOP): the nemesis then kills it (`processor-kill`) or
resumes it after the group moved on (`zombie`), so the outcome never depends on luck.

**Stopping.** SIGTERM, or its parent gone (`parent_pid`): the processor ends its batch (commits
it), closes its consumer (leaving the group) and producer, logs `stop` and exits 0. SIGINT is
ignored (a Ctrl-C reaches the whole process group: the parent decides).

**Output record.** Key: the input record's key. Value: the input value's `<id>:<seq>:` prefix, then
`<instance>:<incarnation>:<generation>:<input partition>:<input offset>:<txn>` (decimal ASCII;
`generation`: the group generation, or the member epoch under `group.protocol=consumer`, the
processor saw when it produced; `txn`: the batch number within the incarnation, from 0).

**Log.** JSON lines, one object per event, each with `t` (epoch seconds) and `ev`; flushed per
line. Events (fields beside `t` and `ev`):

- `start`: instance, incarnation, pid, client_family, client_version, transactional_id
- `assigned` / `revoked`: generation, member (the member id), partitions (list of int)
- `batch`: txn, generation, count, inputs ({partition: [first offset, last offset]}; JSON keys are
  strings) — logged once per polled batch, before its first step (for at-most-once: before the commit)
- `point`: txn (the process stops itself right after)
- `committed`: txn, offsets ({partition: next offset}) — the offsets (and, for eos styles, the
  transaction) are durable: the client's commit call returned without error
- `txn_committed`: txn — eos-naive only: its transaction (the output alone) committed, before the
  point and before the consumer commits the offsets
- `aborted`: txn, error — the transaction was aborted by the processor (abort call returned, or a
  new producer with the same transactional id fenced it after send_offsets or abort overran; after
  commit overran the outcome is unknown and only `error` is logged)
- `overran`: txn, call, timeout_s, waited_s — a transaction call of the client still blocked
  `waited_s` after it was given `timeout_s` (the client did not keep its timeout: 10 s past it, 1 s
  once the processor is stopping); the processor abandons it (`error` fatal, then `aborted` unless
  the call was commit_transaction). The call `commit` is confluent-kafka's consumer offset commit
  (the styles without offsets in the transaction), which takes no timeout: the processor bounds it
  as a transaction call, and the instance, which cannot use that consumer again, logs `error` fatal
  and `stop` reason `stuck` and exits 1 without leaving the group (the group moves on after the
  session timeout). The Java processor's `commitSync` and `committed` take the same budget as a
  timeout: past it, a non-fatal `error` and a rewind
- `error`: txn, error, fatal (bool) — a step failed; for eos, `aborted` or a new producer follows
- `rewound`: offsets ({partition: offset}) — the consumer was set back to them
- `stop`: reason
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from acklab.base.property_policy import CLIENT_FAMILIES, check_client_properties
from acklab.cluster.layout import GROUP_HEARTBEAT_INTERVAL_MS, GROUP_SESSION_TIMEOUT_MS

Style = Literal["eos", "at-least-once", "at-most-once", "eos-naive"]
STYLES: tuple[str, ...] = ("eos", "at-least-once", "at-most-once", "eos-naive")
BARE = "bare"  # the benchmark's bare consume-produce loop (`acklab.tools.bench_processor`)
TRANSACTIONAL_STYLES = frozenset({"eos", "eos-naive"})
GroupProtocol = Literal["classic", "consumer"]
ARM_SIGNAL = "SIGUSR1"  # arms the point


TUNABLE_PROPERTY = re.compile(
    r"^[a-z][a-z0-9.]*\.(ms|bytes|kbytes|records|messages|size|count|max)$|^(retries|acks|compression\.(type|codec)|enable\.idempotence)$"
)
"""The processor properties a user may set (`ProcessorConfig`): timings, sizes and counts, retries,
acks, compression and idempotence. Every other name is refused, so no property can load code (a class
name, a plugin library), read a file (a key store, a JAAS file), reach another host (bootstrap servers)
or undo what the style relies on (the group, the transactional id, the isolation level, auto-commit)."""


class ProcessorProperties(BaseModel):
    """Consumer and producer properties of a pipeline's processors, in their client's own names. Only
    names `TUNABLE_PROPERTY` matches are taken, and none either family refuses (`check_client_properties`)."""

    model_config = ConfigDict(extra="forbid")

    consumer: dict[str, str | int | float | bool] = Field(default_factory=dict, description="consumer properties")
    producer: dict[str, str | int | float | bool] = Field(default_factory=dict, description="producer properties")

    @field_validator("consumer", "producer")
    @classmethod
    def _tunable(cls, properties: dict[str, str | int | float | bool], info: ValidationInfo) -> dict[str, str | int | float | bool]:
        for name in properties:
            if not TUNABLE_PROPERTY.match(name):
                raise ValueError(
                    f"{info.field_name} property {name!r} is not one a processor may take: only timings, sizes and counts "
                    "(names ending .ms, .bytes, .kbytes, .records, .messages, .size, .count, .max), retries, acks, "
                    "compression.type/codec and enable.idempotence"
                )
        for family in CLIENT_FAMILIES:  # a processor runs either client: what one refuses is refused
            check_client_properties(family, properties)
        return properties


class ProcessorConfig(ProcessorProperties):
    """The user's properties of a pipeline's processors, applied over the processor's defaults:
    `consumer` to its consumer, `producer` to its producer, on every client family; `librdkafka` and
    `java` add (or replace) properties of that family only, for a name the other family does not
    have (librdkafka's `socket.timeout.ms`). Each family's client must accept every property it is
    given, names and values (`acklab.workload.client.ClientFamily.validate_processor`): a misspelled
    name is refused before anything starts. A conflict with the processor's own settings (its
    transactional id, its group protocol) shows when its processors start: the run then ends in an
    error, never a verdict."""

    librdkafka: ProcessorProperties = Field(default_factory=ProcessorProperties, description="the librdkafka processors' own, over the above")
    java: ProcessorProperties = Field(default_factory=ProcessorProperties, description="the Java processors' own, over the above")

    def as_text(self, side: Literal["consumer", "producer"], family: str) -> dict[str, str]:
        """One side's properties as `family`'s processors take them (text; booleans lower-case)."""
        own: ProcessorProperties = getattr(self, family)
        properties = {**getattr(self, side), **getattr(own, side)}
        return {name: str(value).lower() if isinstance(value, bool) else str(value) for name, value in properties.items()}


class ProcessorJob(BaseModel):
    """One processor instance's job, written as JSON and passed to its process by path."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    bootstrap_servers: str
    input_topic: str
    output_topic: str
    group_id: str
    instance: int = Field(ge=0)
    incarnation: int = Field(0, ge=0, description="0 at first start; +1 at each restart of the instance")
    style: Style | Literal["bare"]
    transactional_id: str | None = Field(None, description="eos styles: stable per instance across incarnations (a restart fences the last)")
    group_protocol: GroupProtocol = "classic"
    max_batch: int = Field(1000, ge=1, description="records per poll, so per transaction (at most)")
    poll_timeout_ms: int = Field(100, ge=1)
    session_timeout_ms: int = Field(GROUP_SESSION_TIMEOUT_MS, ge=1000, description="classic groups; KIP-848 groups have the brokers' (the same)")
    heartbeat_interval_ms: int = Field(
        GROUP_HEARTBEAT_INTERVAL_MS, ge=100, description="classic groups; KIP-848 groups have the brokers' (the same)"
    )
    max_poll_interval_ms: int = Field(10000, ge=1000)
    transaction_timeout_ms: int = Field(10000, ge=1000)
    consumer_config: dict[str, str] = Field(default_factory=dict, description="the user's consumer properties (the family's names), over the defaults")
    producer_config: dict[str, str] = Field(default_factory=dict, description="the user's producer properties, over the defaults")
    log: str = Field(description="path of the JSON-lines log")
    parent_pid: int | None = Field(None, description="the supervising process: the processor stops (`stop` reason `parent gone`) once its parent is another")

    @model_validator(mode="after")
    def _heartbeat_within_session(self) -> ProcessorJob:
        if self.heartbeat_interval_ms >= self.session_timeout_ms:
            raise ValueError(f"heartbeat_interval_ms {self.heartbeat_interval_ms} must be below session_timeout_ms {self.session_timeout_ms}")
        return self


def scenario_line(style: str) -> str:
    """What a pipeline scenario of `style` is named before its client tag and `__<fault>`
    (`pipeline-eos__zombie`), as a producer scenario is named by its profile."""
    return f"pipeline-{style}"


def transactional_id(group_id: str, instance: int) -> str:
    """The transactional.id of a pipeline's processor instance: stable across its incarnations, so
    a restart fences the one before."""
    return f"{group_id}-p{instance}"


def output_value(prefix: bytes, instance: int, incarnation: int, generation: int, partition: int, offset: int, txn: int) -> bytes:
    """An output record's value (`prefix`: the input value's `<id>:<seq>:`)."""
    return b"%s%d:%d:%d:%d:%d:%d" % (prefix, instance, incarnation, generation, partition, offset, txn)


OUTPUT_FIELDS = ("id", "seq", "instance", "incarnation", "generation", "in_partition", "in_offset", "txn")
OUTPUT_PATTERN = r"(?P<id>\d+):(?P<seq>\d+):(?P<instance>\d+):(?P<incarnation>\d+):(?P<generation>-?\d+):(?P<in_partition>\d+):(?P<in_offset>\d+):(?P<txn>\d+)"
"""An output value (the whole value), a named group per field of `OUTPUT_FIELDS`: Python's and RE2's syntax alike."""
_OUTPUT = re.compile(OUTPUT_PATTERN.encode())


def parse_output(value: bytes | None) -> tuple[int, ...] | None:
    """The fields of an output value (`OUTPUT_FIELDS`), or None if it is not one."""
    match = _OUTPUT.fullmatch(value or b"")
    return tuple(int(group) for group in match.groups()) if match else None


def input_prefix(value: bytes) -> bytes:
    """The `<id>:<seq>:` prefix of an input value (the load's records)."""
    second = value.index(b":", value.index(b":") + 1)
    return value[: second + 1]


def read_log(path: Path) -> Iterator[dict[str, Any]]:
    """The events of a processor log; a last line cut by a kill is skipped."""
    with path.open() as lines:
        for line in lines:
            try:
                yield json.loads(line)
            except json.JSONDecodeError:
                continue
