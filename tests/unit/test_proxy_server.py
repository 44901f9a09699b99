"""The proxy's connection logic for the PRODUCE faults, against a stand-in broker that answers
every PRODUCE with success (pure logic: framing, ordering, holding, releasing). Real brokers and
librdkafka under these faults: tests/integration/test_proxy_faults.py."""

from __future__ import annotations

import asyncio
import struct
import time
from collections.abc import Awaitable, Callable
from contextlib import suppress
from dataclasses import dataclass, field

import pytest

from acklab.proxy.answers import ANSWERS, error_answer, errors, top_error
from acklab.proxy.behaviours import BEHAVIOURS
from acklab.proxy.behaviours.plant_offset import SHIFT
from acklab.proxy.behaviours.plant_reorder import FIRST_TRIES
from acklab.proxy.codes import END_TXN, HEARTBEAT, INIT_PRODUCER_ID, PRODUCE, TXN_OFFSET_COMMIT
from acklab.proxy.protocol import (
    PartitionData,
    PartitionResponse,
    ProduceRequest,
    ProduceResponse,
    RequestHeader,
    TopicData,
    TopicResponse,
    Writer,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
)
from acklab.proxy.rules import ProxyRule
from acklab.proxy.server import BrokerProxy, ProxyServer, ProxySpec, Route

VERSION = 10


@dataclass
class Broker:
    """Answers each PRODUCE (acks != 0) with success at the next offset, after `delay_s`; EndTxn with an empty body;
    the other requests the proxy can answer (`acklab.proxy.answers.ANSWERS`) with error NONE."""

    delay_s: float = 0.0
    received: list[tuple[int, int, float]] = field(default_factory=list)  # (api key, correlation id, time)
    offset: int = 0

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with suppress(asyncio.IncompleteReadError, ConnectionError):
            while True:
                body = await reader.readexactly(int.from_bytes(await reader.readexactly(4), "big"))
                api_key = int.from_bytes(body[:2], "big")
                correlation = int.from_bytes(body[4:8], "big", signed=True)
                self.received.append((api_key, correlation, time.monotonic()))
                if api_key == END_TXN:
                    answer = correlation.to_bytes(4, "big") + b"\x00"
                elif api_key in ANSWERS:
                    answer = error_answer(body, 0)
                else:
                    header, request = decode_request(body)
                    if request.acks == 0:
                        continue
                    self.offset += 1
                    topics = tuple(TopicResponse(t.name, tuple(PartitionResponse(p.index, 0, self.offset) for p in t.partitions)) for t in request.topics)
                    answer = encode_response(correlation, ProduceResponse(topics), header.api_version)
                await asyncio.sleep(self.delay_s)
                writer.write(len(answer).to_bytes(4, "big") + answer)
        writer.close()


class Client:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    def produce(
        self, correlation: int, acks: int = -1, transactional_id: str | None = None, records: tuple[bytes, ...] = (b"records", b"r"), topic: str = "t",
    ) -> None:
        partitions = tuple(PartitionData(index, batch) for index, batch in enumerate(records))
        request = ProduceRequest(transactional_id, acks, 1000, (TopicData(topic, partitions),))
        self.send(encode_request(RequestHeader(PRODUCE, VERSION, correlation, "test"), request))

    def send(self, body: bytes) -> None:
        self.writer.write(len(body).to_bytes(4, "big") + body)

    async def answer(self, timeout_s: float = 2.0) -> tuple[int, list[int]]:
        """(correlation id, error code per partition) of the next answer."""
        size = await asyncio.wait_for(self.reader.readexactly(4), timeout_s)
        correlation, response = decode_response(await self.reader.readexactly(int.from_bytes(size, "big")), VERSION)
        return correlation, [p.error_code for t in response.topics for p in t.partitions]


Scenario = Callable[[ProxyServer, list[Broker], Callable[[int], Awaitable[Client]]], Awaitable[None]]


def run(scenario: Scenario, brokers: int = 1, delay_s: float = 0.0) -> None:
    """Run `scenario` with a proxy in front of `brokers` stand-in brokers (ports chosen by the OS)."""

    async def main() -> None:
        fakes = [Broker(delay_s) for _ in range(brokers)]
        upstreams = [await asyncio.start_server(fake.serve, "127.0.0.1", 0) for fake in fakes]
        spec = ProxySpec(control_port=0, routes=[
            Route(broker=n, listen_port=0, upstream_port=server.sockets[0].getsockname()[1]) for n, server in enumerate(upstreams)
        ])
        proxy = ProxyServer(spec)
        listeners = [await asyncio.start_server(proxy.brokers[n].serve, "127.0.0.1", 0) for n in range(brokers)]

        async def connect(n: int) -> Client:
            return Client(*await asyncio.open_connection("127.0.0.1", listeners[n].sockets[0].getsockname()[1]))

        try:
            await scenario(proxy, fakes, connect)
        finally:
            for server in (*listeners, *upstreams):
                server.close()

    asyncio.run(main())


def produce_received(broker: Broker) -> list[int]:
    return [correlation for api_key, correlation, _ in broker.received if api_key == PRODUCE]


def stats(proxy: ProxyServer, broker: int = 0) -> dict[str, int]:
    return {k: v for k, v in proxy.brokers[broker].stats.items() if not k.startswith(("requests.", "responses.", "connections"))}


def set_rule(proxy: ProxyServer, broker: int = 0, *, action: str, **options: object) -> BrokerProxy:
    """Install a rule of `action` with `options` (validated by the behaviour's options models) through the control channel."""
    proxy.handle({"op": "set", "broker": broker, "rule": {"action": action, "options": options}})
    return proxy.brokers[broker]


def test_injected_error_answers_every_partition_and_never_reaches_the_broker() -> None:
    async def scenario(proxy: ProxyServer, brokers: list[Broker], connect: Callable[[int], Awaitable[Client]]) -> None:
        set_rule(proxy, action="inject_error", error="NOT_ENOUGH_REPLICAS", count=1)
        client = await connect(0)
        client.produce(1)
        assert await client.answer() == (1, [19, 19])
        client.produce(2)  # count=1: forwarded
        assert await client.answer() == (2, [0, 0])
        assert produce_received(brokers[0]) == [2]
        assert stats(proxy) == {"injected_errors": 1}

    run(scenario)


def test_injected_error_waits_for_the_answers_due_before_it() -> None:
    """A broker answers a connection's requests in order, so the proxy's answer comes after the broker's."""

    async def scenario(proxy: ProxyServer, brokers: list[Broker], connect: Callable[[int], Awaitable[Client]]) -> None:
        client = await connect(0)
        client.produce(1)  # the broker answers it 0.3 s later
        await asyncio.sleep(0.1)
        set_rule(proxy, action="inject_error", error="REQUEST_TIMED_OUT")
        client.produce(2)
        assert [await client.answer(), await client.answer()] == [(1, [0, 0]), (2, [7, 7])]

    run(scenario, delay_s=0.3)


def test_injected_error_for_acks_0_closes_the_connection() -> None:
    async def scenario(proxy: ProxyServer, brokers: list[Broker], connect: Callable[[int], Awaitable[Client]]) -> None:
        set_rule(proxy, action="inject_error", error="NOT_LEADER_OR_FOLLOWER")
        client = await connect(0)
        client.produce(1, acks=0)
        assert await asyncio.wait_for(client.reader.read(), 2) == b""  # closed, no answer
        assert produce_received(brokers[0]) == []
        assert stats(proxy) == {"injected_errors": 1, "closed_after_error": 1}

    run(scenario)


def test_replaced_error_after_the_broker_appended() -> None:
    async def scenario(proxy: ProxyServer, brokers: list[Broker], connect: Callable[[int], Awaitable[Client]]) -> None:
        set_rule(proxy, action="replace_error", error="NOT_ENOUGH_REPLICAS_AFTER_APPEND")
        client = await connect(0)
        client.produce(1)
        assert await client.answer() == (1, [20, 20])
        assert produce_received(brokers[0]) == [1]
        assert stats(proxy) == {"replaced_errors": 1}

    run(scenario)


def test_held_requests_are_released_after_their_delay_in_order() -> None:
    async def scenario(proxy: ProxyServer, brokers: list[Broker], connect: Callable[[int], Awaitable[Client]]) -> None:
        set_rule(proxy, action="hold_request", delay_s=0.4, count=1)
        client = await connect(0)
        started = time.monotonic()
        client.produce(1)
        client.produce(2)  # beyond count, but queued behind the held one
        assert [await client.answer(), await client.answer()] == [(1, [0, 0]), (2, [0, 0])]
        assert time.monotonic() - started >= 0.4
        assert produce_received(brokers[0]) == [1, 2]
        assert stats(proxy) == {"held_requests": 2, "released_requests": 2}

    run(scenario)


def test_later_requests_of_its_connection_queue_behind_a_held_one() -> None:
    async def scenario(proxy: ProxyServer, brokers: list[Broker], connect: Callable[[int], Awaitable[Client]]) -> None:
        set_rule(proxy, action="hold_request")  # until the rule ends
        client = await connect(0)
        client.produce(1)
        client.send(_end_txn(2))
        with pytest.raises(TimeoutError):
            await client.answer(timeout_s=0.3)
        assert brokers[0].received == []
        proxy.handle({"op": "clear", "broker": 0})
        assert await client.answer() == (1, [0, 0])
        assert [c for _, c, _ in brokers[0].received] == [1, 2]
        (held, queued) = proxy.handle({"op": "withheld", "broker": 0})["withheld"]
        assert (held["api"], held["queued"], queued["api"], queued["queued"]) == ("Produce", False, "EndTxn", True)

    run(scenario)


def test_a_held_request_reaches_the_broker_after_its_client_left() -> None:
    async def scenario(proxy: ProxyServer, brokers: list[Broker], connect: Callable[[int], Awaitable[Client]]) -> None:
        set_rule(proxy, action="hold_request")
        client = await connect(0)
        client.produce(1)
        await asyncio.sleep(0.1)
        client.writer.close()
        await asyncio.sleep(0.1)
        assert produce_received(brokers[0]) == []
        proxy.handle({"op": "clear"})
        await asyncio.sleep(0.2)
        assert produce_received(brokers[0]) == [1]
        assert stats(proxy) == {"held_requests": 1, "released_requests": 1, "discarded_responses": 1, "discarded_produce_errors.0": 2}

    run(scenario)


def test_withhold_replays_right_after_a_named_request_answered_by_any_broker_and_logs_what_it_held() -> None:
    async def scenario(proxy: ProxyServer, brokers: list[Broker], connect: Callable[[int], Awaitable[Client]]) -> None:
        set_rule(proxy, 0, action="hold_request", replay_after=END_TXN, transactional_only=True)
        producer, coordinator = await connect(0), await connect(1)
        producer.produce(1)  # not transactional: passes
        assert await producer.answer() == (1, [0, 0])
        producer.produce(2, transactional_id="txn", records=(batch(5, 10, epoch=2),))
        await asyncio.sleep(0.2)
        assert produce_received(brokers[0]) == [1]
        coordinator.send(_end_txn(7))
        assert await producer.answer() == (2, [0])
        answered_end_txn = next(t for api, _, t in brokers[1].received if api == END_TXN)
        assert next(t for api, c, t in brokers[0].received if c == 2) >= answered_end_txn
        assert stats(proxy) == {"held_requests": 1, "released_requests": 1, "replayed_after_trigger": 1}
        (held,) = proxy.handle({"op": "withheld", "broker": 0})["withheld"]
        assert held["transactional_id"] == "txn" and held["answer"] == "t-0: NONE" and not held["client_gone"]
        assert held["batches"] == [{"topic": "t", "partition": 0, "producer_id": 5, "producer_epoch": 2, "base_sequence": 10}]
        assert held["held_at"] <= held["released_at"]

    run(scenario, brokers=2)


def test_withhold_chooses_by_producer_partition_and_the_nth_match() -> None:
    async def scenario(proxy: ProxyServer, brokers: list[Broker], connect: Callable[[int], Awaitable[Client]]) -> None:
        set_rule(proxy, action="hold_request", producer_id=5, partition=1, nth=2, count=1)
        client = await connect(0)
        client.produce(1, records=(batch(4, 0), batch(4, 0)))  # another producer
        client.produce(2, records=(batch(5, 0),))  # partition 0 only
        client.produce(3, records=(batch(5, 1), batch(5, 0)))  # the first match: passes
        for correlation in (1, 2, 3):
            assert (await client.answer())[0] == correlation
        client.produce(4, records=(batch(5, 2), batch(5, 1)))  # the second: held
        with pytest.raises(TimeoutError):
            await client.answer(timeout_s=0.3)
        proxy.handle({"op": "clear"})
        assert (await client.answer())[0] == 4

    run(scenario)


def test_injected_errors_answer_the_coordinator_requests_in_the_brokers_place() -> None:
    async def scenario(proxy: ProxyServer, brokers: list[Broker], connect: Callable[[int], Awaitable[Client]]) -> None:
        set_rule(proxy, action="inject_error", apis=[INIT_PRODUCER_ID], error="REQUEST_TIMED_OUT")
        client = await connect(0)
        client.send(_init_producer_id(9))
        size = await asyncio.wait_for(client.reader.readexactly(4), 2)
        body = await client.reader.readexactly(int.from_bytes(size, "big"))
        assert top_error(body, INIT_PRODUCER_ID, 4) == 7 and body[:4] == (9).to_bytes(4, "big")
        assert brokers[0].received == [] and stats(proxy) == {"injected_errors": 1}

    run(scenario)


def test_injected_errors_answer_group_requests_but_pass_a_version_older_than_the_error() -> None:
    """UNKNOWN_MEMBER_ID answers Heartbeat (any version) and TxnOffsetCommit from v3, for each
    partition it commits; a TxnOffsetCommit v2 reaches the broker (`unanswerable.TxnOffsetCommit`)."""

    async def scenario(proxy: ProxyServer, brokers: list[Broker], connect: Callable[[int], Awaitable[Client]]) -> None:
        set_rule(proxy, action="inject_error", apis=["Heartbeat", "TxnOffsetCommit"], error="UNKNOWN_MEMBER_ID")
        client = await connect(0)
        requests = {1: (HEARTBEAT, 4, _heartbeat(1)), 2: (TXN_OFFSET_COMMIT, 2, _txn_offset_commit(2, 2)), 3: (TXN_OFFSET_COMMIT, 3, _txn_offset_commit(3, 3))}
        for _, _, body in requests.values():
            client.send(body)
        answered = {}
        for _ in requests:
            body = await client.reader.readexactly(int.from_bytes(await asyncio.wait_for(client.reader.readexactly(4), 2), "big"))
            correlation = int.from_bytes(body[:4], "big")
            api, version, _ = requests[correlation]
            answered[correlation] = errors(body, api, version)
        assert answered == {1: {"": 25}, 2: {"t-0": 0, "t-1": 0}, 3: {"t-0": 25, "t-1": 25}}
        assert [c for _, c, _ in brokers[0].received] == [2]
        assert stats(proxy) == {"injected_errors": 2, "unanswerable.TxnOffsetCommit": 1}

    run(scenario)


def _heartbeat(correlation: int) -> bytes:
    """A Heartbeat v4 request (flexible): group, generation, member, no instance id."""
    writer = Writer()
    writer.out += struct.pack(">hhi", HEARTBEAT, 4, correlation)
    writer.string("test", False)
    writer.tags({}, ())
    writer.string("group", True)
    writer.int32(3)
    writer.string("member", True)
    writer.string(None, True)
    writer.tags({}, ())
    return bytes(writer.out)


def _txn_offset_commit(correlation: int, version: int) -> bytes:
    """A TxnOffsetCommit v2 or v3 (flexible, with the group's generation and member) request committing partitions 0 and 1 of topic t."""
    flexible = version >= 3
    writer = Writer()
    writer.out += struct.pack(">hhi", TXN_OFFSET_COMMIT, version, correlation)
    writer.string("test", False)
    if flexible:
        writer.tags({}, ())
    writer.string("txn", flexible)
    writer.string("group", flexible)
    writer.out += struct.pack(">qh", 5, 0)
    if flexible:
        writer.int32(3)
        writer.string("member", True)
        writer.string(None, True)
    writer.length(1, flexible)
    writer.string("t", flexible)
    writer.length(2, flexible)
    for partition in (0, 1):
        writer.out += struct.pack(">iqi", partition, 10, -1)
        writer.string(None, flexible)
        if flexible:
            writer.tags({}, ())
    if flexible:
        writer.tags({}, ())
        writer.tags({}, ())
    return bytes(writer.out)


def test_rules_validate_their_options() -> None:
    with pytest.raises(ValueError, match="apis: name the request types to answer with an error"):
        ProxyRule.of("inject_error", apis=[])
    with pytest.raises(ValueError, match=r"error 'NOPE' is not one a broker answers Produce with; valid: CORRUPT_MESSAGE \(2, retriable\)"):
        ProxyRule.of("replace_error", error="NOPE")
    with pytest.raises(ValueError, match="error 'NOT_ENOUGH_REPLICAS' is not one a broker answers EndTxn with"):
        ProxyRule.of("inject_error", apis=[END_TXN], error="NOT_ENOUGH_REPLICAS")
    with pytest.raises(ValueError, match="cannot answer ApiVersions requests"):
        ProxyRule.of("inject_error", apis=[18], error="NOT_COORDINATOR")
    with pytest.raises(ValueError, match="error 'NOT_COORDINATOR' is not one a broker answers Metadata with"):
        ProxyRule.of("inject_error", apis=[3], error="NOT_COORDINATOR")
    with pytest.raises(ValueError, match="cannot answer Fetch|cannot answer api 1 "):
        ProxyRule.of("inject_error", apis=[1], error="NOT_COORDINATOR")
    with pytest.raises(ValueError, match="error 'REBALANCE_IN_PROGRESS' is not one a broker answers TxnOffsetCommit with"):
        ProxyRule.of("inject_error", apis=["TxnOffsetCommit"], error="REBALANCE_IN_PROGRESS")
    with pytest.raises(ValueError, match="Extra inputs are not permitted"):
        ProxyRule.of("replace_error", apis=[0])  # error-after-append acts on Produce only: it has no apis
    with pytest.raises(ValueError, match="nth"):
        ProxyRule.model_validate({"action": "hold_request", "options": {"nth": 0}})


def _init_producer_id(correlation: int) -> bytes:
    """An InitProducerId v4 request (flexible): no transactional id, timeout, no producer yet."""
    writer = Writer()
    RequestHeader(INIT_PRODUCER_ID, 4, correlation, "test", ()).write(writer)
    writer.out += b"\x00"  # the header's tagged fields (RequestHeader knows flexibility of Produce and EndTxn only)
    writer.string(None, True)
    writer.int32(60000)
    writer.int64(-1)
    writer.int16(-1)
    writer.tags({}, ())
    return bytes(writer.out)


def _end_txn(correlation: int) -> bytes:
    """An EndTxn v3 request (flexible): transactional id, producer id and epoch, committed."""
    writer = Writer()
    RequestHeader(END_TXN, 3, correlation, "test").write(writer)
    writer.string("txn", True)
    writer.int64(1)
    writer.int16(0)
    writer.out.append(1)
    writer.tags({}, ())
    return bytes(writer.out)


def batch(producer_id: int, sequence: int, epoch: int = 0, records: int = 1) -> bytes:
    """The header of a v2 record batch of `records` records (what the proxy reads: magic, producer, sequence, count)."""
    return struct.pack(">qiibihiqqqhii", 0, 49, 0, 2, 0, 0, records - 1, 0, 0, producer_id, epoch, sequence, records)


def test_planted_loss_answers_as_appended_in_the_brokers_name_and_logs_what_it_swallowed() -> None:
    async def scenario(proxy: ProxyServer, brokers: list[Broker], connect: Callable[[int], Awaitable[Client]]) -> None:
        client = await connect(0)
        client.produce(1, records=(batch(7, 0, records=3),))  # before the rule: the broker appends it
        assert await client.answer() == (1, [0])
        set_rule(proxy, action="plant_loss")
        client.produce(2, records=(batch(7, 3, records=5), batch(7, 0, records=2) + batch(7, 2, records=4)))
        client.produce(3, records=(batch(7, 8, records=1),))
        client.produce(4, acks=0, records=(batch(-1, -1, records=6),))  # acks=0: swallowed, no answer
        client.produce(5, records=(b"records",))  # batches it cannot count: forwarded
        size = await asyncio.wait_for(client.reader.readexactly(4), 2)
        correlation, response = decode_response(await client.reader.readexactly(int.from_bytes(size, "big")), VERSION)
        offsets = [(p.index, p.error_code, p.base_offset) for t in response.topics for p in t.partitions]
        assert (correlation, offsets) == (2, [(0, 0, 1 << 40), (1, 0, 1 << 40)])
        _, response = decode_response(await client.reader.readexactly(int.from_bytes(await client.reader.readexactly(4), "big")), VERSION)
        assert [p.base_offset for t in response.topics for p in t.partitions] == [(1 << 40) + 5]  # partition 0 goes on from the 5 before
        assert await client.answer() == (5, [0])
        assert produce_received(brokers[0]) == [1, 5]
        assert stats(proxy) == {"swallowed_requests": 3, "swallowed_records": 5 + 6 + 1 + 6, "unparsed_produce": 1}
        log = proxy.handle({"op": "swallowed", "broker": 0})["swallowed"]
        assert [(e["partition"], e["records"], e["producer_id"], e["base_sequence"], e["answered"]) for e in log] == [
            (0, 5, 7, 3, True), (1, 6, 7, 0, True), (0, 1, 7, 8, True), (0, 6, -1, -1, False)
        ]

    run(scenario)


def test_planted_duplicate_sends_a_request_twice_answers_the_client_once_and_logs_what_the_broker_appended() -> None:
    async def scenario(proxy: ProxyServer, brokers: list[Broker], connect: Callable[[int], Awaitable[Client]]) -> None:
        client = await connect(0)
        set_rule(proxy, action="plant_duplicate", probability=1.0)
        client.produce(1, records=(batch(-1, -1, records=3), batch(-1, -1, records=4)))  # no idempotence: sent twice
        client.produce(2, records=(batch(7, 0, records=5),))  # idempotent: the broker would append nothing, passes
        client.produce(3, transactional_id="tx", records=(batch(-1, -1, records=2),))  # transactional: passes
        client.produce(4, acks=0, records=(batch(-1, -1, records=6),))  # acks=0: no answer to learn from, passes
        client.produce(5, records=(batch(-1, -1, records=1),))
        assert [await client.answer() for _ in range(4)] == [(1, [0, 0]), (2, [0]), (3, [0]), (5, [0])]
        with pytest.raises(TimeoutError):  # the copies' answers never reach the client
            await client.answer(timeout_s=0.3)
        received = produce_received(brokers[0])
        assert received[:3] == [1, received[1], 2] and received[1] < 0 and received[-2:] == [5, received[-1]] and received[-1] < 0
        assert len(received) == 7
        assert stats(proxy) == {
            "duplicated_requests": 2, "duplicated_records": 3 + 4 + 1, "idempotent_passed": 2, "unanswered_passed": 1,
        }
        log = proxy.handle({"op": "duplicated", "broker": 0})["duplicated"]
        # The stand-in broker appends each request at the next offset: the copy right after the original.
        assert [(e["partition"], e["records"], e["answered"], e["error"], e["base_offset"]) for e in log] == [
            (0, 3, True, "NONE", 2), (1, 4, True, "NONE", 2), (0, 1, True, "NONE", 6),
        ]

    run(scenario)


@pytest.mark.parametrize("action,log", [("plant_duplicate", "duplicated"), ("plant_offset", "shifted"), ("plant_misroute", "misrouted")])
def test_a_planted_anomalys_truth_is_kept_when_its_client_leaves_before_the_answer(action: str, log: str) -> None:
    """The broker's answer is the truth of what was planted: a client that closes its connection
    before it came (its copy's answer comes after the client's own) does not take it along."""

    async def scenario(proxy: ProxyServer, brokers: list[Broker], connect: Callable[[int], Awaitable[Client]]) -> None:
        client = await connect(0)
        set_rule(proxy, action=action, probability=1.0)
        client.produce(1, records=(batch(-1, -1, records=3), batch(-1, -1, records=4)))
        await asyncio.sleep(0.05)
        client.writer.close()
        await asyncio.sleep(1.0)  # the broker answers 0.3 s after each request
        entries = proxy.handle({"op": log, "broker": 0})[log]
        assert [(e["records"], e["answered"], e["error"]) for e in entries] == [(3, True, "NONE"), (4, True, "NONE")]

    run(scenario, delay_s=0.3)


def test_planted_offset_shifts_the_answers_offsets_and_logs_the_real_ones() -> None:
    async def scenario(proxy: ProxyServer, brokers: list[Broker], connect: Callable[[int], Awaitable[Client]]) -> None:
        client = await connect(0)
        set_rule(proxy, action="plant_offset", probability=1.0, count=2)
        client.produce(1, records=(batch(7, 0, records=3), batch(7, 0, records=4)))
        client.produce(2, acks=0, records=(batch(-1, -1, records=6),))  # acks=0: nothing to shift, passes
        client.produce(3, records=(batch(-1, -1, records=1),))
        client.produce(4, records=(batch(-1, -1, records=2),))  # count=2: answered as the broker gave it
        answers = []
        for _ in range(3):
            size = await asyncio.wait_for(client.reader.readexactly(4), 2)
            correlation, response = decode_response(await client.reader.readexactly(int.from_bytes(size, "big")), VERSION)
            answers.append((correlation, [(p.index, p.error_code, p.base_offset) for t in response.topics for p in t.partitions]))
        assert answers == [(1, [(0, 0, SHIFT + 1), (1, 0, SHIFT + 1)]), (3, [(0, 0, SHIFT + 2)]), (4, [(0, 0, 3)])]
        assert produce_received(brokers[0]) == [1, 2, 3, 4]  # every request reaches the broker as sent
        assert stats(proxy) == {"shifted_requests": 2, "shifted_records": 3 + 4 + 1, "unanswered_passed": 1}
        log = proxy.handle({"op": "shifted", "broker": 0})["shifted"]
        assert [(e["partition"], e["records"], e["answered"], e["error"], e["base_offset"]) for e in log] == [
            (0, 3, True, "NONE", 1), (1, 4, True, "NONE", 1), (0, 1, True, "NONE", 2),
        ]

    run(scenario)


@pytest.mark.parametrize(("action", "counter"), [("plant_offset", "shifted_requests"), ("plant_duplicate", "duplicated_requests")])
def test_a_planting_share_plants_each_topic_once_before_it_applies(action: str, counter: str) -> None:
    """However small the share, every topic's first eligible request is planted (each producer whose
    load passes the broker meets the plant); after it, the share decides (0 here: none)."""

    async def scenario(proxy: ProxyServer, brokers: list[Broker], connect: Callable[[int], Awaitable[Client]]) -> None:
        client = await connect(0)
        set_rule(proxy, action=action, probability=0.0)
        client.produce(1, acks=0, topic="a", records=(batch(-1, -1, records=6),))  # acks=0: not eligible, topic a still waits
        for correlation, topic in ((2, "a"), (3, "a"), (4, "b"), (5, "a"), (6, "b")):
            client.produce(correlation, topic=topic, records=(batch(-1, -1, records=correlation),))
        assert sorted([(await client.answer())[0] for _ in range(5)]) == [2, 3, 4, 5, 6]
        log = proxy.handle({"op": BEHAVIOURS[action].log, "broker": 0})[BEHAVIOURS[action].log]
        assert [(e["topic"], e["records"]) for e in log] == [("a", 2), ("b", 4)]
        assert stats(proxy)[counter] == 2

    run(scenario)


def test_planted_misroute_renames_the_partitions_answers_the_clients_and_logs_where_they_went() -> None:
    """Two partitions of a topic rotate; a lone one goes to another partition of its topic seen
    through this broker (none seen: it passes); the client's answer names what it sent."""

    async def scenario(proxy: ProxyServer, brokers: list[Broker], connect: Callable[[int], Awaitable[Client]]) -> None:
        client = await connect(0)
        set_rule(proxy, action="plant_misroute", probability=1.0)
        client.produce(1, records=(batch(-1, -1, records=3),))  # partition 0 alone, nothing else seen: passes
        client.produce(2, records=(batch(-1, -1, records=3), batch(-1, -1, records=4)))  # 0 and 1 rotate
        client.produce(3, records=(batch(-1, -1, records=2),))  # partition 0 alone: to 1, seen in request 2
        client.produce(4, records=(batch(7, 0, records=5),))  # idempotent: passes
        client.produce(5, acks=0, records=(batch(-1, -1, records=6),))  # acks=0: passes
        client.produce(6, records=(b"records",))  # batches it cannot count: passes
        answers = []
        for _ in range(5):
            size = await asyncio.wait_for(client.reader.readexactly(4), 2)
            correlation, response = decode_response(await client.reader.readexactly(int.from_bytes(size, "big")), VERSION)
            answers.append((correlation, [(p.index, p.error_code) for t in response.topics for p in t.partitions]))
        assert answers == [(1, [(0, 0)]), (2, [(0, 0), (1, 0)]), (3, [(0, 0)]), (4, [(0, 0)]), (6, [(0, 0)])]
        assert stats(proxy) == {
            "misrouted_requests": 2, "misrouted_records": 3 + 4 + 2, "no_target_passed": 1, "idempotent_passed": 1,
            "unanswered_passed": 1, "unparsed_produce": 1,
        }
        log = proxy.handle({"op": "misrouted", "broker": 0})["misrouted"]
        assert [(e["partition"], e["to"], e["records"], e["answered"], e["error"], e["base_offset"]) for e in log] == [
            (0, 1, 3, True, "NONE", 2), (1, 0, 4, True, "NONE", 2), (0, 1, 2, True, "NONE", 3),
        ]

    run(scenario)


def test_planted_misroute_sends_a_lone_partition_to_the_broker_leading_the_next_and_keeps_the_answers_in_order() -> None:
    """A request writing one partition goes, renamed, to the broker leading the next partition (the
    fault's `leaders`), on the proxy's own connection; its answer, however late, reaches the client
    before the answers to the requests behind it."""

    async def scenario(proxy: ProxyServer, brokers: list[Broker], connect: Callable[[int], Awaitable[Client]]) -> None:
        brokers[1].delay_s = 0.3  # the other broker answers later than this one
        client = await connect(0)
        set_rule(proxy, action="plant_misroute", probability=1.0, leaders={0: 0, 1: 1})
        client.produce(1, records=(batch(-1, -1, records=3),))  # partition 0 alone: to partition 1, on broker 1
        client.produce(2, records=(batch(7, 0, records=5),))  # idempotent: passes, answered by broker 0 first
        answers = []
        for _ in range(2):
            size = await asyncio.wait_for(client.reader.readexactly(4), 2)
            correlation, response = decode_response(await client.reader.readexactly(int.from_bytes(size, "big")), VERSION)
            answers.append((correlation, [(p.index, p.error_code, p.base_offset) for t in response.topics for p in t.partitions]))
        assert answers == [(1, [(0, 0, 1)]), (2, [(0, 0, 1)])]
        assert produce_received(brokers[0]) == [2] and len(produce_received(brokers[1])) == 1
        log = proxy.handle({"op": "misrouted", "broker": 0})["misrouted"]
        assert [(e["partition"], e["to"], e["records"], e["error"], e["base_offset"]) for e in log] == [(0, 1, 3, "NONE", 1)]
        # The proxy's own connection closed (a broker's idle timeout, a restart): the next one opens a new one.
        activation = proxy.brokers[0].activation
        (await activation.links[1]).close()  # type: ignore[union-attr]
        await asyncio.sleep(0.05)
        client.produce(3, records=(batch(-1, -1, records=2),))
        size = await asyncio.wait_for(client.reader.readexactly(4), 2)
        correlation, response = decode_response(await client.reader.readexactly(int.from_bytes(size, "big")), VERSION)
        assert (correlation, [(p.index, p.error_code) for t in response.topics for p in t.partitions]) == (3, [(0, 0)])
        assert len(produce_received(brokers[1])) == 2
        proxy.handle({"op": "clear", "broker": 0})
        await asyncio.sleep(0.05)
        assert all(task.done() for task in activation.links.values()) and activation.closing is not None  # type: ignore[union-attr]

    run(scenario, brokers=2)


def _zigzag(value: int) -> bytes:
    value = (value << 1) ^ (value >> 63)
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    return bytes(out + bytes([value]))


def keyed_batch(keys: list[bytes], compressed: bool = False) -> bytes:
    """A v2 record batch of a producer without idempotence, one record (value b"v") per key."""
    records = b""
    for n, key in enumerate(keys):
        body = b"\x00" + _zigzag(0) + _zigzag(n) + _zigzag(len(key)) + key + _zigzag(1) + b"v" + _zigzag(0)
        records += _zigzag(len(body)) + body
    header = struct.pack(">ibihiqqqhii", 0, 2, 0, 1 if compressed else 0, len(keys) - 1, 0, 0, -1, -1, -1, len(keys))
    return struct.pack(">qi", 0, len(header) + len(records)) + header + records


def test_record_keys_reads_each_records_key_and_refuses_a_compressed_batch() -> None:
    assert PartitionData(0, keyed_batch([b"a", b"bb"]) + keyed_batch([b"c"])).record_keys() == [b"a", b"bb", b"c"]
    assert PartitionData(0, keyed_batch([b"a"], compressed=True)).record_keys() is None
    assert PartitionData(0, keyed_batch([b"a", b"b"])[:-3]).record_keys() is None  # cut short


def test_planted_reorder_forwards_the_next_request_first_and_answers_in_request_order() -> None:
    """A is held until B, which writes its partition, has passed it: the broker gets B then A, the
    client A's answer then B's; the records of A whose key B also wrote are the planted truth."""

    async def scenario(proxy: ProxyServer, brokers: list[Broker], connect: Callable[[int], Awaitable[Client]]) -> None:
        client = await connect(0)
        set_rule(proxy, action="plant_reorder", probability=1.0, wait_s=0.2)
        client.produce(1, records=(keyed_batch([b"k1", b"k2", b"k2"]),))  # A: held
        client.produce(2, records=(keyed_batch([b"k2", b"k3"]),))  # B: goes first
        client.produce(3, records=(keyed_batch([b"k1"]),))  # held in turn, nothing follows: forwarded after wait_s
        await asyncio.sleep(0.4)
        client.produce(4, records=(keyed_batch([b"k1"]),))  # held in turn
        client.produce(5, records=(batch(7, 0, records=5),))  # idempotent, behind it: neither goes first (missed)
        answers = []
        for _ in range(5):
            size = await asyncio.wait_for(client.reader.readexactly(4), 2)
            correlation, response = decode_response(await client.reader.readexactly(int.from_bytes(size, "big")), VERSION)
            answers.append((correlation, [p.base_offset for t in response.topics for p in t.partitions]))
        assert answers == [(1, [2]), (2, [1]), (3, [3]), (4, [4]), (5, [5])]  # in request order; the broker appended B (offset 1) before A
        assert produce_received(brokers[0]) == [2, 1, 3, 4, 5]
        log = proxy.handle({"op": "reordered", "broker": 0})["reordered"]
        assert [(e["partition"], e["held_records"], e["records"], e["error"], e["a_offset"], e["b_offset"]) for e in log] == [
            (0, 3, 2, "NONE", 2, 1),
        ]
        assert stats(proxy) == {
            "held_for_reorder": 3, "reordered_requests": 1, "reordered_records": 2, "idempotent_passed": 1, "released_requests": 1,
            "reorder_missed": 1,
        }

    run(scenario)


def test_planted_reorder_holds_a_topic_whose_producer_sends_nothing_behind_until_its_tries_run_out() -> None:
    """A producer with one request in flight never sends B behind a held A: its topic is held
    `FIRST_TRIES` times (each forwarded after `wait_s`), then left to the share (0 here: none)."""

    async def scenario(proxy: ProxyServer, brokers: list[Broker], connect: Callable[[int], Awaitable[Client]]) -> None:
        client = await connect(0)
        set_rule(proxy, action="plant_reorder", probability=0.0, wait_s=0.2)
        waited = []
        for correlation in range(1, FIRST_TRIES + 3):
            sent_at = time.monotonic()
            client.produce(correlation, records=(keyed_batch([b"k"]),))
            assert (await client.answer())[0] == correlation
            waited.append(time.monotonic() - sent_at >= 0.2)
        assert waited == [True] * FIRST_TRIES + [False, False]
        assert stats(proxy) == {"held_for_reorder": FIRST_TRIES, "released_requests": FIRST_TRIES}

    run(scenario)


def test_planted_reorder_keeps_each_connections_held_request_apart() -> None:
    """Producers number their requests on their own: two connections holding requests of the same
    correlation id each get their own pair reordered, with their own truth."""

    async def scenario(proxy: ProxyServer, brokers: list[Broker], connect: Callable[[int], Awaitable[Client]]) -> None:
        first, second = await connect(0), await connect(0)
        set_rule(proxy, action="plant_reorder", probability=1.0)
        first.produce(1, records=(keyed_batch([b"a", b"b"]),))
        second.produce(1, records=(keyed_batch([b"x"]),))
        await asyncio.sleep(0.05)
        first.produce(2, records=(keyed_batch([b"b"]),))
        second.produce(2, records=(keyed_batch([b"x", b"y"]),))
        for client in (first, second):
            assert [(await client.answer())[0] for _ in range(2)] == [1, 2]
        log = proxy.handle({"op": "reordered", "broker": 0})["reordered"]
        assert sorted((e["held_records"], e["records"], e["error"]) for e in log) == [(1, 1, "NONE"), (2, 1, "NONE")]

    run(scenario)


def test_lose_then_reject_loses_a_batch_with_its_connection_then_rejects_its_retry_once() -> None:
    async def scenario(proxy: ProxyServer, brokers: list[Broker], connect: Callable[[int], Awaitable[Client]]) -> None:
        set_rule(proxy, action="lose_then_reject", error="NOT_ENOUGH_REPLICAS", delay_s=0.3)
        plain = await connect(0)
        plain.produce(1)  # no idempotent batch: forwarded, the rule waits for one
        assert await plain.answer() == (1, [0, 0])
        first = await connect(0)
        lost_at = time.monotonic()
        first.produce(2, records=(batch(7, 10),))
        first.produce(3, records=(batch(7, 11),))  # pipelined behind it: lost with it
        assert await first.reader.read() == b""  # no answer; the proxy closes the connection
        assert time.monotonic() - lost_at >= 0.3
        retry = await connect(0)
        sent_at = time.monotonic()
        retry.produce(4, records=(batch(7, 10),))  # the lost batch's retry: rejected
        retry.produce(5, records=(batch(7, 11),))  # behind it: reaches the broker, answered after the rejection
        assert await retry.answer() == (4, [19])
        assert time.monotonic() - sent_at >= 0.3
        assert await retry.answer() == (5, [0])
        retry.produce(6, records=(batch(7, 10),))  # a second retry: the rule acted once
        assert await retry.answer() == (6, [0])
        assert produce_received(brokers[0]) == [1, 5, 6]
        assert stats(proxy) == {"lost_requests": 2, "injected_errors": 1}

    run(scenario)


def test_a_dropped_request_stalls_its_connection_and_answers_stay_in_order() -> None:
    """Kafka answers a connection's requests in order (the Java client checks the correlation ids): a
    request lost on a connection takes every later one with it, as a TCP stream would; a new
    connection passes again once the rule is gone."""

    async def scenario(proxy: ProxyServer, brokers: list[Broker], connect: Callable[[int], Awaitable[Client]]) -> None:
        client = await connect(0)
        client.produce(1)
        assert await client.answer() == (1, [0, 0])
        set_rule(proxy, action="drop_request", probability=1, count=1)
        client.produce(2)  # dropped by the rule
        client.produce(3)  # past the rule's count, yet behind a lost request: dropped too
        with pytest.raises(TimeoutError):
            await client.answer(timeout_s=0.5)
        assert produce_received(brokers[0]) == [1] and stats(proxy)["dropped_requests"] == 2
        fresh = await connect(0)
        fresh.produce(4)
        assert await fresh.answer() == (4, [0, 0])

    run(scenario)


def test_a_dropped_response_on_a_held_connection_is_the_last_it_answers() -> None:
    async def scenario(proxy: ProxyServer, brokers: list[Broker], connect: Callable[[int], Awaitable[Client]]) -> None:
        client = await connect(0)
        set_rule(proxy, action="drop_response", probability=1, then="hold", count=1)
        client.produce(1)  # appended, its answer dropped
        client.produce(2)  # appended, its answer would arrive out of order: dropped too
        with pytest.raises(TimeoutError):
            await client.answer(timeout_s=0.5)
        assert produce_received(brokers[0]) == [1, 2] and stats(proxy)["dropped_responses"] == 2

    run(scenario)


def stall_log(proxy: ProxyServer, broker: int = 0) -> list[dict]:
    return proxy.handle({"op": "write_stalls", "broker": broker})["write_stalls"]


def test_a_stalled_connection_passes_nothing_on_and_backs_up_into_its_client_until_the_stall_ends() -> None:
    async def scenario(proxy: ProxyServer, brokers: list[Broker], connect: Callable[[int], Awaitable[Client]]) -> None:
        client = await connect(0)
        client.produce(1)
        assert await client.answer() == (1, [0, 0])
        set_rule(proxy, action="stall_write")  # the whole window
        client.produce(2, records=(b"x" * (4 << 20),))  # more than the socket buffers of both ends hold
        await asyncio.sleep(0.5)
        assert produce_received(brokers[0]) == [1]
        assert client.writer.transport.get_write_buffer_size() > 0  # the client's write could not finish
        proxy.brokers[0].end_rule()
        assert await client.answer(5.0) == (2, [0])
        (stall,) = stall_log(proxy)
        assert stall["queued"] > 0 and stall["resumed_at"] - stall["stalled_at"] >= 0.5
        assert stats(proxy) == {"stalls": 1, "stalled_writes": 1}

    run(scenario)


def test_a_stall_logs_the_part_of_a_request_the_proxy_had_read() -> None:
    async def scenario(proxy: ProxyServer, brokers: list[Broker], connect: Callable[[int], Awaitable[Client]]) -> None:
        client = await connect(0)
        body = encode_request(RequestHeader(PRODUCE, VERSION, 7, "test"), ProduceRequest(None, -1, 1000, (TopicData("t", (PartitionData(0, b"r" * 5000),)),)))
        frame = len(body).to_bytes(4, "big") + body
        client.writer.write(frame[:1000])
        await asyncio.sleep(0.2)  # the proxy has read them
        set_rule(proxy, action="stall_write")
        client.writer.write(frame[1000:])
        await asyncio.sleep(0.3)
        assert produce_received(brokers[0]) == []
        proxy.brokers[0].end_rule()
        assert await client.answer() == (7, [0])
        (stall,) = stall_log(proxy)
        assert (stall["pending_size"], stall["pending_read"], stall["queued"]) == (len(frame), 1000, len(frame) - 1000)

    run(scenario)


def test_stalls_repeat_with_gaps_and_every_request_is_answered_in_order() -> None:
    async def scenario(proxy: ProxyServer, brokers: list[Broker], connect: Callable[[int], Awaitable[Client]]) -> None:
        client = await connect(0)
        set_rule(proxy, action="stall_write", stall_s=0.15, gap_s=0.05)
        for correlation in range(10):
            client.produce(correlation)
            await asyncio.sleep(0.05)
        proxy.brokers[0].end_rule()
        assert [(await client.answer())[0] for _ in range(10)] == list(range(10))
        log = stall_log(proxy)
        assert len(log) >= 2 and all(a["resumed_at"] <= b["stalled_at"] for a, b in zip(log, log[1:], strict=False))
        assert stats(proxy)["stalled_writes"] >= 2

    run(scenario)
