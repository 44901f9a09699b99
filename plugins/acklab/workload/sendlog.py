"""The send log: every planned message's fate, columnar, written once and renamed into place (docs/evidence.md).

Each producer process keeps numpy arrays for its whole planned id range and fills them from
delivery reports in bulk; when its load is over it writes its own part in row groups of
BATCH_ROWS, one row per planned message, so a message the producer never got to send is a row
(`unsent`) rather than a gap. `combine` joins the parts into the scenario's send log with one
atomic rename.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from confluent_kafka import KafkaError

from acklab.store.contract import STATES, UNSENT
from acklab.store.schemas import SEND_LOG
from acklab.workload.spec import key

NO_ERROR = 0
UNREPORTED = np.iinfo(np.int32).min  # outside librdkafka's codes (local -200..-100, protocol >= -1)
BATCH_ROWS = 1 << 18
# Dictionary-encode only the string columns: trying it on ids and times costs 3x the write time.
WRITE_OPTIONS = {"use_dictionary": ["key", "producer", "error", "state", "topic"]}
TXN_OUTCOMES = ("committed", "aborted", "unknown")
LOG_STATES = (*STATES, UNSENT)  # the `state` column's values, by code
# A producer's per-message reports, as another process hands them over (`read_reports`): each column's
# name (a ProducerLog array) and numpy dtype, in file order. The Java driver writes this layout
# (workload/java/SendLog.java, its Column enum); tests/unit/test_workload_evidence.py checks the two agree.
REPORT_COLUMNS = (("send_ts", "<f8"), ("ack_ts", "<f8"), ("partition", "<i4"), ("offset", "<i8"), ("error", "<i4"), ("refused", "u1"))

# Kafka protocol errors whose exception is a RetriableException (org.apache.kafka.common.protocol.Errors
# of kafka-clients 4.3.1, share-session errors omitted) and librdkafka's transient local errors (Java
# maps a delivery timeout to the retriable TimeoutException). A retriable failure may still have been
# written: the checker keeps it as indeterminate when its record is found.
RETRIABLE_CODES = np.array(
    [2, 3, 5, 6, 7, 9, 13, 14, 15, 16, 19, 20, 41, 51, 56, 70, 71, 72, 74, 75, 78, 80, 83, 84, 88, 89, 100, 103, 106,
     KafkaError._MSG_TIMED_OUT, KafkaError._TIMED_OUT, KafkaError._TIMED_OUT_QUEUE, KafkaError._TRANSPORT,
     KafkaError._ALL_BROKERS_DOWN],
    dtype=np.int32,
)


class EvidenceError(RuntimeError):
    """The delivery reports contradict themselves (e.g. two reports for one message)."""


class ProducerLog:
    """The fate of one producer's planned messages, ids `first_id .. first_id + capacity - 1`.

    `sent` counts the messages handed to `produce()` so far (in id order); `refuse` records one that
    `produce()` rejected, `record_deliveries` the delivery reports, `fail_fatally` the producer's
    fatal error. `write(planned)` writes one row per planned message."""

    def __init__(
        self,
        path: Path,
        producer: int,
        first_id: int,
        capacity: int,
        keys: int,
        key_partitions: Sequence[int],
        transactional: bool = False,
        metadata: dict[str, str] | None = None,
        retriable_codes: np.ndarray = RETRIABLE_CODES,
        key_topics: Sequence[str] | None = None,
    ) -> None:
        """`metadata`: key-value pairs for the file (e.g. the client versions), as `acklab.<key>`;
        `retriable_codes`: the error codes whose errors are retriable (default: librdkafka's);
        `key_topics`: the topic each key is sent to (`WorkerJob.key_topics`)."""
        self.path, self.producer, self.first_id, self.keys = path, producer, first_id, keys
        self.schema = SEND_LOG.with_metadata({f"acklab.{k}": v for k, v in (metadata or {}).items()})
        self.capacity = capacity
        self.key_partitions = np.asarray(key_partitions, dtype=np.int32)
        self.key_topics = list(key_topics) if key_topics is not None else None
        self.transactional = transactional
        self.send_ts = np.full(capacity, np.nan)
        self.ack_ts = np.full(capacity, np.nan)
        self.partition = np.full(capacity, -1, dtype=np.int32)
        self.offset = np.full(capacity, -1, dtype=np.int64)
        self.error = np.full(capacity, UNREPORTED, dtype=np.int32)
        self.refused = np.zeros(capacity, dtype=bool)
        self.retriable_codes = retriable_codes
        self._txn_starts: list[int] = []  # local index of each transaction's first message
        self._txn_outcomes: list[int] = []  # TXN_OUTCOMES index, one per finished transaction
        self.error_names: dict[int, str] = {}
        self.fatal_code: int | None = None  # the fatal error's code, once the producer had one
        self.fatal_ts = np.inf  # when it happened
        self.sent = self.acked = self.failed = 0

    def begin_transaction(self) -> None:
        """The next message sent opens a transaction."""
        self._txn_starts.append(self.sent)

    def end_transaction(self, outcome: str) -> None:
        """The open transaction was committed or aborted, or its outcome is unknown (TXN_OUTCOMES)."""
        self._txn_outcomes.append(TXN_OUTCOMES.index(outcome))

    def refuse(self, index: int, error: KafkaError, ts: float) -> None:
        """`produce()` rejected local message `index` (handed to it, so counted as sent): it failed
        without reaching the wire."""
        self.error[index] = error.code()
        self.error_names.setdefault(error.code(), error.name())
        self.refused[index] = True
        self.send_ts[index] = ts
        self.failed += 1

    def fail_fatally(self, error: KafkaError, ts: float) -> None:
        """The producer raised a fatal error at `ts`: every message not acknowledged by then, or never
        sent, failed by it (the instance can deliver nothing more)."""
        if self.fatal_code is None:
            self.fatal_code, self.fatal_ts = error.code(), ts
            self.error_names.setdefault(error.code(), error.name())

    def record_deliveries(
        self, ids: np.ndarray, ack_ts: np.ndarray, partitions: np.ndarray, offsets: np.ndarray, errors: list[tuple[int, KafkaError]]
    ) -> None:
        """Apply a batch of delivery reports: message ids, times, partitions and offsets (-1 where
        unknown), and (position in the batch, error) of the failed ones."""
        if not len(ids):
            return
        local = ids - self.first_id
        if local.min() < 0 or local.max() >= self.sent:
            raise EvidenceError(f"p{self.producer}: delivery report for an id this producer never sent")
        if (self.error[local] != UNREPORTED).any() or np.bincount(local - local.min()).max() > 1:
            raise EvidenceError(f"p{self.producer}: more than one delivery report (or a report for a refused message)")
        codes = np.full(len(local), NO_ERROR, dtype=np.int32)
        for position, error in errors:
            codes[position] = error.code()
            self.error_names.setdefault(error.code(), error.name())
        self.error[local] = codes
        self.ack_ts[local] = ack_ts
        self.partition[local] = partitions
        self.offset[local] = offsets
        self.failed += len(errors)
        self.acked += len(local) - len(errors)

    def adopt(
        self,
        sent: int,
        reports: dict[str, np.ndarray],
        error_names: dict[int, str],
        transactions: tuple[list[int], list[int]] = ([], []),
        fatal: tuple[int, float] | None = None,
    ) -> None:
        """Take a whole load's record from another process (the Java driver): `sent` messages, the
        per-message `reports` (send_ts, ack_ts, partition, offset, error codes with NO_ERROR and
        UNREPORTED as here, refused), the names of its error codes, each transaction's first local
        index and outcome (its TXN_OUTCOMES index), and the fatal error's code and time."""
        if self.sent or not 0 <= sent <= self.capacity:
            raise EvidenceError(f"p{self.producer}: cannot adopt {sent} sent messages into this log")
        for name, _ in REPORT_COLUMNS:
            column = getattr(self, name)
            column[:] = reports[name].astype(column.dtype)
        if (self.error[sent:] != UNREPORTED).any():
            raise EvidenceError(f"p{self.producer}: delivery reports for messages never sent")
        self.sent = sent
        self.error_names = dict(error_names)
        self._txn_starts, self._txn_outcomes = list(transactions[0]), list(transactions[1])
        if fatal is not None:
            self.fatal_code, self.fatal_ts = fatal
        self.acked = int((self.error[:sent] == NO_ERROR).sum())
        self.failed = int(((self.error[:sent] != NO_ERROR) & (self.error[:sent] != UNREPORTED)).sum())

    def write(self, planned: int) -> None:
        """Write the first `planned` messages (every sent one at least) in row groups, then rename into place."""
        if not self.sent <= planned <= self.capacity:
            raise EvidenceError(f"p{self.producer}: {planned} planned messages, but {self.sent} sent of {self.capacity}")
        tmp = self.path.with_name(self.path.name + ".tmp")
        with pq.ParquetWriter(tmp, self.schema, **WRITE_OPTIONS) as writer:
            for lo in range(0, planned, BATCH_ROWS):
                writer.write_table(self._table(lo, min(planned, lo + BATCH_ROWS)), row_group_size=BATCH_ROWS)
        os.replace(tmp, self.path)

    def summary(self, planned: int) -> dict[str, object]:
        """Counts of the final states of the first `planned` messages, as `write(planned)` writes them."""
        states, aborted, fatal, error = self._states(0, planned)[:4]
        failed = states == LOG_STATES.index("failed")
        return {
            "planned": planned,
            **{name: int((states == code).sum()) for code, name in enumerate(LOG_STATES)},
            "sent": int((states != LOG_STATES.index(UNSENT)).sum()),
            "aborted": int(aborted.sum()),
            "refused": int(self.refused[:planned].sum()),
            "fatal": int(fatal.sum()),
            "errors": {self.error_names[int(c)]: int(n) for c, n in zip(*np.unique(error[failed], return_counts=True), strict=True)},
        }

    def _states(self, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
        """State codes (LOG_STATES), aborted and fatal masks, error codes (a fatal producer's error for
        the messages it failed) and transaction indices (None unless transactional) of rows lo..hi-1."""
        index = np.arange(lo, hi)
        error = self.error[lo:hi].copy()
        sent = index < self.sent
        acked = error == NO_ERROR
        failed = (error != NO_ERROR) & (error != UNREPORTED)
        aborted = np.zeros(hi - lo, dtype=bool)
        txn = None
        if self.transactional:
            txn = np.searchsorted(self._txn_starts, index, side="right").astype(np.int64) - 1
            outcome = np.array(self._txn_outcomes + [TXN_OUTCOMES.index("unknown")], dtype=np.int8)[np.maximum(txn, 0)]
            acked &= outcome != TXN_OUTCOMES.index("unknown")  # acked in a transaction of unknown outcome: unknown
            aborted = sent & (outcome == TXN_OUTCOMES.index("aborted"))
            txn = np.where(sent, txn, -1)
        fatal = np.zeros(hi - lo, dtype=bool)
        if self.fatal_code is not None:
            # not acked before the fatal error: reported failed after it, never reported, or never sent
            failed_at = np.where(self.refused[lo:hi], self.send_ts[lo:hi], self.ack_ts[lo:hi])
            late = ~sent | (error == UNREPORTED) | (failed & ~(failed_at < self.fatal_ts))
            fatal = ~acked & late
            error[fatal & (error == UNREPORTED)] = self.fatal_code
            failed |= fatal
        state = np.where(acked, 0, np.where(failed, 1, np.where(sent, 2, 3))).astype(np.int32)
        return state, aborted, fatal, error, txn

    def _table(self, lo: int, hi: int) -> pa.Table:
        local = np.arange(lo, hi, dtype=np.int64)
        key_index = (local % self.keys).astype(np.int32)
        state, aborted, fatal, error, txn = self._states(lo, hi)
        failed = state == LOG_STATES.index("failed")
        codes = sorted(self.error_names) or [NO_ERROR]
        error_index = np.minimum(np.searchsorted(codes, error), len(codes) - 1).astype(np.int32)
        sent = local < self.sent
        columns = {
            "id": pa.array(local + self.first_id),
            "key": _strings(key_index, [key(self.producer, k) for k in range(self.keys)]),
            "seq": pa.array(local // self.keys),
            "producer": _strings(np.zeros(hi - lo, dtype=np.int32), [f"p{self.producer}"]),
            "expected_partition": pa.array(self.key_partitions[key_index]),
            "txn": pa.array(txn, mask=txn < 0) if txn is not None else pa.nulls(hi - lo, pa.int64()),
            "aborted": pa.array(aborted),
            "retriable": pa.array(np.isin(error, self.retriable_codes), mask=~failed),
            "send_ts": pa.array(self.send_ts[lo:hi], mask=~sent),
            "ack_ts": pa.array(self.ack_ts[lo:hi], mask=np.isnan(self.ack_ts[lo:hi])),
            "partition": pa.array(self.partition[lo:hi], mask=self.partition[lo:hi] < 0),
            "offset": pa.array(self.offset[lo:hi], mask=(error != NO_ERROR) | (self.offset[lo:hi] < 0)),
            "error": _strings(error_index, [self.error_names.get(c, "") for c in codes], mask=~failed),
            "state": _strings(state, list(LOG_STATES)),
            "refused": pa.array(self.refused[lo:hi]),
            "fatal": pa.array(fatal),
            "topic": _strings(key_index, self.key_topics) if self.key_topics is not None else pa.nulls(hi - lo, pa.string()),
        }
        return pa.table(columns, schema=self.schema)


def _strings(indices: np.ndarray, values: list[str], mask: np.ndarray | None = None) -> pa.Array:
    """`values[indices]` as a plain string column (null where `mask`)."""
    return pa.DictionaryArray.from_arrays(pa.array(indices, mask=mask), pa.array(values, pa.string())).cast(pa.string())


def read_reports(path: Path, count: int) -> dict[str, np.ndarray]:
    """The per-message reports of `count` messages in a file of REPORT_COLUMNS' layout (each column's
    `count` values in turn, no header): column name -> array. EvidenceError if the size differs."""
    raw = np.fromfile(path, dtype=np.uint8)
    sizes = [np.dtype(dtype).itemsize * count for _, dtype in REPORT_COLUMNS]
    if len(raw) != sum(sizes):
        raise EvidenceError(f"{path}: {len(raw)} bytes, the reports of {count} messages take {sum(sizes)}")
    ends = np.cumsum(sizes)
    return {name: raw[end - size : end].view(dtype) for (name, dtype), size, end in zip(REPORT_COLUMNS, sizes, ends, strict=True)}


def combine(parts: Sequence[Path], path: Path) -> int:
    """Concatenate the producers' parts into `path` (temp file + atomic rename); return the row count."""
    tmp = path.with_name(path.name + ".tmp")
    rows = 0
    schema = pq.read_schema(parts[0]) if parts else SEND_LOG  # the producers' metadata (client versions) kept
    with pq.ParquetWriter(tmp, schema, **WRITE_OPTIONS) as writer:
        for part in parts:
            source = pq.ParquetFile(part)
            for group in range(source.num_row_groups):
                table = source.read_row_group(group)
                rows += table.num_rows
                writer.write_table(table, row_group_size=BATCH_ROWS)
    os.replace(tmp, path)
    return rows
