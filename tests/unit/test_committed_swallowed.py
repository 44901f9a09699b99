"""A transactional producer's records swallowed by planted-loss are a planted loss only where their
transaction committed: the proxy's entries (partition, made-up offsets, records) read against the
client's send log (`acklab.orchestration.execution.committed_swallowed`)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from acklab.orchestration.execution import committed_swallowed
from acklab.proxy.behaviours.plant_loss import FABRICATED_OFFSET as F


def _send_log(path: Path, rows: list[tuple[int, int, str, bool]]) -> Path:
    partition, offset, state, aborted = zip(*rows, strict=True)
    table = pa.table({"partition": list(partition), "offset": list(offset), "state": list(state), "aborted": list(aborted)})
    pq.write_table(table, path)
    return path


def test_only_the_swallowed_records_of_committed_transactions_are_planted(tmp_path: Path) -> None:
    log = _send_log(tmp_path / "send_log.parquet", [
        (0, F, "acked", False), (0, F + 1, "acked", False),  # a swallowed batch of a committed transaction
        (0, F + 2, "acked", True), (0, F + 3, "acked", True), (0, F + 4, "acked", True),  # one of an aborted transaction
        (1, 7, "acked", False),  # stored: not swallowed
        (0, F + 5, "unknown", False),  # a transaction of unknown outcome: not acked in the log
    ])
    entries = [{"partition": 0, "base_offset": F, "records": 2}, {"partition": 0, "base_offset": F + 2, "records": 3}]
    assert committed_swallowed(log, entries) == 2
    assert committed_swallowed(log, [{"partition": 0, "base_offset": F + 5, "records": 1}]) == 0
    assert committed_swallowed(log, [{"partition": 0, "base_offset": F + 9, "records": 4}]) == 0  # none acked: purged by an abort


def test_an_entry_the_log_does_not_match_exactly_leaves_the_truth_unknown(tmp_path: Path) -> None:
    log = _send_log(tmp_path / "send_log.parquet", [(0, F, "acked", False), (0, F + 1, "acked", True)])
    assert committed_swallowed(log, [{"partition": 0, "base_offset": F, "records": 3}]) is None  # 2 of 3 found
    assert committed_swallowed(log, [{"partition": 0, "base_offset": F, "records": 2}]) is None  # committed for one only
