"""What the proxy can do to a broker's client traffic, as validated rules."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from acklab.proxy.codes import ERRORS, PRODUCE, error_table

Action = Literal[
    "drop_response", "drop_request", "delay_response", "blackhole", "inject_error", "replace_error", "hold_request", "lose_then_reject"
]
PRODUCE_ACTIONS = frozenset({"inject_error", "replace_error", "hold_request", "lose_then_reject"})  # they act on PRODUCE requests only


def check_error(name: str | None) -> str | None:
    """`name` if it is an error a fault may answer with (`acklab.proxy.codes.ERRORS`)."""
    if name is not None and name not in ERRORS:
        raise ValueError(f"unknown error {name!r}; valid: {error_table()}")
    return name


class ProxyRule(BaseModel):
    """One active fault on one broker's client traffic.

    - drop_response: the broker processed the request, its response never reaches the client;
      then `hold` the connection (no later response of it reaches the client either: it times out)
      or `close` it.
    - drop_request: the request never reaches the broker, nor does any later request of its
      connection (a stream that lost a request delivers nothing after it, as TCP would): the client
      sees a stalled connection until its request timeout closes it. Responses stay in request
      order, which Kafka's protocol promises per connection (the Java client checks it).
    - delay_response: responses wait `delay_s` (all later responses on the connection queue behind,
      as with a link delay).
    - blackhole: nothing passes in either direction; new connections are accepted and ignored.
    - inject_error: a PRODUCE request is answered by the proxy with `error` for each of its
      partitions and never reaches the broker (acks=0: the connection is closed, as a broker does).
    - replace_error: a PRODUCE request reaches the broker; the partitions its response reports
      appended carry `error` instead.
    - hold_request: a PRODUCE request (only transactional ones if `transactional_only`) is held and
      forwarded after `delay_s` (0 = no timed release), right after the next EndTxn any broker of the
      proxy answered (`until: end_txn`), and at the latest when the rule ends. Later PRODUCE
      requests of its connection queue behind it; a held request still reaches the broker when its
      client has gone (its response is then discarded).
    - lose_then_reject: the first PRODUCE request carrying an idempotent producer's batch, and every
      later PRODUCE request of its connection, never reach the broker and get no answer; `delay_s`
      after the first, the proxy closes that connection (the client sees a disconnect: what it had
      in flight is "possibly persisted", yet none of it was appended). The first later request that
      retries the lost batch (same producer id and base sequence, on any connection) is answered
      with `error` `delay_s` after it arrived, without reaching the broker; the requests behind it
      are forwarded (the broker, missing the lost batch, answers OUT_OF_ORDER_SEQUENCE_NUMBER) and
      answered in order behind it. It acts once: `count` is ignored.
    """

    model_config = ConfigDict(extra="forbid")
    action: Action
    apis: list[int] = Field(default_factory=lambda: [PRODUCE], description="API keys affected (empty = all)")
    probability: float = Field(1.0, ge=0.0, le=1.0)
    count: int | None = Field(None, ge=1, description="at most this many frames are affected")
    then: Literal["hold", "close"] = "hold"
    delay_s: float = Field(0.0, ge=0.0)
    error: str | None = Field(None, description="inject_error / replace_error: the error's name")
    until: Literal["end", "end_txn"] = "end"
    transactional_only: bool = False
    expires_in_s: float = Field(300.0, gt=0, description="safety: the rule lifts itself after this")

    @field_validator("error")
    @classmethod
    def _known_error(cls, name: str | None) -> str | None:
        return check_error(name)

    @model_validator(mode="after")
    def _complete(self) -> ProxyRule:
        if self.action in ("inject_error", "replace_error", "lose_then_reject") and self.error is None:
            raise ValueError(f"{self.action} needs an error")
        return self

    def matches(self, api_key: int) -> bool:
        return not self.apis or api_key in self.apis

    @property
    def error_code(self) -> int:
        assert self.error is not None
        return ERRORS[self.error].code
