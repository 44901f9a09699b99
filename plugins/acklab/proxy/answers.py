"""Error answers the proxy writes in a broker's place for the transactional and coordinator
requests (Produce's are `acklab.proxy.protocol.error_response`), and the top-level error of their
answers. Layouts from Kafka's message schemas (``common/message/*Response.json``):

- InitProducerId (flexible from v2): throttle_time_ms, error_code, producer_id, producer_epoch.
- AddOffsetsToTxn (flexible from v3): throttle_time_ms, error_code.
- EndTxn (flexible from v3): throttle_time_ms, error_code; v5+ producer_id, producer_epoch.
- FindCoordinator: v0 error_code, node_id, host, port; v1-3 throttle_time_ms first and an
  error_message after error_code (flexible from v3); v4+ one coordinator per requested key.
- AddPartitionsToTxn v0-3 (flexible from v3): an error per requested topic partition. v4+ is the
  brokers' batched form (KIP-890): kafka-clients sends v3 at most (`LAST_CLIENT_VERSION`), and
  brokers send v4+ to the coordinator on their inter-broker listener, which the proxy never sees.
- Metadata (flexible from v9) is not answered in the broker's place: the broker's own answer is
  rewritten (`metadata_with_error`), so its brokers, cluster id and controller stay true.
"""

from __future__ import annotations

from acklab.proxy.codes import ADD_OFFSETS_TO_TXN, ADD_PARTITIONS_TO_TXN, END_TXN, FIND_COORDINATOR, INIT_PRODUCER_ID
from acklab.proxy.protocol import NO_UUID, ProtocolError, Reader, RequestHeader, Writer, response_header

FLEXIBLE_FROM = {INIT_PRODUCER_ID: 2, ADD_PARTITIONS_TO_TXN: 3, ADD_OFFSETS_TO_TXN: 3, END_TXN: 3, FIND_COORDINATOR: 3}
TOP_LEVEL = {INIT_PRODUCER_ID, ADD_OFFSETS_TO_TXN, END_TXN}  # throttle_time_ms then error_code


def _flexible(api_key: int, version: int) -> bool:
    return version >= FLEXIBLE_FROM[api_key]


def _header(body: bytes) -> tuple[RequestHeader, Reader]:
    reader = Reader(body)
    api_key, version, correlation = reader.int16(), reader.int16(), reader.int32()
    if api_key not in FLEXIBLE_FROM:
        raise ProtocolError(f"api {api_key} is not answered by the proxy")
    client_id = reader.string(False)
    if _flexible(api_key, version):
        reader.tags()
    return RequestHeader(api_key, version, correlation, client_id), reader


def error_answer(body: bytes, error_code: int) -> bytes:
    """The answer (without the size prefix) a broker would give the request `body` if it failed
    it with `error_code`. ProtocolError for a request or version not answered here."""
    header, reader = _header(body)
    api_key, version = header.api_key, header.api_version
    flex = _flexible(api_key, version)
    out = Writer()
    out.out += response_header(header.correlation_id, flex)
    if api_key in TOP_LEVEL:
        out.int32(0)
        out.int16(error_code)
        if api_key == INIT_PRODUCER_ID or (api_key == END_TXN and version >= 5):
            out.int64(-1)
            out.int16(-1)
    elif api_key == FIND_COORDINATOR:
        _find_coordinator(out, reader, version, flex, error_code)
    else:
        _add_partitions(out, reader, version, flex, error_code)
    if flex:
        out.tags({}, ())
    return bytes(out.out)


def _find_coordinator(out: Writer, reader: Reader, version: int, flex: bool, error_code: int) -> None:
    if version >= 4:
        reader.int8()  # key_type
        keys = [reader.string(True) for _ in range(reader.length(True))]
        out.int32(0)
        out.length(len(keys), True)
        for key in keys:
            out.string(key, True)
            out.int32(-1)
            out.string("", True)
            out.int32(-1)
            out.int16(error_code)
            out.string(None, True)
            out.tags({}, ())
        return
    if version >= 1:
        out.int32(0)
    out.int16(error_code)
    if version >= 1:
        out.string(None, flex)
    out.int32(-1)
    out.string("", flex)
    out.int32(-1)


def _add_partitions(out: Writer, reader: Reader, version: int, flex: bool, error_code: int) -> None:
    if version > 3:
        raise ProtocolError(f"AddPartitionsToTxn v{version} (the brokers' batched form) is not answered")
    reader.string(flex)  # transactional_id
    reader.int64()
    reader.int16()
    topics = []
    for _ in range(reader.length(flex)):
        name = reader.string(flex)
        partitions = [reader.int32() for _ in range(reader.length(flex))]
        if flex:
            reader.tags()
        topics.append((name, partitions))
    out.int32(0)
    out.length(len(topics), flex)
    for name, partitions in topics:
        out.string(name, flex)
        out.length(len(partitions), flex)
        for partition in partitions:
            out.int32(partition)
            out.int16(error_code)
            if flex:
                out.tags({}, ())
        if flex:
            out.tags({}, ())


def top_error(body: bytes, api_key: int, version: int) -> int:
    """The top-level error code of an answer (response body with its header) to a request of
    `api_key` answered here with one (`TOP_LEVEL`, FindCoordinator before v4); ProtocolError otherwise."""
    reader = Reader(body)
    reader.int32()
    if api_key in FLEXIBLE_FROM and _flexible(api_key, version):
        reader.tags()
    if api_key in TOP_LEVEL or (api_key == FIND_COORDINATOR and 1 <= version < 4):
        reader.int32()
        return reader.int16()
    if api_key == FIND_COORDINATOR and version == 0:
        return reader.int16()
    raise ProtocolError(f"no top-level error in answers to api {api_key} v{version}")


def metadata_with_error(body: bytes, version: int, error_code: int) -> tuple[bytes, int]:
    """A broker's Metadata answer (response body with its header, v0-13) in which every topic
    carries `error_code` with no partitions and a zero topic id, as a broker reports a topic it
    fails; brokers, cluster id, controller and the rest are kept. Also the number of topics
    rewritten. ProtocolError if the body does not read as that version."""
    if not 0 <= version <= 13:
        raise ProtocolError(f"Metadata v{version} is not read by the proxy")
    flex = version >= 9
    reader, out = Reader(body), Writer()
    out.int32(reader.int32())  # correlation id
    if flex:
        out.tags(reader.tags(), ())
    if version >= 3:
        out.int32(reader.int32())  # throttle_time_ms
    brokers = reader.length(flex)
    out.length(brokers, flex)
    for _ in range(brokers):
        out.int32(reader.int32())
        out.string(reader.string(flex), flex)
        out.int32(reader.int32())
        if version >= 1:
            out.string(reader.string(flex), flex)  # rack
        if flex:
            out.tags(reader.tags(), ())
    if version >= 2:
        out.string(reader.string(flex), flex)  # cluster id
    if version >= 1:
        out.int32(reader.int32())  # controller id
    topics = reader.length(flex)
    out.length(topics, flex)
    for _ in range(topics):
        reader.int16()
        out.int16(error_code)
        out.string(reader.string(flex), flex)
        if version >= 10:
            reader.uuid()
            out.uuid(NO_UUID)
        if version >= 1:
            out.int8(reader.int8())  # is_internal
        for _ in range(reader.length(flex)):
            _skip_partition(reader, version, flex)
        out.length(0, flex)
        if version >= 8:
            out.int32(reader.int32())  # topic_authorized_operations
        if flex:
            out.tags(reader.tags(), ())
    if 8 <= version <= 10:
        out.int32(reader.int32())  # cluster_authorized_operations
    if version >= 13:
        out.int16(reader.int16())  # top-level error code
    if flex:
        out.tags(reader.tags(), ())
    reader.end()
    return bytes(out.out), topics


def _skip_partition(reader: Reader, version: int, flex: bool) -> None:
    reader.int16()
    reader.int32()
    reader.int32()
    if version >= 7:
        reader.int32()
    for _ in range(3 if version >= 5 else 2):  # replicas, isr, offline replicas
        for _ in range(reader.length(flex)):
            reader.int32()
    if flex:
        reader.tags()
