"""What the planting behaviours share: the PRODUCE requests whose records they can count (those the
broker will answer; of those, a producer's without idempotence), and (for those whose requests reach
the broker and whose answer is the truth: plant_duplicate, plant_offset, plant_misroute) a log entry per partition
that the broker's answer completes, read by a tap the activation leaves on the connection, so the
truth of what was planted is known even after the rule is lifted or the client has gone.

Those acting on a share of the requests (`PlantingOptions`) choose among the eligible ones
themselves (`TopicShare`): every topic is planted once before the share applies, so each producer
whose load passes the broker meets the plant, however few requests it sends there."""

from __future__ import annotations

import random
import time
from collections import Counter
from collections.abc import Callable, Iterable

from pydantic import Field

from acklab.proxy.behaviours.base import Activation, Host, ProxyOptions, Rule, parse_produce
from acklab.proxy.codes import PRODUCE
from acklab.proxy.connection import Connection, Tap
from acklab.proxy.protocol import PartitionData, ProduceRequest, RequestHeader, TopicData

Counted = list[tuple[TopicData, PartitionData, int]]
"""Each partition of a produce request: its topic, its data and its record count."""


def topic_key(topic: TopicData) -> str:
    """How a log entry names a topic: by name, or by id (hex) from produce v13."""
    return topic.name or topic.topic_id.hex()


def counted_produce(activation: Activation, body: bytes, api_key: int, version: int) -> tuple[RequestHeader, ProduceRequest, Counted] | None:
    """A PRODUCE request (header, request) and the records of each of its partitions, or None:
    another request type, or one whose record batches the codec cannot read or count
    (`unparsed_produce`)."""
    if api_key != PRODUCE or (parsed := parse_produce(activation.stats, body, version)) is None:
        return None
    header, request = parsed
    partitions = [(topic, partition, partition.record_count()) for topic in request.topics for partition in topic.partitions]
    if any(count is None for _, _, count in partitions):
        activation.stats["unparsed_produce"] += 1
        return None
    return header, request, partitions  # type: ignore[return-value]


def topics_of(partitions: Counted) -> set[str]:
    """The topics (`topic_key`) a produce request's `partitions` write."""
    return {topic_key(topic) for topic, _, _ in partitions}


def answered_produce(activation: Activation, body: bytes, api_key: int, version: int) -> tuple[RequestHeader, ProduceRequest, Counted] | None:
    """A PRODUCE request the broker will answer, as `counted_produce` gives it, or None: the codec
    cannot count it (`unparsed_produce`), or acks=0 (`unanswered_passed`: no answer would say what
    was planted)."""
    if (counted := counted_produce(activation, body, api_key, version)) is None:
        return None
    if counted[1].acks == 0:
        activation.stats["unanswered_passed"] += 1
        return None
    return counted


def plain_produce(activation: Activation, body: bytes, api_key: int, version: int) -> tuple[RequestHeader, ProduceRequest, Counted] | None:
    """An `answered_produce` request of a producer without idempotence, or None; an idempotent or
    transactional producer's is counted (`idempotent_passed`: the broker checks its sequences, so a
    request tampered with would be refused or recognised)."""
    if (counted := answered_produce(activation, body, api_key, version)) is None:
        return None
    _, request, partitions = counted
    if request.transactional_id is not None or any(partition.producer_sequence() is not None for _, partition, _ in partitions):
        activation.stats["idempotent_passed"] += 1
        return None
    return counted


class PlantingOptions(ProxyOptions):
    """Options of a planting behaviour acting on a share of the produce requests it can plant
    (`probability`, at most `count` of them): the activation chooses among the eligible requests
    (`TopicShare`), so the proxy's own coin toss over every request is left out (`share`)."""

    probability: float = Field(0.2, ge=0, le=1, description="share of the eligible produce requests planted once each topic has been")

    def share(self) -> tuple[float, int | None]:
        return 1.0, self.count


class TopicShare:
    """Which eligible requests a planting activation plants: one that writes a topic nothing was
    planted in yet, always (for at most `tries` such requests of the topic, if set); any other with
    the rule's `probability`. A topic counts as planted once the activation acts on a request of it
    (`planted`), so an eligible request it could not act on leaves its topics waiting for the next,
    and waits again if the broker's answers show nothing of that request planted (`settled`)."""

    def __init__(self, probability: float, tries: int | None = None) -> None:
        self.probability, self.tries = probability, tries
        self.topics: set[str] = set()
        self.tried: Counter[str] = Counter()  # topic -> requests chosen for it while it waited

    def chosen(self, topics: Iterable[str]) -> bool:
        """Whether a request writing `topics` (their `topic_key`s) is planted."""
        waiting = [topic for topic in topics if topic not in self.topics and (self.tries is None or self.tried[topic] < self.tries)]
        self.tried.update(waiting)
        return bool(waiting) or random.random() < self.probability

    def planted(self, topics: Iterable[str]) -> None:
        """The activation acted on a request writing each of `topics`."""
        self.topics.update(topics)

    def settled(self, entries: Iterable[dict]) -> None:
        """The answers to a request acted on came: each topic of its log `entries` none of which shows
        records planted (error NONE) waits again. (Had another request of the topic been planted
        meanwhile, the topic gets one plant more than it needed.)"""
        entries = list(entries)
        planted = {entry["topic"] for entry in entries if entry.get("error") == "NONE" and entry.get("records")}
        self.topics.difference_update({entry["topic"] for entry in entries} - planted)


class Answers(Tap):
    """Hands the broker's answers to the requests registered on one connection (by correlation id)
    to `on_answer` with their log entries; what it returns is passed on (None: taken off)."""

    def __init__(self, on_answer: Callable[[list[dict], bytes, int], bytes | None]) -> None:
        self.on_answer = on_answer
        self.pending: dict[int, list[dict]] = {}  # correlation -> its partitions' log entries

    def on_response(self, correlation: int, body: bytes, version: int) -> bytes | None:
        entries = self.pending.pop(correlation, None)
        return body if entries is None else self.on_answer(entries, body, version)


class AnsweredPlanting(Activation):
    """A planting activation whose truth is the broker's answer to a request it let through: each
    partition of such a request is logged (`logged`: topic, partition, records, when, and, once the
    answer came, `answered`, `error` and `base_offset`; `error` stays null where the answer cannot
    say what was planted), and `on_answer` completes the entries from the answer. `share` chooses
    which eligible requests it plants."""

    def __init__(self, rule: Rule, host: Host) -> None:
        super().__init__(rule, host)
        self.logged: list[dict] = []
        self.taps: dict[int, Answers] = {}  # id(connection) -> its tap (a reused id gets a new one)
        self.share = TopicShare(rule.options.probability)

    def log(self, partitions: Counted) -> list[dict]:
        """A log entry per partition of `partitions`, not answered yet; their topics are planted
        (`TopicShare.planted`) until the answer settles it."""
        entries = [
            {
                "topic": topic_key(topic), "partition": partition.index, "records": count,
                "at": time.time(), "answered": False, "error": None, "base_offset": None,
            }
            for topic, partition, count in partitions
        ]
        self.logged.extend(entries)
        self.share.planted(entry["topic"] for entry in entries)
        return entries

    def expect_answer(self, conn: Connection, correlation: int, partitions: Counted) -> list[dict]:
        """Log `partitions` and have the answer to request `correlation` on `conn` handed to
        `on_answer`; the connection outlives a client that leaves before it (`Connection.awaiting`).
        Returns the entries."""
        entries = self.log(partitions)
        tap = self.taps.get(id(conn))
        if tap is None or tap not in conn.response_taps:
            tap = self.taps[id(conn)] = Answers(self._answered)
            conn.response_taps.insert(0, tap)
        tap.pending[correlation] = entries
        conn.awaiting.setdefault(correlation, {})
        return entries

    def _answered(self, entries: list[dict], body: bytes, version: int) -> bytes | None:
        try:
            return self.on_answer(entries, body, version)
        finally:
            self.share.settled(entries)

    def on_answer(self, entries: list[dict], body: bytes, version: int) -> bytes | None:
        """The body the client gets for an answer whose partitions `entries` log (None: none)."""
        raise NotImplementedError

    def evidence(self) -> list[dict]:
        return self.logged
