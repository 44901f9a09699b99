"""The send log: per-message fate, columnar, written in batches and renamed into place (docs/evidence.md).

Each producer process keeps numpy arrays for its id range and fills them from delivery reports in
bulk; when its load is over it writes its own part in row groups of BATCH_ROWS (nothing is
written during the load: an unfinished Parquet file is unreadable anyway, and every write would
take CPU from the producer). `combine` joins the parts into the scenario's send log with one
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

from acklab.workload.records import key

SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("key", pa.string()),
        ("seq", pa.int64()),
        ("producer", pa.string()),
        ("expected_partition", pa.int32()),
        ("txn", pa.int64()),
        ("aborted", pa.bool_()),
        ("retriable", pa.bool_()),
        ("send_ts", pa.float64()),
        ("ack_ts", pa.float64()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("error", pa.string()),
        ("state", pa.string()),
    ]
)
NO_ERROR = 0
UNREPORTED = np.iinfo(np.int32).min  # outside librdkafka's codes (local -200..-100, protocol >= -1)
BATCH_ROWS = 1 << 18
# Dictionary-encode only the string columns: trying it on ids and times costs 3x the write time.
WRITE_OPTIONS = {"use_dictionary": ["key", "producer", "error", "state"]}
TXN_OUTCOMES = ("committed", "aborted", "unknown")

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
    """The fate of one producer's messages, ids `first_id .. first_id + capacity - 1`."""

    def __init__(
        self,
        path: Path,
        producer: int,
        first_id: int,
        capacity: int,
        keys: int,
        key_partitions: Sequence[int],
        transactional: bool = False,
    ) -> None:
        self.path, self.producer, self.first_id, self.keys = path, producer, first_id, keys
        self.key_partitions = np.asarray(key_partitions, dtype=np.int32)
        self.transactional = transactional
        self.send_ts = np.full(capacity, np.nan)
        self.ack_ts = np.full(capacity, np.nan)
        self.partition = np.full(capacity, -1, dtype=np.int32)
        self.offset = np.full(capacity, -1, dtype=np.int64)
        self.error = np.full(capacity, UNREPORTED, dtype=np.int32)
        self._txn_starts: list[int] = []  # local index of each transaction's first message
        self._txn_outcomes: list[int] = []  # TXN_OUTCOMES index, one per finished transaction
        self.error_names: dict[int, str] = {}
        self.sent = self.acked = self.failed = 0

    def begin_transaction(self) -> None:
        """The next message sent opens a transaction."""
        self._txn_starts.append(self.sent)

    def end_transaction(self, outcome: str) -> None:
        """The open transaction was committed or aborted, or its outcome is unknown (TXN_OUTCOMES)."""
        self._txn_outcomes.append(TXN_OUTCOMES.index(outcome))

    def record_deliveries(
        self, ids: np.ndarray, ack_ts: np.ndarray, partitions: list[int | None], offsets: list[int | None], errors: list[tuple[int, KafkaError]]
    ) -> None:
        """Apply a batch of delivery reports: message ids, times, partitions, offsets, and
        (position in the batch, error) of the failed ones."""
        if not len(ids):
            return
        local = ids - self.first_id
        if local.min() < 0 or local.max() >= self.sent:
            raise EvidenceError(f"p{self.producer}: delivery report for an id this producer never sent")
        if (self.error[local] != UNREPORTED).any() or np.bincount(local - local.min()).max() > 1:
            raise EvidenceError(f"p{self.producer}: more than one delivery report for a message")
        codes = np.full(len(local), NO_ERROR, dtype=np.int32)
        for position, error in errors:
            codes[position] = error.code()
            self.error_names.setdefault(error.code(), error.name())
        self.error[local] = codes
        self.ack_ts[local] = ack_ts
        # confluent-kafka reports an unknown partition or offset as None: via float, None -> nan -> -1
        self.partition[local] = np.nan_to_num(np.array(partitions, dtype=np.float64), nan=-1)
        self.offset[local] = np.nan_to_num(np.array(offsets, dtype=np.float64), nan=-1)
        self.failed += len(errors)
        self.acked += len(local) - len(errors)

    def write(self) -> None:
        """Write every sent message (unreported ones as `unknown`) in row groups, then rename into place."""
        tmp = self.path.with_name(self.path.name + ".tmp")
        with pq.ParquetWriter(tmp, SCHEMA, **WRITE_OPTIONS) as writer:
            for lo in range(0, self.sent, BATCH_ROWS):
                writer.write_table(self._table(lo, min(self.sent, lo + BATCH_ROWS)), row_group_size=BATCH_ROWS)
        os.replace(tmp, self.path)

    def summary(self) -> dict[str, object]:
        """Counts of the final states of every sent message, as written to the send log."""
        acked, failed, aborted = self._states(0, self.sent)[:3]
        errors = self.error[: self.sent][failed]
        return {
            "sent": self.sent,
            "acked": int(acked.sum()),
            "failed": int(failed.sum()),
            "unknown": int(self.sent - acked.sum() - failed.sum()),
            "aborted": int(aborted.sum()),
            "errors": {self.error_names[int(c)]: int(n) for c, n in zip(*np.unique(errors, return_counts=True), strict=True)},
        }

    def _states(self, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
        """acked, failed and aborted masks and transaction indices (None unless transactional) of rows lo..hi-1."""
        error = self.error[lo:hi]
        failed = (error != NO_ERROR) & (error != UNREPORTED)
        acked = error == NO_ERROR
        if not self.transactional:
            return acked, failed, np.zeros(hi - lo, dtype=bool), None
        txn = np.searchsorted(self._txn_starts, np.arange(lo, hi), side="right").astype(np.int64) - 1
        outcome = np.array(self._txn_outcomes + [TXN_OUTCOMES.index("unknown")], dtype=np.int8)[txn]
        acked &= outcome != TXN_OUTCOMES.index("unknown")  # acked in a transaction of unknown outcome: unknown
        return acked, failed, outcome == TXN_OUTCOMES.index("aborted"), txn

    def _table(self, lo: int, hi: int) -> pa.Table:
        local = np.arange(lo, hi, dtype=np.int64)
        key_index = (local % self.keys).astype(np.int32)
        error = self.error[lo:hi]
        acked, failed, aborted, txn = self._states(lo, hi)
        state = np.where(acked, 0, np.where(failed, 1, 2)).astype(np.int32)
        codes = sorted(self.error_names) or [NO_ERROR]
        error_index = np.minimum(np.searchsorted(codes, error), len(codes) - 1).astype(np.int32)
        columns = {
            "id": pa.array(local + self.first_id),
            "key": _strings(key_index, [key(self.producer, k) for k in range(self.keys)]),
            "seq": pa.array(local // self.keys),
            "producer": _strings(np.zeros(hi - lo, dtype=np.int32), [f"p{self.producer}"]),
            "expected_partition": pa.array(self.key_partitions[key_index]),
            "txn": pa.array(txn) if txn is not None else pa.nulls(hi - lo, pa.int64()),
            "aborted": pa.array(aborted),
            "retriable": pa.array(np.isin(error, RETRIABLE_CODES), mask=~failed),
            "send_ts": pa.array(self.send_ts[lo:hi]),
            "ack_ts": pa.array(self.ack_ts[lo:hi], mask=np.isnan(self.ack_ts[lo:hi])),
            "partition": pa.array(self.partition[lo:hi], mask=self.partition[lo:hi] < 0),
            "offset": pa.array(self.offset[lo:hi], mask=(error != NO_ERROR) | (self.offset[lo:hi] < 0)),
            "error": _strings(error_index, [self.error_names.get(c, "") for c in codes], mask=~failed),
            "state": _strings(state, ["acked", "failed", "unknown"]),
        }
        return pa.table(columns, schema=SCHEMA)


def _strings(indices: np.ndarray, values: list[str], mask: np.ndarray | None = None) -> pa.Array:
    """`values[indices]` as a plain string column (null where `mask`)."""
    return pa.DictionaryArray.from_arrays(pa.array(indices, mask=mask), pa.array(values, pa.string())).cast(pa.string())


def combine(parts: Sequence[Path], path: Path) -> int:
    """Concatenate the producers' parts into `path` (temp file + atomic rename); return the row count."""
    tmp = path.with_name(path.name + ".tmp")
    rows = 0
    with pq.ParquetWriter(tmp, SCHEMA, **WRITE_OPTIONS) as writer:
        for part in parts:
            source = pq.ParquetFile(part)
            for group in range(source.num_row_groups):
                table = source.read_row_group(group)
                rows += table.num_rows
                writer.write_table(table, row_group_size=BATCH_ROWS)
    os.replace(tmp, path)
    return rows
