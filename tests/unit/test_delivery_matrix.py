"""Exactness tests for spark/delivery_matrix.py on synthetic evidence with planted anomalies."""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

JOB_PATH = Path(__file__).resolve().parents[2] / "spark" / "delivery_matrix.py"
_spec = importlib.util.spec_from_file_location("delivery_matrix", JOB_PATH)
dm = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(dm)

T0 = 100.0  # send_ts of id i is T0 + i
# Send log rows: (id, key, seq, state, ack latency ms or None). Failed messages get a (late)
# error report, which must not count as an ack time.
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
]
META = [
    ("s-a", "leader-ack", "leader-kill", "leader-durable", True, True, None),
    ("s-b", "idempotent", "partition", "exactly-once", False, True, None),
    ("s-c", "fire-and-forget", "none", "none", None, True, None),
    ("s-d", "all-ack", "broker-pause", "durable", None, False, "producer crashed"),  # no evidence
]


def _meta(name: str) -> dict:
    keys = ("scenario", "profile", "fault", "guarantee", "fault_effective", "evidence_complete", "incomplete_reason")
    return dict(zip(keys, next(m for m in META if m[0] == name)))


def _send_log_rows(scenario: str) -> list[tuple]:
    rows = []
    for id_, key, seq, state, latency in SEND_LOGS[scenario]:
        send_ts = T0 + id_
        ack_ts = send_ts + latency / 1000 if state == "acked" else (send_ts + 9.0 if state == "failed" else None)
        acked = state == "acked"
        rows.append(
            (scenario, id_, key, seq, send_ts, ack_ts, 0 if acked else None, id_ if acked else None,
             None if acked else ("_MSG_TIMED_OUT" if state == "failed" else None), state)
        )
    return rows


EXPECTED = {
    "s-a": dict(
        _meta("s-a"), sent=11, acked=7, failed=2, unknown=2, records_read=14, delivered=4, lost=1,
        duplicated=3, duplicates=4, acked_duplicated=2, failed_clean=1, indeterminate=2,
        unknown_absent=1, unexpected=2, reordered=1,
        ack_latency_p50_ms=pytest.approx(40.0), ack_latency_p99_ms=pytest.approx(69.4),
        ack_latency_max_ms=pytest.approx(70.0), acked_per_s=pytest.approx(7 / 10.07),
    ),
    "s-b": dict(
        _meta("s-b"), sent=7, acked=5, failed=1, unknown=1, records_read=9, delivered=5, lost=0,
        duplicated=1, duplicates=2, acked_duplicated=0, failed_clean=0, indeterminate=1,
        unknown_absent=1, unexpected=1, reordered=2,
        ack_latency_p50_ms=pytest.approx(5.0), ack_latency_p99_ms=pytest.approx(5.0),
        ack_latency_max_ms=pytest.approx(5.0), acked_per_s=pytest.approx(5 / 4.005),
    ),
    "s-c": dict(
        _meta("s-c"), sent=2, acked=2, failed=0, unknown=0, records_read=0, delivered=0, lost=2,
        duplicated=0, duplicates=0, acked_duplicated=0, failed_clean=0, indeterminate=0,
        unknown_absent=0, unexpected=0, reordered=0,
        ack_latency_p50_ms=pytest.approx(2.0), ack_latency_p99_ms=pytest.approx(2.98),
        ack_latency_max_ms=pytest.approx(3.0), acked_per_s=pytest.approx(2 / 1.003),
    ),
    "s-d": dict(
        _meta("s-d"), **{c: 0 for c in dm.COUNT_COLUMNS},
        ack_latency_p50_ms=None, ack_latency_p99_ms=None, ack_latency_max_ms=None, acked_per_s=None,
    ),
}


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    session = (
        SparkSession.builder.master("local[2]")
        .appName("test-delivery-matrix")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.ui.enabled", "false")
        .getOrCreate()
    )
    yield session
    session.stop()


def _records(spark: SparkSession) -> DataFrame:
    raw = spark.createDataFrame(RECORDS, "scenario string, partition int, offset long, key string, value binary")
    return raw.select("scenario", "partition", "offset", "key", dm.parse_value(F.col("value")).alias("v")).select(
        "scenario", "partition", "offset", "key", "v.id", "v.seq"
    )


@pytest.fixture(scope="module")
def matrix(spark: SparkSession) -> DataFrame:
    send_logs = spark.createDataFrame(
        [row for scenario in SEND_LOGS for row in _send_log_rows(scenario)], dm.SEND_LOG_SCHEMA
    )
    meta = spark.createDataFrame(META, dm.META_SCHEMA)
    return dm.compute_matrix(send_logs, _records(spark), meta)


@pytest.fixture(scope="module")
def matrix_rows(matrix: DataFrame) -> dict[str, dict]:
    return {row.scenario: row.asDict() for row in matrix.collect()}


def test_parse_value(spark: SparkSession) -> None:
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
        (b"a:3:x", None, None),
        (b"\xff\xfe:1:", None, None),
        (b"", None, None),
        (None, None, None),
    ]
    df = spark.createDataFrame([(i, v) for i, (v, _, _) in enumerate(values)], "i int, value binary")
    got = {r.i: (r.id, r.seq) for r in df.select("i", dm.parse_value(F.col("value")).alias("p")).select("i", "p.*").collect()}
    assert got == {i: (id_, seq) for i, (_, id_, seq) in enumerate(values)}


def test_matrix_schema(matrix: DataFrame) -> None:
    assert tuple(matrix.columns) == dm.MATRIX_COLUMNS
    types = dict(matrix.dtypes)
    assert all(types[c] == "bigint" for c in dm.COUNT_COLUMNS)
    assert all(types[c] == "double" for c in dm.METRIC_COLUMNS)


@pytest.mark.parametrize("scenario", sorted(EXPECTED))
def test_matrix_exact(matrix_rows: dict[str, dict], scenario: str) -> None:
    assert matrix_rows[scenario] == EXPECTED[scenario]


def test_matrix_rows_balance(matrix_rows: dict[str, dict]) -> None:
    assert sorted(matrix_rows) == sorted(EXPECTED)
    dm.check_conservation(matrix_rows.values())


def test_broken_identity_raises(matrix_rows: dict[str, dict]) -> None:
    row = dict(matrix_rows["s-a"], lost=2)
    with pytest.raises(dm.ConservationError) as err:
        dm.check_conservation([matrix_rows["s-b"], row])
    message = str(err.value)
    assert "s-a: acked=7 != delivered=4 + lost=2 + acked_duplicated=2 = 8" in message
    assert "s-a: sent=11 != " in message
    assert "s-b" not in message


def test_main_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_dir = tmp_path / "run"
    scenarios = []
    for name in ("s-a", "s-b", "s-d"):
        meta = _meta(name)
        send_log = None
        if name in SEND_LOGS:
            send_log = f"scenarios/{name}/send_log.parquet"
            (run_dir / send_log).parent.mkdir(parents=True)
            columns = list(zip(*_send_log_rows(name)))[1:]
            table = pa.table(
                dict(zip(("id", "key", "seq", "send_ts", "ack_ts", "partition", "offset", "error", "state"), columns)),
                schema=pa.schema(
                    [("id", pa.int64()), ("key", pa.string()), ("seq", pa.int64()), ("send_ts", pa.float64()),
                     ("ack_ts", pa.float64()), ("partition", pa.int32()), ("offset", pa.int64()),
                     ("error", pa.string()), ("state", pa.string())]
                ),
            )
            pq.write_table(table, run_dir / send_log)
        scenarios.append(dict(meta, topic=f"acklab-test-{name}", partitions=2, send_log=send_log))
    manifest = run_dir / "manifest.json"
    manifest.write_text(json.dumps({"run_id": "t", "bootstrap_servers": "127.0.0.1:1", "scenarios": scenarios}))

    parsed = [(s, p, o, k, *_parse(v)) for s, p, o, k, v in RECORDS]
    records = tmp_path / "records.parquet"
    pq.write_table(
        pa.table(
            dict(zip(("scenario", "partition", "offset", "key", "id", "seq"), map(list, zip(*parsed)))),
            schema=pa.schema([("scenario", pa.string()), ("partition", pa.int32()), ("offset", pa.int64()),
                              ("key", pa.string()), ("id", pa.int64()), ("seq", pa.int64())]),
        ),
        records,
    )

    out = tmp_path / "audit"
    dm.main(["--manifest", str(manifest), "--out", str(out), "--topic-records", str(records)])

    assert capsys.readouterr().out.strip().endswith(f"matrix: {out / 'matrix.json'}")
    assert (out / "matrix.parquet").is_dir()
    assert not (out / "topic_records.parquet").exists()
    rows = json.loads((out / "matrix.json").read_text())
    assert [r["scenario"] for r in rows] == ["s-a", "s-b", "s-d"]
    for row in rows:
        assert list(row) == list(dm.MATRIX_COLUMNS)
        assert all(type(row[c]) is int for c in dm.COUNT_COLUMNS)
        assert row == EXPECTED[row["scenario"]]


def _parse(value: bytes) -> tuple[int | None, int | None]:
    head = value.split(b":")
    try:
        return int(head[0]), int(head[1])
    except (IndexError, ValueError):
        return None, None
