"""What a load sends (`LoadSpec`) and the record format's size rule: pure, cheap to import."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

MAX_MESSAGES = 100_000_000
MAX_PRODUCERS = 64
RECORD_OVERHEAD = 61 + 21  # a v2 batch header and one record's varint framing, upper bound (bytes)


def key(producer: int, k: int) -> str:
    """Record key `k` of producer `producer` (keys are per producer, so per-key order is well defined)."""
    return f"p{producer}-k{k}"


MAX_TOPICS = 16


def scenario_topics(topic: str, count: int) -> list[str]:
    """The topics of a scenario whose own topic is `topic` and whose load spreads over `count`
    topics: `topic` itself, then `<topic>-t1` .. `<topic>-t<count-1>`."""
    return [topic, *(f"{topic}-t{n}" for n in range(1, count))]


def key_topic(k: int, count: int) -> int:
    """Which of a scenario's `count` topics (an index into `scenario_topics`) key `k` of every producer goes to."""
    return k % count


def id_width(max_id: int) -> int:
    """Digits of the zero-padded id and seq in a value: those of the largest id."""
    return len(str(max_id))


def min_value_bytes(messages: int) -> int:
    """The smallest value that holds `<id>:<seq>:` for `messages` messages."""
    return 2 * id_width(messages - 1) + 2


class LoadSpec(BaseModel):
    """How much to send, how fast, and by how many producer processes."""

    model_config = ConfigDict(extra="forbid", defer_build=True)  # built on first use: DAG files import it when parsed
    messages: int = Field(ge=1, le=MAX_MESSAGES, description="messages to send; an upper bound when duration_s is set")
    duration_s: float | None = Field(None, gt=0, description="stop after this many seconds")
    rate: float | None = Field(None, gt=0, description="messages per second over all producers; None = as fast as possible")
    message_bytes: int = Field(100, ge=16, le=1_000_000, description="bytes per message value")
    keys: int = Field(16, ge=1, le=100_000, description="keys per producer (p<n>-k0 .. p<n>-k<keys-1>)")
    producers: int = Field(1, ge=1, le=MAX_PRODUCERS, description="producer processes")
    topics: int = Field(
        1, ge=1, le=MAX_TOPICS,
        description="topics the load spreads over, all of the topology's partitions and replicas: key k of each producer goes to "
        "topic k mod topics, so a record read from a topic it was not sent to is counted (`misdirected`)",
    )

    @model_validator(mode="after")
    def _consistent(self) -> LoadSpec:
        if self.producers > self.messages:
            raise ValueError(f"producers ({self.producers}) > messages ({self.messages})")
        if self.topics > self.keys:
            raise ValueError(f"topics ({self.topics}) > keys ({self.keys}): every topic needs a key")
        if self.message_bytes < (least := min_value_bytes(self.messages)):
            raise ValueError(f"message_bytes ({self.message_bytes}) must be >= {least} to hold the id and seq of {self.messages} messages")
        return self

    def ranges(self) -> list[tuple[int, int]]:
        """(first id, count) of each producer: contiguous, nearly equal ranges of 0..messages-1."""
        bounds = [self.messages * n // self.producers for n in range(self.producers + 1)]
        return [(lo, hi - lo) for lo, hi in zip(bounds[:-1], bounds[1:], strict=True)]

    @property
    def longest_key(self) -> str:
        return key(self.producers - 1, self.keys - 1)

    @property
    def largest_batch_bytes(self) -> int:
        """An upper bound of the bytes of a record batch holding one of its records alone."""
        return self.message_bytes + len(self.longest_key) + RECORD_OVERHEAD
