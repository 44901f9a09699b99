"""Exactness tests for the audit (`acklab.checker.audit`, `acklab.checker.scenario_audit`) on evidence
with planted anomalies; its percentiles and rounding against Spark's own functions."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from acklab.checker import audit as dm
from acklab.checker import scenario_audit as sa
from acklab.store.contract import COUNT_COLUMNS, METRIC_COLUMNS, OUTCOMES
from acklab.store.runs import FaultRecord, Manifest, RunDir, ScenarioEntry
from acklab.store.schemas import MATRIX, MATRIX_DESCRIPTIVE, MATRIX_PIPELINE, OUTCOME_TABLE, SEND_LOG, TOPIC_RECORDS
from acklab.testing import synthetic
from acklab.workload.records import parse_prefix

T0 = 100.0  # send_ts of id i is T0 + i in s-a, s-b, s-c
# Send log rows: (id, key, seq, state, ack latency ms or None). Failed messages get a (late)
# error report, which must not count as an ack time. Acked messages are acked at their first copy
# (lost ones at (0, 99)); these scenarios use the send log columns' defaults.
SEND_LOGS = {
    "s-a": [
        (0, "k1", 0, "acked", 10),  # delivered
        (1, "k1", 1, "acked", 20),  # delivered, reordered (after seq 3)
        (2, "k1", 2, "acked", 30),  # lost
        (3, "k1", 3, "acked", 40),  # 2 copies
        (4, "k2", 0, "acked", 50),  # 3 copies, later copies behind seq 2 are not reordering
        (5, "k2", 1, "failed", None),  # failed clean
        (6, "k2", 2, "failed", None),  # failed but present: indeterminate
        (7, "k3", 0, "unknown", None),  # unknown present, 2 copies: indeterminate + duplicated
        (8, "k3", 1, "unknown", None),  # unknown absent
        (9, "k4", 0, "acked", 60),  # delivered in p1, seq below k4's seq 1 in p0: not reordered
        (10, "k4", 1, "acked", 70),  # delivered in p0
    ],
    "s-b": [
        (0, "kb", 0, "acked", 5),
        (1, "kb", 1, "acked", 5),  # reordered: below earlier max 3
        (2, "kb", 2, "acked", 5),  # reordered: above predecessor 1, still below earlier max 3
        (3, "kb", 3, "acked", 5),
        (4, "kc", 0, "acked", 5),  # same seqs as kb, other partition/key: not reordered
        (5, "kc", 1, "unknown", None),  # unknown absent
        (6, "kc", 2, "failed", None),  # failed, 3 copies: indeterminate + duplicated
    ],
    "s-c": [  # no records at all
        (0, "kx", 0, "acked", 1),
        (1, "kx", 1, "acked", 3),
    ],
}
# Topic records: (scenario, partition, offset, key, value)
RECORDS = [
    ("s-a", 0, 0, "k1", b"0:0:xxxxxxxx"),
    ("s-a", 0, 1, "k1", b"3:3:xxxxxxxx"),
    ("s-a", 0, 2, "k1", b"1:1:xxxxxxxx"),
    ("s-a", 0, 3, "k1", b"3:3:xxxxxxxx"),
    ("s-a", 0, 4, "k4", b"10:1:xxxxxxx"),
    ("s-a", 0, 5, "k1", b"999:9:xxxxxx"),  # id not in the send log
    ("s-a", 1, 0, "k2", b"4:0:xxxxxxxx"),
    ("s-a", 1, 1, "k2", b"6:2:xxxxxxxx"),
    ("s-a", 1, 2, "k2", b"4:0:xxxxxxxx"),
    ("s-a", 1, 3, "k3", b"7:0:xxxxxxxx"),
    ("s-a", 1, 4, "k2", b"4:0:xxxxxxxx"),
    ("s-a", 1, 5, "k4", b"9:0:xxxxxxxx"),
    ("s-a", 1, 6, "k2", b"garbage"),  # unparseable
    ("s-a", 1, 7, "k3", b"7:0:xxxxxxxx"),
    ("s-b", 0, 10, "kb", b"0:0:"),
    ("s-b", 0, 11, "kb", b"3:3:"),
    ("s-b", 0, 12, "kb", b"1:1:"),
    ("s-b", 0, 13, "kb", b"2:2:"),
    ("s-b", 1, 0, "kc", b"4:0:"),
    ("s-b", 1, 1, "kc", b"6:2:"),
    ("s-b", 1, 2, "kc", b"6:2:"),
    ("s-b", 1, 3, "kc", b"6:2:"),
    ("s-b", 1, 4, "kc", b"9:9:"),  # id of another scenario's send log: unexpected here
    # s-e: a transactional scenario of two producers (its send log is S_E below)
    ("s-e", 0, 0, "p0-k0", b"0:0:"),
    ("s-e", 0, 2, "p0-k0", b"2:2:"),  # id 2 was acked at offset 5
    ("s-e", 0, 3, "p0-k0", b"3:3:"),  # aborted, yet visible
    ("s-e", 0, 6, "p0-k0", b"5:5:"),  # aborted (failed), visible twice
    ("s-e", 0, 7, "p0-k0", b"5:5:"),
    ("s-e", 0, 8, "p1-k0", b"11:4:"),
    ("s-e", 1, 0, "p0-k0", b"1:1:"),  # id 1 was acked here, but its key maps to partition 0
    ("s-e", 1, 1, "p1-k0", b"8:1:"),  # where id 7 was acked
    ("s-e", 1, 2, "p1-k0", b"7:0:"),  # reordered: seq 0 after seq 1
    ("s-e", 1, 3, "p1-k0", b"7:0:"),
    ("s-e", 1, 4, "p1-k0", b"9:2:", "t-e"),  # misdirected: sent to t-e-t1
    ("s-e", 1, 5, "p1-k0", b"8:1:"),  # the copy of id 8 at its acked offset
    ("s-e", 1, 7, "p1-k0", b"12:5:"),
    ("s-e", 1, 8, "p1-k0", b"500:9:"),  # never sent
    ("s-f", 0, 0, "p0-k0", b"0:0:"),
    ("s-f", 0, 1, "p0-k0", b"5:5:"),  # planned, never handed to produce(): unexpected
]

# s-e send log in SEND_LOG_SCHEMA order after "scenario". Times are exact binary fractions, so the
# two longest ack gaps (0.75 s: 1000.25-1001.0 across a bucket boundary and 1002.0-1002.75 inside
# one) tie exactly and the earlier one must win. Failed reports (1002.5, 1004.5) are not acks.
S_E = [
    # id key seq producer expected_partition txn aborted retriable send_ts ack_ts partition offset error state refused fatal
    (0, "p0-k0", 0, "p0", 0, 0, False, None, 1000.0, 1000.25, 0, 0, None, "acked", False, False),  # delivered
    (1, "p0-k0", 1, "p0", 0, 0, False, None, 1000.125, 1001.0, 1, 0, None, "acked", False, False),  # misrouted
    (2, "p0-k0", 2, "p0", 0, 0, False, None, 1000.25, 1001.25, 0, 5, None, "acked", False, False),  # offset mismatch
    (3, "p0-k0", 3, "p0", 0, 1, True, None, 1000.375, 1001.5, 0, 3, None, "acked", False, False),  # aborted visible
    (4, "p0-k0", 4, "p0", 0, 1, True, None, 1000.5, 1002.0, 0, 4, None, "acked", False, False),  # aborted clean, not lost
    (5, "p0-k0", 5, "p0", 0, 1, True, False, 1000.625, 1002.0, None, None, "_PURGE_QUEUE", "failed", False, False),
    (6, "p0-k0", 6, "p0", 0, 1, True, False, 1000.75, 1002.5, None, None, "_PURGE_QUEUE", "failed", False, False),
    (7, "p1-k0", 0, "p1", 1, 0, False, None, 1000.875, 1002.75, 1, 1, None, "acked", False, False),  # 2 copies, neither at 1
    (8, "p1-k0", 1, "p1", 1, 0, False, None, 1001.0, 1003.0, 1, 5, None, "acked", False, False),  # 2 copies, one at 5
    (9, "p1-k0", 2, "p1", 1, 0, False, None, 1001.125, 1003.25, 1, -1, None, "acked", False, False, "t-e-t1"),  # offset unknown; misdirected
    (10, "p1-k0", 3, "p1", 1, 0, False, None, 1001.25, 1003.5, 1, 6, None, "acked", False, False),  # lost, not a mismatch
    (11, "p1-k0", 4, "p1", None, 0, False, None, 1001.375, 1003.75, 0, 8, None, "acked", False, False),  # partition unknown
    (12, "p1-k0", 5, "p1", 1, 0, False, None, 1001.5, None, None, None, None, "unknown", False, False),  # indeterminate
    (13, "p1-k0", 6, "p1", 1, 0, False, True, 1001.625, 1004.5, None, None, "NOT_ENOUGH_REPLICAS", "failed", False, False),
]
# s-f: a load that fell short of its plan. Refused by produce(), failed by a fatal producer error (sent
# or never handed to produce()), and planned but never sent (one of which the topic holds anyway).
S_F = [
    (0, "p0-k0", 0, "p0", 0, None, False, None, 10.0, 10.5, 0, 0, None, "acked", False, False),
    (1, "p0-k0", 1, "p0", 0, None, False, False, 10.1, None, None, None, "MSG_SIZE_TOO_LARGE", "failed", True, False),
    (2, "p0-k0", 2, "p0", 0, None, False, False, 10.2, 11.0, None, None, "OUT_OF_ORDER_SEQUENCE_NUMBER", "failed", False, True),
    (3, "p0-k0", 3, "p0", 0, None, False, False, None, None, None, None, "OUT_OF_ORDER_SEQUENCE_NUMBER", "failed", False, True),
    (4, "p0-k0", 4, "p0", 0, None, False, None, None, None, None, None, None, "unsent", False, False),
    (5, "p0-k0", 5, "p0", 0, None, False, None, None, None, None, None, None, "unsent", False, False),
]
SEND_LOG_ROWS = {"s-e": S_E, "s-f": S_F}
S_E_OUTCOMES = {  # id: (outcome, copies, misrouted, offset_mismatch, reordered)
    0: ("delivered", 1, False, False, False),
    1: ("delivered", 1, True, False, False),
    2: ("delivered", 1, False, True, False),
    3: ("aborted_visible", 1, False, False, False),
    4: ("aborted_clean", 0, False, False, False),
    5: ("aborted_visible", 2, False, False, False),
    6: ("aborted_clean", 0, False, False, False),
    7: ("acked_duplicated", 2, False, True, True),
    8: ("acked_duplicated", 2, False, False, False),
    9: ("delivered", 1, False, False, False),
    10: ("lost", 0, False, False, False),
    11: ("delivered", 1, False, False, False),
    12: ("indeterminate", 1, False, False, False),
    13: ("failed_clean", 0, False, False, False),
    500: ("unexpected", 1, False, False, False),
}

# Manifest scenario entries (the fields the job reads).
SCENARIOS = [
    dict(scenario="s-a", profile="leader-ack", fault="leader-kill", guarantee="leader-durable",
         fault_effective=True, evidence_complete=True, incomplete_reason=None,
         # union [105, 107] + [109, 120]
         fault_timeline=[{"fault": "f", "started": 105.0, "ended": 106.0}, {"fault": "f", "started": 105.5, "ended": 107.0},
                         {"fault": "f", "started": 109.0, "ended": 120.0}]),
    dict(scenario="s-b", profile="idempotent", fault="partition", guarantee="exactly-once",
         fault_effective=False, evidence_complete=True, incomplete_reason=None, fault_timeline=[]),
    dict(scenario="s-c", profile="fire-and-forget", fault="none", guarantee="none", fault_effective=None,
         evidence_complete=True, incomplete_reason=None,
         fault_timeline=[{"fault": "f", "started": 100.5, "ended": None}]),  # never ended
    dict(scenario="s-d", profile="all-ack", fault="broker-pause", guarantee="durable", fault_effective=None,
         evidence_complete=False, incomplete_reason="producer crashed"),  # no evidence
    dict(scenario="s-e", profile="transactional", fault="leader-kill", guarantee="exactly-once",
         partitioner="murmur2_random", producers=2, transactional=True, fault_effective=True,
         evidence_complete=True, incomplete_reason=None,
         fault_timeline=[{"fault": "f", "started": 1000.5, "ended": 1000.625}, {"fault": "f", "started": 1002.0, "ended": 1003.0},
                         {"fault": "f", "started": None, "ended": None}]),
    dict(scenario="s-f", profile="idempotent", fault="none", guarantee="exactly-once", fault_effective=True,
         evidence_complete=True, incomplete_reason=None, fatal_error="p0: OUT_OF_ORDER_SEQUENCE_NUMBER: ...",
         fault_timeline=[]),
]
NAMES = [s["scenario"] for s in SCENARIOS]


def manifest_of(scenarios: list[dict]) -> Manifest:
    return Manifest(run_id="t", scenarios=[ScenarioEntry.model_validate(s) for s in scenarios])


def _meta(name: str) -> dict:
    scenario = ScenarioEntry.model_validate(next(s for s in SCENARIOS if s["scenario"] == name))
    return {column: getattr(scenario, column) for column in MATRIX_DESCRIPTIVE.names}


def _parse(value: bytes) -> tuple[int | None, int | None]:
    head = value.split(b":")
    try:
        return int(head[0]), int(head[1])
    except (IndexError, ValueError):
        return None, None


def _first_copy(scenario: str, id_: int) -> tuple[int, int]:
    return min(((p, o) for s, p, o, _, v, *_ in RECORDS if s == scenario and _parse(v)[0] == id_), default=(0, 99))


def _send_log_rows(scenario: str) -> list[tuple]:
    """Rows in SEND_LOG_SCHEMA order (after "scenario")."""
    if scenario in SEND_LOG_ROWS:
        return SEND_LOG_ROWS[scenario]
    rows = []
    for id_, key, seq, state, latency in SEND_LOGS[scenario]:
        send_ts = T0 + id_
        ack_ts = send_ts + latency / 1000 if state == "acked" else (send_ts + 9.0 if state == "failed" else None)
        partition, offset = _first_copy(scenario, id_) if state == "acked" else (None, None)
        error = "_MSG_TIMED_OUT" if state == "failed" else None
        rows.append((id_, key, seq, "p0", None, None, False, None, send_ts, ack_ts, partition, offset, error, state, False, False))
    return rows


ZERO_NEW = dict(misrouted=0, offset_mismatch=0, misdirected=0, aborted=0, aborted_acked=0, aborted_clean=0, aborted_visible=0,
                unsent=0, refused=0, fatal=0, **dict.fromkeys(MATRIX_PIPELINE.names))
EXPECTED = {
    "s-a": dict(
        _meta("s-a"), planned=11, sent=11, acked=7, failed=2, unknown=2, records_read=14, delivered=4, lost=1,
        duplicated=3, duplicates=4, acked_duplicated=2, failed_clean=1, indeterminate=2,
        unknown_absent=1, unexpected=2, reordered=1, **ZERO_NEW,
        ack_latency_p50_ms=pytest.approx(40.0), ack_latency_p95_ms=pytest.approx(67.0),
        ack_latency_p99_ms=pytest.approx(69.4), ack_latency_max_ms=pytest.approx(70.0),
        acked_per_s=pytest.approx(7 / 10.07),
        # first send 100.0; acks 100.01 ... 104.05, then 109.06: the gap crosses buckets 104-109
        longest_ack_gap_s=pytest.approx(5.01), ack_gap_fault_overlap_s=pytest.approx(2.0 + 0.06),
    ),
    "s-b": dict(
        _meta("s-b"), planned=7, sent=7, acked=5, failed=1, unknown=1, records_read=9, delivered=5, lost=0,
        duplicated=1, duplicates=2, acked_duplicated=0, failed_clean=0, indeterminate=1,
        unknown_absent=1, unexpected=1, reordered=2, **ZERO_NEW,
        ack_latency_p50_ms=pytest.approx(5.0), ack_latency_p95_ms=pytest.approx(5.0),
        ack_latency_p99_ms=pytest.approx(5.0), ack_latency_max_ms=pytest.approx(5.0),
        acked_per_s=pytest.approx(5 / 4.005),
        longest_ack_gap_s=pytest.approx(1.0), ack_gap_fault_overlap_s=0.0,  # no fault window
    ),
    "s-c": dict(
        _meta("s-c"), planned=2, sent=2, acked=2, failed=0, unknown=0, records_read=0, delivered=0, lost=2,
        duplicated=0, duplicates=0, acked_duplicated=0, failed_clean=0, indeterminate=0,
        unknown_absent=0, unexpected=0, reordered=0, **ZERO_NEW,
        ack_latency_p50_ms=pytest.approx(2.0), ack_latency_p95_ms=pytest.approx(2.9),
        ack_latency_p99_ms=pytest.approx(2.98), ack_latency_max_ms=pytest.approx(3.0),
        acked_per_s=pytest.approx(2 / 1.003),
        # acks at 100.001 and 101.003; the fault from 100.5 never ended
        longest_ack_gap_s=pytest.approx(1.002), ack_gap_fault_overlap_s=pytest.approx(0.503),
    ),
    "s-d": dict(
        _meta("s-d"), **{c: 0 for c in COUNT_COLUMNS}, **{c: None for c in METRIC_COLUMNS}, **dict.fromkeys(MATRIX_PIPELINE.names),
    ),
    "s-e": dict(
        _meta("s-e"), planned=14, sent=14, acked=10, failed=3, unknown=1, records_read=14, delivered=5, lost=1,
        duplicated=3, duplicates=3, acked_duplicated=2, failed_clean=1, indeterminate=1,
        unknown_absent=0, unexpected=1, reordered=1, misrouted=1, offset_mismatch=2, misdirected=1, aborted=4,
        aborted_acked=2, aborted_clean=2, aborted_visible=2, unsent=0, refused=0, fatal=0,
        # latencies 250 875 1000 1125 1500 1875 2000 2125 2250 2375 ms
        ack_latency_p50_ms=1687.5, ack_latency_p95_ms=pytest.approx(2318.75),
        ack_latency_p99_ms=pytest.approx(2363.75), ack_latency_max_ms=2375.0, acked_per_s=10 / 3.75,
        longest_ack_gap_s=0.75, ack_gap_fault_overlap_s=0.125, **dict.fromkeys(MATRIX_PIPELINE.names),
    ),
    "s-f": dict(
        _meta("s-f"), planned=6, sent=4, unsent=2, refused=1, fatal=2, acked=1, failed=3, unknown=0,
        records_read=2, delivered=1, lost=0, duplicated=0, duplicates=0, acked_duplicated=0, failed_clean=3,
        indeterminate=0, unknown_absent=0, unexpected=1, reordered=0, misrouted=0, offset_mismatch=0, misdirected=0,
        aborted=0, aborted_acked=0, aborted_clean=0, aborted_visible=0,
        ack_latency_p50_ms=500.0, ack_latency_p95_ms=500.0, ack_latency_p99_ms=500.0, ack_latency_max_ms=500.0,
        acked_per_s=1 / 0.5, longest_ack_gap_s=0.5, ack_gap_fault_overlap_s=0.0, **dict.fromkeys(MATRIX_PIPELINE.names),
    ),
}


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # the audit's tasks run this interpreter's acklab (as main sets it)
    session = (
        SparkSession.builder.master("local[2]")
        .appName("test-delivery-matrix")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.ui.enabled", "false")
        .getOrCreate()
    )
    yield session
    session.stop()


def _records(scenario: str) -> pa.Table:
    rows = [(s, partition, offset, key, *parse_prefix(value), *topic) for s, partition, offset, key, value, *topic in RECORDS if s == scenario]
    return pa.Table.from_pylist([_row(TOPIC_RECORDS, row) for row in rows], schema=TOPIC_RECORDS)


def _send_log(rows: list[tuple]) -> pa.Table:
    return pa.Table.from_pylist([_row(SEND_LOG, row) for row in rows], schema=SEND_LOG)


def _row(schema: pa.Schema, values: tuple) -> dict:
    """A row of `schema` from its leading columns' values; the trailing `topic` may be left out (null:
    the scenario's own topic)."""
    names = schema.names[: len(values)]
    if len(values) not in (len(schema.names), len(schema.names) - 1) or schema.names[-1] != "topic":
        raise ValueError(f"{len(values)} values for {schema.names}")
    return dict(zip(names, values, strict=True))


def _send_logs() -> dict[str, pa.Table]:
    return {name: _send_log(_send_log_rows(name)) for name in (*SEND_LOGS, *SEND_LOG_ROWS)}


def _audit(send_logs: dict[str, pa.Table]) -> tuple[dict[str, pa.Table], dict[str, dict]]:
    """Each scenario's outcome table and matrix row, as an audit task computes them."""
    outcomes, rows = {}, {}
    for entry in manifest_of(SCENARIOS).scenarios:
        send_log = send_logs.get(entry.scenario, SEND_LOG.empty_table())
        records = _records(entry.scenario)
        outcomes[entry.scenario] = sa.outcome_table(entry.scenario, send_log, records)
        row = _meta(entry.scenario) | sa.matrix_row(send_log, records, outcomes[entry.scenario], dm.fault_windows(entry.fault_timeline))
        row |= dict.fromkeys(MATRIX_PIPELINE.names)  # producer scenarios: no pipeline
        rows[entry.scenario] = {column: row[column] for column in dm.MATRIX_COLUMNS}
    return outcomes, rows


@pytest.fixture(scope="module")
def audited() -> tuple[dict[str, pa.Table], dict[str, dict]]:
    return _audit(_send_logs())


@pytest.fixture(scope="module")
def outcomes(audited: tuple[dict[str, pa.Table], dict[str, dict]]) -> dict[str, pa.Table]:
    return audited[0]


@pytest.fixture(scope="module")
def matrix_rows(audited: tuple[dict[str, pa.Table], dict[str, dict]]) -> dict[str, dict]:
    return audited[1]


def test_parse_prefix() -> None:
    values = [
        (b"12:3:padding", 12, 3),
        (b"0:0:", 0, 0),
        (b"7:8:9:10", 7, 8),
        (b"9223372036854775807:1:x", 9223372036854775807, 1),
        (b"9223372036854775808:1:x", None, None),  # id overflows int64
        (b"1:99999999999999999999:x", None, None),  # seq overflows int64
        (b"12:3", None, None),  # prefix not terminated
        (b" 12:3:x", None, None),
        (b"-1:3:x", None, None),
        (b"+1:3:x", None, None),  # a cast alone would take the sign and the blanks
        (b"1: 3:x", None, None),
        (b"0" * 40 + b"1:2:x", 1, 2),  # leading zeros, the prefix within its first 48 bytes
        (b"0" * 45 + b"1:2:x", None, None),  # ends past them
        (b"a:3:x", None, None),
        (b"\xff\xfe:1:", None, None),
        (b"", None, None),
        (None, None, None),
    ]
    assert [parse_prefix(value) for value, _, _ in values] == [(id_, seq) for _, id_, seq in values]


def test_fault_windows_union() -> None:
    timeline = [
        {"started": 5.0, "ended": 6.0},
        {"started": 1.0, "ended": 2.0},
        {"started": 1.5, "ended": 3.0},  # overlaps the previous one
        {"started": 3.0, "ended": 4.0},  # touches it
        {"started": None, "ended": None},  # never started
        {"started": 7.0},  # never ended
    ]
    records = [FaultRecord(fault="f", **window) for window in timeline]
    assert dm.fault_windows(records) == [(1.0, 4.0), (5.0, 6.0), (7.0, float("inf"))]
    assert dm.fault_windows([]) == []


def test_matrix_row_columns_and_types(matrix_rows: dict[str, dict]) -> None:
    for row in matrix_rows.values():
        assert tuple(row) == dm.MATRIX_COLUMNS
        assert all(type(row[c]) is int for c in COUNT_COLUMNS)
        assert all(row[c] is None or type(row[c]) is float for c in METRIC_COLUMNS)


@pytest.mark.parametrize("scenario", sorted(EXPECTED))
def test_matrix_exact(matrix_rows: dict[str, dict], scenario: str) -> None:
    assert matrix_rows[scenario] == EXPECTED[scenario]


def test_outcomes_per_message(outcomes: dict[str, pa.Table]) -> None:
    table = outcomes["s-e"]
    assert table.schema == OUTCOME_TABLE
    rows = table.to_pylist()
    got = {r["id"]: (r["outcome"], r["copies"], r["misrouted"], r["offset_mismatch"], r["reordered"]) for r in rows}
    assert got == S_E_OUTCOMES
    by_id = {r["id"]: r for r in rows}
    assert by_id[2] == dict(scenario="s-e", id=2, state="acked", aborted=False, partition=0, offset=5,
                            expected_partition=0, copies=1, outcome="delivered", misrouted=False,
                            offset_mismatch=True, reordered=False, misdirected=False)
    assert [r["id"] for r in rows if r["misdirected"]] == [9]
    assert (by_id[5]["state"], by_id[5]["aborted"], by_id[5]["partition"]) == ("failed", True, None)
    assert (by_id[500]["state"], by_id[500]["aborted"], by_id[500]["partition"]) == (None, None, None)


def test_every_class_planted(matrix_rows: dict[str, dict]) -> None:
    """The fixtures plant every class at least once, so an always-zero count would fail a test."""
    totals = {c: sum(row[c] for row in matrix_rows.values()) for c in COUNT_COLUMNS}
    assert [c for c, total in totals.items() if total == 0] == []
    planted = {outcome for outcome, *_ in S_E_OUTCOMES.values()} | {"failed_clean", "unknown_absent"}
    assert planted >= set(OUTCOMES)


TICK = 1 / 8192  # about 0.12 ms, exact in binary


@pytest.mark.parametrize(
    ("acks", "start", "gap"),
    [
        ([2000.125, 2000.25, 2000.875, 2001.0, 2001.5], 2000.0, (2000.25, 2000.875)),  # inside a second
        ([13.5, 13.75], 10.0, (10.0, 13.5)),  # first send to first ack, across seconds
        ([1.0, 1.5, 7.25, 7.5], 0.5, (1.5, 7.25)),  # across seconds without an ack
        ([5.0, 5.0], 5.0, (5.0, 5.0)),  # no gap at all
        ([3.5, 4.25, 4.5, 5.0, 5.75, 6.5], 3.0, (3.5, 4.25)),  # three ties of 0.75: the earliest
        # every gap below a millisecond, with ties, and across a second
        ([4 + k * TICK for k in (1, 2, 4, 5, 7)], 4.0, (4 + 2 * TICK, 4 + 4 * TICK)),
        ([6.9996, 6.9998, 7.0003, 7.0004], 6.9995, (6.9998, 7.0003)),
    ],
)
def test_longest_ack_gap(acks: list[float], start: float, gap: tuple[float, float]) -> None:
    assert sa.longest_ack_gap(np.array(acks[::-1]), start) == gap
    assert sa.longest_ack_gap(np.array([], dtype=float), start) is None


@pytest.mark.parametrize(
    "values",
    [[], [7], [3, 3, 3], [1, 2], [5, 1, 4, 4, 9, 2, 8], list(range(1000, 0, -7)), [10**12, 3, 10**12 + 1, 17, 17, 17]],
)
def test_exact_percentile_is_sparks_percentile(spark: SparkSession, values: list[int]) -> None:
    """The matrix's latency percentiles from a sorted array equal Spark's percentile() bit for bit,
    and numpy's default (linear interpolation) up to rounding; None for no values."""
    fractions = (*sa.LATENCY_PERCENTILES, 0.0, 0.25, 1.0)
    frame = spark.createDataFrame([(v,) for v in values], "us long")
    expected = frame.agg(F.percentile("us", list(fractions)).alias("p")).first().p
    ours = [sa.exact_percentile(np.sort(np.array(values, dtype=np.int64)), f) for f in fractions]
    assert ours == (expected or [None] * len(fractions))
    if values:
        assert ours == pytest.approx([np.percentile(values, f * 100) for f in fractions], rel=1e-12)


def test_latency_rounding_is_sparks_round(spark: SparkSession) -> None:
    """Latencies in microseconds are rounded as Spark's round() rounds: halves away from zero, and a
    value just below a half down (adding 0.5 first would round it up)."""
    values = [0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49999999999999994, 2.4999999999999996, 1234.5000000000002, 7.0, -7.2, 1e15 + 0.5]
    expected = [row.r for row in spark.createDataFrame([(v,) for v in values], "v double").select(F.round("v").alias("r")).collect()]
    assert sa.round_half_up(np.array(values)).tolist() == expected


def test_matrix_rows_balance(matrix_rows: dict[str, dict]) -> None:
    assert sorted(matrix_rows) == sorted(EXPECTED)
    dm.check_conservation(matrix_rows.values())


def test_broken_identity_raises(matrix_rows: dict[str, dict]) -> None:
    row = dict(matrix_rows["s-a"], lost=2)
    with pytest.raises(dm.ConservationError) as err:
        dm.check_conservation([matrix_rows["s-b"], row])
    message = str(err.value)
    assert "s-a: acked=7 != delivered=4 + lost=2 + acked_duplicated=2 + aborted_acked=0 = 8" in message
    assert "s-a: sent=11 != " in message
    assert "s-b" not in message


def test_send_log_shorter_than_planned_does_not_balance(matrix_rows: dict[str, dict]) -> None:
    """A send log that lost rows (or a producer that miscounted) disagrees with the plan the manifest
    recorded: the audit refuses it rather than judge fewer messages than were planned."""
    dm.check_conservation(matrix_rows.values(), {"s-f": 6, "s-a": 11})
    with pytest.raises(dm.ConservationError, match="s-f: the send log has 6 rows, the manifest planned 8"):
        dm.check_conservation(matrix_rows.values(), {"s-f": 8})


def test_corrupt_send_log_does_not_balance() -> None:
    """An id listed twice is merged into one message and a state outside the contract has no
    outcome; the job must refuse both rather than report a matrix."""
    send_logs = _send_logs()
    send_logs["s-e"] = pa.concat_tables([send_logs["s-e"], send_logs["s-e"].slice(0, 1)])
    rows = send_logs["s-b"].to_pylist()
    rows[5]["state"] = "lost-in-space"
    send_logs["s-b"] = pa.Table.from_pylist(rows, schema=SEND_LOG)
    with pytest.raises(dm.ConservationError) as err:
        dm.check_conservation(_audit(send_logs)[1].values())
    message = str(err.value)
    assert "s-e: sent=15 != delivered=5 + lost=1 + acked_duplicated=2 + failed_clean=1 + " in message
    assert "s-b: sent=7 != acked=5 + failed=1 + unknown=0 = 6" in message
    assert "s-a" not in message


LEGACY_SEND_LOG = pa.schema(  # the skeleton's send log: none of the optional columns
    [("id", pa.int64()), ("key", pa.string()), ("seq", pa.int64()), ("send_ts", pa.float64()),
     ("ack_ts", pa.float64()), ("partition", pa.int32()), ("offset", pa.int64()),
     ("error", pa.string()), ("state", pa.string())]
)
FULL_SEND_LOG = pa.schema(
    [("id", pa.int64()), ("key", pa.string()), ("seq", pa.int64()), ("producer", pa.string()),
     ("expected_partition", pa.int32()), ("txn", pa.int64()), ("aborted", pa.bool_()), ("retriable", pa.bool_()),
     ("send_ts", pa.float64()), ("ack_ts", pa.float64()), ("partition", pa.int32()), ("offset", pa.int64()),
     ("error", pa.string()), ("state", pa.string()), ("refused", pa.bool_()), ("fatal", pa.bool_()), ("topic", pa.string())]
)


def _write_send_log(path: Path, rows: list[tuple], schema: pa.Schema) -> None:
    padded = [(*row, *[None] * (len(FULL_SEND_LOG) - len(row))) for row in rows]  # the trailing topic may be left out
    columns = dict(zip(FULL_SEND_LOG.names, map(list, zip(*padded, strict=True)), strict=True))
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({name: columns[name] for name in schema.names}, schema=schema), path)


def test_send_log_defaults_and_missing_column(tmp_path: Path) -> None:
    _write_send_log(tmp_path / "odd dir/50% #1/legacy.parquet", _send_log_rows("s-c"), LEGACY_SEND_LOG)
    _write_send_log(tmp_path / "broken.parquet", _send_log_rows("s-c"), pa.schema(
        [f for f in LEGACY_SEND_LOG if f.name != "send_ts"]))
    entry = ScenarioEntry.model_validate({"scenario": "s-c", "send_log": "odd dir/50% #1/legacy.parquet"})
    table = dm.read_send_log(RunDir(tmp_path), entry)
    assert table.schema == SEND_LOG
    assert [(r["producer"], r["expected_partition"], r["txn"], r["aborted"], r["retriable"]) for r in table.to_pylist()] == [
        ("p0", None, None, False, None)
    ] * 2
    entry = ScenarioEntry.model_validate({"scenario": "s-c", "send_log": "broken.parquet"})
    with pytest.raises(ValueError, match=r"s-c: send log .*broken.parquet lacks column 'send_ts'"):
        dm.read_send_log(RunDir(tmp_path), entry)
    missing = ScenarioEntry.model_validate({"scenario": "s-c", "send_log": "gone.parquet"})
    with pytest.raises(FileNotFoundError, match="s-c: send log .*gone.parquet is missing"):
        dm.read_send_log(RunDir(tmp_path), missing)
    incomplete = ScenarioEntry.model_validate({"scenario": "s-c", "send_log": "gone.parquet", "evidence_complete": False})
    assert dm.read_send_log(RunDir(tmp_path), incomplete).num_rows == 0


def test_scenarios_are_dealt_by_planned_messages() -> None:
    entries = [ScenarioEntry.model_validate({"scenario": f"s{i}", "planned": planned}) for i, planned in enumerate([10, 40, 30, 20, None])]
    shares = dm.shares(entries, 2)
    assert [[e.scenario for e in share] for share in shares] == [["s1", "s0", "s4"], ["s2", "s3"]]
    assert sorted(e.scenario for share in dm.shares(entries, 8) for e in share) == sorted(e.scenario for e in entries)
    batches = dm.read_batches(entries, 50)
    assert [[e.scenario for e in batch] for batch in batches] == [["s0", "s1"], ["s2", "s3", "s4"]]
    assert [[e.scenario for e in batch] for batch in dm.read_batches(entries, 5)] == [["s0"], ["s1"], ["s2"], ["s3"], ["s4"]]


def test_main_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_dir = tmp_path / "run"
    scenarios = []
    for meta in SCENARIOS:
        name = meta["scenario"]
        if name == "s-c":
            continue
        send_log = None
        if name in (*SEND_LOGS, *SEND_LOG_ROWS):
            send_log = f"scenarios/{name}/send_log.parquet"
            schema = FULL_SEND_LOG if name in SEND_LOG_ROWS else LEGACY_SEND_LOG
            _write_send_log(run_dir / send_log, _send_log_rows(name), schema)
        scenarios.append(dict(meta, topic=f"acklab-test-{name}", partitions=2, send_log=send_log))
    manifest = run_dir / "manifest.json"
    manifest.write_text(json.dumps({"run_id": "t", "bootstrap_servers": "127.0.0.1:1", "scenarios": scenarios}))

    # A record of a scenario the manifest does not list is not audited.
    parsed = [(s, p, o, k, *_parse(v)) for s, p, o, k, v, *_ in [*RECORDS, ("s-x", 0, 0, "kx", b"0:0:")]]
    records = tmp_path / "records.parquet"
    pq.write_table(
        pa.table(
            dict(zip(("scenario", "partition", "offset", "key", "id", "seq"), map(list, zip(*parsed, strict=False)), strict=False)),
            schema=pa.schema([("scenario", pa.string()), ("partition", pa.int32()), ("offset", pa.int64()),
                              ("key", pa.string()), ("id", pa.int64()), ("seq", pa.int64())]),
        ),
        records,
    )

    out = tmp_path / "audit"
    dm.main(["--manifest", str(manifest), "--out", str(out), "--topic-records", str(records)])

    assert capsys.readouterr().out.strip().endswith(f"matrix: {out / 'matrix.json'}")
    assert not (out / "topic_records.parquet").exists()
    rows = json.loads((out / "matrix.json").read_text())
    matrix = pq.read_table(out / "matrix.parquet")  # a folder of Parquet parts, like the other outputs
    assert matrix.schema == MATRIX and matrix.to_pylist() == rows
    assert [r["scenario"] for r in rows] == ["s-a", "s-b", "s-d", "s-e", "s-f"]
    for row in rows:
        assert list(row) == list(dm.MATRIX_COLUMNS)
        assert all(type(row[c]) is int for c in COUNT_COLUMNS)
        assert row == EXPECTED[row["scenario"]]

    assert sorted(set(pq.read_table(out / "outcomes.parquet", columns=["scenario"])["scenario"].to_pylist())) == ["s-a", "s-b", "s-e", "s-f"]
    table = pq.read_table(out / "outcomes.parquet", filters=[("scenario", "=", "s-e")])
    got = {
        r["id"]: (r["outcome"], r["copies"], r["misrouted"], r["offset_mismatch"], r["reordered"])
        for r in table.to_pylist()
    }
    assert got == S_E_OUTCOMES


def test_synthetic_evidence_audits_exactly(tmp_path: Path) -> None:
    """Randomly planted anomalies of every class, over several generator chunks: the job's matrix
    equals the generator's own count of what it planted (the same check `make bench-audit` makes)."""
    run = synthetic.generate(
        tmp_path / "run", 24_000, chunk=5_000, rate=2_000.0, rates={name: 0.02 for name in synthetic.RATES}, seed=7
    )
    out = tmp_path / "audit"
    dm.main(["--manifest", str(run.manifest), "--out", str(out), "--topic-records", str(run.topic_records)])
    (row,) = json.loads((out / "matrix.json").read_text())
    counts = {name: value for name, value in run.expected.items() if isinstance(value, int)}
    assert min(counts.values()) > 0 and set(synthetic.RATES) <= set(counts)
    assert {name: row[name] for name in counts} == counts
    gap = {name: value for name, value in run.expected.items() if name not in counts}
    assert {name: row[name] for name in gap} == pytest.approx(gap, abs=1e-6)
    dm.check_conservation([row])


def test_a_record_stored_outside_its_keys_partition_is_misrouted_not_an_offset_mismatch() -> None:
    """planted-misroute's anomaly: the client was acked in the partition its key maps to, the broker
    stored the record in another one. It is misrouted (once), never also an offset mismatch; a
    record acked and stored where its key maps, at another offset, stays an offset mismatch."""
    rows = [
        # id key seq producer expected_partition txn aborted retriable send_ts ack_ts partition offset error state refused fatal
        (0, "p0-k0", 0, "p0", 0, None, False, None, 1.0, 1.5, 0, 0, None, "acked", False, False),  # where it was acked
        (1, "p0-k0", 1, "p0", 0, None, False, None, 1.0, 1.5, 0, 1, None, "acked", False, False),  # stored in partition 1
        (2, "p0-k0", 2, "p0", 0, None, False, None, 1.0, 1.5, 0, 2, None, "acked", False, False),  # stored at offset 7
        (3, "p0-k1", 0, "p0", 1, None, False, None, 1.0, 1.5, 1, 0, None, "acked", False, False),  # where it was acked
    ]
    stored = [("s", 0, 0, "p0-k0", b"0:0:"), ("s", 1, 1, "p0-k0", b"1:1:"), ("s", 0, 7, "p0-k0", b"2:2:"), ("s", 1, 0, "p0-k1", b"3:0:")]
    records = pa.Table.from_pylist(
        [_row(TOPIC_RECORDS, (s, p, o, k, *parse_prefix(v))) for s, p, o, k, v in stored], schema=TOPIC_RECORDS
    )
    table = sa.outcome_table("s", _send_log(rows), records).to_pylist()
    got = {r["id"]: (r["outcome"], r["misrouted"], r["offset_mismatch"]) for r in table}
    assert got == {
        0: ("delivered", False, False), 1: ("delivered", True, False), 2: ("delivered", False, True), 3: ("delivered", False, False),
    }
