"""blackhole: nothing passes in either direction; new connections are accepted and ignored."""

from __future__ import annotations

from pydantic import Field

from acklab.proxy.behaviours.base import Activation, Behaviour, FrameOptions, Verdict
from acklab.proxy.connection import Connection


class PartitionOptions(FrameOptions):
    apis: list[int] = Field(default_factory=list, description="request types blackholed (empty = all)")


class Blackhole(Activation):
    def on_request(self, conn: Connection, size: bytes, body: bytes, correlation: int, api_key: int, version: int) -> Verdict:
        self.affected += 1
        self.stats["blackholed_requests"] += 1
        return Verdict.TAKEN

    async def on_response(self, conn: Connection, body: bytes, api_key: int, version: int) -> bytes | Verdict:
        self.affected += 1
        self.stats["blackholed_responses"] += 1
        return Verdict.TAKEN


BEHAVIOUR = Behaviour("blackhole", PartitionOptions, ("blackholed_requests", "blackholed_responses"), Blackhole)
