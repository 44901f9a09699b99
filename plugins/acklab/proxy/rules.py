"""What the proxy can do to a broker's client traffic, as validated rules."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

PRODUCE = 0

Action = Literal["drop_response", "drop_request", "delay_response", "blackhole"]


class ProxyRule(BaseModel):
    """One active fault on one broker's client traffic.

    - drop_response: the broker processed the request, its response never reaches the client;
      then `hold` the connection (the client times out) or `close` it.
    - drop_request: the request never reaches the broker.
    - delay_response: responses wait `delay_s` (all later responses on the connection queue behind,
      as with a link delay).
    - blackhole: nothing passes in either direction; new connections are accepted and ignored.
    """

    model_config = ConfigDict(extra="forbid")
    action: Action
    apis: list[int] = Field(default_factory=lambda: [PRODUCE], description="API keys affected (empty = all)")
    probability: float = Field(1.0, ge=0.0, le=1.0)
    count: int | None = Field(None, ge=1, description="at most this many frames are affected")
    then: Literal["hold", "close"] = "hold"
    delay_s: float = Field(0.0, ge=0.0)
    expires_in_s: float = Field(300.0, gt=0, description="safety: the rule lifts itself after this")

    def matches(self, api_key: int) -> bool:
        return not self.apis or api_key in self.apis
