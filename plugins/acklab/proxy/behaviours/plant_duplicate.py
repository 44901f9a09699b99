"""plant_duplicate: a PRODUCE request of a producer without idempotence reaches the broker twice;
the client is answered for the first copy only, and each partition the second copy appended is
logged (`duplicated`).

The second copy follows the first on the same broker connection, under a correlation id of the
proxy's own (negative: a client's are not), so the broker appends it right after the first and its
answer is taken off the connection before any client sees it. Its answer is the truth of what was
planted: each partition answered NONE holds the request's records twice (an answer the codec
cannot read, or without the partition, leaves its `error` null: unknown). Requests of an idempotent
or transactional producer pass untouched (the broker would recognise the copy by its sequence and
append nothing: `idempotent_passed`), as do acks=0 requests (no answer would say what the copy did:
`unanswered_passed`) and requests the codec cannot count (`unparsed_produce`)."""

from __future__ import annotations

import itertools
import struct
import time

from pydantic import Field

from acklab.proxy.behaviours.base import Activation, Behaviour, Host, ProxyOptions, Rule, Verdict, parse_produce
from acklab.proxy.codes import PRODUCE, error_name
from acklab.proxy.connection import Connection, Tap
from acklab.proxy.protocol import ProtocolError, decode_response

COPY_CORRELATIONS = itertools.count(-1, -1)  # the proxy's own correlation ids: -1, -2, ...
_CORRELATION = struct.Struct(">i")


class PlantDuplicateOptions(ProxyOptions):
    probability: float = Field(0.2, ge=0, le=1, description="share of the eligible produce requests sent twice")


class Copies(Tap):
    """Takes the answers to the copies the proxy sent on one connection off it, filling in each
    copy's log entries (what the broker appended) as its answer arrives."""

    def __init__(self, activation: PlantDuplicate) -> None:
        self.activation = activation
        self.pending: dict[int, list[dict]] = {}  # copy correlation -> its partitions' log entries

    def on_response(self, correlation: int, body: bytes, version: int) -> bytes | None:
        entries = self.pending.pop(correlation, None)
        if entries is None:
            return body
        self.activation.answered(entries, body, version)
        return None


class PlantDuplicate(Activation):
    """Sends an eligible PRODUCE request on, then a copy of it under a correlation id of its own;
    the copy's answer is logged per partition and never reaches the client."""

    def __init__(self, rule: Rule, host: Host) -> None:
        super().__init__(rule, host)
        self.duplicated: list[dict] = []
        self.taps: dict[int, Copies] = {}  # id(connection) -> its tap

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
        if request.transactional_id is not None or any(partition.producer_sequence() is not None for _, partition, _ in partitions):
            self.stats["idempotent_passed"] += 1
            return Verdict.FORWARD
        conn.forward(size + body, correlation, api_key, version)
        copy = next(COPY_CORRELATIONS)
        entries = [
            {
                "topic": topic.name or topic.topic_id.hex(), "partition": partition.index, "records": count,
                "at": time.time(), "answered": False, "error": None, "base_offset": None,
            }
            for topic, partition, count in partitions
        ]
        self.duplicated.extend(entries)
        tap = self.taps.get(id(conn))
        if tap is None or tap not in conn.response_taps:
            tap = self.taps[id(conn)] = Copies(self)
            conn.response_taps.insert(0, tap)
        tap.pending[copy] = entries
        conn.forward(size + body[:4] + _CORRELATION.pack(copy) + body[8:], copy, api_key, version)
        conn.awaiting[copy] = {}  # a client that leaves first does not take the copy's answer with it
        self.affected += 1
        self.stats["duplicated_requests"] += 1
        return Verdict.TAKEN

    def answered(self, entries: list[dict], body: bytes, version: int) -> None:
        """The broker's answer to a copy: per partition, its error and the offset it appended the copy at."""
        try:
            _, response = decode_response(body, version)
        except ProtocolError:  # what the broker did with the copy is unknown
            self.stats["unparsed_answers"] += 1
            for entry in entries:
                entry.update(answered=True, error=None)
            return
        answers = {
            (topic.name or topic.topic_id.hex(), partition.index): partition for topic in response.topics for partition in topic.partitions
        }
        for entry in entries:
            answer = answers.get((entry["topic"], entry["partition"]))
            entry["answered"] = True
            if answer is None:  # unknown
                continue
            entry["error"] = error_name(answer.error_code)
            entry["base_offset"] = answer.base_offset
            if answer.error_code == 0:
                self.stats["duplicated_records"] += entry["records"]

    def evidence(self) -> list[dict]:
        return self.duplicated


BEHAVIOUR = Behaviour("plant_duplicate", PlantDuplicateOptions, ("duplicated_requests",), PlantDuplicate, log="duplicated")
