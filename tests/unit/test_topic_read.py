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
