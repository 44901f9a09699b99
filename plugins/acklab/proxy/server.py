"""The proxy process: one asyncio listener per broker plus a JSON-lines control port.

Kafka framing: every request and response is a 4-byte big-endian size followed by the body. A
request body starts with api_key (int16), api_version (int16), correlation_id (int32); a response
body starts with the correlation_id, so responses are matched to their request's API through the
correlation ids seen on the connection.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import signal
import struct
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel

from acklab.proxy.rules import ProxyRule

REQUEST_HEADER = struct.Struct(">hhi")
CORRELATION = struct.Struct(">i")
DRAIN_ABOVE = 1 << 20


class Route(BaseModel):
    broker: int
    listen_port: int
    upstream_port: int


class ProxySpec(BaseModel):
    control_port: int
    routes: list[Route]


@dataclass
class BrokerProxy:
    """Forwards one broker's client connections and applies its active rule."""

    route: Route
    rule: ProxyRule | None = None
    rule_expires: float = 0.0
    affected: int = 0
    stats: Counter[str] = field(default_factory=Counter)

    def active(self, api_key: int | None = None) -> ProxyRule | None:
        """The rule if it is live, not exhausted, matches `api_key` and wins its coin toss."""
        rule = self.rule
        if rule is None:
            return None
        if time.monotonic() > self.rule_expires:
            self.rule = None
            return None
        if rule.count is not None and self.affected >= rule.count:
            return None
        if api_key is not None and not rule.matches(api_key):
            return None
        if rule.probability < 1.0 and random.random() >= rule.probability:
            return None
        return rule

    def set_rule(self, rule: ProxyRule) -> None:
        self.rule, self.affected = rule, 0
        self.rule_expires = time.monotonic() + rule.expires_in_s

    async def serve(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        self.stats["connections"] += 1
        upstream_writer = None
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1", self.route.upstream_port)
            inflight: dict[int, int] = {}
            requests = asyncio.create_task(self._requests(client_reader, upstream_writer, inflight))
            responses = asyncio.create_task(self._responses(upstream_reader, client_writer, inflight))
            done, pending = await asyncio.wait({requests, responses}, return_when=asyncio.FIRST_COMPLETED)
            for task in pending:
                task.cancel()
        except (ConnectionError, asyncio.IncompleteReadError, OSError):
            pass
        finally:
            client_writer.close()
            if upstream_writer is not None:
                upstream_writer.close()

    async def _requests(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, inflight: dict[int, int]) -> None:
        while True:
            size = await reader.readexactly(4)
            body = await reader.readexactly(int.from_bytes(size, "big"))
            api_key, _version, correlation = REQUEST_HEADER.unpack_from(body)
            self.stats[f"requests.{api_key}"] += 1
            rule = self.active(api_key)
            if rule is not None and rule.action in ("drop_request", "blackhole"):
                self.affected += 1
                self.stats["dropped_requests" if rule.action == "drop_request" else "blackholed_requests"] += 1
                continue
            inflight[correlation] = api_key
            writer.write(size + body)
            if writer.transport.get_write_buffer_size() > DRAIN_ABOVE:
                await writer.drain()

    async def _responses(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, inflight: dict[int, int]) -> None:
        while True:
            size = await reader.readexactly(4)
            body = await reader.readexactly(int.from_bytes(size, "big"))
            (correlation,) = CORRELATION.unpack_from(body)
            api_key = inflight.pop(correlation, -1)
            rule = self.active(api_key)
            if rule is not None and rule.action in ("drop_response", "blackhole"):
                self.affected += 1
                self.stats["dropped_responses" if rule.action == "drop_response" else "blackholed_responses"] += 1
                if rule.action == "drop_response" and rule.then == "close":
                    self.stats["closed_after_drop"] += 1
                    return
                continue
            if rule is not None and rule.action == "delay_response":
                self.affected += 1
                self.stats["delayed_responses"] += 1
                await asyncio.sleep(rule.delay_s)
            self.stats[f"responses.{api_key}"] += 1
            writer.write(size + body)
            if writer.transport.get_write_buffer_size() > DRAIN_ABOVE:
                await writer.drain()


class ProxyServer:
    """All broker proxies of a cluster and their control channel."""

    def __init__(self, spec: ProxySpec) -> None:
        self.spec = spec
        self.brokers = {route.broker: BrokerProxy(route) for route in spec.routes}

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
        """Control operations: ping, set (broker, rule), clear (broker or all), stats."""
        op = command["op"]
        if op == "ping":
            return {"ok": True}
        if op == "set":
            self.brokers[int(command["broker"])].set_rule(ProxyRule.model_validate(command["rule"]))
            return {"ok": True}
        if op == "clear":
            targets = [self.brokers[int(command["broker"])]] if "broker" in command else list(self.brokers.values())
            for proxy in targets:
                proxy.rule = None
            return {"ok": True}
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
