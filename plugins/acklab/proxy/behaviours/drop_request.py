"""drop_request: the request never reaches the broker, nor does any later request of its connection."""

from __future__ import annotations

from pydantic import Field

from acklab.proxy.behaviours.base import Behaviour, FrameOptions


class RequestLossOptions(FrameOptions):
    probability: float = Field(0.3, ge=0, le=1, description="share of the matching requests dropped")


BEHAVIOUR = Behaviour("drop_request", RequestLossOptions, ("dropped_requests",))
