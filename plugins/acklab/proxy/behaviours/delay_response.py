"""delay_response: responses wait `delay_s` (later responses of the connection queue behind)."""

from __future__ import annotations

from pydantic import Field

from acklab.proxy.behaviours.base import Behaviour, FrameOptions


class LatencyOptions(FrameOptions):
    delay_s: float = Field(30.0, gt=0, description="seconds each response waits")
    apis: list[int] = Field(default_factory=list, description="request types whose responses wait (empty = all)")


BEHAVIOUR = Behaviour("delay_response", LatencyOptions, ("delayed_responses",))
