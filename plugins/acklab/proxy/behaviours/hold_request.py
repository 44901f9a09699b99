"""hold_request: matching requests are withheld and forwarded later (after `delay_s`, after the
next answer to a `replay_after` request, or when the rule ends); each is logged (`withheld`)."""

from __future__ import annotations

import asyncio
import math
import time
from typing import Any

from pydantic import Field, field_validator, model_validator

from acklab.proxy.behaviours.base import Activation, Behaviour, FrameOptions, Host, Rule, Verdict, parse_produce
from acklab.proxy.codes import APIS, PRODUCE, api_key, api_name
from acklab.proxy.connection import Connection, Held
from acklab.proxy.protocol import ProduceRequest


class HoldOptions(FrameOptions):
    """Held requests (PRODUCE unless `apis` says otherwise) are forwarded after `delay_s`, and at
    the latest when the window ends."""

    delay_s: float = Field(0.0, ge=0, description="release each request this long after it arrived (0: at the window's end)")


class WithholdOptions(FrameOptions):
    """Which requests are withheld and when they are replayed: `delay_s` after each was withheld,
    or `delay_s` after the next request of type `replay_after` any broker answered, and at the
    latest at the window's end. PRODUCE requests may be chosen by what they carry."""

    count: int | None = Field(1, ge=1, description="at most this many requests withheld (default 1)")
    nth: int = Field(1, ge=1, description="withhold from the nth matching request on (the ones before pass)")
    partition: int | None = Field(None, ge=0, description="only produce requests writing this partition")
    producer_id: int | None = Field(None, ge=0, description="only produce requests of this producer id")
    transactional_id: str | None = Field(None, description="only produce requests of this transactional id")
    transactional_only: bool = Field(False, description="only produce requests of transactional producers")
    delay_s: float = Field(
        0.0, ge=0, description="replay this long after each request was withheld, or after replay_after's answer (0: at once; no trigger: at the window's end)"
    )
    replay_after: int | None = Field(None, description=f"replay right after a request of this type ({', '.join(APIS)}) is answered")

    @field_validator("replay_after", mode="before")
    @classmethod
    def _trigger(cls, name: Any) -> Any:
        return None if name is None else api_key(name)

    @model_validator(mode="after")
    def _consistent(self) -> WithholdOptions:
        if self.selects_produce and self.apis != [PRODUCE]:
            raise ValueError("partition, producer_id, transactional_id and transactional_only choose among Produce requests: apis must be [Produce]")
        return self

    @property
    def selects_produce(self) -> bool:
        """Whether the hold chooses among PRODUCE requests by what they carry."""
        return self.transactional_only or any(v is not None for v in (self.transactional_id, self.partition, self.producer_id))

    def selects(self, transactional_id: str | None, batches: list[tuple[int, int, int, int]]) -> bool:
        """Whether a PRODUCE request (its transactional id, and (partition, producer id, epoch, base
        sequence) per idempotent batch) is one the hold chooses."""
        if (self.transactional_only and transactional_id is None) or (
            self.transactional_id is not None and transactional_id != self.transactional_id
        ):
            return False
        if self.partition is not None and all(batch[0] != self.partition for batch in batches):
            return False
        return self.producer_id is None or any(batch[1] == self.producer_id for batch in batches)


def withholding(options: HoldOptions | WithholdOptions) -> WithholdOptions:
    """A hold's options as the withhold they amount to: `HoldOptions` hold every matching request
    from the first on, with no trigger."""
    return options if isinstance(options, WithholdOptions) else WithholdOptions.model_validate(options.model_dump())


class HoldRequest(Activation):
    """Withholds the requests the rule's options choose (`WithholdOptions`; `HoldOptions` choose
    every matching request), each due `delay_s` after it arrived, or released `delay_s` after the
    `replay_after` trigger is answered (`replayed_after_trigger`), or when the rule ends; logs each
    (`withheld`), the ones queued behind a held request of their connection too."""

    def __init__(self, rule: Rule, host: Host) -> None:
        super().__init__(rule, host)
        self.options = withholding(rule.options)
        self.matched = 0  # requests that matched the rule so far
        self.withheld: list[dict] = []  # a log entry per held request

    def on_request(self, conn: Connection, size: bytes, body: bytes, correlation: int, api_key: int, version: int) -> Verdict:
        options = self.options
        request = self._produce(api_key, body, version)
        if options.selects_produce and (
            request is None or not options.selects(request.transactional_id, [(partition, *batch) for _, partition, batch in _batches(request)])
        ):
            return Verdict.FORWARD
        self.matched += 1
        if self.matched < options.nth:
            return Verdict.FORWARD
        self.affected += 1
        timed = options.delay_s and options.replay_after is None
        due = time.monotonic() + options.delay_s if timed else math.inf
        self._hold(conn, size + body, correlation, api_key, version, due, request, queued=False)
        return Verdict.TAKEN

    def on_queued(self, conn: Connection, frame: bytes, correlation: int, api_key: int, version: int, due: float) -> None:
        self._hold(conn, frame, correlation, api_key, version, due, self._produce(api_key, frame[4:], version), queued=True)

    def on_answered(self, api_key: int) -> None:
        if self.options.replay_after == api_key and self.host.holding:
            if self.options.delay_s:
                asyncio.get_running_loop().call_later(self.options.delay_s, self._replay)
            else:
                self._replay()

    def _replay(self) -> None:
        if self.host.rule is self.rule:
            self.stats["replayed_after_trigger"] += sum(len(conn.held) for conn in self.host.holding)
            self.host.release_all()

    def evidence(self) -> list[dict]:
        return self.withheld

    def _produce(self, api_key: int, body: bytes, version: int) -> ProduceRequest | None:
        """The request if it is a PRODUCE the codec reads, else None."""
        parsed = parse_produce(self.stats, body, version) if api_key == PRODUCE else None
        return None if parsed is None else parsed[1]

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
        self.stats["held_requests"] += 1
        self.host.hold(conn, Held(frame, correlation, api_key, version, due, answered, log, self))


def _batches(request: ProduceRequest) -> list[tuple[str, int, tuple[int, int, int]]]:
    """(topic, partition, (producer id, epoch, base sequence)) of each idempotent batch of a PRODUCE request."""
    return [
        (topic.name or topic.topic_id.hex(), partition.index, batch)
        for topic in request.topics
        for partition in topic.partitions
        if (batch := partition.producer_sequence()) is not None
    ]


BEHAVIOUR = Behaviour("hold_request", HoldOptions, ("held_requests",), HoldRequest, log="withheld", variants=(WithholdOptions,))
