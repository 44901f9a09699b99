"""delay_response: responses wait `delay_s` (later responses of the connection queue behind)."""

from __future__ import annotations

import asyncio

from pydantic import Field

from acklab.proxy.behaviours.base import Activation, Behaviour, FrameOptions, Verdict
from acklab.proxy.connection import Connection


class LatencyOptions(FrameOptions):
    delay_s: float = Field(30.0, gt=0, description="seconds each response waits")
    apis: list[int] = Field(default_factory=list, description="request types whose responses wait (empty = all)")


class DelayResponse(Activation):
    async def on_response(self, conn: Connection, body: bytes, api_key: int, version: int) -> bytes | Verdict:
        self.affected += 1
        self.stats["delayed_responses"] += 1
        await asyncio.sleep(self.rule.options.delay_s)
        return body


BEHAVIOUR = Behaviour("delay_response", LatencyOptions, ("delayed_responses",), DelayResponse)
