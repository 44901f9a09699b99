"""The part of the Kafka wire protocol the fault proxy reads and writes: request and response
headers, ProduceRequest and ProduceResponse (versions 3-13). The numbers it names (API keys, error
codes) are `acklab.proxy.codes`'.

Encoding (Kafka protocol guide, and the message schemas in kafka-clients'
``common/message/*.json``): integers are big-endian. Non-flexible versions prefix strings with an
int16 length, bytes and arrays with an int32 length (-1 = null). Flexible versions (Produce 9+,
request header v2, response header v1) prefix them with an unsigned varint of length + 1
(0 = null) and end every struct with tagged fields: a varint count, then per field a varint tag,
a varint size and the data. The request header's client id keeps its int16 length in every
version. Produce 13 names topics by topic id (uuid) instead of by name.

Decoding then encoding a frame gives back the same bytes (unknown tagged fields are kept raw), so
a response can be rewritten field by field.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from acklab.proxy.codes import END_TXN, PRODUCE

PRODUCE_VERSIONS = range(3, 14)  # Kafka 4 accepts 3-13 (3.x also 0-2, message format v0/v1: not parsed here)
PRODUCE_FLEXIBLE = 9
PRODUCE_TOPIC_IDS = 13
NO_UUID = bytes(16)

Tags = tuple[tuple[int, bytes], ...]  # unknown tagged fields, (tag, raw data), in tag order

_I16, _I32, _I64 = struct.Struct(">h"), struct.Struct(">i"), struct.Struct(">q")
_HEADER = struct.Struct(">hhi")


class ProtocolError(ValueError):
    """A frame that does not parse as the version it claims."""


# ---- primitives ---------------------------------------------------------------------------


class Reader:
    """Reads primitives from a frame, left to right."""

    __slots__ = ("data", "pos")

    def __init__(self, data: bytes | memoryview, pos: int = 0) -> None:
        self.data, self.pos = memoryview(data), pos

    def _take(self, size: int) -> memoryview:
        if size < 0 or self.pos + size > len(self.data):
            raise ProtocolError(f"frame too short: {size} bytes wanted at {self.pos} of {len(self.data)}")
        chunk = self.data[self.pos : self.pos + size]
        self.pos += size
        return chunk

    def _unpack(self, fmt: struct.Struct) -> int:
        return fmt.unpack(self._take(fmt.size))[0]

    def int8(self) -> int:
        return int.from_bytes(self._take(1), "big", signed=True)

    def int16(self) -> int:
        return self._unpack(_I16)

    def int32(self) -> int:
        return self._unpack(_I32)

    def int64(self) -> int:
        return self._unpack(_I64)

    def uvarint(self) -> int:
        value = shift = 0
        while True:
            byte = self._take(1)[0]
            value |= (byte & 0x7F) << shift
            if byte < 0x80:
                return value
            shift += 7
            if shift > 28:
                raise ProtocolError("varint longer than 5 bytes")

    def uuid(self) -> bytes:
        return bytes(self._take(16))

    def length(self, flexible: bool) -> int:
        """An array, string or bytes length; -1 = null."""
        return self.uvarint() - 1 if flexible else self.int32()

    def bytes_(self, flexible: bool) -> bytes | None:
        size = self.length(flexible)
        return None if size < 0 else bytes(self._take(size))

    def string(self, flexible: bool) -> str | None:
        size = self.uvarint() - 1 if flexible else self.int16()
        return None if size < 0 else str(self._take(size), "utf-8")

    def tags(self) -> dict[int, bytes]:
        return {self.uvarint(): bytes(self._take(self.uvarint())) for _ in range(self.uvarint())}

    def end(self) -> None:
        if self.pos != len(self.data):
            raise ProtocolError(f"{len(self.data) - self.pos} bytes left over")


class Writer:
    """Builds a frame from primitives."""

    __slots__ = ("out",)

    def __init__(self) -> None:
        self.out = bytearray()

    def int8(self, value: int) -> None:
        self.out += value.to_bytes(1, "big", signed=True)

    def int16(self, value: int) -> None:
        self.out += _I16.pack(value)

    def int32(self, value: int) -> None:
        self.out += _I32.pack(value)

    def int64(self, value: int) -> None:
        self.out += _I64.pack(value)

    def uvarint(self, value: int) -> None:
        while value >= 0x80:
            self.out.append((value & 0x7F) | 0x80)
            value >>= 7
        self.out.append(value)

    def uuid(self, value: bytes) -> None:
        if len(value) != 16:
            raise ProtocolError(f"a uuid has 16 bytes, not {len(value)}")
        self.out += value

    def length(self, size: int, flexible: bool) -> None:
        self.uvarint(size + 1) if flexible else self.int32(size)

    def bytes_(self, value: bytes | None, flexible: bool) -> None:
        self.length(-1 if value is None else len(value), flexible)
        if value is not None:
            self.out += value

    def string(self, value: str | None, flexible: bool) -> None:
        raw = None if value is None else value.encode()
        size = -1 if raw is None else len(raw)
        self.uvarint(size + 1) if flexible else self.int16(size)
        if raw is not None:
            self.out += raw

    def tags(self, known: Mapping[int, bytes], unknown: Tags) -> None:
        fields = sorted({**dict(unknown), **known}.items())
        self.uvarint(len(fields))
        for tag, data in fields:
            self.uvarint(tag)
            self.uvarint(len(data))
            self.out += data


def _unknown(tags: dict[int, bytes], known: tuple[int, ...] = ()) -> Tags:
    return tuple(sorted((tag, data) for tag, data in tags.items() if tag not in known))


# ---- headers ------------------------------------------------------------------------------

FLEXIBLE_FROM = {PRODUCE: PRODUCE_FLEXIBLE, END_TXN: 3}  # the APIs the proxy reads beyond the header


def flexible(api_key: int, api_version: int) -> bool:
    """Whether this request (and its response) uses flexible encoding: header v2 / v1."""
    return api_version >= FLEXIBLE_FROM.get(api_key, 1 << 15)


@dataclass(frozen=True)
class RequestHeader:
    """Request header v1 (v2 adds tagged fields, for flexible requests)."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    tagged: Tags = ()

    @property
    def flexible(self) -> bool:
        return flexible(self.api_key, self.api_version)

    @classmethod
    def read(cls, reader: Reader) -> RequestHeader:
        api_key, api_version, correlation_id = reader.int16(), reader.int16(), reader.int32()
        client_id = reader.string(False)
        tagged = _unknown(reader.tags()) if flexible(api_key, api_version) else ()
        return cls(api_key, api_version, correlation_id, client_id, tagged)

    def write(self, writer: Writer) -> None:
        writer.out += _HEADER.pack(self.api_key, self.api_version, self.correlation_id)
        writer.string(self.client_id, False)
        if self.flexible:
            writer.tags({}, self.tagged)


def peek_header(body: bytes) -> tuple[int, int, int]:
    """(api_key, api_version, correlation_id) of a request body, without parsing the rest."""
    return _HEADER.unpack_from(body)


def response_header(correlation_id: int, flexible_: bool) -> bytes:
    """Response header v0 (correlation id) or v1 (and no tagged fields)."""
    return _I32.pack(correlation_id) + (b"\x00" if flexible_ else b"")


# ---- ProduceRequest -----------------------------------------------------------------------


BATCH_PRODUCER = struct.Struct(">qhi")  # a v2 record batch's producerId, producerEpoch, baseSequence
BATCH_PRODUCER_AT, BATCH_MAGIC_AT = 43, 16
BATCH_LENGTH_AT, BATCH_COUNT_AT, BATCH_OVERHEAD = 8, 57, 12  # batchLength, recordsCount; baseOffset + batchLength precede the length
BATCH_ATTRIBUTES_AT, BATCH_RECORDS_AT, BATCH_COMPRESSION = 21, 61, 0x07  # attributes (int16), first record, compression bits


def _varint(data: bytes, at: int) -> tuple[int, int]:
    """A zigzag varint (or varlong) of a record at `at`: (value, the position after it)."""
    value = shift = 0
    while True:
        if at >= len(data) or shift > 63:
            raise ProtocolError("record varint cut short or too long")
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return (value >> 1) ^ -(value & 1), at
        shift += 7


@dataclass(frozen=True)
class PartitionData:
    index: int
    records: bytes | None
    tagged: Tags = ()

    def producer_sequence(self) -> tuple[int, int, int] | None:
        """(producer id, epoch, base sequence) of the first record batch, if it is an idempotent
        producer's (producer id >= 0) v2 batch; else None."""
        records = self.records
        if records is None or len(records) < BATCH_PRODUCER_AT + BATCH_PRODUCER.size or records[BATCH_MAGIC_AT] != 2:
            return None
        producer_id, epoch, sequence = BATCH_PRODUCER.unpack_from(records, BATCH_PRODUCER_AT)
        return (producer_id, epoch, sequence) if producer_id >= 0 else None

    def record_count(self) -> int | None:
        """How many records its v2 record batches hold (the batch headers' recordsCount, readable
        compressed or not); None if it holds none or any batch is not a whole v2 batch."""
        records, at, count = self.records or b"", 0, 0
        while at < len(records):
            if len(records) < at + BATCH_COUNT_AT + 4 or records[at + BATCH_MAGIC_AT] != 2:
                return None
            count += _I32.unpack_from(records, at + BATCH_COUNT_AT)[0]
            at += BATCH_OVERHEAD + _I32.unpack_from(records, at + BATCH_LENGTH_AT)[0]
        return count if at == len(records) and count > 0 else None

    def record_keys(self) -> list[bytes | None] | None:
        """The key of each record of its v2 record batches, in order (None for a null key); None if
        any batch is compressed or not a whole, readable v2 batch."""
        records, at, keys = self.records or b"", 0, []
        while at < len(records):
            if len(records) < at + BATCH_RECORDS_AT or records[at + BATCH_MAGIC_AT] != 2:
                return None
            if _I16.unpack_from(records, at + BATCH_ATTRIBUTES_AT)[0] & BATCH_COMPRESSION:
                return None
            end = at + BATCH_OVERHEAD + _I32.unpack_from(records, at + BATCH_LENGTH_AT)[0]
            count, pos = _I32.unpack_from(records, at + BATCH_COUNT_AT)[0], at + BATCH_RECORDS_AT
            try:
                for _ in range(count):
                    length, pos = _varint(records, pos)
                    following = pos + length
                    _, field = _varint(records, pos + 1)  # after the record's attributes: timestampDelta
                    _, field = _varint(records, field)  # offsetDelta
                    size, field = _varint(records, field)  # keyLength
                    keys.append(None if size < 0 else bytes(records[field : field + size]))
                    pos = following
            except ProtocolError:
                return None
            if pos != end or end > len(records):
                return None
            at = end
        return keys if keys else None


@dataclass(frozen=True)
class TopicData:
    """A topic of a produce request: by `name` (versions < 13) or by `topic_id` (13+)."""

    name: str
    partitions: tuple[PartitionData, ...]
    topic_id: bytes = NO_UUID
    tagged: Tags = ()


@dataclass(frozen=True)
class ProduceRequest:
    """ProduceRequest body (after the header), versions 3-13."""

    transactional_id: str | None
    acks: int
    timeout_ms: int
    topics: tuple[TopicData, ...]
    tagged: Tags = ()

    @classmethod
    def read(cls, reader: Reader, version: int) -> ProduceRequest:
        _check_version(version)
        flex = version >= PRODUCE_FLEXIBLE
        transactional_id, acks, timeout_ms = reader.string(flex), reader.int16(), reader.int32()
        topics = []
        for _ in range(reader.length(flex)):
            name, topic_id = ("", reader.uuid()) if version >= PRODUCE_TOPIC_IDS else (reader.string(flex) or "", NO_UUID)
            partitions = []
            for _ in range(reader.length(flex)):
                index, records = reader.int32(), reader.bytes_(flex)
                partitions.append(PartitionData(index, records, _unknown(reader.tags()) if flex else ()))
            topics.append(TopicData(name, tuple(partitions), topic_id, _unknown(reader.tags()) if flex else ()))
        tagged = _unknown(reader.tags()) if flex else ()
        return cls(transactional_id, acks, timeout_ms, tuple(topics), tagged)

    def write(self, writer: Writer, version: int) -> None:
        _check_version(version)
        flex = version >= PRODUCE_FLEXIBLE
        writer.string(self.transactional_id, flex)
        writer.int16(self.acks)
        writer.int32(self.timeout_ms)
        writer.length(len(self.topics), flex)
        for topic in self.topics:
            writer.uuid(topic.topic_id) if version >= PRODUCE_TOPIC_IDS else writer.string(topic.name, flex)
            writer.length(len(topic.partitions), flex)
            for partition in topic.partitions:
                writer.int32(partition.index)
                writer.bytes_(partition.records, flex)
                if flex:
                    writer.tags({}, partition.tagged)
            if flex:
                writer.tags({}, topic.tagged)
        if flex:
            writer.tags({}, self.tagged)


def encode_request(header: RequestHeader, request: ProduceRequest) -> bytes:
    """A whole produce request body (header, then request), without the size prefix."""
    writer = Writer()
    header.write(writer)
    request.write(writer, header.api_version)
    return bytes(writer.out)


def decode_request(body: bytes) -> tuple[RequestHeader, ProduceRequest]:
    """A produce request body (without the size prefix); ProtocolError if it does not parse."""
    reader = Reader(body)
    header = RequestHeader.read(reader)
    if header.api_key != PRODUCE:
        raise ProtocolError(f"api key {header.api_key} is not PRODUCE")
    request = ProduceRequest.read(reader, header.api_version)
    reader.end()
    return header, request


# ---- ProduceResponse ----------------------------------------------------------------------


@dataclass(frozen=True)
class RecordError:
    batch_index: int
    message: str | None
    tagged: Tags = ()


@dataclass(frozen=True)
class LeaderIdAndEpoch:
    """The partition's current leader (versions 10+, tagged field 0 of a partition)."""

    leader_id: int
    leader_epoch: int
    tagged: Tags = ()


@dataclass(frozen=True)
class PartitionResponse:
    index: int
    error_code: int
    base_offset: int = -1
    log_append_time_ms: int = -1  # v2+
    log_start_offset: int = -1  # v5+
    record_errors: tuple[RecordError, ...] = ()  # v8+
    error_message: str | None = None  # v8+
    current_leader: LeaderIdAndEpoch | None = None  # v10+, tagged
    tagged: Tags = ()


@dataclass(frozen=True)
class TopicResponse:
    name: str
    partitions: tuple[PartitionResponse, ...]
    topic_id: bytes = NO_UUID
    tagged: Tags = ()


@dataclass(frozen=True)
class NodeEndpoint:
    """A leader's address (versions 10+, top-level tagged field 0)."""

    node_id: int
    host: str
    port: int
    rack: str | None = None
    tagged: Tags = ()


@dataclass(frozen=True)
class ProduceResponse:
    """ProduceResponse body (after the response header), versions 3-13."""

    topics: tuple[TopicResponse, ...]
    throttle_time_ms: int = 0
    node_endpoints: tuple[NodeEndpoint, ...] = ()  # v10+, tagged
    tagged: Tags = ()

    @classmethod
    def read(cls, reader: Reader, version: int) -> ProduceResponse:
        _check_version(version)
        flex = version >= PRODUCE_FLEXIBLE
        topics = []
        for _ in range(reader.length(flex)):
            name, topic_id = ("", reader.uuid()) if version >= PRODUCE_TOPIC_IDS else (reader.string(flex) or "", NO_UUID)
            partitions = tuple(_read_partition(reader, version) for _ in range(reader.length(flex)))
            topics.append(TopicResponse(name, partitions, topic_id, _unknown(reader.tags()) if flex else ()))
        throttle_time_ms = reader.int32()
        endpoints: tuple[NodeEndpoint, ...] = ()
        tagged: Tags = ()
        if flex:
            tags = reader.tags()
            if version >= 10 and 0 in tags:
                endpoints = _read_endpoints(Reader(tags[0]))
            tagged = _unknown(tags, (0,) if version >= 10 else ())
        return cls(tuple(topics), throttle_time_ms, endpoints, tagged)

    def write(self, writer: Writer, version: int) -> None:
        _check_version(version)
        flex = version >= PRODUCE_FLEXIBLE
        writer.length(len(self.topics), flex)
        for topic in self.topics:
            writer.uuid(topic.topic_id) if version >= PRODUCE_TOPIC_IDS else writer.string(topic.name, flex)
            writer.length(len(topic.partitions), flex)
            for partition in topic.partitions:
                _write_partition(writer, partition, version)
            if flex:
                writer.tags({}, topic.tagged)
        writer.int32(self.throttle_time_ms)
        if flex:
            writer.tags({0: _endpoints(self.node_endpoints)} if version >= 10 and self.node_endpoints else {}, self.tagged)


def _read_partition(reader: Reader, version: int) -> PartitionResponse:
    flex = version >= PRODUCE_FLEXIBLE
    index, error_code, base_offset = reader.int32(), reader.int16(), reader.int64()
    log_append_time_ms = reader.int64()
    log_start_offset = reader.int64() if version >= 5 else -1
    record_errors: tuple[RecordError, ...] = ()
    error_message = None
    if version >= 8:
        record_errors = tuple(
            RecordError(reader.int32(), reader.string(flex), _unknown(reader.tags()) if flex else ()) for _ in range(reader.length(flex))
        )
        error_message = reader.string(flex)
    leader, tagged = None, ()
    if flex:
        tags = reader.tags()
        if version >= 10 and 0 in tags:
            sub = Reader(tags[0])
            leader = LeaderIdAndEpoch(sub.int32(), sub.int32(), _unknown(sub.tags()))
            sub.end()
        tagged = _unknown(tags, (0,) if version >= 10 else ())
    return PartitionResponse(index, error_code, base_offset, log_append_time_ms, log_start_offset, record_errors, error_message, leader, tagged)


def _write_partition(writer: Writer, partition: PartitionResponse, version: int) -> None:
    flex = version >= PRODUCE_FLEXIBLE
    writer.int32(partition.index)
    writer.int16(partition.error_code)
    writer.int64(partition.base_offset)
    writer.int64(partition.log_append_time_ms)
    if version >= 5:
        writer.int64(partition.log_start_offset)
    if version >= 8:
        writer.length(len(partition.record_errors), flex)
        for error in partition.record_errors:
            writer.int32(error.batch_index)
            writer.string(error.message, flex)
            if flex:
                writer.tags({}, error.tagged)
        writer.string(partition.error_message, flex)
    if flex:
        known = {}
        if version >= 10 and partition.current_leader is not None:
            sub = Writer()
            sub.int32(partition.current_leader.leader_id)
            sub.int32(partition.current_leader.leader_epoch)
            sub.tags({}, partition.current_leader.tagged)
            known[0] = bytes(sub.out)
        writer.tags(known, partition.tagged)


def _read_endpoints(reader: Reader) -> tuple[NodeEndpoint, ...]:
    endpoints = tuple(
        NodeEndpoint(reader.int32(), reader.string(True) or "", reader.int32(), reader.string(True), _unknown(reader.tags()))
        for _ in range(reader.length(True))
    )
    reader.end()
    return endpoints


def _endpoints(endpoints: tuple[NodeEndpoint, ...]) -> bytes:
    writer = Writer()
    writer.length(len(endpoints), True)
    for node in endpoints:
        writer.int32(node.node_id)
        writer.string(node.host, True)
        writer.int32(node.port)
        writer.string(node.rack, True)
        writer.tags({}, node.tagged)
    return bytes(writer.out)


def _check_version(version: int) -> None:
    if version not in PRODUCE_VERSIONS:
        raise ProtocolError(f"produce version {version} not supported (only {PRODUCE_VERSIONS.start}-{PRODUCE_VERSIONS.stop - 1})")


def encode_response(correlation_id: int, response: ProduceResponse, version: int) -> bytes:
    """A whole produce response body (header, then response), without the size prefix."""
    writer = Writer()
    writer.out += response_header(correlation_id, version >= PRODUCE_FLEXIBLE)
    response.write(writer, version)
    return bytes(writer.out)


def decode_response(body: bytes, version: int) -> tuple[int, ProduceResponse]:
    """(correlation id, response) of a produce response body of request `version`."""
    reader = Reader(body)
    correlation_id = reader.int32()
    if version >= PRODUCE_FLEXIBLE:
        reader.tags()
    response = ProduceResponse.read(reader, version)
    reader.end()
    return correlation_id, response


# ---- what the faults write ----------------------------------------------------------------


def _answer(header: RequestHeader, request: ProduceRequest, partition: Callable[[TopicData, PartitionData], PartitionResponse]) -> bytes:
    """A response body to `request` (same correlation id, topics and partitions), each partition
    answered by `partition`."""
    topics = tuple(
        TopicResponse(topic.name, tuple(partition(topic, p) for p in topic.partitions), topic.topic_id) for topic in request.topics
    )
    return encode_response(header.correlation_id, ProduceResponse(topics), header.api_version)


def error_response(header: RequestHeader, request: ProduceRequest, error_code: int) -> bytes:
    """The body a broker would answer `request` with if it refused every partition with
    `error_code`: no offsets."""
    return _answer(header, request, lambda topic, p: PartitionResponse(p.index, error_code))


def success_response(header: RequestHeader, request: ProduceRequest, base_offsets: Mapping[tuple[str | bytes, int], int]) -> bytes:
    """The body a broker would answer `request` with had it appended every partition: each at its
    `base_offsets[(topic name, or topic id from version 13, partition)]`."""
    return _answer(
        header, request, lambda topic, p: PartitionResponse(p.index, 0, base_offsets[(topic.name or topic.topic_id, p.index)], log_start_offset=0)
    )


def with_error(body: bytes, version: int, error_code: int) -> tuple[bytes, int]:
    """A produce response body whose successful partitions carry `error_code` instead, and how many
    partitions changed; everything else (offsets, tagged fields) stays as the broker wrote it."""
    correlation_id, response = decode_response(body, version)
    changed = sum(1 for topic in response.topics for p in topic.partitions if p.error_code == 0)
    topics = tuple(
        replace(topic, partitions=tuple(replace(p, error_code=error_code) if p.error_code == 0 else p for p in topic.partitions))
        for topic in response.topics
    )
    return encode_response(correlation_id, replace(response, topics=topics), version), changed
