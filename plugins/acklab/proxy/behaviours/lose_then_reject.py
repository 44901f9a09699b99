"""lose_then_reject: the first PRODUCE request carrying an idempotent producer's batch is lost with
its connection; the lost batch's retry is answered with `error` while the requests behind it reach
the broker."""

from __future__ import annotations

import asyncio

from pydantic import Field, field_validator

from acklab.proxy.behaviours.base import Activation, Behaviour, Host, Options, Rule, Verdict, check_error, error_code, parse_produce
from acklab.proxy.codes import PRODUCE
from acklab.proxy.connection import Connection, Tap
from acklab.proxy.protocol import error_response


class LoseThenRejectOptions(Options):
    """How long the lost connection lives before the proxy closes it, and how long the rejection
    of the lost batch's retry is held (requests behind it are pipelined meanwhile)."""

    error: str = Field("NOT_ENOUGH_REPLICAS", description="the error the lost batch's retry is answered with")
    delay_s: float = Field(0.5, gt=0, description="seconds the lost connection lives; seconds the retry's rejection is held")

    @field_validator("error")
    @classmethod
    def _known(cls, name: str) -> str:
        return check_error(name)  # type: ignore[return-value]


class Swallowing(Tap):
    """A connection whose PRODUCE requests are lost (until the proxy closes it)."""

    def __init__(self, activation: LoseThenReject, conn: Connection) -> None:
        self.activation, self.conn = activation, conn

    def on_request(self, api_key: int) -> bool:
        if api_key == PRODUCE and self.conn in self.activation.swallowing:
            self.activation.stats["lost_requests"] += 1
            return True
        return False


class LoseThenReject(Activation):
    """The first idempotent batch's request is lost with its connection; its retry is rejected once."""

    def __init__(self, rule: Rule, host: Host) -> None:
        super().__init__(rule, host)
        self.lost: dict[tuple[str | bytes, int, int], int] = {}  # (topic, partition, producer id) -> base sequence
        self.swallowing: set[Connection] = set()  # connections whose PRODUCE requests are lost

    def on_request(self, conn: Connection, size: bytes, body: bytes, correlation: int, api_key: int, version: int) -> Verdict:
        if api_key != PRODUCE or (parsed := parse_produce(self.stats, body, version)) is None:
            return Verdict.FORWARD
        header, request = parsed
        batches = {
            (topic.name or topic.topic_id, partition.index, batch[0]): batch[2]
            for topic in request.topics
            for partition in topic.partitions
            if (batch := partition.producer_sequence()) is not None
        }
        if not self.lost:
            if not batches:
                return Verdict.FORWARD
            self.lost = batches
            self.swallowing.add(conn)
            conn.request_taps.insert(0, Swallowing(self, conn))  # before a stall: its requests count as lost
            self.stats["lost_requests"] += 1
            asyncio.get_running_loop().call_later(self.rule.options.delay_s, self._close, conn)
            return Verdict.TAKEN
        if self.affected or not any(self.lost.get(key) == sequence for key, sequence in batches.items()):
            return Verdict.FORWARD
        self.affected += 1
        self.stats["injected_errors"] += 1
        options = self.rule.options
        conn.answer(correlation, version, error_response(header, request, error_code(options.error)), options.delay_s)
        return Verdict.TAKEN

    def _close(self, conn: Connection) -> None:
        """Close a client connection (the client sees a disconnect)."""
        self.swallowing.discard(conn)
        conn.client.close()

    def on_end(self) -> None:
        for conn in list(self.swallowing):
            self._close(conn)


BEHAVIOUR = Behaviour("lose_then_reject", LoseThenRejectOptions, ("injected_errors",), LoseThenReject)
