"""The error answers the proxy writes in a broker's place (`acklab.proxy.answers.ANSWERS`), for the
consumer-group and transactional-offset requests: for every version Kafka 4.3 takes (its first,
its first flexible and its latest among them), a request laid out as Kafka's
``common/message/<Name>Request.json`` says is answered with the error where
``<Name>Response.json`` puts it, and the answer reads back whole: correlation id, the error (the
answer's own, or each requested partition's / group's) and, in flexible versions, tagged fields."""

from __future__ import annotations

import struct
from collections.abc import Callable

import pytest

from acklab.proxy.answers import ANSWERS, PARTITION_ERRORS, describe, error_answer, errors, top_error
from acklab.proxy.codes import (
    ANSWERABLE,
    ANSWERED_FROM,
    APIS,
    CONSUMER_GROUP_HEARTBEAT,
    ERRORS,
    HEARTBEAT,
    INIT_PRODUCER_ID,
    JOIN_GROUP,
    LEAVE_GROUP,
    METADATA,
    OFFSET_COMMIT,
    OFFSET_FETCH,
    PRODUCE,
    SYNC_GROUP,
    TXN_OFFSET_COMMIT,
    api_name,
    error_table,
)
from acklab.proxy.protocol import ProtocolError, Writer

CORRELATION = 4242
TOPIC_ID = bytes(range(16))
TOPICS = [("orders", [0, 2]), ("audit", [1])]

# api -> (first version, first flexible version, latest version) of Kafka 4.3.1's schemas
# (kafka-clients 4.3.1, common/message/<Name>Request.json and <Name>Response.json: validVersions, flexibleVersions)
KAFKA_4_3 = {
    TXN_OFFSET_COMMIT: (0, 3, 5),
    OFFSET_COMMIT: (2, 8, 10),
    OFFSET_FETCH: (1, 6, 10),
    JOIN_GROUP: (0, 6, 9),
    SYNC_GROUP: (0, 4, 5),
    HEARTBEAT: (0, 4, 4),
    LEAVE_GROUP: (0, 4, 5),
    CONSUMER_GROUP_HEARTBEAT: (0, 0, 1),
}


class Request:
    """A request body written field by field, compact or not as its version is flexible."""

    def __init__(self, api: int, version: int) -> None:
        first, flexible_from, _ = KAFKA_4_3[api]
        self.version, self.flex, self.w = version, version >= flexible_from, Writer()
        self.w.out += struct.pack(">hhi", api, version, CORRELATION)
        self.w.string("acklab-test", False)
        self.tags()

    def tags(self) -> Request:
        if self.flex:
            self.w.tags({}, ())
        return self

    def string(self, value: str | None) -> Request:
        self.w.string(value, self.flex)
        return self

    def int(self, fmt: str, value: int) -> Request:
        self.w.out += struct.pack(f">{fmt}", value)
        return self

    def array(self, items: list | None, each: Callable[[object], object]) -> Request:
        self.w.length(-1 if items is None else len(items), self.flex)
        for item in items or ():
            each(item)
        return self

    def bytes_(self, value: bytes) -> Request:
        self.w.bytes_(value, self.flex)
        return self

    def body(self) -> bytes:
        self.tags()
        return bytes(self.w.out)


def _commit_topics(r: Request, *, by_id: bool, leader_epoch: bool) -> None:
    def partition(p: object) -> None:
        r.int("i", p).int("q", 100 + p)  # type: ignore[arg-type,operator]
        if leader_epoch:
            r.int("i", 3)
        r.string("meta").tags()

    def topic(t: object) -> None:
        name, partitions = t  # type: ignore[misc]
        r.w.uuid(TOPIC_ID) if by_id else r.string(name)
        r.array(partitions, partition).tags()

    r.array(TOPICS, topic)


def txn_offset_commit(v: int) -> bytes:
    r = Request(TXN_OFFSET_COMMIT, v).string("txn-1").string("group-1").int("q", 7).int("h", 1)
    if v >= 3:
        r.int("i", 5).string("member-1").string(None)
    _commit_topics(r, by_id=False, leader_epoch=v >= 2)
    return r.body()


def offset_commit(v: int) -> bytes:
    r = Request(OFFSET_COMMIT, v).string("group-1").int("i", 5).string("member-1")
    if v >= 7:
        r.string("instance-1")
    if v <= 4:
        r.int("q", -1)
    _commit_topics(r, by_id=v >= 10, leader_epoch=v >= 6)
    return r.body()


def offset_fetch(v: int, topics: list | None = TOPICS) -> bytes:
    r = Request(OFFSET_FETCH, v)

    def topic(t: object) -> None:
        name, partitions = t  # type: ignore[misc]
        r.w.uuid(TOPIC_ID) if v >= 10 else r.string(name)
        r.array(partitions, lambda p: r.int("i", p)).tags()  # type: ignore[arg-type]

    if v < 8:
        r.string("group-1").array(topics, topic)
        if v >= 7:
            r.int("b", 1)  # require_stable
        return r.body()

    def group(g: object) -> None:
        r.string(g)  # type: ignore[arg-type]
        if v >= 9:
            r.string("member-1").int("i", 4)
        r.array(topics, topic).tags()

    return r.array(["group-1"], group).int("b", 1).body()


def join_group(v: int) -> bytes:
    r = Request(JOIN_GROUP, v).string("group-1").int("i", 45000)
    if v >= 1:
        r.int("i", 300000)
    r.string("member-1")
    if v >= 5:
        r.string(None)
    r.string("consumer").array(["range"], lambda name: r.string(name).bytes_(b"\x00\x01").tags())  # type: ignore[arg-type]
    if v >= 8:
        r.string("rejoin")
    return r.body()


def sync_group(v: int) -> bytes:
    r = Request(SYNC_GROUP, v).string("group-1").int("i", 5).string("member-1")
    if v >= 3:
        r.string(None)
    if v >= 5:
        r.string("consumer").string("range")
    return r.array(["member-1"], lambda m: r.string(m).bytes_(b"\x00\x03").tags()).body()  # type: ignore[arg-type]


def heartbeat(v: int) -> bytes:
    r = Request(HEARTBEAT, v).string("group-1").int("i", 5).string("member-1")
    if v >= 3:
        r.string("instance-1")
    return r.body()


def leave_group(v: int) -> bytes:
    r = Request(LEAVE_GROUP, v).string("group-1")
    if v <= 2:
        return r.string("member-1").body()

    def member(m: object) -> None:
        r.string(m).string(None)  # type: ignore[arg-type]
        if v >= 5:
            r.string("closing")
        r.tags()

    return r.array(["member-1"], member).body()


def consumer_group_heartbeat(v: int) -> bytes:
    r = Request(CONSUMER_GROUP_HEARTBEAT, v).string("group-1").string("member-uuid").int("i", 3).string(None).string(None).int("i", 300000)
    r.array(["orders"], lambda name: r.string(name))  # type: ignore[arg-type]
    if v >= 1:
        r.string(None)
    r.string("uniform")
    r.array([TOPIC_ID], lambda topic: (r.w.uuid(topic), r.array([0, 1], lambda p: r.int("i", p)), r.tags()))  # type: ignore[arg-type]
    return r.body()


REQUESTS: dict[int, Callable[[int], bytes]] = {
    TXN_OFFSET_COMMIT: txn_offset_commit,
    OFFSET_COMMIT: offset_commit,
    OFFSET_FETCH: offset_fetch,
    JOIN_GROUP: join_group,
    SYNC_GROUP: sync_group,
    HEARTBEAT: heartbeat,
    LEAVE_GROUP: leave_group,
    CONSUMER_GROUP_HEARTBEAT: consumer_group_heartbeat,
}
PER_PARTITION = {TXN_OFFSET_COMMIT, OFFSET_COMMIT}


def _cases() -> list[tuple[int, int]]:
    """(api, version) for every boundary of Kafka 4.3's range, and every version in between."""
    return [(api, v) for api, (first, _, latest) in KAFKA_4_3.items() for v in range(first, latest + 1)]


def _answerable_code(api: int, version: int, partition_level: bool = False) -> int:
    """An error a broker answers `api` of `version` with (a group-level one unless `partition_level`)."""
    since = ANSWERED_FROM.get(api, {})
    for name in ANSWERABLE[api]:
        code = ERRORS[name].code
        if since.get(name, 0) <= version and (code in PARTITION_ERRORS) == partition_level and code != ERRORS["UNKNOWN_SERVER_ERROR"].code:
            return code
    raise AssertionError(f"no error for {api_name(api)} v{version}")


def _partitions(version: int, by_id: bool, prefix: str = "") -> set[str]:
    return {f"{prefix}{TOPIC_ID.hex() if by_id else name}-{p}" for name, partitions in TOPICS for p in partitions}


def test_the_registry_follows_kafka_4_3s_schemas() -> None:
    """Each request type's versions and first flexible version are Kafka 4.3.1's; every one a fault
    may answer (but Produce and Metadata, written elsewhere) has its entry, and the errors answered
    only from a version are errors it is answered with."""
    for api, (first, flexible_from, latest) in KAFKA_4_3.items():
        answer = ANSWERS[api]
        assert (answer.versions[0], answer.flexible_from, answer.versions[-1]) == (first, flexible_from, latest), api_name(api)
    assert set(ANSWERABLE) - {PRODUCE, METADATA} == set(ANSWERS)
    assert {api_name(api) for api in KAFKA_4_3} <= set(APIS)
    for api, since in ANSWERED_FROM.items():
        assert set(since) <= set(ANSWERABLE[api]), api_name(api)
        assert all(version in ANSWERS[api].versions for version in since.values()), api_name(api)


@pytest.mark.parametrize(("api", "version"), _cases(), ids=[f"{api_name(api)}-v{version}" for api, version in _cases()])
def test_the_error_answer_reads_back_where_the_schema_puts_it(api: int, version: int) -> None:
    code = _answerable_code(api, version)
    answer = error_answer(REQUESTS[api](version), code)
    assert struct.unpack_from(">i", answer)[0] == CORRELATION
    flexible = version >= KAFKA_4_3[api][1]
    if flexible:
        assert answer[4] == 0  # the response header's tagged fields: none
        assert answer[-1] == 0  # the answer's: none
    found = errors(answer, api, version)  # reads every field, to the last byte
    if api in PER_PARTITION:
        assert found == dict.fromkeys(_partitions(version, by_id=api == OFFSET_COMMIT and version >= 10), code)
        with pytest.raises(ProtocolError, match="no top-level error"):
            top_error(answer, api, version)
    elif api == OFFSET_FETCH and version == 1:  # no group-level error yet: each partition carries it
        assert found == dict.fromkeys(_partitions(version, by_id=False), code)
    elif api == OFFSET_FETCH and version >= 8:
        assert found == {"group:group-1": code}
    else:
        assert found == {"": code} and top_error(answer, api, version) == code


@pytest.mark.parametrize("version", range(7, 11))
def test_offset_fetch_carries_a_partitions_error_on_each_requested_partition(version: int) -> None:
    code = _answerable_code(OFFSET_FETCH, version, partition_level=True)
    found = errors(error_answer(offset_fetch(version), code), OFFSET_FETCH, version)
    group = "group:group-1" if version >= 8 else ""
    assert found == {group: 0} | dict.fromkeys(_partitions(version, version >= 10, f"{group}/" if group else ""), code)
    with pytest.raises(ProtocolError, match="no partition to carry"):
        error_answer(offset_fetch(version, topics=None), code)  # every partition of the group: nothing to put it on


def test_answers_match_kafkas_bytes() -> None:
    """A few answers written out by hand from the response schemas."""
    tags = b"\x00"
    assert error_answer(heartbeat(0), 27) == struct.pack(">ih", CORRELATION, 27)
    assert error_answer(heartbeat(4), 27) == struct.pack(">i", CORRELATION) + tags + struct.pack(">ih", 0, 27) + tags
    assert error_answer(leave_group(3), 25) == struct.pack(">iihi", CORRELATION, 0, 25, 0)
    assert error_answer(sync_group(5), 22) == struct.pack(">i", CORRELATION) + tags + struct.pack(">ih", 0, 22) + b"\x00\x00\x01" + tags
    join = error_answer(join_group(9), 79)  # throttle, error, generation, protocol type/name null, leader "", skip, member id "", members
    assert join == struct.pack(">i", CORRELATION) + tags + struct.pack(">ihi", 0, 79, -1) + b"\x00\x00\x01\x00\x01\x01" + tags
    heartbeat_848 = error_answer(consumer_group_heartbeat(1), 110)  # throttle, error, message, member id, epoch, interval, no assignment
    assert heartbeat_848 == struct.pack(">i", CORRELATION) + tags + struct.pack(">ih", 0, 110) + b"\x00\x00" + struct.pack(">iib", 0, 0, -1) + tags
    txn = error_answer(txn_offset_commit(0), 51)
    assert txn == struct.pack(">iii", CORRELATION, 0, 2) + struct.pack(">h", 6) + b"orders" + struct.pack(">iihih", 2, 0, 51, 2, 51) + struct.pack(
        ">h", 5
    ) + b"audit" + struct.pack(">iih", 1, 1, 51)


def test_an_error_a_version_is_not_answered_with_is_refused() -> None:
    """Below the version a broker answers an error from, the proxy does not answer it (the request
    reaches the broker: `unanswerable.<api>`)."""
    with pytest.raises(ProtocolError, match=r"Heartbeat v2 is not answered with FENCED_INSTANCE_ID \(v3\+ is\)"):
        error_answer(heartbeat(2), ERRORS["FENCED_INSTANCE_ID"].code)
    with pytest.raises(ProtocolError, match="TxnOffsetCommit v1 is not answered with COORDINATOR_LOAD_IN_PROGRESS"):
        error_answer(txn_offset_commit(1), ERRORS["COORDINATOR_LOAD_IN_PROGRESS"].code)
    assert errors(error_answer(txn_offset_commit(2), 14), TXN_OFFSET_COMMIT, 2)["audit-1"] == 14
    with pytest.raises(ProtocolError, match=r"OffsetCommit v1 is not answered \(v2-10 are\)"):
        error_answer(offset_commit(2)[:2] + struct.pack(">h", 1) + offset_commit(2)[4:], 16)
    with pytest.raises(ProtocolError, match="ConsumerGroupHeartbeat v2 is not answered"):
        error_answer(struct.pack(">hhi", CONSUMER_GROUP_HEARTBEAT, 2, 1) + b"\x00\x00\x00", 16)
    assert "STALE_MEMBER_EPOCH (113, non-retriable, v9+)" in error_table(OFFSET_COMMIT)


def test_a_truncated_request_or_answer_raises_a_protocol_error() -> None:
    body = txn_offset_commit(3)
    with pytest.raises(ProtocolError):
        error_answer(body[:-6], 16)
    answer = error_answer(body, 16)
    for broken in (answer[:-1], answer + b"\x00"):
        with pytest.raises(ProtocolError):
            errors(broken, TXN_OFFSET_COMMIT, 3)


def test_a_brokers_answer_is_described_per_part() -> None:
    assert describe(error_answer(heartbeat(4), 0), HEARTBEAT, 4) == "NONE"
    assert describe(error_answer(offset_commit(8), 16), OFFSET_COMMIT, 8) == "orders-0: NOT_COORDINATOR, orders-2: NOT_COORDINATOR, audit-1: NOT_COORDINATOR"
    assert describe(error_answer(offset_fetch(8), 15), OFFSET_FETCH, 8) == "group:group-1: COORDINATOR_NOT_AVAILABLE"


def test_init_producer_id_v6_answers_carry_no_ongoing_transaction() -> None:
    """InitProducerId v6 (KIP-939) adds the ongoing transaction's producer id and epoch after the producer's."""
    w = Writer()
    w.out += struct.pack(">hhi", INIT_PRODUCER_ID, 6, CORRELATION)
    w.string("c", False)
    w.tags({}, ())
    w.string("txn-1", True)
    w.out += struct.pack(">iqhbb", 60000, -1, -1, 0, 0)
    w.tags({}, ())
    answer = error_answer(bytes(w.out), 51)
    assert answer == struct.pack(">ibihqhqhb", CORRELATION, 0, 0, 51, -1, -1, -1, -1, 0)
    assert top_error(answer, INIT_PRODUCER_ID, 6) == 51
