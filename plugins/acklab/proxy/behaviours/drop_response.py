"""drop_response: the broker processed the request, its response never reaches the client; then the
connection is held (no later response of it reaches the client either) or closed."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from acklab.proxy.behaviours.base import Behaviour, FrameOptions


class AckLossOptions(FrameOptions):
    probability: float = Field(0.3, ge=0, le=1, description="share of the matching responses dropped")
    then: Literal["hold", "close"] = Field("close", description="after a dropped response: close the connection, or hold it (every later response dropped too)")


BEHAVIOUR = Behaviour("drop_response", AckLossOptions, ("dropped_responses",))
