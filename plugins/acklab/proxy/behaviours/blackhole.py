"""blackhole: nothing passes in either direction; new connections are accepted and ignored."""

from __future__ import annotations

from pydantic import Field

from acklab.proxy.behaviours.base import Behaviour, FrameOptions


class PartitionOptions(FrameOptions):
    apis: list[int] = Field(default_factory=list, description="request types blackholed (empty = all)")


BEHAVIOUR = Behaviour("blackhole", PartitionOptions, ("blackholed_requests", "blackholed_responses"))
