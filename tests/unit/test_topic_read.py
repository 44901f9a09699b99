"""The audit's reading of records back into columns (`read_back`) and the archive's rows (`_table`),
on confluent-kafka Messages made in the test: the topic records' schema, keys, prefixes and nulls."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException, Message

from acklab.checker.topic_read import _table
from acklab.store.schemas import TOPIC_RECORDS
from acklab.workload.records import read_back


def test_records_read_back_become_archive_rows() -> None:
    messages = [
        Message(topic="t-b", partition=2, offset=7, key=b"p0-k1", value=b"0041:0003:xxxx"),
        Message(topic="t-a", partition=0, offset=0, key=None, value=b"12:3:"),
        Message(topic="t-a", partition=1, error=KafkaError(KafkaError._PARTITION_EOF)),
        Message(topic="t-a", partition=0, offset=1, key=b"\xff", value=b"no prefix"),
        Message(topic="t-b", partition=2, offset=8, key=b"p0-k1", value=None),
    ]
    keys: dict[bytes, int] = {}
    ends: list[tuple[str, int]] = []
    chunks = [read_back(messages[:2], {"t-a": 0, "t-b": 1}, keys, ends), read_back(messages[2:], {"t-a": 0, "t-b": 1}, keys, ends)]
    assert ends == [("t-a", 1)]
    table = _table(chunks, ["t-a", "t-b"], ["scenario-a", "scenario-b"], [key.decode("utf-8", "replace") for key in keys])
    assert table.schema == TOPIC_RECORDS
    assert table.to_pylist() == [
        {"scenario": "scenario-b", "partition": 2, "offset": 7, "key": "p0-k1", "id": 41, "seq": 3, "topic": "t-b"},
        {"scenario": "scenario-a", "partition": 0, "offset": 0, "key": None, "id": 12, "seq": 3, "topic": "t-a"},
        {"scenario": "scenario-a", "partition": 0, "offset": 1, "key": "\ufffd", "id": None, "seq": None, "topic": "t-a"},
        {"scenario": "scenario-b", "partition": 2, "offset": 8, "key": "p0-k1", "id": None, "seq": None, "topic": "t-b"},
    ]


def test_an_error_other_than_a_partitions_end_fails_the_read() -> None:
    failed = Message(topic="t-a", partition=0, error=KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED))
    with pytest.raises(KafkaException):
        read_back([failed], {"t-a": 0}, {}, [])


def test_nothing_read_is_an_empty_table() -> None:
    table = _table([read_back([], {}, {}, [])], [], [], [])
    assert table.num_rows == 0 and table.schema == TOPIC_RECORDS


def test_output_rows_parse_each_value_as_parse_output_does_and_mark_the_committed() -> None:
    from acklab.checker.topic_read import output_rows
    from acklab.store.schemas import PIPELINE_OUTPUT_RECORDS
    from acklab.workload.processing import OUTPUT_FIELDS, output_value, parse_output

    values = [
        output_value(b"12:3:", 0, 1, 5, 2, 55, 7), output_value(b"1:0:", 2, 0, -1, 0, 9, 0), b"12:3:0:1:5:2:55:7\n", b"12:3:0:1:5:2:55",
        b"x:3:0:1:5:2:55:7", b"", None, "١:2:3:4:5:6:7:8".encode(),
    ]
    records = [(i % 3, 100 + i, value) for i, value in enumerate(values)]
    table = output_rows("s", records, {(0, 100), (2, 105), (9, 9)})
    assert table.schema == PIPELINE_OUTPUT_RECORDS
    rows = table.to_pylist()
    for row, (partition, offset, value) in zip(rows, records, strict=True):
        expected = parse_output(value) or (None,) * len(OUTPUT_FIELDS)
        assert tuple(row[name] for name in OUTPUT_FIELDS) == expected, value
        assert (row["scenario"], row["partition"], row["offset"]) == ("s", partition, offset)
    assert [row["committed"] for row in rows] == [True, False, False, False, False, True, False, False]
    assert [parse_output(v) is not None for v in values] == [True, True, False, False, False, False, False, False]
    assert output_rows("s", [], set()).num_rows == 0
