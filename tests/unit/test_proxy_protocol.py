"""The proxy's Kafka codec: exact round trips of every supported Produce version, the frames real
librdkafka clients exchanged with real brokers (`acklab.tools.capture`), and the responses the
faults write."""

from __future__ import annotations

import json
import struct
from dataclasses import replace
from pathlib import Path

import pytest

from acklab.proxy.answers import error_answer, metadata_with_error, top_error
from acklab.proxy.codes import ADD_PARTITIONS_TO_TXN, END_TXN, ERRORS, FIND_COORDINATOR, INIT_PRODUCER_ID, PRODUCE
from acklab.proxy.protocol import (
    PRODUCE_VERSIONS,
    LeaderIdAndEpoch,
    NodeEndpoint,
    PartitionData,
    PartitionResponse,
    ProduceRequest,
    ProduceResponse,
    ProtocolError,
    RecordError,
    RequestHeader,
    TopicData,
    TopicResponse,
    Writer,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    error_response,
    peek_header,
    with_error,
)

CAPTURED = json.loads((Path(__file__).parent / "data" / "produce_frames.json").read_text())
TOPIC_ID = bytes(range(16))


def request(version: int, transactional_id: str | None = "txn-ä") -> tuple[RequestHeader, ProduceRequest]:
    """Two topics, one with two partitions (one null record set), with what `version` can carry."""
    flexible, ids = version >= 9, version >= 13
    tags = ((3, b"\x01\x02"),) if flexible else ()
    topics = (
        TopicData("" if ids else "orders", (PartitionData(0, b"\x00" * 61 + b"batch"), PartitionData(7, None, tags)), TOPIC_ID if ids else bytes(16)),
        TopicData("" if ids else "x" * 200, (PartitionData(1, b"r"),), bytes(16), tags),  # a 2-byte varint length
    )
    header = RequestHeader(PRODUCE, version, 12345, "rdkafka", tags)
    return header, ProduceRequest(transactional_id, -1, 30000, topics, tags)


def response(version: int) -> ProduceResponse:
    """Every field `version` carries, set to a non-default value."""
    flexible, ids = version >= 9, version >= 13
    partition = PartitionResponse(
        index=2,
        error_code=6,
        base_offset=1 << 40,
        log_append_time_ms=1_700_000_000_000,
        log_start_offset=17 if version >= 5 else -1,
        record_errors=(RecordError(3, "bad record", ((1, b"z"),) if flexible else ()), RecordError(4, None)) if version >= 8 else (),
        error_message="not the leader" if version >= 8 else None,
        current_leader=LeaderIdAndEpoch(2, 9) if version >= 10 else None,
        tagged=((5, b"unknown"),) if flexible else (),
    )
    ok = PartitionResponse(0, 0, 100, -1, 0 if version >= 5 else -1)
    topic = TopicResponse("" if ids else "orders", (partition, ok), TOPIC_ID if ids else bytes(16), ((1, b""),) if flexible else ())
    endpoints = (NodeEndpoint(2, "127.0.0.1", 9092, None), NodeEndpoint(3, "host", 1, "rack-a")) if version >= 10 else ()
    return ProduceResponse((topic,), 250, endpoints, ((2, b"\xff"),) if flexible else ())


@pytest.mark.parametrize("version", PRODUCE_VERSIONS)
@pytest.mark.parametrize("transactional_id", [None, "txn-ä"])
def test_request_round_trip(version: int, transactional_id: str | None) -> None:
    header, produce = request(version, transactional_id)
    body = encode_request(header, produce)
    assert decode_request(body) == (header, produce)
    assert encode_request(*decode_request(body)) == body
    assert peek_header(body) == (PRODUCE, version, 12345)


@pytest.mark.parametrize("version", PRODUCE_VERSIONS)
def test_response_round_trip(version: int) -> None:
    body = encode_response(12345, response(version), version)
    assert decode_response(body, version) == (12345, response(version))
    assert encode_response(*decode_response(body, version), version) == body


def test_flexible_versions_are_compact() -> None:
    """v9 writes a 6-byte topic name as length+1 in one varint byte; v8 as an int32."""
    v8, v9 = (encode_request(RequestHeader(PRODUCE, v, 1, None), ProduceRequest(None, 1, 5, (TopicData("orders", ()),))) for v in (8, 9))
    header_v1 = 8 + 2  # api key, version, correlation, null client id (int16 -1)
    assert v8[header_v1:] == b"\xff\xff" + b"\x00\x01" + b"\x00\x00\x00\x05" + b"\x00\x00\x00\x01" + b"\x00\x06orders" + b"\x00\x00\x00\x00"
    assert v9[header_v1:] == b"\x00" + b"\x00" + b"\x00\x01" + b"\x00\x00\x00\x05" + b"\x02" + b"\x07orders" + b"\x01\x00" + b"\x00"


@pytest.mark.parametrize("frame", CAPTURED, ids=lambda f: f"kafka-{f['kafka']}-ck-{f['confluent_kafka']}-{f['producer']}")
def test_frames_captured_from_librdkafka(frame: dict) -> None:
    """Real PRODUCE exchanges (3 records to partition 0 of a fresh topic) decode and re-encode exactly."""
    body, answer = bytes.fromhex(frame["request"]), bytes.fromhex(frame["response"])
    header, produce = decode_request(body)
    assert (header.api_version, header.client_id) == (frame["api_version"], "rdkafka")
    assert produce.acks == -1
    assert (produce.transactional_id is not None) == (frame["producer"] == "transactional")
    ((topic,),) = [produce.topics]
    assert topic.name.startswith(f"capture-{frame['producer']}-")
    ((partition,),) = [topic.partitions]
    assert partition.index == 0 and partition.records is not None
    assert partition.records[16] == 2  # RecordBatch magic: message format v2
    assert int.from_bytes(partition.records[57:61], "big") == 3  # records in the batch
    assert encode_request(header, produce) == body
    correlation, produced = decode_response(answer, header.api_version)
    assert correlation == header.correlation_id
    assert [(t.name, [p.index for p in t.partitions]) for t in produced.topics] == [(topic.name, [0])]
    assert encode_response(correlation, produced, header.api_version) == answer


def test_captured_versions() -> None:
    """Which Produce version each client negotiated with each broker (none uses topic ids, v13)."""
    seen = {(f["kafka"], f["librdkafka"]): f["api_version"] for f in CAPTURED}
    assert seen == {("4.3.1", "2.16.0"): 10, ("3.9.2", "2.16.0"): 10, ("4.3.1", "2.0.2"): 7, ("3.9.2", "2.0.2"): 7}


@pytest.mark.parametrize("version", PRODUCE_VERSIONS)
def test_error_response_refuses_every_partition(version: int) -> None:
    header, produce = request(version)
    correlation, answer = decode_response(error_response(header, produce, 19), version)
    assert correlation == header.correlation_id
    assert [(t.name, t.topic_id) for t in answer.topics] == [(t.name, t.topic_id) for t in produce.topics]
    partitions = [p for t in answer.topics for p in t.partitions]
    assert [p.index for p in partitions] == [0, 7, 1]
    assert {(p.error_code, p.base_offset, p.log_append_time_ms, p.log_start_offset, p.current_leader) for p in partitions} == {
        (19, -1, -1, -1, None)
    }
    assert (answer.throttle_time_ms, answer.node_endpoints) == (0, ())


@pytest.mark.parametrize("version", PRODUCE_VERSIONS)
def test_with_error_replaces_only_appended_partitions(version: int) -> None:
    original = response(version)
    body, changed = with_error(encode_response(7, original, version), version, 20)
    assert changed == 1
    correlation, rewritten = decode_response(body, version)
    failed, appended = rewritten.topics[0].partitions
    assert correlation == 7
    assert failed == original.topics[0].partitions[0]  # already an error: kept
    assert appended == replace(original.topics[0].partitions[1], error_code=20)  # offsets kept
    assert replace(rewritten, topics=()) == replace(original, topics=())


def test_captured_response_rewritten() -> None:
    frame = next(f for f in CAPTURED if f["api_version"] == 10 and f["producer"] == "idempotent")
    body, changed = with_error(bytes.fromhex(frame["response"]), 10, ERRORS["NOT_ENOUGH_REPLICAS_AFTER_APPEND"].code)
    assert changed == 1 and len(body) == len(frame["response"]) // 2
    assert decode_response(body, 10)[1].topics[0].partitions[0].error_code == 20


def test_bad_frames_raise_protocol_errors() -> None:
    header, produce = request(10)
    body = encode_request(header, produce)
    for broken in (body[:-1], body + b"\x00", body[:20]):
        with pytest.raises(ProtocolError):
            decode_request(broken)
    with pytest.raises(ProtocolError, match="version 2 not supported"):
        encode_request(replace(header, api_version=2), produce)
    with pytest.raises(ProtocolError, match="not PRODUCE"):
        decode_request(encode_request(replace(header, api_key=1, api_version=10), produce))  # header only: api 1 is not flexible here


def test_error_table_has_kafkas_numbers() -> None:
    assert {name: (e.code, e.retriable) for name, e in ERRORS.items() if name.startswith("NOT_")} == {
        "NOT_LEADER_OR_FOLLOWER": (6, True),
        "NOT_ENOUGH_REPLICAS": (19, True),
        "NOT_ENOUGH_REPLICAS_AFTER_APPEND": (20, True),
        "NOT_COORDINATOR": (16, True),
    }


def test_error_answers_for_the_coordinator_requests_follow_kafkas_layouts() -> None:
    """Each answer carries the request's correlation id and the error where Kafka's schema puts it."""

    def request(api: int, version: int, payload: bytes, flexible: bool) -> bytes:
        writer = Writer()
        writer.out += struct.pack(">hhi", api, version, 5)
        writer.string("c", False)
        if flexible:
            writer.tags({}, ())
        return bytes(writer.out) + payload

    end_txn_v1 = request(END_TXN, 1, b"", False)
    assert error_answer(end_txn_v1, 51) == struct.pack(">iih", 5, 0, 51)
    assert top_error(error_answer(end_txn_v1, 51), END_TXN, 1) == 51
    assert error_answer(request(INIT_PRODUCER_ID, 1, b"", False), 7) == struct.pack(">iihqh", 5, 0, 7, -1, -1)
    assert error_answer(request(INIT_PRODUCER_ID, 4, b"", True), 7) == struct.pack(">ibihqhb", 5, 0, 0, 7, -1, -1, 0)
    assert error_answer(request(FIND_COORDINATOR, 0, b"", False), 15) == struct.pack(">ihih", 5, 15, -1, 0) + struct.pack(">i", -1)
    keys = struct.pack(">b", 1) + bytes([2, 3]) + b"tx" + b"\x00"  # key_type, one compact key "tx", tags
    answer = error_answer(request(FIND_COORDINATOR, 4, keys, True), 15)
    assert answer == struct.pack(">ibi", 5, 0, 0) + bytes([2, 3]) + b"tx" + struct.pack(">i", -1) + b"\x01" + struct.pack(">ih", -1, 15) + b"\x00\x00\x00"
    add = struct.pack(">h", 2) + b"tx" + struct.pack(">qh", 1, 0) + struct.pack(">i", 1) + struct.pack(">h", 1) + b"t" + struct.pack(">iii", 2, 0, 1)
    assert error_answer(request(ADD_PARTITIONS_TO_TXN, 2, add, False), 48) == struct.pack(">iii", 5, 0, 1) + struct.pack(">h", 1) + b"t" + struct.pack(
        ">iihih", 2, 0, 48, 1, 48
    )
    with pytest.raises(ProtocolError, match="not answered"):
        error_answer(request(ADD_PARTITIONS_TO_TXN, 4, b"", True), 48)
    with pytest.raises(ProtocolError, match="api 3 is not answered"):
        error_answer(request(3, 12, b"", True), 5)
    assert ERRORS["REQUEST_TIMED_OUT"].code == 7 and not ERRORS["INVALID_RECORD"].retriable


def _metadata(version: int, topics: list[tuple[int, str, bytes, list[int]]]) -> bytes:
    """A Metadata answer of `version` as Kafka's schema lays it out: two brokers, a cluster id, a
    controller, and per topic (error, name, topic id, partitions led by broker 1)."""
    flex = version >= 9
    writer = Writer()
    writer.int32(5)
    if flex:
        writer.tags({}, ())
    if version >= 3:
        writer.int32(0)
    writer.length(2, flex)
    for node in (1, 2):
        writer.int32(node)
        writer.string("127.0.0.1", flex)
        writer.int32(9000 + node)
        if version >= 1:
            writer.string(None, flex)
        if flex:
            writer.tags({}, ())
    if version >= 2:
        writer.string("cluster", flex)
    if version >= 1:
        writer.int32(2)
    writer.length(len(topics), flex)
    for error, name, topic_id, partitions in topics:
        writer.int16(error)
        writer.string(name, flex)
        if version >= 10:
            writer.uuid(topic_id)
        if version >= 1:
            writer.int8(0)
        writer.length(len(partitions), flex)
        for index in partitions:
            writer.int16(0)
            writer.int32(index)
            writer.int32(1)
            if version >= 7:
                writer.int32(4)
            for nodes in ([1, 2], [1, 2], []) if version >= 5 else ([1, 2], [1, 2]):
                writer.length(len(nodes), flex)
                for node in nodes:
                    writer.int32(node)
            if flex:
                writer.tags({}, ())
        if version >= 8:
            writer.int32(-2147483648)
        if flex:
            writer.tags({}, ())
    if 8 <= version <= 10:
        writer.int32(-2147483648)
    if version >= 13:
        writer.int16(0)
    if flex:
        writer.tags({}, ())
    return bytes(writer.out)


@pytest.mark.parametrize("version", range(14))
def test_a_metadata_answer_rewritten_keeps_the_brokers_and_fails_every_topic(version: int) -> None:
    """Every topic gets the error, no partitions and a zero id; brokers, cluster id and controller stay."""
    topic_id = bytes(range(16))
    answer = _metadata(version, [(0, "orders", topic_id, [0, 1, 2]), (0, "audit", topic_id, [0])])
    rewritten, topics = metadata_with_error(answer, version, ERRORS["TOPIC_AUTHORIZATION_FAILED"].code)
    assert topics == 2
    assert rewritten == _metadata(version, [(29, "orders", bytes(16), []), (29, "audit", bytes(16), [])])
    with pytest.raises(ProtocolError):
        metadata_with_error(answer + b"\x00", version, 29)
    with pytest.raises(ProtocolError):
        metadata_with_error(answer[:-3], version, 29)
