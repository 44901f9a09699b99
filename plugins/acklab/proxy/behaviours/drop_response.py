"""drop_response: the broker processed the request, its response never reaches the client; then the
connection is held (no later response of it reaches the client either) or closed."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from acklab.proxy.behaviours.base import Activation, Behaviour, FrameOptions, Verdict
from acklab.proxy.connection import Connection, Tap


class AckLossOptions(FrameOptions):
    probability: float = Field(0.3, ge=0, le=1, description="share of the matching responses dropped")
    then: Literal["hold", "close"] = Field("close", description="after a dropped response: close the connection, or hold it (every later response dropped too)")


class Deaf(Tap):
    """A held connection that lost a response: no later response of it reaches the client either."""

    def __init__(self, activation: Activation) -> None:
        self.stats = activation.stats

    def on_response(self, correlation: int, body: bytes, version: int) -> bytes | None:
        self.stats["dropped_responses"] += 1
        return None


class DropResponse(Activation):
    async def on_response(self, conn: Connection, body: bytes, api_key: int, version: int) -> bytes | Verdict:
        self.affected += 1
        self.stats["dropped_responses"] += 1
        if self.rule.options.then == "close":
            self.stats["closed_after_drop"] += 1
            return Verdict.CLOSE
        conn.response_taps.insert(0, Deaf(self))  # before any rewrite pending on the connection
        return Verdict.TAKEN


BEHAVIOUR = Behaviour("drop_response", AckLossOptions, ("dropped_responses",), DropResponse)
