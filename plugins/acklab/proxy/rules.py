"""What the proxy can do to a broker's client traffic, as validated rules."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SerializeAsAny, model_validator

from acklab.proxy.behaviours import BEHAVIOURS
from acklab.proxy.behaviours.base import Options

Action = Literal[
    "drop_response", "drop_request", "delay_response", "blackhole", "inject_error", "replace_error", "hold_request", "lose_then_reject",
    "plant_loss", "plant_duplicate", "plant_offset", "plant_misroute", "plant_reorder", "stall_write",
]


class ProxyRule(BaseModel):
    """One active fault on one broker's client traffic: the behaviour (`action`), its options (an
    instance of one of its options models, `acklab.proxy.behaviours.base.Behaviour.option_models`:
    the only home of every option, the requests it selects, `apis`, and its share, `probability`
    and `count`, among them) and a safety lifetime. On the control channel the options travel as
    the model's fields (`model_dump`) and are validated by the behaviour's models again.

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
      its partitions, an offset commit for each partition it commits) and never reaches the broker
      (acks=0: the connection is closed, as a broker does). A Metadata request does reach the
      broker; every topic of its answer carries `error` (`acklab.proxy.answers.metadata_with_error`).
      The requests the proxy can answer and the errors each may carry: `acklab.proxy.codes.ANSWERABLE`
      (their layouts: `acklab.proxy.answers.ANSWERS`); others, and a version not answered with that
      error, pass untouched.
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
    - plant_duplicate: a PRODUCE request of a producer without idempotence (acks != 0) reaches the
      broker twice, the second copy right behind the first under a correlation id of the proxy's
      own; the client gets the first copy's answer only. Each partition of a copy is logged
      (`duplicated`: topic, partition, record count, and the broker's answer to the copy: its error
      and the offset it appended the copy at). Idempotent and transactional producers' requests
      pass untouched (the broker would append nothing: `idempotent_passed`).
    - plant_offset: a PRODUCE request (acks != 0) reaches the broker as sent; its answer reports
      each appended partition at `acklab.proxy.behaviours.plant_offset.SHIFT` beyond the offset the
      broker gave. Each partition is logged (`shifted`: topic, partition, record count, the broker's
      error and the offset it really gave).
    - plant_misroute: a PRODUCE request of a producer without idempotence (acks != 0) reaches the
      broker with its partitions renamed (rotated among themselves, or a lone one sent to another
      partition of its topic produced to through this broker); the answer names the client's
      partitions. Each moved partition is logged (`misrouted`: topic, the client's partition, the
      partition it went `to`, record count, the broker's error and the offset it appended at).
    - plant_reorder: a PRODUCE request of a producer without idempotence (acks != 0) is held until
      the next request of its connection, which writes one of its partitions, has been forwarded
      before it; the answers reach the client in request order. Each partition both write is logged
      (`reordered`: topic, partition, the held request's records and those of them whose key the
      later request also wrote, both base offsets and whether the broker appended them swapped).
    - stall_write: the proxy stops reading the broker's client connections (for `stall_s` at a
      time, `gap_s` apart, or the whole window), their receive buffers capped at
      `receive_buffer_bytes`: what a client writes fills the socket buffers and its write blocks
      part-way through a request, nothing dropped. Each stall of a connection is logged
      (`write_stalls`: when, and the request bytes it left waiting in the proxy and in the kernel).
    """

    model_config = ConfigDict(extra="forbid")
    action: Action
    options: SerializeAsAny[Options] = Field(description="the behaviour's options (a mapping is validated by its options models)")
    expires_in_s: float = Field(300.0, gt=0, description="safety: the rule lifts itself after this")

    @model_validator(mode="before")
    @classmethod
    def _behaviours_options(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("action") in BEHAVIOURS:
            data = {**data, "options": BEHAVIOURS[data["action"]].options_of(data.get("options", {}))}
        return data

    @classmethod
    def of(cls, action: Action, expires_in_s: float = 300.0, **options: Any) -> ProxyRule:
        """A rule of `action` with the named options (validated by the behaviour's options models)."""
        return cls(action=action, options=BEHAVIOURS[action].options_of(options), expires_in_s=expires_in_s)

    def matches(self, api_key: int) -> bool:
        """Whether the rule selects requests (and responses) of `api_key` (its options' `apis`)."""
        return self.options.acts_on(api_key)

    def share(self) -> tuple[float, int | None]:
        """(probability, count) of its options: each selected frame is affected with `probability`, at most `count` of them."""
        return self.options.share()
