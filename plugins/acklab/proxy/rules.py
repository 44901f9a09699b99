"""What the proxy can do to a broker's client traffic, as validated rules."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from acklab.proxy.behaviours.base import check_error
from acklab.proxy.behaviours.drop_response import AckLossOptions
from acklab.proxy.codes import ERRORS, PRODUCE

Action = Literal[
    "drop_response", "drop_request", "delay_response", "blackhole", "inject_error", "replace_error", "hold_request", "lose_then_reject",
    "plant_loss",
]


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
    - inject_error: a request is answered by the proxy with `error` (a PRODUCE request for each of
      its partitions) and never reaches the broker (acks=0: the connection is closed, as a broker
      does). A Metadata request does reach the broker; every topic of its answer carries `error`
      (`acklab.proxy.answers.metadata_with_error`). The requests the proxy can answer and the
      errors each may carry: `acklab.proxy.codes.ANSWERABLE`; others pass untouched.
    - replace_error: a PRODUCE request reaches the broker; the partitions its response reports
      appended carry `error` instead.
    - hold_request: a matching request is withheld and forwarded `delay_s` after it arrived (0 =
      no timed release) or, with `replay_after`, `delay_s` after the next request of that API any
      broker of the proxy answered, and at the latest when the rule ends. Matching: of the `apis`, the `nth` and up to
      `count` - 1 after it; PRODUCE requests may further be chosen by `partition` (one they write),
      `producer_id`, `transactional_id` or `transactional_only`. Every later request of its
      connection queues behind it (a delayed stream delivers nothing past the delay, as TCP
      would); a held request still reaches the broker when its client has gone (its answer is
      then discarded). Each held request is logged (`withheld`).
    - lose_then_reject: the first PRODUCE request carrying an idempotent producer's batch, and every
      later PRODUCE request of its connection, never reach the broker and get no answer; `delay_s`
      after the first, the proxy closes that connection (the client sees a disconnect: what it had
      in flight is "possibly persisted", yet none of it was appended). The first later request that
      retries the lost batch (same producer id and base sequence, on any connection) is answered
      with `error` `delay_s` after it arrived, without reaching the broker; the requests behind it
      are forwarded (the broker, missing the lost batch, answers OUT_OF_ORDER_SEQUENCE_NUMBER) and
      answered in order behind it. It acts once: `count` is ignored.
    - plant_loss: a PRODUCE request never reaches the broker; the proxy answers it as the broker
      would had it appended every partition (error NONE, offsets from `acklab.proxy.behaviours.plant_loss.FABRICATED_OFFSET` on, per
      partition; acks=0: no answer), so its client counts the records acked while no broker
      stored them. Each swallowed partition is logged (`swallowed`: topic, partition, record count,
      fabricated base offset, producer id, epoch, base sequence). A request whose record batches
      the codec cannot count passes untouched (`unparsed_produce`).
    """

    model_config = ConfigDict(extra="forbid")
    action: Action
    apis: list[int] = Field(default_factory=lambda: [PRODUCE], description="API keys affected (empty = all)")
    probability: float = Field(1.0, ge=0.0, le=1.0)
    count: int | None = Field(None, ge=1, description="at most this many frames are affected")
    then: Literal["hold", "close"] = AckLossOptions.model_fields["then"].default  # drop_response's own default
    delay_s: float = Field(0.0, ge=0.0)
    error: str | None = Field(None, description="inject_error / replace_error: the error's name")
    replay_after: int | None = Field(None, description="hold_request: release right after a request of this API key is answered")
    nth: int = Field(1, ge=1, description="hold_request: the matches before the nth pass")
    partition: int | None = Field(None, ge=0)
    producer_id: int | None = Field(None, ge=0)
    transactional_id: str | None = None
    transactional_only: bool = False
    expires_in_s: float = Field(300.0, gt=0, description="safety: the rule lifts itself after this")

    @model_validator(mode="after")
    def _complete(self) -> ProxyRule:
        if self.action in ("inject_error", "replace_error", "lose_then_reject") and self.error is None:
            raise ValueError(f"{self.action} needs an error")
        if self.action == "inject_error" and not self.apis:
            raise ValueError("inject_error needs the request types it answers (apis)")
        check_error(self.error, self.apis if self.action == "inject_error" else (PRODUCE,))
        return self

    def selects(self, transactional_id: str | None, batches: list[tuple[int, int, int, int]]) -> bool:
        """Whether a PRODUCE request (its transactional id, and (partition, producer id, epoch, base
        sequence) per idempotent batch) is one the hold chooses."""
        if (self.transactional_only and transactional_id is None) or (
            self.transactional_id is not None and transactional_id != self.transactional_id
        ):
            return False
        if self.partition is not None and all(batch[0] != self.partition for batch in batches):
            return False
        return self.producer_id is None or any(batch[1] == self.producer_id for batch in batches)

    @property
    def selects_produce(self) -> bool:
        """Whether the hold chooses among PRODUCE requests by what they carry."""
        return self.transactional_only or any(v is not None for v in (self.transactional_id, self.partition, self.producer_id))

    def matches(self, api_key: int) -> bool:
        return not self.apis or api_key in self.apis

    @property
    def error_code(self) -> int:
        assert self.error is not None
        return ERRORS[self.error].code
