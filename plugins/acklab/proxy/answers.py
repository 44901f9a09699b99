"""Error answers the proxy writes in a broker's place (Produce's are `acklab.proxy.protocol.error_response`),
and the errors of those answers, read back. One registry entry per request type (`ANSWERS`): the
versions answered (Kafka 4.3's, from its ``common/message/<Name>Response.json``), the version its
encoding turns flexible from, the writer of its error answer (which reads the request as far as it
must: a per-partition answer names the partitions the request named) and the reader of an answer's
errors (`Errors`: the answer's own error, ``""``, or the errors of its parts). Adding a request type
is one entry here and its line in `acklab.proxy.codes` (`APIS`, `ANSWERABLE`).

Layouts (throttle_time_ms where the schema has it is written 0):

- InitProducerId 0-6 (flexible from 2): error, producer id and epoch -1; v6+ the ongoing
  transaction's producer id and epoch -1 (KIP-939).
- AddOffsetsToTxn 0-4 (3): error. EndTxn 0-5 (3): error; v5+ producer id and epoch -1.
- FindCoordinator 0-6 (3): v0 error, node, host, port; v1-3 throttle first and an error message;
  v4+ one coordinator per requested key, each with the error.
- AddPartitionsToTxn 0-3 (3): an error per requested partition. v4+ is the brokers' batched form
  (KIP-890): clients send v3 at most, brokers send v4+ on their inter-broker listener, which the
  proxy never sees.
- TxnOffsetCommit 0-5 (3), OffsetCommit 2-10 (8): an error per requested partition (OffsetCommit
  v10 names topics by id).
- OffsetFetch 1-10 (6): v1 an error per requested partition; v2-7 a top-level error; v8+ an error
  per requested group. An error a broker reports per partition (`PARTITION_ERRORS`) goes on each
  requested partition (offset -1) instead; a request for all partitions then cannot be answered.
- JoinGroup 0-9 (6): error, generation -1, no protocol, no leader, no member id, no members. SyncGroup 0-5 (4): error, no protocol, an empty assignment. Heartbeat 0-4 (4): error.
  LeaveGroup 0-5 (4): error (v3+ no member results). ConsumerGroupHeartbeat 0-1 (0): error, no
  message, no member id, epoch 0, no assignment.
- Metadata (flexible from 9) is not answered in the broker's place: the broker's own answer is
  rewritten (`metadata_with_error`), so its brokers, cluster id and controller stay true.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from acklab.proxy.codes import (
    ADD_OFFSETS_TO_TXN,
    ADD_PARTITIONS_TO_TXN,
    CONSUMER_GROUP_HEARTBEAT,
    END_TXN,
    ERRORS,
    FIND_COORDINATOR,
    HEARTBEAT,
    INIT_PRODUCER_ID,
    JOIN_GROUP,
    LEAVE_GROUP,
    OFFSET_COMMIT,
    OFFSET_FETCH,
    SYNC_GROUP,
    TXN_OFFSET_COMMIT,
    answered_from,
    api_name,
    error_name,
)
from acklab.proxy.protocol import NO_UUID, ProtocolError, Reader, Writer, response_header

Errors = dict[str, int]  # where -> error code: "" the answer's own error, else "topic-3", "group:g", "group:g/topic-3", "key:k", "member:m"
TOP = ""

# OffsetFetch errors a broker reports on each partition rather than for the group.
PARTITION_ERRORS = frozenset(ERRORS[name].code for name in ("UNSTABLE_OFFSET_COMMIT", "TOPIC_AUTHORIZATION_FAILED", "UNKNOWN_TOPIC_ID"))


@dataclass(frozen=True)
class Answer:
    """How the proxy answers one request type with an error: `write(request, out, version,
    flexible, code)` reads the request body past its header and writes the answer body past its
    header, up to its last tagged fields; `read(answer, version, flexible)` reads an answer body
    (the broker's or the proxy's) likewise and returns its errors."""

    versions: range
    flexible_from: int
    write: Callable[[Reader, Writer, int, bool, int], None]
    read: Callable[[Reader, int, bool], Errors]

    def flexible(self, version: int) -> bool:
        return version >= self.flexible_from


# ---- shared pieces ------------------------------------------------------------------------


def _array(reader: Reader, flex: bool, item: Callable[[], object]) -> list:
    """The items of an array (none if it is null)."""
    return [item() for _ in range(max(reader.length(flex), 0))]


def _skip_tags(reader: Reader, flex: bool) -> None:
    """The tagged fields ending a struct of a flexible version (skipped)."""
    if flex:
        reader.tags()


def _no_tags(out: Writer, flex: bool) -> None:
    """No tagged fields, ending a struct of a flexible version."""
    if flex:
        out.tags({}, ())


def _requested_partitions(reader: Reader, flex: bool, *, by_id: bool, offsets: Callable[[Reader], None] | None) -> list[tuple[str | bytes, list[int]]]:
    """[(topic name or id, [partition, ...])] of a request's topic array: each partition an int32
    index followed by what `offsets` reads, or (`offsets` None) an array of int32 indexes."""

    def topic() -> tuple[str | bytes, list[int]]:
        key: str | bytes = reader.uuid() if by_id else (reader.string(flex) or "")
        if offsets is None:
            partitions = _array(reader, flex, reader.int32)
        else:

            def partition() -> int:
                index = reader.int32()
                offsets(reader)
                _skip_tags(reader, flex)
                return index

            partitions = _array(reader, flex, partition)
        _skip_tags(reader, flex)
        return key, partitions

    return _array(reader, flex, topic)


def _write_topic(out: Writer, key: str | bytes, flex: bool) -> None:
    out.uuid(key) if isinstance(key, bytes) else out.string(key, flex)


def _partition_errors(out: Writer, topics: list[tuple[str | bytes, list[int]]], flex: bool, code: int) -> None:
    """An answer's topics array: each requested partition (index, error)."""
    out.length(len(topics), flex)
    for key, partitions in topics:
        _write_topic(out, key, flex)
        out.length(len(partitions), flex)
        for partition in partitions:
            out.int32(partition)
            out.int16(code)
            _no_tags(out, flex)
        _no_tags(out, flex)


def _read_partition_errors(reader: Reader, flex: bool, *, by_id: bool = False, prefix: str = "") -> Errors:
    errors: Errors = {}
    for _ in range(max(reader.length(flex), 0)):
        topic = reader.uuid().hex() if by_id else reader.string(flex)
        for _ in range(max(reader.length(flex), 0)):
            partition = reader.int32()
            errors[f"{prefix}{topic}-{partition}"] = reader.int16()
            _skip_tags(reader, flex)
        _skip_tags(reader, flex)
    return errors


def _top(reader: Reader, *, throttle: bool) -> Errors:
    if throttle:
        reader.int32()
    return {TOP: reader.int16()}


# ---- the transaction coordinator's -----------------------------------------------------------


def _write_init_producer_id(request: Reader, out: Writer, version: int, flex: bool, code: int) -> None:
    out.int32(0)
    out.int16(code)
    out.int64(-1)
    out.int16(-1)
    if version >= 6:
        out.int64(-1)
        out.int16(-1)


def _read_init_producer_id(reader: Reader, version: int, flex: bool) -> Errors:
    errors = _top(reader, throttle=True)
    reader.int64()
    reader.int16()
    if version >= 6:
        reader.int64()
        reader.int16()
    return errors


def _write_add_offsets(request: Reader, out: Writer, version: int, flex: bool, code: int) -> None:
    out.int32(0)
    out.int16(code)


def _read_add_offsets(reader: Reader, version: int, flex: bool) -> Errors:
    return _top(reader, throttle=True)


def _write_end_txn(request: Reader, out: Writer, version: int, flex: bool, code: int) -> None:
    out.int32(0)
    out.int16(code)
    if version >= 5:
        out.int64(-1)
        out.int16(-1)


def _read_end_txn(reader: Reader, version: int, flex: bool) -> Errors:
    errors = _top(reader, throttle=True)
    if version >= 5:
        reader.int64()
        reader.int16()
    return errors


def _write_find_coordinator(request: Reader, out: Writer, version: int, flex: bool, code: int) -> None:
    if version >= 4:
        request.int8()  # key_type
        keys = _array(request, flex, lambda: request.string(flex))
        out.int32(0)
        out.length(len(keys), flex)
        for key in keys:
            out.string(key, flex)
            out.int32(-1)
            out.string("", flex)
            out.int32(-1)
            out.int16(code)
            out.string(None, flex)
            _no_tags(out, flex)
        return
    if version >= 1:
        out.int32(0)
    out.int16(code)
    if version >= 1:
        out.string(None, flex)
    out.int32(-1)
    out.string("", flex)
    out.int32(-1)


def _read_find_coordinator(reader: Reader, version: int, flex: bool) -> Errors:
    if version >= 4:
        reader.int32()
        errors: Errors = {}
        for _ in range(max(reader.length(flex), 0)):
            key = reader.string(flex)
            reader.int32()
            reader.string(flex)
            reader.int32()
            errors[f"key:{key}"] = reader.int16()
            reader.string(flex)
            _skip_tags(reader, flex)
        return errors
    errors = _top(reader, throttle=version >= 1)
    if version >= 1:
        reader.string(flex)
    reader.int32()
    reader.string(flex)
    reader.int32()
    return errors


def _write_add_partitions(request: Reader, out: Writer, version: int, flex: bool, code: int) -> None:
    request.string(flex)  # transactional_id
    request.int64()
    request.int16()
    out.int32(0)
    _partition_errors(out, _requested_partitions(request, flex, by_id=False, offsets=None), flex, code)


def _read_add_partitions(reader: Reader, version: int, flex: bool) -> Errors:
    reader.int32()
    return _read_partition_errors(reader, flex)


# ---- the group coordinator's ------------------------------------------------------------------


def _committed_offset(flex: bool, *, with_epoch: bool) -> Callable[[Reader], None]:
    """A reader past one partition's committed offset in an (Txn)OffsetCommit request: the offset, the
    leader epoch where the version has it, the metadata."""

    def skip(reader: Reader) -> None:
        reader.int64()  # committed_offset
        if with_epoch:
            reader.int32()  # committed_leader_epoch
        reader.string(flex)  # committed_metadata

    return skip


def _write_txn_offset_commit(request: Reader, out: Writer, version: int, flex: bool, code: int) -> None:
    request.string(flex)  # transactional_id
    request.string(flex)  # group_id
    request.int64()
    request.int16()
    if version >= 3:
        request.int32()  # generation_id
        request.string(flex)  # member_id
        request.string(flex)  # group_instance_id
    out.int32(0)
    _partition_errors(out, _requested_partitions(request, flex, by_id=False, offsets=_committed_offset(flex, with_epoch=version >= 2)), flex, code)


def _read_txn_offset_commit(reader: Reader, version: int, flex: bool) -> Errors:
    reader.int32()
    return _read_partition_errors(reader, flex)


def _write_offset_commit(request: Reader, out: Writer, version: int, flex: bool, code: int) -> None:
    request.string(flex)  # group_id
    request.int32()  # generation_id_or_member_epoch
    request.string(flex)  # member_id
    if version >= 7:
        request.string(flex)  # group_instance_id
    if version <= 4:
        request.int64()  # retention_time_ms
    topics = _requested_partitions(request, flex, by_id=version >= 10, offsets=_committed_offset(flex, with_epoch=version >= 6))
    if version >= 3:
        out.int32(0)
    _partition_errors(out, topics, flex, code)


def _read_offset_commit(reader: Reader, version: int, flex: bool) -> Errors:
    if version >= 3:
        reader.int32()
    return _read_partition_errors(reader, flex, by_id=version >= 10)


def _write_fetched(out: Writer, topics: list[tuple[str | bytes, list[int]]], version: int, flex: bool, code: int) -> None:
    """OffsetFetch's topics of an answer: each requested partition without an offset, with `code`."""
    out.length(len(topics), flex)
    for key, partitions in topics:
        _write_topic(out, key, flex)
        out.length(len(partitions), flex)
        for partition in partitions:
            out.int32(partition)
            out.int64(-1)
            if version >= 5:
                out.int32(-1)  # committed_leader_epoch
            out.string("", flex)  # metadata
            out.int16(code)
            _no_tags(out, flex)
        _no_tags(out, flex)


def _read_fetched(reader: Reader, version: int, flex: bool, prefix: str) -> Errors:
    errors: Errors = {}
    for _ in range(max(reader.length(flex), 0)):
        topic = reader.uuid().hex() if version >= 10 else reader.string(flex)
        for _ in range(max(reader.length(flex), 0)):
            partition = reader.int32()
            reader.int64()
            if version >= 5:
                reader.int32()
            reader.string(flex)
            errors[f"{prefix}{topic}-{partition}"] = reader.int16()
            _skip_tags(reader, flex)
        _skip_tags(reader, flex)
    return errors


def _write_offset_fetch(request: Reader, out: Writer, version: int, flex: bool, code: int) -> None:
    per_partition = version < 2 or code in PARTITION_ERRORS
    if version < 8:
        request.string(flex)  # group_id
        groups = [(None, _requested_partitions(request, flex, by_id=False, offsets=None))]
    else:

        def group() -> tuple[str | None, list[tuple[str | bytes, list[int]]]]:
            group_id = request.string(flex)
            if version >= 9:
                request.string(flex)  # member_id
                request.int32()  # member_epoch
            topics = _requested_partitions(request, flex, by_id=version >= 10, offsets=None)
            _skip_tags(request, flex)
            return group_id, topics

        groups = _array(request, flex, group)
    if per_partition and not any(partitions for _, topics in groups for _, partitions in topics):
        raise ProtocolError(f"OffsetFetch v{version} for every partition: no partition to carry {error_name(code)}")
    if version >= 3:
        out.int32(0)
    if version < 8:
        _write_fetched(out, groups[0][1] if per_partition else [], version, flex, code)
        if version >= 2:
            out.int16(0 if per_partition else code)
        return
    out.length(len(groups), flex)
    for group_id, topics in groups:
        out.string(group_id, flex)
        _write_fetched(out, topics if per_partition else [], version, flex, code)
        out.int16(0 if per_partition else code)
        _no_tags(out, flex)


def _read_offset_fetch(reader: Reader, version: int, flex: bool) -> Errors:
    if version >= 3:
        reader.int32()
    if version < 8:
        errors = _read_fetched(reader, version, flex, "")
        if version >= 2:
            errors[TOP] = reader.int16()
        return errors
    errors = {}
    for _ in range(max(reader.length(flex), 0)):
        group = reader.string(flex)
        errors.update(_read_fetched(reader, version, flex, f"group:{group}/"))
        errors[f"group:{group}"] = reader.int16()
        _skip_tags(reader, flex)
    return errors


def _write_join_group(request: Reader, out: Writer, version: int, flex: bool, code: int) -> None:
    if version >= 2:
        out.int32(0)
    out.int16(code)
    out.int32(-1)  # generation_id
    if version >= 7:
        out.string(None, flex)  # protocol_type
    out.string(None if version >= 7 else "", flex)  # protocol_name
    out.string("", flex)  # leader
    if version >= 9:
        out.int8(0)  # skip_assignment
    out.string("", flex)  # member_id: none (as the coordinator answers a request it fails)
    out.length(0, flex)  # members


def _read_join_group(reader: Reader, version: int, flex: bool) -> Errors:
    errors = _top(reader, throttle=version >= 2)
    reader.int32()
    if version >= 7:
        reader.string(flex)
    reader.string(flex)
    reader.string(flex)
    if version >= 9:
        reader.int8()
    reader.string(flex)
    for _ in range(max(reader.length(flex), 0)):
        reader.string(flex)
        if version >= 5:
            reader.string(flex)
        reader.bytes_(flex)
        _skip_tags(reader, flex)
    return errors


def _write_sync_group(request: Reader, out: Writer, version: int, flex: bool, code: int) -> None:
    if version >= 1:
        out.int32(0)
    out.int16(code)
    if version >= 5:
        out.string(None, flex)  # protocol_type
        out.string(None, flex)  # protocol_name
    out.bytes_(b"", flex)  # assignment


def _read_sync_group(reader: Reader, version: int, flex: bool) -> Errors:
    errors = _top(reader, throttle=version >= 1)
    if version >= 5:
        reader.string(flex)
        reader.string(flex)
    reader.bytes_(flex)
    return errors


def _write_heartbeat(request: Reader, out: Writer, version: int, flex: bool, code: int) -> None:
    if version >= 1:
        out.int32(0)
    out.int16(code)


def _read_heartbeat(reader: Reader, version: int, flex: bool) -> Errors:
    return _top(reader, throttle=version >= 1)


def _write_leave_group(request: Reader, out: Writer, version: int, flex: bool, code: int) -> None:
    if version >= 1:
        out.int32(0)
    out.int16(code)
    if version >= 3:
        out.length(0, flex)  # members


def _read_leave_group(reader: Reader, version: int, flex: bool) -> Errors:
    errors = _top(reader, throttle=version >= 1)
    if version >= 3:
        for _ in range(max(reader.length(flex), 0)):
            member = reader.string(flex)
            reader.string(flex)
            errors[f"member:{member}"] = reader.int16()
            _skip_tags(reader, flex)
    return errors


def _write_consumer_group_heartbeat(request: Reader, out: Writer, version: int, flex: bool, code: int) -> None:
    out.int32(0)
    out.int16(code)
    out.string(None, flex)  # error_message
    out.string(None, flex)  # member_id
    out.int32(0)  # member_epoch
    out.int32(0)  # heartbeat_interval_ms
    out.int8(-1)  # assignment: null


def _read_consumer_group_heartbeat(reader: Reader, version: int, flex: bool) -> Errors:
    errors = _top(reader, throttle=True)
    reader.string(flex)
    reader.string(flex)
    reader.int32()
    reader.int32()
    if reader.int8() >= 0:  # an assignment
        for _ in range(max(reader.length(flex), 0)):
            reader.uuid()
            _array(reader, flex, reader.int32)
            _skip_tags(reader, flex)
        _skip_tags(reader, flex)
    return errors


ANSWERS: Mapping[int, Answer] = {
    INIT_PRODUCER_ID: Answer(range(0, 7), 2, _write_init_producer_id, _read_init_producer_id),
    ADD_PARTITIONS_TO_TXN: Answer(range(0, 4), 3, _write_add_partitions, _read_add_partitions),
    ADD_OFFSETS_TO_TXN: Answer(range(0, 5), 3, _write_add_offsets, _read_add_offsets),
    END_TXN: Answer(range(0, 6), 3, _write_end_txn, _read_end_txn),
    FIND_COORDINATOR: Answer(range(0, 7), 3, _write_find_coordinator, _read_find_coordinator),
    TXN_OFFSET_COMMIT: Answer(range(0, 6), 3, _write_txn_offset_commit, _read_txn_offset_commit),
    OFFSET_COMMIT: Answer(range(2, 11), 8, _write_offset_commit, _read_offset_commit),
    OFFSET_FETCH: Answer(range(1, 11), 6, _write_offset_fetch, _read_offset_fetch),
    JOIN_GROUP: Answer(range(0, 10), 6, _write_join_group, _read_join_group),
    SYNC_GROUP: Answer(range(0, 6), 4, _write_sync_group, _read_sync_group),
    HEARTBEAT: Answer(range(0, 5), 4, _write_heartbeat, _read_heartbeat),
    LEAVE_GROUP: Answer(range(0, 6), 4, _write_leave_group, _read_leave_group),
    CONSUMER_GROUP_HEARTBEAT: Answer(range(0, 2), 0, _write_consumer_group_heartbeat, _read_consumer_group_heartbeat),
}


def _entry(api_key: int, version: int) -> Answer:
    answer = ANSWERS.get(api_key)
    if answer is None:
        raise ProtocolError(f"api {api_key} is not answered by the proxy")
    if version not in answer.versions:
        raise ProtocolError(f"{api_name(api_key)} v{version} is not answered (v{answer.versions[0]}-{answer.versions[-1]} are)")
    return answer


def error_answer(body: bytes, error_code: int) -> bytes:
    """The answer (without the size prefix) a broker would give the request `body` if it failed
    it with `error_code`. ProtocolError for a request or version not answered here, for an error
    that version is not answered with (`acklab.proxy.codes.ANSWERED_FROM`), or a request that
    does not read as its version."""
    reader = Reader(body)
    api_key, version, correlation = reader.int16(), reader.int16(), reader.int32()
    answer = _entry(api_key, version)
    if version < (since := answered_from(api_key, error_code)):
        raise ProtocolError(f"{api_name(api_key)} v{version} is not answered with {error_name(error_code)} (v{since}+ is)")
    flex = answer.flexible(version)
    reader.string(False)  # client id
    if flex:
        reader.tags()
    out = Writer()
    out.out += response_header(correlation, flex)
    answer.write(reader, out, version, flex, error_code)
    _no_tags(out, flex)
    return bytes(out.out)


def errors(body: bytes, api_key: int, version: int) -> Errors:
    """The errors of an answer (response body with its header) to a request of a type in
    `ANSWERS`, by where they sit (`Errors`). ProtocolError if it does not read as that version."""
    answer = _entry(api_key, version)
    flex = answer.flexible(version)
    reader = Reader(body)
    reader.int32()  # correlation id
    if flex:
        reader.tags()
    found = answer.read(reader, version, flex)
    _skip_tags(reader, flex)
    reader.end()
    return found


def top_error(body: bytes, api_key: int, version: int) -> int:
    """The answer's own error (not its partitions', groups' or keys'); ProtocolError if its layout has none."""
    found = errors(body, api_key, version)
    if TOP not in found:
        raise ProtocolError(f"no top-level error in answers to {api_name(api_key)} v{version}")
    return found[TOP]


def describe(body: bytes, api_key: int, version: int) -> str:
    """What an answer says, for logs: its error's name, or each part's (``topic-0: NONE, ...``)."""
    found = errors(body, api_key, version)
    if set(found) == {TOP}:
        return error_name(found[TOP])
    return ", ".join(f"{where or 'error'}: {error_name(code)}" for where, code in found.items()) or "NONE"


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
