"""plant_misroute: a PRODUCE request of a producer without idempotence is appended with its
partitions renamed, so each partition's records land in another partition of the same topic; the
answer the client gets names the partitions it sent, so it believes the records where its
partitioner put them. Each moved partition is logged (`misrouted`).

Where a topic of the request writes two or more partitions, they are rotated among themselves (the
broker leads all of them: the client sent them to it). A request writing one partition sends its
records to the next partition of the topic: to this broker if it leads that partition, else, on a
connection of the proxy's own, to the broker that does (`leaders`, which the fault fills in from the
cluster's metadata at its start; without it, only partitions this proxy has seen produced to count
as this broker's). The client's answer keeps its place among the connection's answers
(`Connection.promise`). A target whose leader moved is answered with an error the client retries:
logged with that error, nothing planted. No target: the request passes (`no_target_passed`).
Requests of an idempotent or transactional producer pass untouched (the broker would refuse a
sequence or a transaction on a partition it does not belong to: `idempotent_passed`), as do acks=0
requests (`unanswered_passed`) and requests the codec cannot count (`unparsed_produce`)."""

from __future__ import annotations

import asyncio
import itertools
import sys
from collections import defaultdict
from contextlib import suppress
from dataclasses import replace

from pydantic import Field

from acklab.proxy.behaviours.base import Behaviour, ClusterFacts, Host, Rule, Verdict, error_code
from acklab.proxy.behaviours.planting import AnsweredPlanting, Counted, PlantingOptions, plain_produce, topic_key, topics_of
from acklab.proxy.codes import error_name
from acklab.proxy.connection import Connection, frame
from acklab.proxy.protocol import (
    PartitionResponse,
    ProduceRequest,
    ProduceResponse,
    ProtocolError,
    RequestHeader,
    TopicResponse,
    decode_response,
    encode_request,
    encode_response,
)

OWN_CORRELATIONS = itertools.count(1 << 30)  # correlation ids of the proxy's own connections to other brokers
ELSEWHERE_TIMEOUT_S = 30.0  # a request sent to another broker not answered by then: the client gets NETWORK_EXCEPTION


class PlantMisrouteOptions(PlantingOptions):
    probability: float = Field(0.2, ge=0, le=1, description="share of the eligible produce requests whose partitions are renamed, once each topic's has been")
    leaders: dict[int, int] = Field(
        default_factory=dict,
        description="partition -> the broker leading it in the scenarios' topics: set by the fault from the cluster's metadata at its "
        "start (a value given is replaced; the topics of a group share their leaders)",
    )

    def at_start(self, facts: ClusterFacts) -> PlantMisrouteOptions:
        return self.model_copy(update={"leaders": facts.leaders()})


def rotation(partitions: list[int]) -> dict[int, int]:
    """Two or more partitions of a topic, each renamed to the next (the last to the first)."""
    return dict(zip(partitions, partitions[1:] + partitions[:1], strict=True)) if len(partitions) >= 2 else {}


class _Link:
    """The proxy's own connection to another broker: requests under its own correlation ids, each
    answer handed to the future of its request."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.writer = writer
        self.pending: dict[int, asyncio.Future[bytes]] = {}
        self.reading = asyncio.get_running_loop().create_task(self._read(reader))

    @property
    def alive(self) -> bool:
        return not self.reading.done() and not self.writer.is_closing()

    def ask(self, correlation: int, body: bytes) -> asyncio.Future[bytes]:
        """The future of the answer to `body` (request `correlation`); ConnectionError if the connection is gone."""
        if not self.alive:
            raise ConnectionError("the proxy's connection to the broker is closed")
        future: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        self.pending[correlation] = future
        self.writer.write(frame(body))
        return future

    async def _read(self, reader: asyncio.StreamReader) -> None:
        try:
            while True:
                body = await reader.readexactly(int.from_bytes(await reader.readexactly(4), "big"))
                if (future := self.pending.pop(int.from_bytes(body[:4], "big", signed=True), None)) is not None and not future.done():
                    future.set_result(body)
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            for future in self.pending.values():
                if not future.done():
                    future.set_exception(ConnectionError("the broker closed the proxy's connection"))
            self.pending.clear()

    def close(self) -> None:
        self.reading.cancel()
        self.writer.close()


class PlantMisroute(AnsweredPlanting):
    """Renames the partitions of an eligible PRODUCE request and answers the client for the
    partitions it sent: through a tap when this broker appends them, through a promised answer when
    another broker does."""

    def __init__(self, rule: Rule, host: Host) -> None:
        super().__init__(rule, host)
        self.seen: defaultdict[str, set[int]] = defaultdict(set)  # topic -> partitions produced to through this broker
        self.links: dict[int, asyncio.Task[_Link]] = {}
        self.sending: set[asyncio.Task[None]] = set()
        self.closing: asyncio.Task[None] | None = None

    def owner(self, topic: str, partition: int) -> int | None:
        """The broker leading `partition` of `topic`, as far as this activation knows."""
        leaders: dict[int, int] = self.rule.options.leaders
        if partition in leaders:
            return leaders[partition]
        return self.host.broker if partition in self.seen[topic] else None

    def target(self, topic: str, partition: int, anywhere: bool) -> tuple[int, int] | None:
        """(partition, broker) a lone partition's records go to: the next partition of the topic
        after `partition` whose leader is known, one this broker leads first; None: nowhere."""
        known = sorted((set(self.rule.options.leaders) | self.seen[topic]) - {partition})
        ordered = [p for p in known if p > partition] + [p for p in known if p < partition]
        owned = [(p, owner) for p in ordered if (owner := self.owner(topic, p)) is not None and owner in self.host.peers]
        here = [(p, owner) for p, owner in owned if owner == self.host.broker]
        return (here or (owned if anywhere else []) or [None])[0]

    def on_request(self, conn: Connection, size: bytes, body: bytes, correlation: int, api_key: int, version: int) -> Verdict:
        if (plain := plain_produce(self, body, api_key, version)) is None:
            return Verdict.FORWARD
        header, request, partitions = plain
        for topic, partition, _ in partitions:
            self.seen[topic_key(topic)].add(partition.index)
        if not self.share.chosen(topics_of(partitions)):
            return Verdict.FORWARD
        plan: dict[str, dict[int, int]] = {}
        to = self.host.broker
        for topic in request.topics:
            indexes = [p.index for p in topic.partitions]
            plan[topic_key(topic)] = rotation(indexes)
            if len(indexes) == 1 and (target := self.target(topic_key(topic), indexes[0], anywhere=len(partitions) == 1)) is not None:
                plan[topic_key(topic)], to = {indexes[0]: target[0]}, target[1]
        if not any(plan.values()):
            self.stats["no_target_passed"] += 1
            return Verdict.FORWARD
        renamed = replace(request, topics=tuple(
            replace(t, partitions=tuple(replace(p, index=plan[topic_key(t)].get(p.index, p.index)) for p in t.partitions)) for t in request.topics
        ))
        moved: Counted = [(t, p, n) for t, p, n in partitions if p.index in plan[topic_key(t)]]
        if to == self.host.broker:
            conn.forward(frame(encode_request(header, renamed)), correlation, api_key, version)
            entries = self.expect_answer(conn, correlation, moved)
        else:
            entries = self.log(moved)
            task = asyncio.get_running_loop().create_task(self._elsewhere(to, header, renamed, entries, conn.promise(correlation, version)))
            self.sending.add(task)
            task.add_done_callback(self.sending.discard)
        for entry, (topic, partition, _) in zip(entries, moved, strict=True):
            entry["to"] = plan[topic_key(topic)][partition.index]
        self.affected += 1
        self.stats["misrouted_requests"] += 1
        return Verdict.TAKEN

    async def _elsewhere(self, broker: int, header: RequestHeader, request: ProduceRequest, entries: list[dict], answer: asyncio.Future[bytes]) -> None:
        """Send `request` to `broker` on the proxy's own connection and give the client its answer:
        NETWORK_EXCEPTION for each partition if none came within `ELSEWHERE_TIMEOUT_S`, or anything
        else went wrong (what was appended is then unknown: the entries' errors stay null). The
        client's answer is always given, or every answer behind it on its connection would wait."""
        own = next(OWN_CORRELATIONS)

        async def ask() -> bytes:
            link = await self._link(broker)
            return await link.ask(own, encode_request(replace(header, correlation_id=own), request))

        try:
            body = await asyncio.wait_for(ask(), ELSEWHERE_TIMEOUT_S)
            answer.set_result(self.renamed(entries, body, header.api_version, header.correlation_id))
        except Exception as exc:  # any failure: the client is answered with a retriable error (finally)
            self.stats["misroute_unanswered"] += 1
            print(f"plant_misroute: no answer from broker {broker}: {exc!r}", file=sys.stderr)
        finally:
            if not answer.done():
                for entry in entries:  # what the broker appended is unknown: the errors stay null
                    entry["answered"] = True
                back = {(e["topic"], e["to"]): e["partition"] for e in entries}
                failed = ProduceResponse(tuple(
                    TopicResponse(t.name, tuple(
                        PartitionResponse(back.get((topic_key(t), p.index), p.index), error_code("NETWORK_EXCEPTION")) for p in t.partitions
                    ), t.topic_id)
                    for t in request.topics
                ))
                answer.set_result(encode_response(header.correlation_id, failed, header.api_version))
            self.share.settled(entries)

    async def _link(self, broker: int) -> _Link:
        """The proxy's live connection to `broker` (opened when there is none, or it closed)."""
        task = self.links.get(broker)
        if task is not None and task.done() and (task.cancelled() or task.exception() is not None or not task.result().alive):
            task = None
        if task is None:
            async def connect() -> _Link:
                return _Link(*await asyncio.open_connection("127.0.0.1", self.host.peers[broker]))

            task = self.links[broker] = asyncio.get_running_loop().create_task(connect())
        return await asyncio.shield(task)

    def on_answer(self, entries: list[dict], body: bytes, version: int) -> bytes:
        return self.renamed(entries, body, version)

    def renamed(self, entries: list[dict], body: bytes, version: int, correlation: int | None = None) -> bytes:
        """The answer `body` with each moved partition named as the client sent it (under
        `correlation`, default the answer's own); each entry gets the broker's error and the offset
        its records were appended at in their new partition. An answer the codec cannot read passes
        as it is, its entries' errors unknown (null)."""
        try:
            own, response = decode_response(body, version)
        except ProtocolError:
            self.stats["unparsed_answers"] += 1
            for entry in entries:
                entry["answered"] = True
            if correlation is not None:
                raise
            return body
        back = {(entry["topic"], entry["to"]): entry for entry in entries}
        topics = []
        for topic in response.topics:
            partitions = []
            for partition in topic.partitions:
                if (entry := back.pop((topic_key(topic), partition.index), None)) is not None:
                    entry.update(answered=True, error=error_name(partition.error_code), base_offset=partition.base_offset)
                    if partition.error_code == 0:
                        self.stats["misrouted_records"] += entry["records"]
                    partition = replace(partition, index=entry["partition"])
                partitions.append(partition)
            topics.append(replace(topic, partitions=tuple(partitions)))
        for entry in back.values():  # not in the answer: what the broker did is unknown (error stays null)
            entry["answered"] = True
        return encode_response(own if correlation is None else correlation, replace(response, topics=tuple(topics)), version)

    def on_end(self) -> None:
        """Close the proxy's own connections once the requests sent on them are answered."""

        async def close() -> None:
            if self.sending:
                await asyncio.wait(set(self.sending), timeout=ELSEWHERE_TIMEOUT_S + 5)
            for task in list(self.links.values()):  # read after the wait: a link opened meanwhile is closed too
                if task.done() and not task.cancelled() and task.exception() is None:
                    task.result().close()
                else:
                    task.cancel()

        with suppress(RuntimeError):  # no running loop: nothing was ever opened
            if self.links or self.sending:
                self.closing = asyncio.get_running_loop().create_task(close())


BEHAVIOUR = Behaviour("plant_misroute", PlantMisrouteOptions, ("misrouted_requests",), PlantMisroute, log="misrouted")
