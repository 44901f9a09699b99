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

from pydantic import Field

from acklab.proxy.behaviours.base import Behaviour, Verdict
from acklab.proxy.behaviours.planting import AnsweredPlanting, PlantingOptions, plain_produce, topic_key, topics_of
from acklab.proxy.codes import error_name
from acklab.proxy.connection import Connection
from acklab.proxy.protocol import ProtocolError, decode_response

COPY_CORRELATIONS = itertools.count(-1, -1)  # the proxy's own correlation ids: -1, -2, ...
_CORRELATION = struct.Struct(">i")


class PlantDuplicateOptions(PlantingOptions):
    probability: float = Field(0.2, ge=0, le=1, description="share of the eligible produce requests sent twice, once each topic's has been")


class PlantDuplicate(AnsweredPlanting):
    """Sends an eligible PRODUCE request on, then a copy of it under a correlation id of its own;
    the copy's answer is logged per partition and never reaches the client."""

    def on_request(self, conn: Connection, size: bytes, body: bytes, correlation: int, api_key: int, version: int) -> Verdict:
        if (plain := plain_produce(self, body, api_key, version)) is None or not self.share.chosen(topics_of(plain[2])):
            return Verdict.FORWARD
        partitions = plain[2]
        conn.forward(size + body, correlation, api_key, version)
        copy = next(COPY_CORRELATIONS)
        conn.forward(size + body[:4] + _CORRELATION.pack(copy) + body[8:], copy, api_key, version)
        self.expect_answer(conn, copy, partitions)
        self.affected += 1
        self.stats["duplicated_requests"] += 1
        return Verdict.TAKEN

    def on_answer(self, entries: list[dict], body: bytes, version: int) -> None:
        """The broker's answer to a copy: per partition, its error and the offset it appended the
        copy at; the answer is taken off the connection."""
        try:
            _, response = decode_response(body, version)
        except ProtocolError:  # what the broker did with the copy is unknown
            self.stats["unparsed_answers"] += 1
            for entry in entries:
                entry["answered"] = True
            return None
        answers = {(topic_key(topic), partition.index): partition for topic in response.topics for partition in topic.partitions}
        for entry in entries:
            entry["answered"] = True
            if (answer := answers.get((entry["topic"], entry["partition"]))) is None:  # unknown
                continue
            entry["error"], entry["base_offset"] = error_name(answer.error_code), answer.base_offset
            if answer.error_code == 0:
                self.stats["duplicated_records"] += entry["records"]
        return None


BEHAVIOUR = Behaviour("plant_duplicate", PlantDuplicateOptions, ("duplicated_requests",), PlantDuplicate, log="duplicated")
