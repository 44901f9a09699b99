"""The send log: per-message fate, columnar, written atomically (schema in docs/evidence.md)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("key", pa.string()),
        ("seq", pa.int64()),
        ("send_ts", pa.float64()),
        ("ack_ts", pa.float64()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("error", pa.string()),
        ("state", pa.string()),
    ]
)
NO_ERROR = 0
UNREPORTED = -1


class SendLog:
    """Pre-allocated per-message arrays indexed by message id; cheap to fill from callbacks."""

    def __init__(self, messages: int, keys: int) -> None:
        self.keys = keys
        self.send_ts = np.full(messages, np.nan)
        self.ack_ts = np.full(messages, np.nan)
        self.partition = np.full(messages, -1, dtype=np.int32)
        self.offset = np.full(messages, -1, dtype=np.int64)
        self.error = np.full(messages, UNREPORTED, dtype=np.int32)
        self.error_names: dict[int, str] = {}
        self.sent = 0
        self.acked = 0
        self.failed = 0

    def write(self, path: Path) -> None:
        """Write the rows of every message handed to the producer, via a temp file + rename."""
        n = self.sent
        ids = np.arange(n, dtype=np.int64)
        error = self.error[:n]
        state = np.where(error == UNREPORTED, "unknown", np.where(error == NO_ERROR, "acked", "failed"))
        names = {**self.error_names, NO_ERROR: None, UNREPORTED: None}
        acked = error == NO_ERROR
        table = pa.table(
            {
                "id": ids,
                "key": pa.array([f"k{k}" for k in ids % self.keys], pa.string()),
                "seq": ids // self.keys,
                "send_ts": self.send_ts[:n],
                "ack_ts": pa.array(self.ack_ts[:n], mask=np.isnan(self.ack_ts[:n])),
                "partition": pa.array(self.partition[:n], mask=self.partition[:n] < 0),
                "offset": pa.array(self.offset[:n], mask=~acked | (self.offset[:n] < 0)),
                "error": pa.array([names[int(e)] for e in error], pa.string()),
                "state": pa.array(state, pa.string()),
            },
            schema=SCHEMA,
        )
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".parquet.tmp")
        pq.write_table(table, tmp)
        os.replace(tmp, path)
