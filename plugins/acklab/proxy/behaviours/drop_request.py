"""drop_request: the request never reaches the broker, nor does any later request of its connection."""

from __future__ import annotations

from pydantic import Field

from acklab.proxy.behaviours.base import Activation, Behaviour, FrameOptions, Verdict
from acklab.proxy.connection import Connection, Tap


class RequestLossOptions(FrameOptions):
    probability: float = Field(0.3, ge=0, le=1, description="share of the matching requests dropped")


class Stalled(Tap):
    """A connection that lost a request: every later request of it is dropped too."""

    def __init__(self, activation: Activation) -> None:
        self.stats = activation.stats

    def on_request(self, api_key: int) -> bool:
        self.stats["dropped_requests"] += 1
        return True


class DropRequest(Activation):
    def on_request(self, conn: Connection, size: bytes, body: bytes, correlation: int, api_key: int, version: int) -> Verdict:
        self.affected += 1
        self.stats["dropped_requests"] += 1
        conn.request_taps.append(Stalled(self))
        return Verdict.TAKEN


BEHAVIOUR = Behaviour("drop_request", RequestLossOptions, ("dropped_requests",), DropRequest)
