"""plant_offset: a PRODUCE request reaches the broker as sent; the answer the client gets reports
each appended partition at an offset `SHIFT` beyond the one the broker gave, and each shifted
partition is logged (`shifted`).

The request's record counts are read when it passes, and a tap on its connection rewrites its
answer whenever it comes (also after the rule is lifted): the records sit where the broker put
them, the client believes them elsewhere. A partition the broker answered with an error is passed
as answered (logged, not shifted). acks=0 requests pass untouched (no answer to rewrite:
`unanswered_passed`), as do requests the codec cannot count (`unparsed_produce`)."""

from __future__ import annotations

import time
from dataclasses import replace

from pydantic import Field

from acklab.proxy.behaviours.base import Activation, Behaviour, Host, ProxyOptions, Rule, Verdict, parse_produce
from acklab.proxy.codes import PRODUCE, error_name
from acklab.proxy.connection import Connection, Tap
from acklab.proxy.protocol import ProtocolError, decode_response, encode_response

SHIFT = 1 << 40  # added to an answer's base offset: far beyond any offset a broker gives


class PlantOffsetOptions(ProxyOptions):
    probability: float = Field(0.2, ge=0, le=1, description="share of the produce requests whose answer is shifted")


class Shifts(Tap):
    """Rewrites the answers to the requests selected on one connection, filling in each one's log
    entries (the offset the broker gave, and whether it was shifted) as its answer arrives."""

    def __init__(self, activation: PlantOffset) -> None:
        self.activation = activation
        self.pending: dict[int, list[dict]] = {}  # correlation -> its partitions' log entries

    def on_response(self, correlation: int, body: bytes, version: int) -> bytes | None:
        entries = self.pending.pop(correlation, None)
        return body if entries is None else self.activation.shift(entries, body, version)


class PlantOffset(Activation):
    """Lets a PRODUCE request pass and leaves a tap that shifts its answer's base offsets."""

    def __init__(self, rule: Rule, host: Host) -> None:
        super().__init__(rule, host)
        self.shifted: list[dict] = []
        self.taps: dict[int, Shifts] = {}  # id(connection) -> its tap

    def on_request(self, conn: Connection, size: bytes, body: bytes, correlation: int, api_key: int, version: int) -> Verdict:
        if api_key != PRODUCE or (parsed := parse_produce(self.stats, body, version)) is None:
            return Verdict.FORWARD
        _, request = parsed
        partitions = [(topic, partition, partition.record_count()) for topic in request.topics for partition in topic.partitions]
        if any(count is None for _, _, count in partitions):
            self.stats["unparsed_produce"] += 1
            return Verdict.FORWARD
        if request.acks == 0:
            self.stats["unanswered_passed"] += 1
            return Verdict.FORWARD
        entries = [
            {
                "topic": topic.name or topic.topic_id.hex(), "partition": partition.index, "records": count,
                "at": time.time(), "answered": False, "error": None, "base_offset": None,
            }
            for topic, partition, count in partitions
        ]
        self.shifted.extend(entries)
        tap = self.taps.get(id(conn))
        if tap is None or tap not in conn.response_taps:
            tap = self.taps[id(conn)] = Shifts(self)
            conn.response_taps.insert(0, tap)
        tap.pending[correlation] = entries
        conn.awaiting.setdefault(correlation, {})  # a client that leaves first does not take the answer's truth with it
        self.affected += 1
        self.stats["shifted_requests"] += 1
        return Verdict.FORWARD

    def shift(self, entries: list[dict], body: bytes, version: int) -> bytes:
        """The answer `body` with each appended partition's base offset moved by `SHIFT`; each
        partition's entry gets the broker's error and the offset it really gave."""
        try:
            correlation, response = decode_response(body, version)
        except ProtocolError:  # passed as the broker wrote it: nothing shifted
            self.stats["unparsed_answers"] += 1
            for entry in entries:
                entry.update(answered=True, error="unparsed")
            return body
        wanted = {(entry["topic"], entry["partition"]): entry for entry in entries}
        topics = []
        for topic in response.topics:
            partitions = []
            for partition in topic.partitions:
                entry = wanted.pop((topic.name or topic.topic_id.hex(), partition.index), None)
                if entry is not None:
                    entry.update(answered=True, error=error_name(partition.error_code), base_offset=partition.base_offset)
                    if partition.error_code == 0 and partition.base_offset >= 0:
                        partition = replace(partition, base_offset=partition.base_offset + SHIFT)
                        self.stats["shifted_records"] += entry["records"]
                    else:
                        entry["error"] = entry["error"] if partition.error_code else "no offset in the answer"
                partitions.append(partition)
            topics.append(replace(topic, partitions=tuple(partitions)))
        for entry in wanted.values():  # not in the answer: nothing shifted
            entry.update(answered=True, error="no answer for the partition")
        return encode_response(correlation, replace(response, topics=tuple(topics)), version)

    def evidence(self) -> list[dict]:
        return self.shifted


BEHAVIOUR = Behaviour("plant_offset", PlantOffsetOptions, ("shifted_requests",), PlantOffset, log="shifted")
