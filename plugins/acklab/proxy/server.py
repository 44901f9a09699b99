"""The proxy process: one asyncio listener per broker plus a JSON-lines control port.

Kafka framing: every request and response is a 4-byte big-endian size followed by the body. A
request body starts with api_key (int16), api_version (int16), correlation_id (int32); a response
body starts with the correlation_id. A broker answers the requests of a connection in order, so
the requests forwarded on a connection are kept in order and each response is matched to its
request (its API and version) by correlation id. Request and response bodies are parsed
(`acklab.proxy.protocol`) only while a rule that needs it is active, and for the answers to held
requests whose client has gone: the pass-through path reads the first 8 bytes of a request and the
first 4 of a response.

Counters (`stats`): `requests.<api>.v<version>` and `responses.<api>` per frame forwarded; per
fault dropped_requests/responses, blackholed_requests/responses, delayed_responses,
injected_errors (a rewritten Metadata answer counts once, its topics in injected_topic_errors),
replaced_errors, held_requests, released_requests (replayed_after_trigger of
them by a `replay_after` answer), lost_requests; held_lost (held, but the broker connection closed first); discarded_responses
(answers to requests whose client had gone) and, per partition of those to PRODUCE requests,
discarded_produce_errors.<code> (0: a late write was appended); swallowed_requests and
swallowed_records (plant_loss); closed_after_error (acks=0
requests answered by a closed connection); unparsed_produce (a PRODUCE the codec cannot read:
forwarded untouched); connection_errors (a connection ended by an unexpected error, traceback on
stderr).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import random
import signal
import struct
import sys
import time
import traceback
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import BaseModel

from acklab.proxy import answers
from acklab.proxy.codes import METADATA, PRODUCE, api_name, error_name
from acklab.proxy.protocol import (
    PRODUCE_VERSIONS,
    ProduceRequest,
    ProtocolError,
    RequestHeader,
    decode_request,
    decode_response,
    error_response,
    peek_header,
    success_response,
    with_error,
)
from acklab.proxy.rules import PRODUCE_ACTIONS, ProxyRule

CORRELATION = struct.Struct(">i")
DRAIN_ABOVE = 1 << 20
CLOSED = (ConnectionError, asyncio.IncompleteReadError, OSError)  # how a connection ends
LINGER_S = 30.0  # how long a connection whose client has gone waits for the answers to its released requests
FABRICATED_OFFSET = 1 << 40  # plant_loss: the offsets the proxy makes up start here (far beyond any real one)


class Route(BaseModel):
    broker: int
    listen_port: int
    upstream_port: int


class ProxySpec(BaseModel):
    control_port: int
    routes: list[Route]


def _frame(body: bytes) -> bytes:
    return len(body).to_bytes(4, "big") + body


@dataclass
class Held:
    """A request held back: its frame, when it is due (inf: when the rule ends or its trigger is
    answered), whether the broker will answer it (not a PRODUCE with acks=0), and its `withheld`
    log entry."""

    frame: bytes
    correlation: int
    api_key: int
    version: int
    due: float
    answered: bool
    log: dict


class Connection:
    """One client connection and its connection to the broker.

    `expected` holds, in send order, what the client will be answered: (correlation, api_key,
    api_version, None, 0) for a request the broker will answer, (correlation, PRODUCE, version,
    body, due) for an answer the proxy wrote itself, sent once the broker answered everything
    before it and not before `due` (monotonic time)."""

    def __init__(self, upstream: asyncio.StreamWriter, client: asyncio.StreamWriter) -> None:
        self.upstream, self.client = upstream, client
        self.expected: deque[tuple[int, int, int, bytes | None, float]] = deque()
        self.held: deque[Held] = deque()
        self.awaiting: dict[int, dict] = {}  # released requests not answered yet -> their log entry
        self.rewrite: dict[int, int] = {}  # Metadata requests forwarded whose answer gets an error -> its code
        self.client_open = True
        self.stalled = False  # a request was dropped: every later one is (drop_request)
        self.deaf = False  # a response was dropped and the connection held: every later one is (drop_response)
        self.wake = asyncio.Event()
        self.released = asyncio.Event()

    def forward(self, frame: bytes, correlation: int, api_key: int, version: int) -> None:
        self.expected.append((correlation, api_key, version, None, 0.0))
        self.upstream.write(frame)

    def answer(self, correlation: int, version: int, body: bytes, delay_s: float = 0.0) -> None:
        """Answer a request in the proxy's name `delay_s` from now, in order behind the answers
        still due from the broker (later answers wait behind it)."""
        if self.expected or delay_s:
            self.expected.append((correlation, PRODUCE, version, body, time.monotonic() + delay_s))
            if delay_s:
                asyncio.get_running_loop().call_later(delay_s, self.flush_answers)
        else:
            self.to_client(_frame(body))

    async def answered(self, correlation: int) -> tuple[int, int]:
        """(api_key, api_version) of the request `correlation` answers (-1, -1 if unknown); answers
        of the proxy before it are sent first (once due), requests never answered (acks=0) forgotten."""
        while self.expected:
            expected, api_key, version, body, due = self.expected[0]
            if body is None:
                self.expected.popleft()
                if expected == correlation:
                    return api_key, version
            elif (wait_s := due - time.monotonic()) > 0:
                await asyncio.sleep(wait_s)  # the head may be sent meanwhile (flush_answers): look again
            else:
                self.expected.popleft()
                self.to_client(_frame(body))
        return -1, -1

    def flush_answers(self) -> None:
        """Send the proxy's answers at the head of `expected` that are due."""
        while self.expected and self.expected[0][3] is not None and self.expected[0][4] <= time.monotonic():
            self.to_client(_frame(self.expected.popleft()[3]))  # type: ignore[arg-type]

    def to_client(self, frame: bytes) -> None:
        if self.client_open:
            self.client.write(frame)


@dataclass
class BrokerProxy:
    """Forwards one broker's client connections and applies its active rule."""

    route: Route
    rule: ProxyRule | None = None
    rule_expires: float = 0.0
    affected: int = 0
    stats: Counter[str] = field(default_factory=Counter)
    holding: set[Connection] = field(default_factory=set)
    on_answered: Callable[[int], None] = lambda api_key: None
    matched: int = 0  # hold_request: requests that matched the rule so far
    withheld: list[dict] = field(default_factory=list)  # hold_request: a log entry per held request (the evidence)
    lost: dict[tuple[str | bytes, int, int], int] = field(default_factory=dict)  # lose_then_reject: (topic, partition, producer id) -> base sequence
    swallowing: set[Connection] = field(default_factory=set)  # lose_then_reject: connections whose PRODUCE requests are lost
    swallowed: list[dict] = field(default_factory=list)  # plant_loss: a log entry per partition answered in the broker's name (the evidence)
    fabricated: dict[tuple[str | bytes, int], int] = field(default_factory=dict)  # plant_loss: (topic, partition) -> next made-up offset

    def active(self, api_key: int | None = None) -> ProxyRule | None:
        """The rule if it is live, not exhausted, matches `api_key` and wins its coin toss."""
        rule = self.rule
        if rule is None:
            return None
        if time.monotonic() > self.rule_expires:
            self.end_rule()
            return None
        if rule.count is not None and self.affected >= rule.count:
            return None
        if api_key is not None and not rule.matches(api_key):
            return None
        if rule.probability < 1.0 and random.random() >= rule.probability:
            return None
        return rule

    def set_rule(self, rule: ProxyRule) -> None:
        self.end_rule()
        self.rule, self.affected, self.lost, self.matched, self.withheld, self.swallowed = rule, 0, {}, 0, [], []
        self.rule_expires = time.monotonic() + rule.expires_in_s
        asyncio.get_running_loop().call_later(rule.expires_in_s, self._expire, rule)

    def end_rule(self) -> None:
        """Lift the rule; every held request is released."""
        self.rule = None
        self.release_all()
        for conn in list(self.swallowing):
            self._close(conn)

    def _close(self, conn: Connection) -> None:
        """Close a client connection (the client sees a disconnect)."""
        self.swallowing.discard(conn)
        conn.client.close()

    def _expire(self, rule: ProxyRule) -> None:
        if self.rule is rule:
            self.end_rule()

    def answered_somewhere(self, api_key: int) -> None:
        """A request of `api_key` was answered by some broker: replay what a hold waits for it."""
        rule = self.rule
        if rule is not None and rule.action == "hold_request" and rule.replay_after == api_key and self.holding:
            if rule.delay_s:
                asyncio.get_running_loop().call_later(rule.delay_s, self._replay, rule)
            else:
                self._replay(rule)

    def _replay(self, rule: ProxyRule) -> None:
        if self.rule is rule:
            self.stats["replayed_after_trigger"] += sum(len(conn.held) for conn in self.holding)
            self.release_all()

    # ---- connections ----------------------------------------------------------------------

    async def serve(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        self.stats["connections"] += 1
        upstream_writer = None
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1", self.route.upstream_port)
            conn = Connection(upstream_writer, client_writer)
            requests = asyncio.create_task(self._requests(client_reader, conn))
            responses = asyncio.create_task(self._responses(upstream_reader, conn))
            done, _ = await asyncio.wait({requests, responses}, return_when=asyncio.FIRST_COMPLETED)
            if responses not in done and (conn.held or conn.awaiting):  # the client went away: still deliver what is held
                conn.client_open = False
                client_writer.close()
                await self._linger(conn, responses)
            for task in (requests, responses):
                task.cancel()
                error = task.exception() if task.done() and not task.cancelled() else None
                if error is not None and not isinstance(error, CLOSED):
                    self.stats["connection_errors"] += 1
                    traceback.print_exception(error, file=sys.stderr)
            if conn.held:
                self.stats["held_lost"] += len(conn.held)
                conn.held.clear()
            conn.wake.set()
            self.holding.discard(conn)
        except CLOSED:
            pass
        finally:
            client_writer.close()
            if upstream_writer is not None:
                upstream_writer.close()

    async def _linger(self, conn: Connection, responses: asyncio.Task[None]) -> None:
        """Keep a connection whose client has gone until its held requests are released and answered."""
        while conn.held and not responses.done():
            conn.released.clear()
            released = asyncio.ensure_future(conn.released.wait())
            await asyncio.wait({released, responses}, return_when=asyncio.FIRST_COMPLETED)
            released.cancel()
        deadline = time.monotonic() + LINGER_S
        while conn.awaiting and not responses.done() and time.monotonic() < deadline:
            await asyncio.sleep(0.05)

    async def _requests(self, reader: asyncio.StreamReader, conn: Connection) -> None:
        writer = conn.upstream
        while True:
            size = await reader.readexactly(4)
            body = await reader.readexactly(int.from_bytes(size, "big"))
            api_key, version, correlation = peek_header(body)
            self.stats[f"requests.{api_key}.v{version}"] += 1
            if api_key == PRODUCE and conn in self.swallowing:
                self.stats["lost_requests"] += 1
                continue
            if conn.stalled:
                self.stats["dropped_requests"] += 1
                continue
            if conn.held:  # a connection's requests stay in order behind a held one
                self._hold(conn, size + body, correlation, api_key, version, conn.held[-1].due, self._produce(api_key, body, version), queued=True)
                continue
            rule = self.active(api_key)
            if rule is not None:
                action = rule.action
                if action in ("drop_request", "blackhole"):
                    self.affected += 1
                    self.stats["dropped_requests" if action == "drop_request" else "blackholed_requests"] += 1
                    if action == "drop_request":
                        conn.stalled = True
                    continue
                if action == "hold_request" and self._withholds(conn, size + body, correlation, api_key, version, rule):
                    continue
                if action == "inject_error":
                    outcome = self._inject(conn, body, correlation, api_key, version, rule)
                    if outcome == "close":
                        return
                    if outcome == "taken":
                        continue
                if action in PRODUCE_ACTIONS and api_key == PRODUCE:
                    outcome = self._produce_fault(conn, body, correlation, version, rule)
                    if outcome == "close":
                        return
                    if outcome == "taken":
                        continue
            conn.forward(size + body, correlation, api_key, version)
            if writer.transport.get_write_buffer_size() > DRAIN_ABOVE:
                await writer.drain()

    def _parse(self, body: bytes, version: int) -> tuple[RequestHeader, ProduceRequest] | None:
        """A PRODUCE request, or None (counted as unparsed) if the codec cannot read it."""
        if version in PRODUCE_VERSIONS:
            try:
                return decode_request(body)
            except ProtocolError:
                pass
        self.stats["unparsed_produce"] += 1
        return None

    def _produce_fault(self, conn: Connection, body: bytes, correlation: int, version: int, rule: ProxyRule) -> Literal["taken", "forward"]:
        """Apply a lose_then_reject or plant_loss rule to a PRODUCE request ("taken" by the proxy or "forward";
        replace_error acts on the response; an unparsed request passes)."""
        if rule.action == "replace_error" or (parsed := self._parse(body, version)) is None:
            return "forward"
        header, request = parsed
        if rule.action == "plant_loss":
            return self._plant_loss(conn, correlation, header, request)
        return self._lose_then_reject(conn, correlation, version, header, request, rule)

    def _plant_loss(self, conn: Connection, correlation: int, header: RequestHeader, request: ProduceRequest) -> Literal["taken", "forward"]:
        """Answer the request as appended, in the broker's name, and log what was swallowed."""
        partitions = [(topic, partition, partition.record_count()) for topic in request.topics for partition in topic.partitions]
        if any(count is None for _, _, count in partitions):
            self.stats["unparsed_produce"] += 1
            return "forward"
        offsets = {}
        for topic, partition, count in partitions:
            key = (topic.name or topic.topic_id, partition.index)
            offsets[key] = self.fabricated.get(key, FABRICATED_OFFSET)
            self.fabricated[key] = offsets[key] + count  # type: ignore[operator]
            producer_id, epoch, sequence = partition.producer_sequence() or (-1, -1, -1)
            self.swallowed.append(
                {
                    "topic": topic.name or topic.topic_id.hex(), "partition": partition.index, "records": count,
                    "base_offset": offsets[key], "producer_id": producer_id, "producer_epoch": epoch, "base_sequence": sequence,
                    "at": time.time(), "answered": request.acks != 0,
                }
            )
            self.stats["swallowed_records"] += count  # type: ignore[operator]
        self.affected += 1
        self.stats["swallowed_requests"] += 1
        if request.acks != 0:
            conn.answer(correlation, header.api_version, success_response(header, request, offsets))
        return "taken"

    def _inject(self, conn: Connection, body: bytes, correlation: int, api_key: int, version: int, rule: ProxyRule) -> Literal["taken", "close", "forward"]:
        """Answer a request with the rule's error in the broker's place: "taken", "close" the
        connection (an error for an acks=0 PRODUCE, as a broker does), or "forward" a request the
        proxy cannot answer (counted as unanswerable.<api>). A Metadata request is forwarded and
        its answer rewritten (`_responses`)."""
        if api_key == METADATA:
            conn.rewrite[correlation] = rule.error_code
            self.affected += 1
            return "forward"
        if api_key == PRODUCE:
            if (parsed := self._parse(body, version)) is None:
                return "forward"
            header, request = parsed
            if request.acks == 0:
                self.affected += 1
                self.stats["injected_errors"] += 1
                self.stats["closed_after_error"] += 1
                return "close"
            answer = error_response(header, request, rule.error_code)
        else:
            try:
                answer = answers.error_answer(body, rule.error_code)
            except ProtocolError:
                self.stats[f"unanswerable.{api_name(api_key)}"] += 1
                return "forward"
        self.affected += 1
        self.stats["injected_errors"] += 1
        conn.answer(correlation, version, answer)
        return "taken"

    def _withholds(self, conn: Connection, frame: bytes, correlation: int, api_key: int, version: int, rule: ProxyRule) -> bool:
        """Hold the request if it is one the hold_request rule chooses (see `ProxyRule`)."""
        request = self._produce(api_key, frame[4:], version)
        if rule.selects_produce and (
            request is None or not rule.selects(request.transactional_id, [(partition, *batch) for _, partition, batch in _batches(request)])
        ):
            return False
        self.matched += 1
        if self.matched < rule.nth:
            return False
        self.affected += 1
        timed = rule.delay_s and rule.replay_after is None
        self._hold(conn, frame, correlation, api_key, version, time.monotonic() + rule.delay_s if timed else math.inf, request, queued=False)
        return True

    def _produce(self, api_key: int, body: bytes, version: int) -> ProduceRequest | None:
        """The request if it is a PRODUCE the codec reads, else None."""
        parsed = self._parse(body, version) if api_key == PRODUCE else None
        return None if parsed is None else parsed[1]

    def _lose_then_reject(
        self, conn: Connection, correlation: int, version: int, header: RequestHeader, request: ProduceRequest, rule: ProxyRule
    ) -> Literal["taken", "forward"]:
        """The first idempotent batch's request is lost with its connection; its retry is rejected once."""
        batches = {
            (topic.name or topic.topic_id, partition.index, batch[0]): batch[2]
            for topic in request.topics
            for partition in topic.partitions
            if (batch := partition.producer_sequence()) is not None
        }
        if not self.lost:
            if not batches:
                return "forward"
            self.lost = batches
            self.swallowing.add(conn)
            self.stats["lost_requests"] += 1
            asyncio.get_running_loop().call_later(rule.delay_s, self._close, conn)
            return "taken"
        if self.affected or not any(self.lost.get(key) == sequence for key, sequence in batches.items()):
            return "forward"
        self.affected += 1
        self.stats["injected_errors"] += 1
        conn.answer(correlation, version, error_response(header, request, rule.error_code), rule.delay_s)
        return "taken"

    def _hold(
        self, conn: Connection, frame: bytes, correlation: int, api_key: int, version: int, due: float, request: ProduceRequest | None,
        *, queued: bool,
    ) -> None:
        """Withhold a request (`request`: it, parsed, if a PRODUCE; `queued`: held only because an
        earlier one of its connection is) and log it."""
        log: dict = {"api": api_name(api_key), "correlation_id": correlation, "queued": queued, "held_at": time.time()}
        answered = True
        if request is not None:
            answered = request.acks != 0
            log["transactional_id"] = request.transactional_id
            log["batches"] = [
                {"topic": topic, "partition": partition, "producer_id": pid, "producer_epoch": epoch, "base_sequence": sequence}
                for topic, partition, (pid, epoch, sequence) in _batches(request)
            ]
        if not answered:
            log["answer"] = "none expected (acks=0)"
        self.withheld.append(log)
        conn.held.append(Held(frame, correlation, api_key, version, due, answered, log))
        self.stats["held_requests"] += 1
        if conn not in self.holding:
            self.holding.add(conn)
            asyncio.get_running_loop().create_task(self._release_when_due(conn))

    async def _release_when_due(self, conn: Connection) -> None:
        """Forward a connection's held requests as they fall due (or all, when woken by `release_all`)."""
        while conn.held:
            wait_s = conn.held[0].due - time.monotonic()
            if wait_s > 0:
                conn.wake.clear()
                try:
                    await asyncio.wait_for(conn.wake.wait(), None if math.isinf(wait_s) else wait_s)
                except TimeoutError:
                    pass
                continue
            self._release(conn, 1)
        self.holding.discard(conn)

    def _release(self, conn: Connection, count: int) -> None:
        for _ in range(min(count, len(conn.held))):
            held = conn.held.popleft()
            if conn.upstream.is_closing():
                self.stats["held_lost"] += 1
                continue
            conn.forward(held.frame, held.correlation, held.api_key, held.version)
            held.log["released_at"] = time.time()
            if held.answered:
                conn.awaiting[held.correlation] = held.log
            self.stats["released_requests"] += 1
        conn.released.set()

    def release_all(self) -> None:
        for conn in list(self.holding):
            self._release(conn, len(conn.held))
            conn.wake.set()

    async def _responses(self, reader: asyncio.StreamReader, conn: Connection) -> None:
        writer = conn.client
        while True:
            size = await reader.readexactly(4)
            body = await reader.readexactly(int.from_bytes(size, "big"))
            (correlation,) = CORRELATION.unpack_from(body)
            api_key, version = await conn.answered(correlation)
            if (log := conn.awaiting.pop(correlation, None)) is not None:
                log["answer"] = _answer(body, api_key, version)
                log["client_gone"] = not conn.client_open
            if conn.deaf:
                self.stats["dropped_responses"] += 1
                continue
            if (code := conn.rewrite.pop(correlation, None)) is not None:
                body = self._metadata_error(body, version, code)
                size = len(body).to_bytes(4, "big")
            rule = self.active(api_key)
            if rule is not None:
                action = rule.action
                if action in ("drop_response", "blackhole"):
                    self.affected += 1
                    self.stats["dropped_responses" if action == "drop_response" else "blackholed_responses"] += 1
                    if action == "drop_response" and rule.then == "close":
                        self.stats["closed_after_drop"] += 1
                        return
                    if action == "drop_response":
                        conn.deaf = True  # held: no later response of it reaches the client either
                    continue
                if action == "delay_response":
                    self.affected += 1
                    self.stats["delayed_responses"] += 1
                    await asyncio.sleep(rule.delay_s)
                elif action == "replace_error" and api_key == PRODUCE:
                    body = self._replace_error(body, version, rule)
                    size = len(body).to_bytes(4, "big")
            self.stats[f"responses.{api_key}"] += 1
            if conn.client_open:
                writer.write(size + body)
            else:
                self._discard(body, api_key, version)
            conn.flush_answers()
            self.on_answered(api_key)
            if writer.transport.get_write_buffer_size() > DRAIN_ABOVE:
                await writer.drain()


    def _discard(self, body: bytes, api_key: int, version: int) -> None:
        """Count an answer whose client has gone, and for PRODUCE what the broker said per partition
        (`discarded_produce_errors.<code>`: 0 = a late write was appended)."""
        self.stats["discarded_responses"] += 1
        if api_key == PRODUCE and version in PRODUCE_VERSIONS:
            try:
                _, response = decode_response(body, version)
            except ProtocolError:
                return
            for topic in response.topics:
                for partition in topic.partitions:
                    self.stats[f"discarded_produce_errors.{partition.error_code}"] += 1

    def _metadata_error(self, body: bytes, version: int, code: int) -> bytes:
        """A Metadata answer whose every topic carries `code` (unchanged if unread: unanswerable.Metadata)."""
        try:
            body, topics = answers.metadata_with_error(body, version, code)
        except ProtocolError:
            self.stats[f"unanswerable.{api_name(METADATA)}"] += 1
            return body
        if topics:
            self.stats["injected_errors"] += 1
            self.stats["injected_topic_errors"] += topics
        return body

    def _replace_error(self, body: bytes, version: int, rule: ProxyRule) -> bytes:
        """A PRODUCE response whose appended partitions carry the rule's error (unchanged if unparsed)."""
        try:
            if version not in PRODUCE_VERSIONS:
                raise ProtocolError(f"version {version}")
            body, changed = with_error(body, version, rule.error_code)
        except ProtocolError:
            self.stats["unparsed_produce"] += 1
            return body
        if changed:
            self.affected += 1
            self.stats["replaced_errors"] += 1
        return body


def _batches(request: ProduceRequest) -> list[tuple[str, int, tuple[int, int, int]]]:
    """(topic, partition, (producer id, epoch, base sequence)) of each idempotent batch of a PRODUCE request."""
    return [
        (topic.name or topic.topic_id.hex(), partition.index, batch)
        for topic in request.topics
        for partition in topic.partitions
        if (batch := partition.producer_sequence()) is not None
    ]


def _answer(body: bytes, api_key: int, version: int) -> str:
    """What the broker answered a released request: per partition for PRODUCE, else its error."""
    try:
        if api_key == PRODUCE and version in PRODUCE_VERSIONS:
            _, response = decode_response(body, version)
            return ", ".join(f"{t.name or t.topic_id.hex()}-{p.index}: {error_name(p.error_code)}" for t in response.topics for p in t.partitions)
        return error_name(answers.top_error(body, api_key, version))
    except ProtocolError as exc:
        return f"unparsed ({exc})"


class ProxyServer:
    """All broker proxies of a cluster and their control channel."""

    def __init__(self, spec: ProxySpec) -> None:
        self.spec = spec
        self.brokers = {route.broker: BrokerProxy(route, on_answered=self._answered) for route in spec.routes}

    def _answered(self, api_key: int) -> None:
        for proxy in self.brokers.values():
            proxy.answered_somewhere(api_key)

    async def run(self, stop: asyncio.Event) -> None:
        servers = [
            await asyncio.start_server(proxy.serve, "127.0.0.1", proxy.route.listen_port, reuse_address=True)
            for proxy in self.brokers.values()
        ]
        servers.append(await asyncio.start_server(self._control, "127.0.0.1", self.spec.control_port, reuse_address=True))
        await stop.wait()
        for server in servers:
            server.close()

    async def _control(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while line := await reader.readline():
                try:
                    reply = self.handle(json.loads(line))
                except (ValueError, KeyError) as exc:
                    reply = {"ok": False, "error": str(exc)}
                writer.write(json.dumps(reply).encode() + b"\n")
                await writer.drain()
        finally:
            writer.close()

    def handle(self, command: dict) -> dict:
        """Control operations: ping, set (broker, rule), clear (broker or all), stats, withheld
        (broker: the log of the requests its current or last hold_request rule withheld), swallowed
        (broker: the log of the partitions its current or last plant_loss rule answered)."""
        op = command["op"]
        if op == "ping":
            return {"ok": True}
        if op == "set":
            self.brokers[int(command["broker"])].set_rule(ProxyRule.model_validate(command["rule"]))
            return {"ok": True}
        if op == "clear":
            targets = [self.brokers[int(command["broker"])]] if "broker" in command else list(self.brokers.values())
            for proxy in targets:
                proxy.end_rule()
            return {"ok": True}
        if op == "withheld":
            return {"ok": True, "withheld": self.brokers[int(command["broker"])].withheld}
        if op == "swallowed":
            return {"ok": True, "swallowed": self.brokers[int(command["broker"])].swallowed}
        if op == "stats":
            return {"ok": True, "stats": {str(b): dict(p.stats) for b, p in self.brokers.items()}}
        raise ValueError(f"unknown op {op!r}")


def main() -> None:
    parser = argparse.ArgumentParser(description="acklab Kafka-aware fault proxy")
    parser.add_argument("spec", type=Path, help="JSON ProxySpec")
    args = parser.parse_args()
    server = ProxyServer(ProxySpec.model_validate_json(args.spec.read_text()))

    async def serve() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await server.run(stop)

    asyncio.run(serve())


if __name__ == "__main__":
    main()
