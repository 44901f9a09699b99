"""The proxy process: one asyncio listener per broker plus a JSON-lines control port.

Kafka framing: every request and response is a 4-byte big-endian size followed by the body. A
request body starts with api_key (int16), api_version (int16), correlation_id (int32); a response
body starts with the correlation_id. A broker answers the requests of a connection in order, so
the requests forwarded on a connection are kept in order and each response is matched to its
request (its API and version) by correlation id. Request and response bodies are parsed
(`acklab.proxy.protocol`) only while a rule that needs it is active, by the taps a rule leaves on a
connection (the answers to requests it selected, also after it is lifted), and for the answers to
held requests whose client has gone: the pass-through path reads the first 8 bytes of a request and the
first 4 of a response.

What is done to the traffic is the active rule's behaviour's (`acklab.proxy.behaviours`): the
proxy asks its activation about each request and response the rule selects, and about none while
no rule is active. This module only carries frames, keeps them in order, holds and releases the
requests an activation holds, and runs the rule's lifecycle and the control channel.

Generic counters (`stats`): `requests.<api>.v<version>` and `responses.<api>` per frame forwarded;
connections; released_requests (held requests forwarded) and held_lost (held, but the broker
connection closed first); discarded_responses (answers to requests whose client had gone) and, per
partition of those to PRODUCE requests, discarded_produce_errors.<code> (0: a late write was
appended); connection_errors (a connection ended by an unexpected error, traceback on stderr). Each
behaviour counts its own (`Behaviour.counters` and its module).
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
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel

from acklab.proxy import answers
from acklab.proxy.behaviours import BEHAVIOURS
from acklab.proxy.behaviours.base import Activation, Verdict
from acklab.proxy.codes import PRODUCE, error_name
from acklab.proxy.connection import Connection, Held
from acklab.proxy.protocol import PRODUCE_VERSIONS, ProtocolError, decode_response, peek_header
from acklab.proxy.rules import ProxyRule

CORRELATION = struct.Struct(">i")
DRAIN_ABOVE = 1 << 20
CLOSED = (ConnectionError, asyncio.IncompleteReadError, OSError)  # how a connection ends
LINGER_S = 30.0  # how long a connection whose client has gone waits for the answers to its released requests
LOGS = frozenset(behaviour.log for behaviour in BEHAVIOURS.values() if behaviour.log)  # control operations returning evidence


class Route(BaseModel):
    broker: int
    listen_port: int
    upstream_port: int


class ProxySpec(BaseModel):
    control_port: int
    routes: list[Route]


@dataclass
class BrokerProxy:
    """Forwards one broker's client connections and asks its active rule's activation what to do
    with each frame the rule selects."""

    route: Route
    rule: ProxyRule | None = None
    activation: Activation | None = None  # of the current or last rule (its evidence stays readable)
    rule_expires: float = 0.0
    stats: Counter[str] = field(default_factory=Counter)
    holding: set[Connection] = field(default_factory=set)
    connections: set[Connection] = field(default_factory=set)  # the client connections open now
    on_answered: Callable[[int], None] = lambda api_key: None
    peers: dict[int, int] = field(default_factory=dict)  # every broker of the cluster (this one too) -> its upstream port

    @property
    def broker(self) -> int:
        """The node id of the broker this proxy forwards to."""
        return self.route.broker

    def active(self, api_key: int | None = None) -> ProxyRule | None:
        """The rule if it is live, not exhausted, matches `api_key` and wins its coin toss."""
        rule = self.rule
        if rule is None:
            return None
        if time.monotonic() > self.rule_expires:
            self.end_rule()
            return None
        probability, count = rule.share()
        if count is not None and self.activation.affected >= count:  # type: ignore[union-attr]
            return None
        if api_key is not None and not rule.matches(api_key):
            return None
        if probability < 1.0 and random.random() >= probability:
            return None
        return rule

    def set_rule(self, rule: ProxyRule) -> None:
        self.end_rule()
        self.rule, self.activation = rule, BEHAVIOURS[rule.action].activation(rule, self)
        self.rule_expires = time.monotonic() + rule.expires_in_s
        asyncio.get_running_loop().call_later(rule.expires_in_s, self._expire, rule)
        for conn in self.connections:
            self.activation.on_connect(conn)

    def end_rule(self) -> None:
        """Lift the rule; every held request is released."""
        self.rule = None
        self.release_all()
        if self.activation is not None:
            self.activation.on_end()

    def _expire(self, rule: ProxyRule) -> None:
        if self.rule is rule:
            self.end_rule()

    def answered_somewhere(self, api_key: int) -> None:
        """A request of `api_key` was answered by some broker: the active rule's activation is told."""
        if self.rule is not None:
            self.activation.on_answered(api_key)  # type: ignore[union-attr]

    def evidence(self, log: str) -> list[dict]:
        """The per-frame log `log` of the current or last rule (empty if its behaviour keeps another)."""
        activation = self.activation
        return activation.evidence() if activation is not None and BEHAVIOURS[activation.rule.action].log == log else []

    # ---- connections ----------------------------------------------------------------------

    async def serve(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        self.stats["connections"] += 1
        upstream_writer, conn = None, None
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1", self.route.upstream_port)
            conn = Connection(upstream_writer, client_writer, client_reader)
            self.connections.add(conn)
            if self.active() is not None:
                self.activation.on_connect(conn)  # type: ignore[union-attr]
            requests = asyncio.create_task(self._requests(conn))
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
            self.connections.discard(conn)  # type: ignore[arg-type]
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

    async def _requests(self, conn: Connection) -> None:
        writer, frames = conn.upstream, conn.requests
        while True:
            size, body = await frames.next()
            api_key, version, correlation = peek_header(body)
            self.stats[f"requests.{api_key}.v{version}"] += 1
            if conn.request_taps and any(tap.on_request(api_key) for tap in conn.request_taps):
                continue
            if conn.held:  # a connection's requests stay in order behind a held one
                last = conn.held[-1]
                last.owner.on_queued(conn, size + body, correlation, api_key, version, last.due)
                continue
            if self.active(api_key) is not None:
                verdict = self.activation.on_request(conn, size, body, correlation, api_key, version)  # type: ignore[union-attr]
                if verdict is Verdict.TAKEN:
                    continue
                if verdict is Verdict.CLOSE:
                    return
            conn.forward(size + body, correlation, api_key, version)
            if writer.transport.get_write_buffer_size() > DRAIN_ABOVE:
                await writer.drain()

    def hold(self, conn: Connection, held: Held) -> None:
        """Hold `held` back on `conn` until it is due or released (`release_all`)."""
        conn.held.append(held)
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
            if conn.response_taps:
                tapped: bytes | None = body
                for tap in conn.response_taps:
                    if (tapped := tap.on_response(correlation, tapped, version)) is None:
                        break
                if tapped is None:
                    conn.flush_answers()  # the proxy's answers due behind the one taken off
                    continue
                if tapped is not body:
                    body, size = tapped, len(tapped).to_bytes(4, "big")
            if self.active(api_key) is not None:
                result = await self.activation.on_response(conn, body, api_key, version)  # type: ignore[union-attr]
                if result is Verdict.CLOSE:
                    return
                if result is Verdict.TAKEN:
                    continue
                if result is not body:
                    body, size = result, len(result).to_bytes(4, "big")  # type: ignore[arg-type]
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


def _answer(body: bytes, api_key: int, version: int) -> str:
    """What the broker answered a released request: per partition for PRODUCE, else its error (or its parts')."""
    try:
        if api_key == PRODUCE and version in PRODUCE_VERSIONS:
            _, response = decode_response(body, version)
            return ", ".join(f"{t.name or t.topic_id.hex()}-{p.index}: {error_name(p.error_code)}" for t in response.topics for p in t.partitions)
        return answers.describe(body, api_key, version)
    except ProtocolError as exc:
        return f"unparsed ({exc})"


class ProxyServer:
    """All broker proxies of a cluster and their control channel."""

    def __init__(self, spec: ProxySpec) -> None:
        self.spec = spec
        peers = {route.broker: route.upstream_port for route in spec.routes}
        self.brokers = {route.broker: BrokerProxy(route, on_answered=self._answered, peers=peers) for route in spec.routes}

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
        """Control operations: ping, set (broker, rule), clear (broker or all), stats, and each
        behaviour's log (`Behaviour.log`: broker -> the evidence of its current or last rule)."""
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
        if op in LOGS:
            return {"ok": True, op: self.brokers[int(command["broker"])].evidence(op)}
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
